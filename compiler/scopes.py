"""Symbol tables for the scope tree: pipeline scope, loop scopes (any depth), def namespaces."""
from __future__ import annotations

from typing import Optional

from attrs import define, field

from scopeflow.compiler.types import Schema


@define
class Symbol:
    name: str
    node: Optional[str]  # None when its definition failed (suppresses follow-on errors)
    schema: Optional[Schema]
    outputs: Optional[dict] = None  # loop with named emits: member -> (node, schema)
    kind: str = "stream"  # stream | var | import | param
    span: object = None


@define
class Symbols:
    """One namespace: a scope's streams. Lookups walk outwards so crossings can be reported."""

    scope: str  # Plan scope id that owns the streams defined here
    scope_label: str  # "pipeline" / "loop `cc`"
    parent: Optional["Symbols"] = None
    barrier: bool = False  # a def body: names outside it are invisible (hygiene)
    table: dict = field(factory=dict)
    loop_vars: dict = field(factory=dict)  # var name -> var node id (innermost loop only)
    child_locals: dict = field(factory=dict)  # name -> loop label, for streams local to a child loop
    scalars: dict = field(factory=dict)  # def scalar params -> TLit

    def define(self, sym: Symbol) -> Optional[Symbol]:
        """Add `sym`; return the earlier symbol of the same name if there is one."""
        old = self.table.get(sym.name)
        self.table[sym.name] = sym
        return old

    def lookup(self, name: str) -> tuple[Optional[Symbol], Optional["Symbols"]]:
        ns: Optional[Symbols] = self
        while ns is not None:
            if name in ns.table:
                return ns.table[name], ns
            if ns.barrier:
                return None, None
            ns = ns.parent
        return None, None

    def hidden_by_def(self, name: str) -> bool:
        """Whether `name` is defined outside the def body this namespace is in (hygiene hides it)."""
        ns: Optional[Symbols] = self
        while ns is not None and not ns.barrier:
            ns = ns.parent
        return ns is not None and ns.parent is not None and ns.parent.lookup(name)[0] is not None

    def visible_names(self) -> list[str]:
        out, ns = [], self
        while ns is not None:
            out += list(ns.table)
            if ns.barrier:
                break
            ns = ns.parent
        return out

    def local_to_child(self, name: str) -> Optional[str]:
        ns = self
        while ns is not None:
            if name in ns.child_locals:
                return ns.child_locals[name]
            ns = ns.parent
        return None
