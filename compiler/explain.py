"""`scopeflow explain`: the plan as text (scope tree, operators with schemas, chains, edges)."""
from __future__ import annotations

from scopeflow.compiler.incremental import guard_text, loop_strategies, seed_text
from scopeflow.compiler.plan import Plan


def explain(plan: Plan) -> str:
    out = [f"pipeline {plan.pipeline}{' (streaming)' if plan.streaming else ''}"]
    out += [f"  param {name}: {t} = {default!r}" for name, (t, default) in plan.params.items()]
    out += [f"  config {k} = {v}" for k, v in plan.config.items()]
    out += ["", "scopes:"] + _scope_tree(plan, "pipeline", "  ")
    out += ["", "operators:"]
    for sid, s in plan.scopes.items():
        out.append(f"  [{sid}]")
        out += [_operator_line(plan, nid) for nid in s.nodes]
    out += ["", "chains:"] + [f"  {c.id} [{c.scope}] {' -> '.join(c.nodes)}" for c in plan.chains]
    out += ["", "feedback edges:"]
    for s in plan.loop_scopes():
        defer, _ = plan.deferred_feedback(s)
        for var, src in s.feedback:
            reader = plan.feedback_combiner(var)
            combined = f", combined by {reader} ({plan.nodes[reader].label()})" if reader else ""
            if var in defer:  # (docs/language.md, "Execution and guarantees")
                anchors = ", ".join(f"{a} ({plan.nodes[a].label()})" for a in defer[var])
                combined += f", or deferred: computed by the next round from {anchors}"
            out.append(f"  {s.id}: {src} ({plan.nodes[src].label()}) -> {var} ({plan.nodes[var].name}){combined}")
    out += ["", "emits:"]
    for s in plan.loop_scopes():
        out += [f"  {s.id}: {e.mode} {e.node} ({plan.nodes[e.node].label()}) -> {e.out} ({plan.nodes[e.out].name})"
                for e in s.emits]
    strategies = loop_strategies(plan)
    if strategies:  # a streaming pipeline: how its epochs evaluate each loop (docs/language.md#incremental-loops)
        out += ["", "loops across epochs:"]
        for sid, s in strategies.items():
            out.append(f"  {sid}: {s.name}")
            lines = [s.summary, *(seed_text(plan, x) for x in s.seeds), *filter(None, [guard_text(plan, s)])] \
                if s.incremental else s.reasons
            out += [f"    - {line}" for line in lines]
    out += ["", "sinks:"]
    for sink in plan.sinks:
        where = f" {sink.path}" if sink.path is not None else ""
        out.append(f"  {sink.node} ({plan.nodes[sink.node].label()}) -> {sink.format}{where}")
    return "\n".join(out) + "\n"


def _scope_tree(plan: Plan, sid: str, indent: str) -> list[str]:
    s = plan.scopes[sid]
    if s.kind == "pipeline":
        out = [f"{indent}pipeline"]
    else:
        def names(ids):
            return ", ".join(plan.nodes[i].name for i in ids) or "-"

        out = [f"{indent}{s.kind} {s.id} [{s.options.text(plan)}] vars: {names(s.vars)}; imports: {names(s.imports)}"]
    for child in s.children:
        out += _scope_tree(plan, child, indent + "  ")
    return out


def _operator_line(plan: Plan, nid: str) -> str:
    n = plan.nodes[nid]
    chain = plan.chain_of(nid)
    label = f"{n.kind} {n.name}" if n.name else n.kind
    inputs = f" <- {', '.join(n.inputs)}" if n.inputs else ""
    desc = n.describe()
    return f"    {nid}{' ' + chain.id if chain else '':4} {label}{inputs}{': ' + desc if desc else ''} :: {n.schema}"
