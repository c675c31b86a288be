"""Which loops of a streaming pipeline run incrementally across epochs, and why (docs/language.md#incremental-loops).

Every epoch of a streaming pipeline must leave in its sinks what a batch run over all input so far writes. A loop
can reach that result from the previous epoch's (semi-naive evaluation, as Datalog engines and differential
dataflow do) when its result is the least fixpoint of a monotone body, the same whatever order records arrive in:

- its state only improves: every `reduce` folds with `min` or `max`, or it is a `distinct`; and every value a
  `min`/`max` keeps reaches the feedback through functions that keep its order (`dist + w`, not `0 - dist`), and
  meets no filter, key or `distinct` that would treat a better value differently. The worst values count too: a
  null (`greatest` skips it, so a null a `min` keeps would give a better result than a value arriving later) and,
  for a `double`, NaN (Spark orders it above every number, and reversing keeps it there);
- per-round operators distribute over records: no anti or outer join, no `group` with aggregates, no `top`, no
  `apply`, no join of two streams of the loop (which records meet depends on the round each arrives in);
- it stops at its fixpoint: no `rounds`, `until` or `on max stop`, no `emit last`, and an `emit` of every round
  only of a `distinct` (whose records over all rounds are its state);
- its entries and imports only grow as input arrives: between a `stream` source and the loop only operators
  whose new records are computed from the new input alone (no aggregate, no anti or outer join, no join of two
  streams, no union of a growing stream with one that does not grow, no other loop's output, no `read table`,
  whose changes cannot be seen);
- every join with an import that grows reads, on its other side, a stream whose records of earlier epochs the
  runtime keeps: a `reduce`'s or `distinct`'s state, or the loop variable when it is fed back only by `distinct`s
  (then its history is its entries so far and their states). That is where new import records are pushed across
  (`Seed`).

The result of this module is plain data (`Strategy`): explain and the graph show it, and codegen writes it into
the loop's spec for the runtime (runtime/incremental.py), which decides per epoch whether to use it.
"""
from __future__ import annotations

import math
from typing import Optional

from attrs import frozen

from scopeflow.compiler import ops
from scopeflow.compiler.expr import TCall, TCol, TExpr, TLit, TParam, expr_text
from scopeflow.compiler.plan import Plan, Scope
from scopeflow.stdlib.types import NUMERIC

ORDER_KEEPING = {"func:least", "func:greatest"}  # monotone in every argument, nulls aside (`_trend`)
# A null value is the worst a `min` or `max` can keep (it folds as "no value"): `least` skips it, which is right
# for a `min` (the worst stays out of the result) and wrong for a `max`; `greatest` the other way round.
SKIPS_NULL_WRONGLY = {"func:least": "high", "func:greatest": "low"}
VOLATILE = {"func:current_date", "func:current_timestamp"}  # a different value in every epoch


@frozen
class Seed:
    """A join of the body with an import that grows: in an incremental epoch's first round, the import's new
    records are also joined with the other side's records of earlier epochs: the state of `state` (a reduce or
    distinct), or, for the loop variable `var`, its entries so far and the states of the `distinct`s that feed
    it back (`states`)."""

    join: str
    imported: str  # the import's name in the loop
    import_left: bool  # the import is the join's left input
    state: Optional[str] = None
    var: Optional[str] = None
    states: tuple[str, ...] = ()


@frozen
class Strategy:
    scope: str
    incremental: bool
    reasons: tuple[str, ...] = ()  # why it is recomputed (empty when incremental)
    seeds: tuple[Seed, ...] = ()
    streams: tuple[str, ...] = ()  # the `stream` sources its entries and imports grow with
    sources: tuple[str, ...] = ()  # the bounded file sources they read (a change means recomputing)
    states: tuple[str, ...] = ()  # its reduce and distinct operators: their states carry over epochs
    summary: str = ""  # what makes it incremental
    growing: tuple[str, ...] = ()  # the variables whose entries grow with a stream (the others bring nothing new)
    # (reduce, column): `double` values a `min` keeps that reach `+`/`-`: an epoch is exact only while none of them
    # holds -Infinity (`_infinities`); the runtime checks after every epoch and recomputes when one does
    guards: tuple[tuple[str, str], ...] = ()
    # arithmetic of `int`s/`long`s on a value a `min`/`max` keeps (`_wraps`): with `spark.sql.ansi.enabled=false` an
    # overflow wraps around instead of failing, which keeps no order, and the runtime recomputes the loop
    wraps: str = ""

    @property
    def name(self) -> str:
        return "incremental" if self.incremental else "recomputed"

    @property
    def why(self) -> str:
        return self.summary if self.incremental else "; ".join(self.reasons)


def loop_strategies(plan: Plan) -> dict[str, Strategy]:
    """The strategy of every pipeline-level loop of a streaming plan (none for a batch plan): loop scope ->
    Strategy. Nested loops run inside their parent's rounds and have none of their own."""
    if not plan.streaming:
        return {}
    growth: dict = {}
    return {s.id: _strategy(plan, s, growth) for s in plan.loop_scopes() if s.parent == "pipeline"}


class _NotMonotone(Exception):
    pass


def _strategy(plan: Plan, scope: Scope, growth: dict) -> Strategy:
    reasons: list[str] = []
    o = scope.options
    if o.rounds is not None:
        reasons.append(f"`rounds {o.rounds}`: its result is the state after that many rounds, not a fixpoint")
    if o.until is not None:
        reasons.append("`until empty(...)`: it stops at a round, not at a fixpoint")
    if o.on_max == "stop":
        reasons.append("`on max stop`: its result depends on the round `max` stops it at")
    for child in scope.children:
        reasons.append(f"it runs loop `{plan.scopes[child].name}` in every round, which starts afresh each time")
    nodes = [plan.nodes[n] for n in scope.nodes]
    for node in nodes:
        problem = _operator_problem(node)
        if problem:
            reasons.append(problem)
    for e in scope.emits:
        if e.mode == "last":
            reasons.append(f"`emit last {plan.nodes[e.node].label()}`: the last round's records, not a fixpoint's")
        elif e.mode == "all" and not isinstance(plan.nodes[e.node], ops.Distinct):
            reasons.append(f"`emit {plan.nodes[e.node].label()}` gives the records of every round, which depend "
                           "on how the rounds went (emit a `distinct`, or `emit state` of a `reduce`)")
    streams: set = set()
    sources: set = set()
    grows: dict = {}
    for nid in (*scope.vars, *scope.imports):
        node = plan.nodes[nid]
        upstream = node.entry if isinstance(node, ops.LoopVar) else node.source
        if upstream is None:
            continue
        s, b, problem = _growth(plan, upstream, growth)
        grows[nid] = bool(s)
        streams |= s
        sources |= b
        if problem:
            what = f"variable `{node.name}`'s entry" if isinstance(node, ops.LoopVar) else f"import `{node.name}`"
            reasons.append(f"{what}: {problem}")
    seeds, problems = _seeds(plan, scope, grows)
    reasons += problems
    problems, trends = _order_problems(plan, scope)
    reasons += problems
    guards: tuple = ()
    wraps = ""
    if not reasons:
        guards, problems = _infinities(plan, scope, trends)
        reasons += problems
        wraps = _wraps(plan, scope, trends)
    states = tuple(n.id for n in nodes if isinstance(n, (ops.Reduce, ops.Distinct)))
    if reasons:
        return Strategy(scope.id, False, tuple(dict.fromkeys(reasons)))
    kept = ", ".join(f"{_state_kind(plan.nodes[s])} `{plan.nodes[s].label()}`" for s in states)
    summary = (f"monotone: {kept or 'its result'} only "
               f"{'improve' if len(states) > 1 else 'improves'} as the input grows, so an epoch starts from the "
               "previous epoch's fixpoint and pushes only what the new records change")
    growing = tuple(plan.nodes[v].var for v in scope.vars if grows.get(v))
    return Strategy(scope.id, True, (), tuple(seeds), tuple(sorted(streams)), tuple(sorted(sources)), states,
                    summary, growing, guards, wraps)


def _state_kind(node: ops.Operator) -> str:
    if isinstance(node, ops.Distinct):
        return "distinct"
    return "reduce " + "/".join(sorted({x.fn.split(":")[-1] for _, x in node.aggs}))


def seed_text(plan: Plan, seed: Seed) -> str:
    """Where an incremental epoch pushes an import's new records across (explain)."""
    join = plan.nodes[seed.join]
    if seed.state is not None:
        met = f"the state of `{plan.nodes[seed.state].label()}`"
    else:
        var = next(plan.nodes[v] for v in plan.scopes[join.scope].vars if plan.nodes[v].var == seed.var)
        met = f"every record `{var.name}` held (its entries so far" + \
              "".join(f", the state of `{plan.nodes[s].label()}`" for s in seed.states) + ")"
    return f"new records of import `{seed.imported}` meet {met} at the join{_at(join)}"


def guard_text(plan: Plan, strategy: Strategy) -> Optional[str]:
    """What an incremental epoch checks for -Infinity (explain), or None."""
    if not strategy.guards:
        return None
    held = ", ".join(f"`{column}` of {_named(plan.nodes[op])}" for op, column in strategy.guards)
    return (f"{held} must hold no -Infinity: `-Infinity + Infinity` is NaN, which Spark orders above every number, "
            "so an epoch that leaves it runs the loop again from nothing, and the epochs after it recompute")


def _at(node: ops.Operator) -> str:
    return f" (line {node.span.line})" if node.span is not None else ""


def _named(node: ops.Operator) -> str:
    return f"{node.kind} `{node.name}`" if node.name else node.kind


def _operator_problem(node: ops.Operator) -> Optional[str]:
    """What in one body operator stops the loop from being incremental, or None."""
    where = _at(node)
    if isinstance(node, ops.Reduce):
        other = sorted({x.fn.split(":")[-1] for _, x in node.aggs} - {"min", "max"})
        if other:
            return (f"{_named(node)}{where} folds with `{other[0]}`: only `min` and `max` reach the same state "
                    "from the previous epoch's as from nothing")
    if isinstance(node, ops.Group) and node.aggs:
        return (f"{_named(node)}{where} aggregates each round's records: its result depends on which records "
                "arrive in which round")
    if isinstance(node, ops.Join) and node.how not in ("inner", "semi"):
        return (f"the {node.how} join{where}: a record it gives can be contradicted by records that arrive later"
                if node.how == "anti" else
                f"the {node.how} join{where} gives records with nulls that later records would replace")
    return _not_per_record(node)


def _not_per_record(node: ops.Operator) -> Optional[str]:
    """Why an operator's output is not a function of each record alone (in a loop's body or before it), or
    None: a rank, a Python table function, a value that changes between epochs."""
    where = _at(node)
    if isinstance(node, (ops.Top, ops.Limit)):
        return f"`{node.kind}`{where} keeps records by their rank, which later records change"
    if isinstance(node, ops.Apply):
        return f"`apply {node.module}.{node.func}`{where}: scopeflow cannot tell what a Python function does to sets"
    volatile = _volatile(node)
    if volatile:
        return f"{_named(node)}{where} calls `{volatile}()`, which changes from epoch to epoch"
    return None


def _volatile(node: ops.Operator) -> Optional[str]:
    for x in _expressions(node):
        for call in _calls(x):
            if call.fn in VOLATILE:
                return call.fn.split(":")[-1]
    return None


def _expressions(node: ops.Operator) -> list:
    if isinstance(node, (ops.Select, ops.Derive)):
        return [x for _, x in node.items]
    if isinstance(node, ops.Where):
        return [node.cond]
    if isinstance(node, ops.Join):
        return [node.on]
    if isinstance(node, ops.Explode):
        return [node.expr]
    if isinstance(node, ops.Keyed):
        return [x for _, x in (*node.keys, *node.aggs)]
    return []


def _calls(x: TExpr):
    if isinstance(x, TCall):
        yield x
        for a in x.args:
            yield from _calls(a)


# ---- how the loop's inputs grow ------------------------------------------------------------------------


def _growth(plan: Plan, nid: str, memo: dict) -> tuple[frozenset, frozenset, Optional[str]]:
    """(the stream sources a pipeline-level stream grows with, the bounded file sources it reads, why its new
    records are not the pipeline's operators applied to the new input alone, or None)."""
    if nid in memo:
        return memo[nid]
    node = plan.nodes[nid]
    ins = [_growth(plan, i, memo) for i in node.inputs]
    streams = frozenset().union(*(s for s, _, _ in ins)) if ins else frozenset()
    bounded = frozenset().union(*(b for _, b, _ in ins)) if ins else frozenset()
    problem = next((p for _, _, p in ins if p), None)
    if isinstance(node, ops.Source):
        streams, bounded = (frozenset({nid}), frozenset()) if node.streaming else (frozenset(), frozenset({nid}))
        if node.format == "table":
            problem = (f"{_named(node)}{_at(node)} reads table `{node.path}`, whose changes between epochs "
                       "scopeflow cannot see")
    elif isinstance(node, ops.LoopOutput):
        problem = problem or (f"it comes from loop `{plan.scopes[node.body].name}`, whose output each epoch "
                              "recomputes, not appends to")
    elif problem is None and streams:
        problem = _growth_problem(plan, node, [bool(s) for s, _, _ in ins])
    elif problem is None and (volatile := _volatile(node)):  # (input that does not grow must not change either)
        problem = f"{_named(node)}{_at(node)} calls `{volatile}()`, which changes from epoch to epoch"
    memo[nid] = (streams, bounded, problem)
    return memo[nid]


def _growth_problem(plan: Plan, node: ops.Operator, growing: list) -> Optional[str]:
    """Why `node`, some of whose inputs grow with a stream, does not only add records computed from the new ones."""
    what = f"{_named(node)}{_at(node)}"
    if isinstance(node, (ops.Reduce, ops.Group)) and (node.aggs or isinstance(node, ops.Reduce)):
        return f"{what} aggregates its input: its records change, not only grow, as input arrives"
    if isinstance(node, ops.Join):
        if node.how not in ("inner", "semi"):
            return f"the {node.how} join{_at(node)} can take back or change records as input arrives"
        if all(growing):
            return (f"the join{_at(node)} joins two streams that grow: its new records are not the join of the "
                    "new input alone")
    if isinstance(node, ops.Union) and not all(growing):
        still = plan.nodes[node.inputs[growing.index(False)]]
        return (f"the union{_at(node)} adds `{still.label()}`, which does not grow with the stream, to every "
                "epoch's new records again")
    return _not_per_record(node)


# ---- where new import records are pushed across ----------------------------------------------------------


def _seeds(plan: Plan, scope: Scope, grows: dict) -> tuple[list[Seed], list[str]]:
    seeds, problems = [], []
    imports = set(scope.imports)
    for nid in scope.nodes:
        node = plan.nodes[nid]
        if isinstance(node, ops.LoopImport):
            readers = [plan.nodes[c] for c in plan.consumers(nid)]
            other = [r for r in readers if not isinstance(r, ops.Join)]
            if other and grows.get(nid):
                problems.append(f"import `{node.name}` is read by {_named(other[0])}{_at(other[0])}, not only by "
                                "joins: scopeflow pushes new import records across joins only")
        if not isinstance(node, ops.Join):
            continue
        left, right = node.inputs
        sides = [i in imports for i in (left, right)]
        if all(sides):
            problems.append(f"the join{_at(node)} joins two imports: join them before the loop")
            continue
        if not any(sides):
            problems.append(f"the join{_at(node)} joins `{plan.nodes[left].label()}` and "
                            f"`{plan.nodes[right].label()}`, two streams of the loop: which of their records meet "
                            "depends on the round each arrives in")
            continue
        imported, other = (left, right) if sides[0] else (right, left)
        if not grows.get(imported):
            continue  # an import that never changes needs no seed
        seed = _history(plan, scope, plan.nodes[other])
        if seed is None:
            problems.append(f"the join{_at(node)} reads `{plan.nodes[other].label()}`, whose records of earlier "
                            f"epochs scopeflow does not keep, so new records of import `{plan.nodes[imported].name}` "
                            "could not meet them (join the import with a `reduce` or `distinct`, or with the loop "
                            "variable)")
            continue
        seeds.append(Seed(node.id, plan.nodes[imported].name, sides[0], **seed))
    return seeds, problems


def _history(plan: Plan, scope: Scope, node: ops.Operator) -> Optional[dict]:
    """What stands for `node`'s records of every round of earlier epochs, or None."""
    if isinstance(node, (ops.Reduce, ops.Distinct)):
        return {"state": node.id}  # a reduce's state dominates every value it passed on (order is kept)
    if isinstance(node, ops.LoopVar):
        fed = [src for var, src in scope.feedback if var == node.id]
        if all(isinstance(plan.nodes[s], ops.Distinct) for s in fed):
            return {"var": node.var, "states": tuple(dict.fromkeys(fed))}
    return None


# ---- values that must keep their order ---------------------------------------------------------------------


def _order_problems(plan: Plan, scope: Scope) -> tuple[list[str], dict]:
    """Follow every value a `min`/`max` reduce keeps through the body: it must reach the feedback through
    functions that keep its order (`low`: smaller is better, `high`: larger), and must not decide which records
    pass, meet or count as distinct. Passes until the trends settle: a variable's values come from what the
    body feeds back, which may take a trend from the variable only after several feedbacks."""
    trends: dict[str, dict] = {}
    problems: dict[str, None] = {}  # what any pass found (a node found wrong passes on no trend after it)
    for _ in range(_passes(plan, scope)):
        before = {k: dict(v) for k, v in trends.items()}
        for nid in scope.nodes:
            node = plan.nodes[nid]
            try:
                trends[nid] = _node_trends(plan, scope, node, trends)
            except _NotMonotone as why:
                problems[f"{_named(node)}{_at(node)}: {why}"] = None
                trends[nid] = {}
        if trends == before:
            break
    return list(problems), trends


def _passes(plan: Plan, scope: Scope) -> int:
    """At most how many passes over the body a per-column analysis takes to settle: each pass moves what it
    follows at least one node or field further."""
    fields = sum(len(plan.nodes[n].schema.fields) for n in scope.nodes if plan.nodes[n].schema is not None)
    return len(scope.nodes) * (fields + 2)


def _node_trends(plan: Plan, scope: Scope, node: ops.Operator, trends: dict) -> dict:
    ins = [trends.get(i, {}) for i in node.inputs]
    if isinstance(node, ops.LoopVar):
        return _merge([trends.get(src, {}) for var, src in scope.feedback if var == node.id])
    if isinstance(node, ops.Select):
        return {n: t for n, x in node.items if (t := _trend(x, ins[0])) is not None}
    if isinstance(node, ops.Derive):
        out = {k: v for k, v in ins[0].items() if k not in {n for n, _ in node.items}}
        out.update({n: t for n, x in node.items if (t := _trend(x, ins[0])) is not None})
        return out
    if isinstance(node, ops.Drop):
        return {k: v for k, v in ins[0].items() if k not in node.names}
    if isinstance(node, ops.Where):
        _check_filter(node.cond, ins[0])
        return dict(ins[0])
    if isinstance(node, ops.Explode):
        _no_order(node.expr, ins[0], "decides the records it makes")
        return dict(ins[0])
    if isinstance(node, ops.Union):
        return _merge(ins)
    if isinstance(node, ops.Join):
        both = {**{f"left.{k}": v for k, v in ins[0].items()}, **{f"right.{k}": v for k, v in ins[1].items()}}
        _no_order(node.on, both, "decides which records meet", sided=True)
        if node.how == "semi":
            return dict(ins[0])
        return {n: t for n in node.schema.names()
                if (t := (ins[0] if n in node.left_fields else ins[1]).get(n)) is not None}
    if isinstance(node, ops.Group):
        for _, x in node.keys:
            _no_order(x, ins[0], "is a key")
        return {}
    if isinstance(node, ops.Reduce):
        for _, x in node.keys:
            _no_order(x, ins[0], "is a key")
        out = {}
        for name, agg in node.aggs:
            fn = agg.fn.split(":")[-1]
            want = "low" if fn == "min" else "high"
            got = _trend(agg.args[0], ins[0]) if agg.args else None
            if got not in (None, want):
                raise _NotMonotone(f"`{fn}({expr_text(agg.args[0])})` folds a value whose order is reversed: a "
                                   "better value upstream would make it worse")
            out[name] = want
        return out
    if isinstance(node, ops.Distinct) and ins[0]:
        raise _NotMonotone(f"it keeps every value `{sorted(ins[0])[0]}` takes, and a `min`/`max` upstream "
                           "changes it as input arrives")
    return {}


def _merge(dicts: list) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            if out.get(k, v) != v:
                raise _NotMonotone(f"`{k}` holds values that improve downwards from one input and upwards from "
                                   "another")
            out[k] = v
    return out


def _flip(t: Optional[str], operand: TExpr, x: TExpr) -> Optional[str]:
    """The trend of `x`, which reverses the order of `operand` (trend `t`). Spark orders NaN above every number, and
    reversing a `double` keeps a NaN where it is: the worst value a `min` keeps would become the best of a `max`."""
    if not t:
        return None
    if operand.type == "double":
        raise _NotMonotone(f"`{expr_text(x)}` reverses the order of a `double`, but not of NaN, which Spark orders "
                           "above every number either way: a NaN would move from one end of the order to the other")
    return {"low": "high", "high": "low"}[t]


def _both(a: Optional[str], b: Optional[str], x: TExpr) -> Optional[str]:
    if a is None or b is None or a == b:
        return a or b
    raise _NotMonotone(f"`{expr_text(x)}` mixes values that improve in opposite directions")


def _trend(x: TExpr, cols: dict, sided: bool = False) -> Optional[str]:
    """How `x` moves when the ordered columns `cols` improve: "low"/"high" (it improves the same way), None
    (it does not use them); _NotMonotone when it may move either way."""
    if isinstance(x, TCol):
        return cols.get(f"{x.side}.{x.name}" if sided and x.side else x.name)
    if isinstance(x, (TLit, TParam)) or not isinstance(x, TCall):
        return None
    args = [_trend(a, cols, sided) for a in x.args]
    if not any(args):
        return None
    if x.fn in SKIPS_NULL_WRONGLY and SKIPS_NULL_WRONGLY[x.fn] in args:
        raise _NotMonotone(f"`{expr_text(x)}` skips nulls, and a null is the worst value a `min` or `max` keeps: "
                           "while it is null, this gives a better result than a value arriving later would")
    if x.fn == "+" or x.fn in ORDER_KEEPING:
        out = None
        for a in args:
            out = _both(out, a, x)
        return out
    if x.fn == "-":
        return _both(args[0], _flip(args[1], x.args[1], x), x)
    if x.fn == "neg":
        return _flip(args[0], x.args[0], x)
    if x.fn in ("*", "/"):
        if x.fn == "/" and args[1]:
            raise _NotMonotone(f"`{expr_text(x)}` divides by a value that changes")
        operand, factor = x.args if args[0] else reversed(x.args)  # (the changing value, the other)
        moving = args[0] or args[1]
        if _finite_literal(factor) and factor.value != 0:  # (`0 * inf` is NaN)
            return moving if factor.value > 0 else _flip(moving, operand, x)
    if x.fn == "cast" and _widens(x.args[0].type, x.type):
        return args[0]
    raise _NotMonotone(f"`{expr_text(x)}` may not keep the order of the value a `min`/`max` keeps")


def _widens(source: str, target: str) -> bool:
    """A cast that keeps the order of every value (to the same or a wider number type)."""
    return source in NUMERIC and target in NUMERIC and NUMERIC.index(source) <= NUMERIC.index(target)


def _no_order(x: TExpr, cols: dict, role: str, sided: bool = False) -> None:
    if _trend_quiet(x, cols, sided):
        names = sorted({c.name for c in _columns(x)} & {k.split(".")[-1] for k in cols})
        raise _NotMonotone(f"`{expr_text(x)}` {role}, and it uses `{names[0]}`, which a `min`/`max` changes as "
                           "input arrives")


def _trend_quiet(x: TExpr, cols: dict, sided: bool) -> bool:
    try:
        return _trend(x, cols, sided) is not None
    except _NotMonotone:
        return True


def _columns(x: TExpr):
    if isinstance(x, TCol):
        yield x
    elif isinstance(x, TCall):
        for a in x.args:
            yield from _columns(a)


def _check_filter(cond: TExpr, cols: dict) -> None:
    """A filter on an ordered value must let a better value through whenever it lets a worse one through
    (`dist < 100` on a `min`): then it never takes back what it let through before."""
    if not _trend_quiet(cond, cols, False):
        return
    if isinstance(cond, TCall) and cond.fn == "and":
        for a in cond.args:
            _check_filter(a, cols)
        return
    if isinstance(cond, TCall) and cond.fn in ("<", "<=", ">", ">="):
        left, right = (_trend(a, cols) for a in cond.args)
        if cond.fn in (">", ">="):
            left, right = right, left
        # now `left < right`: passes more as left gets lower or right gets higher
        if (left in (None, "low")) and (right in (None, "high")):
            return
    raise _NotMonotone(f"`{expr_text(cond)}` could drop a better value where it kept a worse one")


# ---- infinities: where `+` of `double`s stops keeping the order ----------------------------------------------

ARITHMETIC = {"+", "-", "*", "/"}  # on `double`s: may overflow to an infinity (`*`, `/`: by a positive literal)
NAN_MAKERS = {"+", "-"}  # `-Infinity + Infinity` and `Infinity - Infinity` are NaN


def _infinities(plan: Plan, scope: Scope, trends: dict) -> tuple[tuple, list[str]]:
    """Where the functions the order rule accepts stop keeping the order: `x + w` of `double`s is NaN for
    `x = -Infinity` and `w = Infinity`, and Spark orders NaN above every number, so -Infinity, the best value a
    `min` keeps, would give the worst result where a finite value gives Infinity (and a filter `dist + c <= cap`
    would drop it where a finite value passes). Nowhere else: every function
    accepted keeps the order of every other value, and of -Infinity when no operand can be infinite (a finite
    literal). Then an incremental epoch may push values a batch run never pushes (an earlier epoch's) and keep
    a result the batch run does not. Whether a `min`'s state ever holds -Infinity is seen after the fact: it
    keeps it for good, and while none does, every value pushed in any epoch or in a batch run is above it, where
    the order holds (runtime/incremental.py checks, and recomputes). Hence (guards, problems):

    - the `double` columns of the loop's `min`s, when a value a `min` keeps reaches a `+`/`-` that an infinity
      can make NaN; none when no value does;
    - a problem for a value a `max` keeps reaching one: its worst value is -Infinity, which the state does not
      keep, and a batch run may push it before a better one arrives;
    - a problem for a `+`/`-` of a value a `min` keeps that went through arithmetic of `double`s since the state:
      an overflow there can make a finite value -Infinity, which no state shows."""
    dirty: dict[str, frozenset] = {}  # node -> its columns holding values that went through arithmetic
    for _ in range(_passes(plan, scope)):
        before = dict(dirty)
        for nid in scope.nodes:
            dirty[nid] = _dirty(plan, scope, plan.nodes[nid], trends, dirty)
        if dirty == before:
            break
    problems: dict[str, None] = {}
    meets = False
    for node, cols, call in _value_calls(plan, scope, trends):
        trend = _trend(call, cols) if call.fn in NAN_MAKERS and call.type == "double" else None
        if trend is None or not _may_be_nan(call, cols):
            continue
        where = f"{_named(node)}{_at(node)}: `{expr_text(call)}`"
        if trend == "high":
            problems[f"{where} adds `double`s under a `max`, and `-Infinity + Infinity` is NaN, which Spark orders "
                     "above every number: the worst value would give the best result, and a run over all input may "
                     "push it before a better one arrives"] = None
            continue
        after = dirty.get(node.inputs[0], frozenset())
        inner = next((a for a in call.args if _trend(a, cols) and _arithmetic(a, cols, after)), None)
        if inner is not None:
            problems[f"{where} adds to `{expr_text(inner)}`, which went through arithmetic of `double`s since a "
                     "`min` kept it: an overflow can make it -Infinity, and `-Infinity + Infinity` is NaN, which "
                     "Spark orders above every number"] = None
            continue
        meets = True
    if problems or not meets:
        return (), list(problems)
    guards = tuple((n.id, name) for n in (plan.nodes[i] for i in scope.nodes) if isinstance(n, ops.Reduce)
                   for name, agg in n.aggs if agg.fn.split(":")[-1] == "min" and agg.type == "double")
    return guards, []


def _wraps(plan: Plan, scope: Scope, trends: dict) -> str:
    """The first arithmetic of `int`s or `long`s on a value a `min`/`max` keeps, as the user wrote it (where and
    what), or "": it keeps the order while an overflow fails the run (Spark's ANSI mode, the default), not where
    one wraps around (`spark.sql.ansi.enabled=false`: `Long.MaxValue + 1` is the lowest `long`)."""
    for node, cols, call in _value_calls(plan, scope, trends):
        if call.fn in ("+", "-", "*", "neg") and call.type in ("int", "long") and _trend_quiet(call, cols, False):
            return f"`{expr_text(call)}` in {_named(node)}{_at(node)}"
    return ""


def _dirty(plan: Plan, scope: Scope, node: ops.Operator, trends: dict, dirty: dict) -> frozenset:
    """The columns of `node` whose values a `min`/`max` keeps went through arithmetic of `double`s since (a
    `reduce` starts them afresh: its state is what the runtime checks)."""
    ins = [dirty.get(i, frozenset()) for i in node.inputs]
    cols = trends.get(node.inputs[0], {}) if node.inputs else {}
    if isinstance(node, ops.LoopVar):
        return frozenset().union(*(dirty.get(src, frozenset()) for var, src in scope.feedback if var == node.id))
    if isinstance(node, (ops.Select, ops.Derive)):
        made = {n for n, x in node.items if _arithmetic(x, cols, ins[0])}
        if isinstance(node, ops.Select):
            return frozenset(made)
        return frozenset((ins[0] - {n for n, _ in node.items}) | made)
    if isinstance(node, ops.Drop):
        return frozenset(ins[0] - set(node.names))
    if isinstance(node, (ops.Where, ops.Explode)) or (isinstance(node, ops.Join) and node.how == "semi"):
        return ins[0]
    if isinstance(node, ops.Union):
        return frozenset().union(*ins)
    if isinstance(node, ops.Join):
        return frozenset(n for n in node.schema.names() if n in (ins[0] if n in node.left_fields else ins[1]))
    return frozenset()


def _value_calls(plan: Plan, scope: Scope, trends: dict):
    """Every call in an expression of the body that computes with values a `min`/`max` keeps (`_values`): (its
    operator, the trends of the operator's input, the call)."""
    for nid in scope.nodes:
        node = plan.nodes[nid]
        cols = trends.get(node.inputs[0], {}) if node.inputs else {}
        for x in _values(node):
            for call in _calls(x):
                yield node, cols, call


def _values(node: ops.Operator) -> list:
    """The expressions of `node` that compute with the values a `min`/`max` keeps: what it passes on, and a
    filter's condition (`where(dist + c <= cap)`: NaN fails it where a finite sum passes). Keys and join
    conditions may not use them at all (`_order_problems`)."""
    if isinstance(node, (ops.Select, ops.Derive)):
        return [x for _, x in node.items]
    if isinstance(node, ops.Reduce):
        return [a for _, x in node.aggs for a in x.args]
    if isinstance(node, ops.Where):
        return [node.cond]
    return []


def _arithmetic(x: TExpr, cols: dict, dirty: frozenset) -> bool:
    """Does `x` use a value a `min`/`max` keeps after arithmetic of `double`s (its own, or before: `dirty`)?"""
    if isinstance(x, TCol):
        return x.name in dirty and cols.get(x.name) is not None
    if not isinstance(x, TCall):
        return False
    if x.fn in ARITHMETIC and x.type == "double" and _trend_quiet(x, cols, False) and not _bounded(x, cols):
        return True
    return any(_arithmetic(a, cols, dirty) for a in x.args)


def _bounded(call: TCall, cols: dict) -> bool:
    """Does arithmetic `call` keep every finite value of the ordered operand finite or above it (no overflow down
    to -Infinity)? Adding a literal >= 0, subtracting one <= 0, multiplying by one in (0, 1], dividing by one >= 1."""
    literal = _literal_operand(call, cols)
    if literal is None:
        return False
    c, second = literal.value, call.args[1] is literal
    if call.fn == "-" and second:
        return c <= 0
    return {"+": c >= 0, "*": 0 < c <= 1, "/": second and c >= 1}.get(call.fn, False)


def _may_be_nan(call: TCall, cols: dict) -> bool:
    """Can `call` (a `+`/`-` of a value a `min`/`max` keeps) give NaN from numbers? Not when its other operand is a
    finite literal: only an infinity meeting the opposite one does."""
    return _literal_operand(call, cols) is None


def _literal_operand(call: TCall, cols: dict) -> Optional[TLit]:
    """The operand of `call` that is not an ordered value, when it is the only one and a finite number literal."""
    others = [a for a in call.args if not _trend_quiet(a, cols, False)]
    return others[0] if len(others) == 1 and _finite_literal(others[0]) else None


def _finite_literal(x: TExpr) -> bool:
    return isinstance(x, TLit) and isinstance(x.value, (int, float)) and math.isfinite(x.value)
