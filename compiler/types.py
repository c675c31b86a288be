"""Types and schemas of the Plan IR."""
from __future__ import annotations

from typing import Iterable, Optional

from attrs import field, frozen

NUMERIC = ("int", "long", "double")
SCALARS = ("long", "int", "double", "string", "boolean", "date", "timestamp")

SPARK_TYPE = {
    "long": "bigint",
    "int": "int",
    "double": "double",
    "string": "string",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
}


def is_valid_type(t: str) -> bool:
    if t.startswith("array<") and t.endswith(">"):
        return is_valid_type(t[6:-1])
    return t in SCALARS


def element_type(t: str) -> Optional[str]:
    return t[6:-1] if t.startswith("array<") else None


def is_numeric(t: str) -> bool:
    return t in NUMERIC or t == "null"


def widen(a: str, b: str) -> Optional[str]:
    """The common type of a and b, or None."""
    if a == b:
        return a
    if a == "null":
        return b
    if b == "null":
        return a
    if a in NUMERIC and b in NUMERIC:
        return max(a, b, key=NUMERIC.index)
    return None


def spark_ddl_type(t: str) -> str:
    inner = element_type(t)
    if inner is not None:
        return f"array<{spark_ddl_type(inner)}>"
    return SPARK_TYPE[t]


@frozen
class Field:
    name: str
    type: str
    quals: frozenset = field(default=frozenset(), eq=False)  # stream names that qualify it: `best.id`


@frozen
class Schema:
    fields: tuple[Field, ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> "Schema":
        return cls(tuple(Field(n, t) for n, t in pairs))

    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def get(self, name: str) -> Optional[Field]:
        return next((f for f in self.fields if f.name == name), None)

    def qualified(self, qual: str) -> "Schema":
        return Schema(tuple(Field(f.name, f.type, f.quals | {qual}) for f in self.fields))

    def unqualified(self) -> "Schema":
        return Schema(tuple(Field(f.name, f.type) for f in self.fields))

    def ddl(self) -> str:
        return ", ".join(f"{f.name} {spark_ddl_type(f.type)}" for f in self.fields)

    def same_as(self, other: "Schema") -> bool:
        """Same names and types, in any order."""
        return sorted((f.name, f.type) for f in self.fields) == sorted((f.name, f.type) for f in other.fields)

    def diff(self, other: "Schema") -> list[str]:
        """Human-readable differences of `other` against `self`."""
        mine = {f.name: f.type for f in self.fields}
        theirs = {f.name: f.type for f in other.fields}
        out = [f"missing field `{n}: {t}`" for n, t in mine.items() if n not in theirs]
        out += [f"extra field `{n}: {t}`" for n, t in theirs.items() if n not in mine]
        out += [f"field `{n}` is {theirs[n]}, expected {t}" for n, t in mine.items() if n in theirs and theirs[n] != t]
        return out

    def __str__(self) -> str:
        return "(" + ", ".join(f"{f.name}: {f.type}" for f in self.fields) + ")"
