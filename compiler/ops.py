"""The operators of the Plan IR: one frozen class per operator.

Each class says once what the rest of the compiler needs to know of it:

- its arguments, typed (expressions are `compiler.expr.TExpr`, paths `Path | ParamRef`);
- its traits, read by the passes and the code generator:
  - `per_round`: inside a loop it exists anew each round and sees only that round's records
    (operators that are neither per-round nor stateful are not allowed in a loop body);
  - `stateful`: keeps state across the rounds of a loop activation (`reduce`, `distinct`);
  - `keeps_every_record`: one output record per input record (its input's counter counts it);
  - `chainable`: may be fused with its neighbours into one generated function (a chain);
  - `starts_chain`: never continues the chain of its first input (a shuffle with two inputs);
- `describe()`: its arguments as one line of .flow-like text, shown by `scopeflow explain`, in
  the graph, in snapshot signatures and in the run report.

The output `schema` of every operator is computed when lowering builds it (`compiler/operators.py`),
where the errors about it are reported. Codegen (`visit_<Class>`) and the graph (`graph.TITLED`)
dispatch on the class and refuse one they do not know; docs/architecture.md says how to add one.
"""
from __future__ import annotations

from typing import ClassVar, Optional, Union

from attrs import field, frozen

from scopeflow.compiler.expr import TCol, TExpr, expr_text
from scopeflow.compiler.types import Schema
from scopeflow.dsl.ast import Span


@frozen
class ParamRef:
    """A `param` given where a constant is expected (a path, a loop option): resolved when the job runs."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"


@frozen
class Path:
    """A path as written (relative to the .flow file's folder), or a catalog table's name."""

    value: str

    def __str__(self) -> str:
        return self.value


Location = Union[Path, ParamRef]
Count = Union[int, ParamRef]  # a number of rounds: a constant or a long param


@frozen(kw_only=True)
class Operator:
    id: str  # n001, n002, ... in definition order
    scope: str  # the id of the scope that owns it
    schema: Schema
    inputs: tuple[str, ...] = ()
    name: Optional[str] = None  # the user's stream name, when the operator ends a definition
    span: Optional[Span] = field(default=None, eq=False, repr=False)

    kind: ClassVar[str] = "operator"
    per_round: ClassVar[bool] = False
    stateful: ClassVar[bool] = False
    keeps_every_record: ClassVar[bool] = False
    chainable: ClassVar[bool] = False
    starts_chain: ClassVar[bool] = False

    def describe(self) -> str:
        return ""

    def label(self) -> str:
        return self.name or f"{self.kind}#{self.id}"


# ---- sources --------------------------------------------------------------------------------------


@frozen(kw_only=True)
class Source(Operator):
    format: str  # csv json parquet table | files rate (streaming)
    path: Optional[Location]  # a table's name for `table`; None for `rate`
    options: tuple[tuple[str, object], ...] = ()  # (name, constant or ParamRef)
    streaming: bool = False
    kind = "source"

    def describe(self) -> str:
        where = f" {self.path}" if self.path is not None else ""
        return f"{'stream ' if self.streaming else ''}{self.format}{where}"


@frozen(kw_only=True)
class Values(Operator):
    rows: tuple[tuple, ...]
    kind = "values"

    def describe(self) -> str:
        return f"{len(self.rows)} rows"


# ---- per-round operators ----------------------------------------------------------------------------


def _items(items) -> str:
    """`select`/`derive` items: a kept field by its name, anything else as name=expr."""
    return ", ".join(n if isinstance(x, TCol) and x.name == n else f"{n}={expr_text(x)}" for n, x in items)


@frozen(kw_only=True)
class Select(Operator):
    items: tuple[tuple[str, TExpr], ...]
    kind = "select"
    per_round = keeps_every_record = chainable = True

    def describe(self) -> str:
        return _items(self.items)


@frozen(kw_only=True)
class Derive(Operator):
    items: tuple[tuple[str, TExpr], ...]
    kind = "derive"
    per_round = keeps_every_record = chainable = True

    def describe(self) -> str:
        return _items(self.items)


@frozen(kw_only=True)
class Drop(Operator):
    names: tuple[str, ...]
    kind = "drop"
    per_round = keeps_every_record = chainable = True

    def describe(self) -> str:
        return ", ".join(self.names)


@frozen(kw_only=True)
class Where(Operator):
    cond: TExpr
    kind = "where"
    per_round = chainable = True

    def describe(self) -> str:
        return expr_text(self.cond)


@frozen(kw_only=True)
class Explode(Operator):
    field: str
    expr: TExpr
    kind = "explode"
    per_round = chainable = True

    def describe(self) -> str:
        return f"{self.field}={expr_text(self.expr)}"


@frozen(kw_only=True)
class Union(Operator):
    kind = "union"
    per_round = chainable = True

    def describe(self) -> str:
        return f"{len(self.inputs)} inputs"


@frozen(kw_only=True)
class Join(Operator):
    on: TExpr
    how: str  # inner left right full semi anti
    keys: tuple[tuple[str, str], ...]  # (left field, right field) compared with `==` at the top of `on`
    left_fields: tuple[str, ...]
    right_fields: tuple[str, ...]
    kind = "join"
    per_round = chainable = starts_chain = True

    def describe(self) -> str:
        on = " and ".join(f"{left}={right}" for left, right in self.keys) or expr_text(self.on)
        return f"{self.how} on {on}"


def _keyed(keys, aggs) -> str:
    """`by id: label=min` (an aggregate of the field it writes), `global: n=count()`, `by k`."""
    by = "by " + ", ".join(n if isinstance(x, TCol) and x.name == n else f"{n}={expr_text(x)}" for n, x in keys) \
        if keys else "global"
    parts = []
    for name, x in aggs:
        fn = x.fn.split(":")[-1]
        simple = all(isinstance(a, TCol) and a.name == name for a in x.args)
        parts.append(f"{name}={fn}" if simple else f"{name}={expr_text(x)}")
    return f"{by}: {', '.join(parts)}" if parts else by


@frozen(kw_only=True)
class Keyed(Operator):
    """Keys and aggregates: `group` and `reduce`."""

    keys: tuple[tuple[str, TExpr], ...]
    aggs: tuple[tuple[str, TExpr], ...]

    def describe(self) -> str:
        return _keyed(self.keys, self.aggs)


@frozen(kw_only=True)
class Group(Keyed):
    """The records of this round, grouped (no aggregates: a per-round distinct of the keys)."""

    kind = "group"
    per_round = chainable = True


@frozen(kw_only=True)
class Apply(Operator):
    module: str  # the `use python` alias
    func: str
    kind = "apply"
    per_round = chainable = True

    def describe(self) -> str:
        return f"{self.module}.{self.func}"


@frozen(kw_only=True)
class Top(Operator):
    """The first `n` records of each key group, in `order`; ties broken by the record's other fields."""

    n: Count
    keys: tuple[TExpr, ...]  # none: one group
    order: tuple[tuple[TExpr, bool], ...]  # (expression, descending)
    kind = "top"
    per_round = chainable = True

    def describe(self) -> str:
        by = f" by {', '.join(expr_text(k) for k in self.keys)}" if self.keys else ""
        return f"{self.n}{by} order " + ", ".join(expr_text(x) + (" desc" if desc else "") for x, desc in self.order)

    def tie_fields(self) -> list[str]:
        """The fields that break ties after `order`, ascending: every field that is not a key or an order
        column itself. Records equal in all of them are equal: which of them is kept cannot matter."""
        plain = {x.name for x in (*self.keys, *(o for o, _ in self.order)) if isinstance(x, TCol)}
        return [f.name for f in self.schema.fields if f.name not in plain]


# ---- stateful operators ---------------------------------------------------------------------------


@frozen(kw_only=True)
class Reduce(Keyed):
    """Keyed state across the rounds of a loop activation; outputs the keys a round changed. Each aggregate
    is a plain one that folds incrementally."""

    kind = "reduce"
    stateful = chainable = True

    def plain_keys(self) -> bool:
        """Every key is an input field kept under its own name (no computed key)."""
        return all(isinstance(t, TCol) and t.name == n for n, t in self.keys)


@frozen(kw_only=True)
class Distinct(Operator):
    """Inside a loop: the records no earlier round of the activation has output."""

    kind = "distinct"
    stateful = chainable = True


# ---- pipeline level only --------------------------------------------------------------------------


@frozen(kw_only=True)
class Sort(Operator):
    keys: tuple[tuple[TExpr, bool], ...]  # (expression, descending)
    kind = "sort"
    chainable = True

    def describe(self) -> str:
        return "by " + ", ".join(expr_text(x) + (" desc" if desc else "") for x, desc in self.keys)


@frozen(kw_only=True)
class Limit(Operator):
    n: int
    kind = "limit"
    chainable = True

    def describe(self) -> str:
        return str(self.n)


# ---- loops ------------------------------------------------------------------------------------------


@frozen(kw_only=True)
class Loop(Operator):
    """A loop in its parent scope: its inputs are the entry streams, then the imported streams."""

    body: str  # the id of the loop's own scope
    kind = "loop"

    def describe(self) -> str:
        return f"scope {self.body}"


@frozen(kw_only=True)
class LoopVar(Operator):
    """A loop variable (a FLIP-15 head): round 0 holds its entry stream, round r+1 what round r fed back."""

    var: str
    entry: Optional[str]  # the entry stream in the parent scope; None: the variable starts empty
    kind = "var"

    def describe(self) -> str:
        return f"entry {self.entry or '(empty)'}"


@frozen(kw_only=True)
class LoopImport(Operator):
    """`with (i = S)`: stream S of the parent scope, the same in every round."""

    source: str
    kind = "import"

    def describe(self) -> str:
        return f"from {self.source}"


@frozen(kw_only=True)
class LoopOutput(Operator):
    """One emit of a loop, in the loop's parent scope (its input is the `Loop`)."""

    emit: Optional[str]  # the emit's name; None for a loop's single output
    mode: str  # all | last | state
    body: str  # the loop's scope
    source: str  # the emitted stream of the body
    kind = "loop_out"

    def describe(self) -> str:
        return f"emit {self.mode}{' ' + self.emit if self.emit else ''} from {self.body}"


OPERATORS: tuple[type[Operator], ...] = (Source, Values, Select, Derive, Drop, Where, Explode, Union, Join, Group,
                                         Apply, Top, Reduce, Distinct, Sort, Limit, Loop, LoopVar, LoopImport,
                                         LoopOutput)
