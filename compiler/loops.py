"""Loops (docs/language.md#loops): a loop's scope, its variables and imports, its body, its options,
`feedback` and `emit`, and the loop outputs in the parent scope."""
from __future__ import annotations

from typing import Optional

import attrs

from scopeflow.compiler import lower, ops
from scopeflow.compiler.builder import ScopeDraft
from scopeflow.compiler.lowering import Failed, Lowering, count_param
from scopeflow.compiler.plan import Emit, LoopOptions
from scopeflow.compiler.scopes import Scope, Symbol
from scopeflow.compiler.types import Schema
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import did_you_mean

COUNT_OPTIONS = ("max", "rounds", "snapshot_every")  # a number of rounds: a literal or a long param


def lower_loop(lw: Lowering, loop: A.Loop, scope: Scope, out_name: Optional[str]):
    """Lower a loop expression; returns its output's (id, schema), or {emit name: (id, schema)} when its
    emits are named."""
    entries = [_entry(lw, v, scope) for v in loop.vars]
    imports = [(imp, lower.lower_stream(lw, imp.expr, scope)) for imp in loop.imports]
    _check_variables(lw, loop, entries)
    parent = lw.plan.scopes[scope.owner]
    local = lw.hygienic(loop.name)
    sid = local if parent.id == "pipeline" else f"{parent.id}.{local}"
    if sid in lw.plan.scopes:
        lw.fail("E0102", f"loop `{loop.name}` is already defined in this scope", loop.name_span, "duplicate loop",
                ["loop names are unique within a scope; rename one"])
    draft = ScopeDraft(sid, loop.kind, loop.name, parent.id, parent.depth + 1, loop.span,
                       options=_options(lw, loop, scope))
    lw.plan.add_scope(draft)
    loop_id = lw.plan.add(ops.Loop, parent.id, [e[1][0] for e in entries if e[1]] + [i[1][0] for i in imports],
                          Schema(()), loop.span, name=loop.name, edge_kind="entry", body=sid)
    draft.loop_node = loop_id
    body = scope.child(loop.kind, sid, f"loop `{loop.name}`")
    _heads(lw, draft, body, entries, imports)
    for stmt in loop.body:
        lower.lower_statement(lw, stmt, body, in_def=False)
    for name, sym in body.symbols.items():
        if sym.kind not in ("var", "import"):
            scope.child_locals.setdefault(name, body.label)
    _check_body(lw, loop, draft, body)
    return _outputs(lw, loop, draft, loop_id, out_name)


def _entry(lw: Lowering, v: A.LoopVar, scope: Scope):
    """(variable, (entry id, schema) or None, the variable's schema)."""
    entry = lower.lower_stream(lw, v.init, scope) if v.init is not None else None
    declared = lw.schema_of(v.schema) if v.schema is not None else None
    if declared is not None and entry is not None and not declared.same_as(entry[1]):
        lw.fail("E0214", f"the entry stream of `{v.name}` does not match its declared schema", v.init.span,
                "schema differs", declared.diff(entry[1]))
    return v, entry, declared or (entry[1].unqualified() if entry else None)


def _check_variables(lw: Lowering, loop: A.Loop, entries) -> None:
    n = len(loop.vars)
    if loop.kind == "loop" and n != 1:
        lw.fail("E0207", f"a `loop` has exactly one variable, `{loop.name}` has {n}", loop.name_span,
                "wrong variable count", ["use `coloop` for two variables of different schemas"])
    if loop.kind == "coloop":
        if n != 2:
            lw.fail("E0207", f"a `coloop` has exactly two variables, `{loop.name}` has {n}", loop.name_span,
                    "wrong variable count", ["use `loop` for one variable"])
        (_, _, s1), (_, _, s2) = entries
        if s1 is not None and s2 is not None and s1.same_as(s2):
            lw.fail("E0207", f"the two variables of coloop `{loop.name}` have the same schema {s1}",
                    loop.name_span, "same schemas", ["a coloop connects streams of different schemas; "
                                                     "use a `loop` over their union"])


def _heads(lw: Lowering, draft: ScopeDraft, body: Scope, entries, imports) -> None:
    """The loop's variables and imports: the first operators of its scope, defined in its body."""
    for v, entry, schema in entries:
        vid = lw.plan.add(ops.LoopVar, draft.id, [], schema, v.span, name=v.name, var=v.name,
                          entry=entry[0] if entry else None)
        if entry:
            lw.plan.edge(entry[0], vid, "entry")
        draft.vars.append(vid)
        body.loop_vars[v.name] = vid
        lw.define(body, Symbol(v.name, vid, schema, kind="var", span=v.span))
    for imp, (src, schema) in imports:
        iid = lw.plan.add(ops.LoopImport, draft.id, [], schema, imp.span, name=imp.name, source=src)
        lw.plan.edge(src, iid, "import")
        draft.imports.append(iid)
        lw.define(body, Symbol(imp.name, iid, schema.unqualified(), kind="import", span=imp.span))


# ---- options -------------------------------------------------------------------------------------


def _options(lw: Lowering, loop: A.Loop, scope: Scope) -> LoopOptions:
    """The loop's options; `until` is resolved to its body stream after the body (`_check_body`)."""
    given: dict = {}
    for o in loop.options:
        if o.name in given:
            lw.fail("E0213", f"loop option `{o.name.replace('_', ' ')}` is given twice", o.span, "duplicate option",
                    ["keep one of them"])
        given[o.name] = _option_value(lw, o, scope)
    if "rounds" in given and "until" in given:
        later = [o for o in loop.options if o.name in ("rounds", "until")][-1]
        lw.error("E0213", "`rounds` and `until` cannot be combined", later.span, "conflicting options",
                 ["use `until empty(S)` with `max N`"])
    rounds, top = given.get("rounds"), given.get("max", 1000)
    if rounds is not None and "max" not in given:
        top = rounds  # `rounds N` means exactly N rounds: the default max must not cut it short
    elif isinstance(rounds, int) and isinstance(top, int) and rounds > top:
        span = next(o.span for o in loop.options if o.name == "max")
        lw.error("E0213", f"`rounds {rounds}` exceeds `max {top}`", span, "max too small",
                 [f"raise `max` to at least {rounds}, or drop it: `rounds N` runs exactly N rounds"])
    return LoopOptions(max=top, on_max=given.get("on_max", "fail"), rounds=rounds,
                       snapshot_every=given.get("snapshot_every"), snapshot_recompute="snapshot_recompute" in given)


def _option_value(lw: Lowering, o: A.LoopOption, scope: Scope):
    value = o.value
    if isinstance(value, A.Lit):
        if value.value < 1:
            lw.fail("E0213", f"`{o.name.replace('_', ' ')}` must be at least 1", o.span, "too small",
                    ["give a positive number of rounds"])
        return value.value
    if isinstance(value, A.Name) and o.name in COUNT_OPTIONS:
        count = count_param(lw, value, scope, "a loop option")
        if isinstance(count, int) and count < 1:  # a def's constant
            lw.fail("E0213", f"`{o.name.replace('_', ' ')}` must be at least 1, `{value.name}` is {count}", o.span,
                    "too small", ["give a positive number of rounds"])
        return count
    return value.name if isinstance(value, A.Name) else value  # `until`'s stream name, `on max`'s mode


# ---- the body's statements and checks --------------------------------------------------------------


def _check_body(lw: Lowering, loop: A.Loop, draft: ScopeDraft, body: Scope) -> None:
    if not draft.feedback and (draft.id, "Feedback") not in lw.failed:
        lw.error("E0206", f"loop `{loop.name}` has no feedback", loop.name_span, "no feedback",
                 [f"send records around: feedback {next(iter(body.loop_vars), 'v')} <- ..."])
    emits = draft.emits
    if not emits and (draft.id, "Emit") not in lw.failed:
        lw.error("E0208", f"loop `{loop.name}` has no emit", loop.name_span, "no output",
                 ["add `emit STREAM` (or `emit last` / `emit state`)"])
    unnamed = [e for e in emits if e.name is None]
    if len(emits) > 1 and unnamed:
        lw.error("E0208", f"loop `{loop.name}` has several emits; each must be named", unnamed[-1].span,
                 "unnamed emit", ["name them: `emit S as name`, then use `OUT.name`"])
    names = [e.name for e in emits if e.name]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        second = [e for e in emits if e.name == dup][1]
        lw.error("E0208", f"two emits of loop `{loop.name}` are named `{dup}`", second.span,
                 "duplicate emit name", ["give each emit its own name"])
    until = next((o.value for o in loop.options if o.name == "until"), None)
    if until is not None:
        _resolve_until(lw, loop, draft, body, until)


def _resolve_until(lw: Lowering, loop: A.Loop, draft: ScopeDraft, body: Scope, until: A.Name) -> None:
    s = body.symbols.get(until.name)
    if s is None or s.kind == "import":
        why = "an import is the same in every round" if s is not None else "not defined in the loop body"
        lw.error("E0210", f"`until empty({until.name})` needs a stream of loop `{loop.name}`'s body ({why})",
                 until.span, "not a body stream",
                 did_you_mean(until.name, [n for n, v in body.symbols.items() if v.kind != "import"]))
    elif s.node is not None:
        draft.options = attrs.evolve(draft.options, until=s.node)


def lower_feedback(lw: Lowering, stmt: A.Feedback, scope: Scope, in_def: bool) -> None:
    loop = scope.loop()
    if loop is None:
        lw.fail("E0212", "`feedback` is only allowed inside a loop body", stmt.span, "outside a loop",
                ["write it in the body: `loop name(v = init) { ...; feedback v <- next; emit ... }`"])
    draft = lw.plan.scopes[scope.owner]
    if stmt.var not in loop.loop_vars:
        outer = loop.outer_loop_with(stmt.var)
        hints = [f"variables of `{draft.name}`: {', '.join(loop.loop_vars)}"]
        if outer:
            lw.fail("E0204", f"`{stmt.var}` is a variable of the outer loop `{lw.plan.scopes[outer.owner].name}`; "
                    f"feedback may only target the innermost loop `{draft.name}`", stmt.var_span, "outer variable",
                    hints)
        close = [h for h in did_you_mean(stmt.var, loop.loop_vars) if h.startswith("did you mean")]
        lw.fail("E0204", f"`{stmt.var}` is not a variable of loop `{draft.name}`", stmt.var_span,
                "not a loop variable", close + hints)
    nid, schema = lower.lower_stream(lw, stmt.expr, scope)
    var_id = loop.loop_vars[stmt.var]
    var_schema = lw.plan.nodes[var_id].schema
    if not var_schema.same_as(schema):
        lw.fail("E0205", f"feedback to `{stmt.var}` has schema {schema.unqualified()}, the variable has "
                f"{var_schema}", stmt.expr.span, "schema differs", var_schema.diff(schema))
    draft.feedback.append((var_id, nid))
    lw.plan.edge(nid, var_id, "feedback")


def lower_emit(lw: Lowering, stmt: A.Emit, scope: Scope, in_def: bool) -> None:
    if scope.loop() is None:
        lw.fail("E0212", "`emit` is only allowed inside a loop body", stmt.span, "outside a loop",
                ["write it in the body: `loop name(v = init) { ...; feedback v <- next; emit ... }`"])
    nid, _ = lower.lower_stream(lw, stmt.expr, scope)
    node = lw.plan.nodes[nid]
    if stmt.mode == "state" and not node.stateful:
        lw.fail("E0209", f"`emit state` needs a `reduce` or `distinct` stream, got `{node.kind}`",
                stmt.expr.span, "not stateful", ["emit a stream defined as `... | reduce(...)` or `... | distinct`",
                                                 "use `emit last` for the final round's records"])
    lw.plan.add_emit(scope.owner, Emit(stmt.as_name, stmt.mode, nid, "", span=stmt.span))


def _outputs(lw: Lowering, loop: A.Loop, draft: ScopeDraft, loop_id: str, out_name: Optional[str]):
    """A LoopOutput in the parent scope per emit; the single output, or {emit name: output}."""
    outputs = {}
    for i, em in enumerate(draft.emits):
        body = lw.plan.nodes[em.node]
        name = f"{out_name or loop.name}.{em.name}" if em.name else (out_name or loop.name)
        oid = lw.plan.add(ops.LoopOutput, draft.parent, [loop_id], body.schema, em.span, name=lw.hygienic(name),
                          emit=em.name, mode=em.mode, body=draft.id, source=em.node)
        lw.plan.edge(em.node, oid, "emit")
        draft.emits[i] = attrs.evolve(em, out=oid)
        outputs[em.name] = (oid, body.schema)
    if not outputs:
        raise Failed()
    if len(outputs) == 1 and None in outputs:
        return outputs[None]
    return outputs
