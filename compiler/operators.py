"""The typing rule of every pipe operator: an AST operator and its input's schema become an IR operator
(`compiler/ops.py`) with its output schema, or a diagnostic.

One function per operator, registered in `RULES` with the IR class it builds. An operator
whose IR class is neither per-round nor stateful (`sort`, `limit`) is refused inside a loop
body here, before its rule runs.
"""
from __future__ import annotations

from scopeflow.compiler import expr as X
from scopeflow.compiler import lower, ops
from scopeflow.compiler.lowering import Failed, Lowering, count_param
from scopeflow.compiler.scopes import Scope
from scopeflow.compiler.types import Field, Schema
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import did_you_mean
from scopeflow.stdlib.functions import AGGREGATES, INCREMENTAL

JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti")


def lower_operator(lw: Lowering, op: A.Op, nid: str, schema: Schema, scope: Scope) -> tuple[str, Schema]:
    """Type `op` over its input (`nid`, `schema`) and add it to the plan; returns its id and schema."""
    rule, cls = RULES[type(op)]
    if scope.owner != "pipeline" and not (cls.per_round or cls.stateful):
        lw.fail("E0211", f"`{op.kind}` is not allowed inside a loop body", op.span, f"{op.kind} here",
                [f"{op.kind} the loop's output at the pipeline level"])
    return rule(lw, op, nid, schema, scope)


def _items(lw: Lowering, items, schema: Schema, scope: Scope, what: str) -> tuple[tuple[str, X.TExpr], ...]:
    out, seen = [], set()
    for it in items:
        t = lw.typed(it.expr, lw.env(schema, scope))
        name = it.name or X.output_name(it.expr)
        if name is None:
            lw.fail("E0313", f"this {what} item needs a name", it.span, "unnamed expression", ["name it: `n = EXPR`"])
        if name in seen:
            lw.fail("E0314", f"field `{name}` appears twice in the output", it.span, "duplicate field",
                    ["rename one of them: `new_name = EXPR`"])
        seen.add(name)
        out.append((name, t))
    return tuple(out)


def select(lw: Lowering, op: A.Select, nid: str, schema: Schema, scope: Scope):
    items = _items(lw, op.items, schema, scope, "select")
    kept = {f.name: f for f in schema.fields}
    out = Schema(tuple(Field(n, t.type, kept[n].quals if isinstance(t, X.TCol) and t.name == n and n in kept
                             else frozenset()) for n, t in items))
    return lw.plan.add(ops.Select, scope.owner, [nid], out, op.span, items=items), out


def derive(lw: Lowering, op: A.Derive, nid: str, schema: Schema, scope: Scope):
    items = _items(lw, op.items, schema, scope, "derive")
    new = dict(items)
    fields = [Field(f.name, new[f.name].type) if f.name in new else f for f in schema.fields]
    fields += [Field(n, t.type) for n, t in items if schema.get(n) is None]
    out = Schema(tuple(fields))
    return lw.plan.add(ops.Derive, scope.owner, [nid], out, op.span, items=items), out


def drop(lw: Lowering, op: A.Drop, nid: str, schema: Schema, scope: Scope):
    for n in op.names:
        if schema.get(n) is None:
            lw.fail("E0301", f"cannot drop `{n}`: no such field", op.span, "unknown field",
                    list(did_you_mean(n, schema.names())) + [f"the input has fields {schema}"])
    out = Schema(tuple(f for f in schema.fields if f.name not in op.names))
    return lw.plan.add(ops.Drop, scope.owner, [nid], out, op.span, names=tuple(op.names)), out


def where(lw: Lowering, op: A.Where, nid: str, schema: Schema, scope: Scope):
    cond = lw.typed(op.cond, lw.env(schema, scope))
    if cond.type not in ("boolean", "null"):
        lw.fail("E0306", f"`where` needs a boolean condition, got {cond.type}", op.cond.span, "not a boolean",
                ["compare it, e.g. `where(x > 0)`"])
    return lw.plan.add(ops.Where, scope.owner, [nid], schema, op.span, cond=cond), schema


def explode(lw: Lowering, op: A.Explode, nid: str, schema: Schema, scope: Scope):
    ((name, t),) = _items(lw, [op.item], schema, scope, "explode")
    if not t.type.startswith("array<"):
        lw.fail("E0315", f"`explode` needs an array, got {t.type}", op.item.span, "not an array",
                ["make one with `split(s, \",\")` or `array(a, b)`"])
    out = Schema(tuple(f for f in schema.fields if f.name != name) + (Field(name, t.type[6:-1]),))
    return lw.plan.add(ops.Explode, scope.owner, [nid], out, op.span, field=name, expr=t), out


def union(lw: Lowering, op: A.Union, nid: str, schema: Schema, scope: Scope):
    inputs = [nid]
    for other in op.others:
        oid, osch = lower.lower_stream(lw, other, scope, binary=("union", scope.label))
        if not schema.same_as(osch):
            lw.fail("E0307", "union inputs have different schemas", other.span, "this input",
                    schema.diff(osch) + [f"left: {schema.unqualified()}, right: {osch.unqualified()}"])
        inputs.append(oid)
    out = schema.unqualified()
    return lw.plan.add(ops.Union, scope.owner, inputs, out, op.span), out


def join(lw: Lowering, op: A.Join, nid: str, schema: Schema, scope: Scope):
    if op.how not in JOIN_KINDS:
        lw.fail("E0309", f"unknown join kind `{op.how}`", op.how_span or op.span, "unknown kind",
                did_you_mean(op.how, JOIN_KINDS))
    rid, rschema = lower.lower_stream(lw, op.other, scope, binary=("join", scope.label))
    cond = lw.typed(op.on, lw.env(schema, scope, right=rschema))
    if cond.type != "boolean":
        lw.fail("E0306", f"a join condition must be boolean, got {cond.type}", op.on.span, "not a boolean",
                ["compare fields of both sides, e.g. `on a.id == b.id`"])
    keys = _equi_keys(cond)
    out = schema if op.how in ("semi", "anti") else _joined(lw, op, schema, rschema, keys)
    jid = lw.plan.add(ops.Join, scope.owner, [nid, rid], out, op.span, on=cond, how=op.how, keys=tuple(keys),
                      left_fields=tuple(schema.names()), right_fields=tuple(rschema.names()))
    return jid, out


def _joined(lw: Lowering, op: A.Join, schema: Schema, rschema: Schema, keys) -> Schema:
    """The left fields, then the right ones; a key compared with itself (`a.id == b.id`) is kept once."""
    shared = {lk for lk, rk in keys if lk == rk}
    fields = list(schema.fields)
    for f in rschema.fields:
        left = schema.get(f.name)
        if left is None:
            fields.append(f)
        elif f.name in shared:
            i = fields.index(left)
            fields[i] = Field(f.name, left.type, left.quals | f.quals)
        else:
            lw.fail("E0308", f"both join inputs have a field `{f.name}`", op.span, "field clash",
                    [f"rename one side first, e.g. `{_qual(rschema)} | select(..., {f.name}_2 = {f.name})`",
                     f"or join on `{f.name}` with itself to keep one `{f.name}`"])
    return Schema(tuple(fields))


def _equi_keys(cond: X.TExpr) -> list[tuple[str, str]]:
    """Left/right field pairs compared with `==` in the top-level conjunction of a join condition."""
    if isinstance(cond, X.TCall) and cond.fn == "and":
        return _equi_keys(cond.args[0]) + _equi_keys(cond.args[1])
    if isinstance(cond, X.TCall) and cond.fn == "==":
        a, b = cond.args
        if isinstance(a, X.TCol) and isinstance(b, X.TCol) and {a.side, b.side} == {"left", "right"}:
            left, right = (a, b) if a.side == "left" else (b, a)
            return [(left.name, right.name)]
    return []


def _qual(schema: Schema) -> str:
    quals = sorted({q for f in schema.fields for q in f.quals})
    return quals[0] if quals else "other"


def _grouping(lw: Lowering, op, schema: Schema, scope: Scope, what: str):
    """The keys and aggregates of a `group` or `reduce`, and its output schema."""
    keys, aggs = [], []
    for it in op.items:
        t = lw.typed(it.expr, lw.env(schema, scope, allow_agg=True))
        name = it.name or X.output_name(it.expr)
        if X.has_agg(t):
            if name is None or it.name is None:
                lw.fail("E0313", f"an aggregate in `{what}` needs a name", it.span, "unnamed aggregate",
                        ["name it: `n = count()`"])
            aggs.append((name, t, it))
        else:
            if not op.has_by:
                lw.fail("E0312", f"`{what}` without `by` takes only aggregates", it.span, "not an aggregate",
                        [f"group by it: `{what}(by {name or 'key'}, ...)`"])
            if aggs:
                lw.fail("E0312", "keys come before aggregates", it.span, "key after an aggregate",
                        [f"write the keys first: `{what}(by k, n = count())`"])
            if name is None:
                lw.fail("E0313", f"this `{what}` key needs a name", it.span, "unnamed key", ["name it: `k = EXPR`"])
            keys.append((name, t))
    names = [n for n, _ in keys] + [n for n, _, _ in aggs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        lw.fail("E0314", f"field `{dup}` appears twice in the `{what}` output", op.span, "duplicate field",
                ["rename one of them: `new_name = EXPR`"])
    out = Schema(tuple(Field(n, t.type) for n, t in keys) + tuple(Field(n, t.type) for n, t, _ in aggs))
    return tuple(keys), aggs, out


def group(lw: Lowering, op: A.Group, nid: str, schema: Schema, scope: Scope):
    keys, aggs, out = _grouping(lw, op, schema, scope, "group")
    return lw.plan.add(ops.Group, scope.owner, [nid], out, op.span, keys=keys,
                       aggs=tuple((n, t) for n, t, _ in aggs)), out


def reduce(lw: Lowering, op: A.Reduce, nid: str, schema: Schema, scope: Scope):
    keys, aggs, out = _grouping(lw, op, schema, scope, "reduce")
    if not aggs:
        lw.fail("E0312", "`reduce` needs at least one aggregate", op.span, "no aggregate",
                ["e.g. `reduce(by id, label = min(label))`; for set semantics use `distinct`"])
    for name, t, it in aggs:
        fn = t.fn.split(":", 1)[1] if t.fn.startswith("agg:") else None
        if fn is None:
            lw.fail("E0311", f"`reduce` needs a plain aggregate for `{name}`", it.expr.span,
                    "aggregate inside an expression", ["compute the expression after the reduce with `derive`"])
        if not AGGREGATES[fn].incremental:
            lw.fail("E0311", f"`{fn}` cannot be folded incrementally in `reduce`", it.expr.span,
                    "not incremental", [f"reduce accepts {', '.join(INCREMENTAL)}",
                                        "for a mean keep `s = sum(x)` and `n = count()`, then derive s / n"
                                        if fn == "avg" else "use `group` for a per-round aggregate"])
    return lw.plan.add(ops.Reduce, scope.owner, [nid], out, op.span, keys=keys,
                       aggs=tuple((n, t) for n, t, _ in aggs)), out


def distinct(lw: Lowering, op: A.Distinct, nid: str, schema: Schema, scope: Scope):
    return lw.plan.add(ops.Distinct, scope.owner, [nid], schema, op.span), schema


def apply(lw: Lowering, op: A.Apply, nid: str, schema: Schema, scope: Scope):
    udf = lw.decl.udfs.get(op.module)
    if op.module in lw.decl.failed_udfs:
        raise Failed()
    if udf is None:
        lw.fail("E0111", f"unknown Python module alias `{op.module}`", op.span, "not declared",
                list(did_you_mean(op.module, lw.decl.udfs)) + [f'declare it: use python "file.py" as {op.module}'])
    if op.func not in udf.functions:
        lw.fail("E0111", f"`{op.module}` has no function `{op.func}`", op.span, "unknown function",
                did_you_mean(op.func, udf.functions))
    out = lw.schema_of(op.schema)
    return lw.plan.add(ops.Apply, scope.owner, [nid], out, op.span, module=op.module, func=op.func), out


def sort(lw: Lowering, op: A.Sort, nid: str, schema: Schema, scope: Scope):
    keys = tuple((lw.typed(k.expr, lw.env(schema, scope)), k.desc) for k in op.keys)
    return lw.plan.add(ops.Sort, scope.owner, [nid], schema, op.span, keys=keys), schema


def limit(lw: Lowering, op: A.Limit, nid: str, schema: Schema, scope: Scope):
    return lw.plan.add(ops.Limit, scope.owner, [nid], schema, op.span, n=op.n), schema


def top(lw: Lowering, op: A.Top, nid: str, schema: Schema, scope: Scope):
    n = op.n.value if isinstance(op.n, A.Lit) else count_param(lw, op.n, scope, "`top`")
    if isinstance(n, int) and n < 1:  # a literal or a def's constant; a param is checked when the job runs
        lw.fail("E0320", f"`top` keeps a positive number of records per group, not {n}", op.n.span,
                "not positive", ["e.g. `top(3, by k, order x desc)`"])
    keys = tuple(lw.typed(k, lw.env(schema, scope)) for k in op.keys)
    order = tuple((lw.typed(k.expr, lw.env(schema, scope)), k.desc) for k in op.order)
    return lw.plan.add(ops.Top, scope.owner, [nid], schema, op.span, n=n, keys=keys, order=order), schema


RULES = {
    A.Select: (select, ops.Select),
    A.Derive: (derive, ops.Derive),
    A.Drop: (drop, ops.Drop),
    A.Where: (where, ops.Where),
    A.Explode: (explode, ops.Explode),
    A.Union: (union, ops.Union),
    A.Join: (join, ops.Join),
    A.Group: (group, ops.Group),
    A.Reduce: (reduce, ops.Reduce),
    A.Distinct: (distinct, ops.Distinct),
    A.Apply: (apply, ops.Apply),
    A.Sort: (sort, ops.Sort),
    A.Limit: (limit, ops.Limit),
    A.Top: (top, ops.Top),
}
