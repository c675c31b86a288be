"""Python functions for examples/udf_scores.flow (docs/language.md#python-functions).

Annotated functions are scalar functions, usable in any expression as
`u.NAME(...)`; annotations give the types (int -> long, float -> double,
str -> string, bool -> boolean, list[int] -> array<long>). A function
`rows: Iterator[dict] -> Iterator[dict]` is a table function for
`apply(u.NAME) schema (...)`: it sees the records of one Arrow batch stream
(one partition), so it should work record by record (map / filter / flat map).
"""
from __future__ import annotations

import math
from typing import Iterator


def score(x: float, y: float) -> float:
    """Distance of the point (x, y) from the origin, rounded to 3 decimals."""
    return round(math.hypot(x, y), 3)


def grade(s: float) -> str:
    """A label for a score: near (< 5), mid (< 9) or far."""
    if s < 5.0:
        return "near"
    return "mid" if s < 9.0 else "far"


def keep(grade: str) -> bool:
    """Whether points of this grade are kept."""
    return grade != "far"


def corners(rows: Iterator[dict]) -> Iterator[dict]:
    """Table function (a flat map): for each point, one record per corner of the unit
    grid cell that contains it, with the Manhattan distance to that corner."""
    for r in rows:
        cx, cy = math.floor(r["x"]), math.floor(r["y"])
        for dx in (0, 1):
            for dy in (0, 1):
                yield {"id": r["id"], "grade": r["grade"], "corner": f"{cx + dx}:{cy + dy}",
                       "manhattan": round(abs(r["x"] - cx - dx) + abs(r["y"] - cy - dy), 6)}
