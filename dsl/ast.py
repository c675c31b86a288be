"""The .flow AST: frozen attrs classes. Every node has a ``span`` that equality ignores."""
from __future__ import annotations

from typing import Optional

import attrs
from attrs import field, frozen


@frozen
class Span:
    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    start: int = 0
    end: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def _span():
    return field(default=None, eq=False, repr=False, kw_only=True)


# ---- schemas --------------------------------------------------------------------


@frozen
class FieldDecl:
    name: str
    type: str  # "long", "array<long>", ...
    span: Optional[Span] = _span()


@frozen
class SchemaDecl:
    fields: tuple[FieldDecl, ...]
    span: Optional[Span] = _span()


# ---- expressions ----------------------------------------------------------------


class Expr:
    """Marker base for expressions."""


@frozen
class Lit(Expr):
    value: object
    type: str  # long double string boolean null
    span: Optional[Span] = _span()


@frozen
class Name(Expr):
    name: str
    span: Optional[Span] = _span()


@frozen
class FieldAccess(Expr):
    base: Expr
    name: str
    span: Optional[Span] = _span()


@frozen
class Index(Expr):
    base: Expr
    index: Expr
    span: Optional[Span] = _span()


@frozen
class Unary(Expr):
    op: str  # "-" or "not"
    operand: Expr
    span: Optional[Span] = _span()


@frozen
class Binary(Expr):
    op: str  # + - * / % == != < <= > >= and or
    left: Expr
    right: Expr
    span: Optional[Span] = _span()


@frozen
class Call(Expr):
    func: str
    args: tuple[Expr, ...]
    module: Optional[str] = None  # `u.score(x)` -> module "u"
    span: Optional[Span] = _span()


@frozen
class Cast(Expr):
    expr: Expr
    type: str
    span: Optional[Span] = _span()


@frozen
class IsNull(Expr):
    expr: Expr
    negated: bool
    span: Optional[Span] = _span()


@frozen
class InList(Expr):
    expr: Expr
    items: tuple[Expr, ...]
    negated: bool
    span: Optional[Span] = _span()


@frozen
class Item:
    """`name = expr` or a bare `expr` in select/derive/group/reduce/explode."""

    name: Optional[str]
    expr: Expr
    span: Optional[Span] = _span()


@frozen
class SortKey:
    expr: Expr
    desc: bool
    span: Optional[Span] = _span()


# ---- operators -------------------------------------------------------------------


class Op:
    """Marker base for pipe operators."""

    kind = "op"


@frozen
class Select(Op):
    items: tuple[Item, ...]
    span: Optional[Span] = _span()
    kind = "select"


@frozen
class Derive(Op):
    items: tuple[Item, ...]
    span: Optional[Span] = _span()
    kind = "derive"


@frozen
class Drop(Op):
    names: tuple[str, ...]
    span: Optional[Span] = _span()
    kind = "drop"


@frozen
class Where(Op):
    cond: Expr
    span: Optional[Span] = _span()
    kind = "where"


@frozen
class Explode(Op):
    item: Item
    span: Optional[Span] = _span()
    kind = "explode"


@frozen
class Union(Op):
    others: tuple["StreamExpr", ...]
    span: Optional[Span] = _span()
    kind = "union"


@frozen
class Join(Op):
    other: "StreamExpr"
    on: Expr
    how: str = "inner"
    how_span: Optional[Span] = field(default=None, eq=False, repr=False)
    span: Optional[Span] = _span()
    kind = "join"


@frozen
class Group(Op):
    has_by: bool
    items: tuple[Item, ...]
    span: Optional[Span] = _span()
    kind = "group"


@frozen
class Reduce(Op):
    has_by: bool
    items: tuple[Item, ...]
    span: Optional[Span] = _span()
    kind = "reduce"


@frozen
class Distinct(Op):
    span: Optional[Span] = _span()
    kind = "distinct"


@frozen
class Apply(Op):
    module: str
    func: str
    schema: SchemaDecl
    span: Optional[Span] = _span()
    kind = "apply"


@frozen
class Sort(Op):
    keys: tuple[SortKey, ...]
    span: Optional[Span] = _span()
    kind = "sort"


@frozen
class Limit(Op):
    n: int
    span: Optional[Span] = _span()
    kind = "limit"


@frozen
class Top(Op):
    """`top(N, by k, ..., order EXPR [desc], ...)`: the first N records of each key group in that order."""

    n: object  # Lit (long) | Name (a param)
    keys: tuple[Expr, ...]
    order: tuple[SortKey, ...]
    span: Optional[Span] = _span()
    kind = "top"


@frozen
class OpCall(Op):
    """A `def` or imported operator: `name(args)`; also usable as a stream head."""

    name: str
    args: tuple[object, ...]  # StreamExpr | Lit
    span: Optional[Span] = _span()
    kind = "call"


# ---- streams ----------------------------------------------------------------------


@frozen
class Ref:
    name: str
    member: Optional[str] = None  # `scores.hubs`
    span: Optional[Span] = _span()


@frozen
class LoopVar:
    name: str
    init: Optional["StreamExpr"]
    schema: Optional[SchemaDecl]
    span: Optional[Span] = _span()


@frozen
class LoopImport:
    name: str
    expr: "StreamExpr"
    span: Optional[Span] = _span()


@frozen
class LoopOption:
    name: str  # max on_max rounds until snapshot_every snapshot_recompute
    value: object  # int | str | Name (param reference) | None
    span: Optional[Span] = _span()


@frozen
class Loop:
    kind: str  # "loop" | "coloop"
    name: str
    vars: tuple[LoopVar, ...]
    imports: tuple[LoopImport, ...]
    options: tuple[LoopOption, ...]
    body: tuple["Stmt", ...]
    name_span: Optional[Span] = field(default=None, eq=False, repr=False)
    span: Optional[Span] = _span()

    def option(self, name: str) -> Optional[LoopOption]:
        return next((o for o in self.options if o.name == name), None)


@frozen
class StreamExpr:
    head: object  # Ref | Loop | OpCall
    ops: tuple[Op, ...]
    span: Optional[Span] = _span()


# ---- sources and sinks ----------------------------------------------------------


@frozen
class Arg:
    """A call argument of a source/sink: positional or `name = value`."""

    name: Optional[str]
    value: object  # Lit | Name (param reference, or a field) | Names
    span: Optional[Span] = _span()


@frozen
class Names:
    """A parenthesised list of names given as an argument: `partition_by = (k, day)`."""

    names: tuple[Name, ...]
    span: Optional[Span] = _span()


@frozen
class ReadSource:
    format: str
    args: tuple[Arg, ...]
    schema: Optional[SchemaDecl]
    streaming: bool = False
    format_span: Optional[Span] = field(default=None, eq=False, repr=False)
    span: Optional[Span] = _span()


@frozen
class ValuesSource:
    schema: SchemaDecl
    rows: tuple[tuple[Lit, ...], ...]
    span: Optional[Span] = _span()


@frozen
class SinkSpec:
    format: str
    args: tuple[Arg, ...]
    span: Optional[Span] = _span()


# ---- statements --------------------------------------------------------------------


class Stmt:
    """Marker base for statements."""


@frozen
class PipelineDecl(Stmt):
    name: str
    span: Optional[Span] = _span()


@frozen
class ParamDecl(Stmt):
    name: str
    type: str
    default: Lit
    span: Optional[Span] = _span()


@frozen
class ConfigDecl(Stmt):
    key: str
    value: Lit
    span: Optional[Span] = _span()


@frozen
class UseDecl(Stmt):
    path: str
    alias: str
    span: Optional[Span] = _span()


@frozen
class ImportDecl(Stmt):
    path: str
    names: tuple[str, ...]
    name_spans: tuple[Span, ...] = field(default=(), eq=False, repr=False)
    span: Optional[Span] = _span()


@frozen
class SourceDecl(Stmt):
    name: str
    source: object  # ReadSource | ValuesSource
    span: Optional[Span] = _span()


@frozen
class Assign(Stmt):
    name: str
    expr: StreamExpr
    span: Optional[Span] = _span()


@frozen
class DefParam:
    name: str
    schema: Optional[SchemaDecl]  # stream parameter
    type: Optional[str] = None  # scalar parameter
    default: Optional[Lit] = None
    span: Optional[Span] = _span()


@frozen
class DefDecl(Stmt):
    name: str
    params: tuple[DefParam, ...]
    body: tuple[Stmt, ...]
    span: Optional[Span] = _span()


@frozen
class SinkDecl(Stmt):
    expr: StreamExpr
    sink: SinkSpec
    span: Optional[Span] = _span()


@frozen
class Feedback(Stmt):
    var: str
    expr: StreamExpr
    var_span: Optional[Span] = field(default=None, eq=False, repr=False)
    span: Optional[Span] = _span()


@frozen
class Emit(Stmt):
    mode: str  # "all" | "last" | "state"
    expr: StreamExpr
    as_name: Optional[str] = None
    span: Optional[Span] = _span()


@frozen
class Return(Stmt):
    expr: StreamExpr
    span: Optional[Span] = _span()


@frozen
class Program:
    file: str
    source: str
    stmts: tuple[Stmt, ...]


def walk(node):
    """Yield `node` and every attrs node below it (depth first)."""
    yield node
    if attrs.has(type(node)):
        for f in attrs.fields(type(node)):
            yield from _walk_value(getattr(node, f.name))


def _walk_value(value):
    if isinstance(value, tuple):
        for v in value:
            yield from _walk_value(v)
    elif attrs.has(type(value)) and not isinstance(value, Span):
        yield from walk(value)
