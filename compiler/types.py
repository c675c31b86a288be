"""Schemas of the Plan IR: named, typed fields (the types themselves are `stdlib/types.py`)."""
from __future__ import annotations

from typing import Iterable, Optional

from attrs import field, frozen

from scopeflow.stdlib.types import spark_ddl_type


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
