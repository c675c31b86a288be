"""The scope tree of name resolution: the pipeline, loop bodies (any depth) and def bodies.

One structure: each scope knows its parent, and every question about what a name
means walks up `ancestors()` (or `visible()`, which stops at a def body: a def's
body sees only its parameters and its own streams, so names stay hygienic).
"""
from __future__ import annotations

from typing import Iterator, Optional

from attrs import define, field

from scopeflow.compiler.types import Schema


@define
class Symbol:
    name: str
    node: Optional[str]  # None when its definition failed (suppresses follow-on errors)
    schema: Optional[Schema]
    outputs: Optional[dict] = None  # a loop with named emits: member -> (node, schema)
    kind: str = "stream"  # stream | var | import | param
    span: object = None


@define(eq=False)
class Scope:
    kind: str  # pipeline | loop | coloop | def
    owner: str  # the id of the plan scope that owns the streams defined here ("pipeline", "cc", "kcore.peel")
    label: str  # "the pipeline", "loop `cc`": how messages name it
    parent: Optional["Scope"] = None
    symbols: dict = field(factory=dict)
    loop_vars: dict = field(factory=dict)  # a loop body's variables: name -> LoopVar id
    scalars: dict = field(factory=dict)  # a def body's constant parameters: name -> TLit | TParam
    child_locals: dict = field(factory=dict)  # streams local to a child loop: name -> the loop's label

    def child(self, kind: str, owner: str, label: str) -> "Scope":
        return Scope(kind, owner, label, parent=self)

    def ancestors(self) -> Iterator["Scope"]:
        """This scope, its parent, ... up to the pipeline."""
        scope: Optional[Scope] = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def visible(self) -> Iterator["Scope"]:
        """The scopes whose names this one sees: ancestors up to the innermost def body, included."""
        for scope in self.ancestors():
            yield scope
            if scope.kind == "def":
                return

    def define(self, sym: Symbol) -> Optional[Symbol]:
        """Add `sym`; return the earlier symbol of the same name if there is one."""
        old = self.symbols.get(sym.name)
        self.symbols[sym.name] = sym
        return old

    def lookup(self, name: str) -> tuple[Optional[Symbol], Optional["Scope"]]:
        """The symbol `name` means here and the scope that defines it, or (None, None)."""
        return next(((s.symbols[name], s) for s in self.visible() if name in s.symbols), (None, None))

    def visible_names(self) -> list[str]:
        return [n for s in self.visible() for n in s.symbols]

    def hidden_by_def(self, name: str) -> bool:
        """Whether `name` is defined outside the def body this scope is in (hygiene hides it)."""
        inner_def = next((s for s in self.ancestors() if s.kind == "def"), None)
        return inner_def is not None and inner_def.parent is not None and inner_def.parent.lookup(name)[0] is not None

    def local_to_child(self, name: str) -> Optional[str]:
        """The label of the child loop whose body defines `name`, when it is invisible from here."""
        return next((s.child_locals[name] for s in self.ancestors() if name in s.child_locals), None)

    def scalars_in_view(self) -> dict:
        """The constant parameters of the def bodies in view, inner ones first."""
        out: dict = {}
        for s in self.visible():
            out = {**s.scalars, **out}
        return out

    def loop(self) -> Optional["Scope"]:
        """The loop body this scope's statements belong to (through def bodies expanded in it)."""
        return next((s for s in self.ancestors() if s.owner == self.owner and s.loop_vars), None) \
            if self.owner != "pipeline" else None

    def outer_loop_with(self, var: str) -> Optional["Scope"]:
        """An enclosing loop (outside this one) that has a variable `var`."""
        inner = self.loop()
        return next((s for s in (inner.parent.ancestors() if inner and inner.parent else ()) if var in s.loop_vars),
                    None)
