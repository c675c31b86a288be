"""The language's value types: names, numeric widening, Spark DDL and Python annotations.

The one table of scalar types. The checker (`compiler/`) types expressions with
it; the runtime declares Spark schemas with it.
"""
from __future__ import annotations

import datetime
import typing
from typing import Optional

NUMERIC = ("int", "long", "double")  # narrowest first: `widen` picks the later one
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

# Python annotations of `use python` functions (docs/language.md#python-functions).
PYTHON_TYPE = {int: "long", float: "double", str: "string", bool: "boolean", datetime.datetime: "timestamp",
               datetime.date: "date"}


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


def python_type(annotation) -> Optional[str]:
    """The .flow type of a Python annotation (`list[int]` -> array<long>), or None when it has none."""
    if annotation in PYTHON_TYPE:
        return PYTHON_TYPE[annotation]
    if typing.get_origin(annotation) is list:
        (inner,) = typing.get_args(annotation) or (None,)
        t = python_type(inner)
        return f"array<{t}>" if t else None
    return None
