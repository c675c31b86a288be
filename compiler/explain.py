"""`scopeflow explain`: the plan as text (scope tree, operators with schemas, chains, edges)."""
from __future__ import annotations

from scopeflow.compiler.plan import Plan


def _describe(plan: Plan, node) -> str:
    a = node.args
    if node.op == "source":
        path = a["path"]
        path = f"${path['param']}" if isinstance(path, dict) else path
        return f"{'stream ' if a.get('streaming') else ''}{a['format']} {path}"
    if node.op == "values":
        return f"{len(a['rows'])} rows"
    if node.op in ("select", "derive"):
        return ", ".join(n for n, _ in a["items"])
    if node.op == "drop":
        return ", ".join(a["names"])
    if node.op == "join":
        keys = " and ".join(f"{l}={r}" for l, r in a["keys"]) or "theta"
        return f"{a['how']} on {keys}"
    if node.op in ("group", "reduce"):
        keys = ", ".join(n for n, _ in a["keys"])
        aggs = ", ".join(f"{n}={t.fn.split(':')[-1]}" for n, t in a["aggs"])
        return f"by [{keys}] {aggs}"
    if node.op == "loop":
        return f"scope {a['scope']}"
    if node.op == "loop_out":
        return f"emit {a['mode']}{' ' + a['emit'] if a['emit'] else ''} from {a['scope']}"
    if node.op == "var":
        return f"entry {a['entry'] or '(empty)'}"
    if node.op == "import":
        return f"from {a['source']}"
    if node.op == "apply":
        return f"{a['module']}.{a['func']}"
    if node.op == "explode":
        return a["name"]
    if node.op == "limit":
        return str(a["n"])
    return ""


def loop_options(plan: Plan, scope) -> str:
    """A loop's options as written in .flow (shared by `explain` and the topology graph)."""
    o = scope.options
    parts = []
    if "rounds" in o:
        parts.append(f"rounds {_val(o['rounds'])}")
    if "until" in o:
        parts.append(f"until empty({_until_name(plan, o['until'])})")
    if "max" in o:
        parts.append(f"max {_val(o['max'])}")
    if "on_max" in o:
        parts.append(f"on max {o['on_max']}")
    if "snapshot_every" in o:
        parts.append(f"snapshot every {_val(o['snapshot_every'])}")
    if o.get("snapshot_recompute"):
        parts.append("snapshot recompute")
    return ", ".join(parts)


def _until_name(plan: Plan, node_id) -> str:
    node = plan.nodes.get(node_id)
    return node.name if node is not None and node.name else str(node_id)


def _val(v):
    return f"${v['param']}" if isinstance(v, dict) and "param" in v else str(v)


def explain(plan: Plan) -> str:
    out = [f"pipeline {plan.pipeline}{' (streaming)' if plan.streaming else ''}"]
    for name, (t, default) in plan.params.items():
        out.append(f"  param {name}: {t} = {default!r}")
    for k, v in plan.config.items():
        out.append(f"  config {k} = {v}")
    out += ["", "scopes:"]

    def tree(sid, indent):
        s = plan.scopes[sid]
        if s.kind == "pipeline":
            out.append(f"{indent}pipeline")
        else:
            names = lambda ids: ", ".join(plan.nodes[i].name for i in ids) or "-"  # noqa: E731
            out.append(f"{indent}{s.kind} {s.id} [{loop_options(plan, s)}] vars: {names(s.vars)}; imports: {names(s.imports)}")
        for c in s.children:
            tree(c, indent + "  ")

    tree("pipeline", "  ")
    out += ["", "operators:"]
    for sid, s in plan.scopes.items():
        out.append(f"  [{sid}]")
        for nid in s.nodes:
            n = plan.nodes[nid]
            chain = f" {n.chain}" if n.chain else ""
            label = f"{n.op} {n.name}" if n.name else n.op
            inputs = f" <- {', '.join(n.inputs)}" if n.inputs else ""
            desc = _describe(plan, n)
            out.append(f"    {nid}{chain:4} {label}{inputs}{': ' + desc if desc else ''} :: {n.schema}")
    out += ["", "chains:"]
    for c in plan.chains:
        out.append(f"  {c.id} [{c.scope}] {' -> '.join(c.nodes)}")
    out += ["", "feedback edges:"]
    for s in plan.loop_scopes():
        for var, src in s.feedback:
            reader = plan.feedback_combiner(var)
            combined = f", combined by {reader} ({plan.nodes[reader].label()})" if reader else ""
            out.append(f"  {s.id}: {src} ({plan.nodes[src].label()}) -> {var} ({plan.nodes[var].name}){combined}")
    out += ["", "emits:"]
    for s in plan.loop_scopes():
        for e in s.emits:
            out.append(f"  {s.id}: {e.mode} {e.node} ({plan.nodes[e.node].label()}) -> {e.out} "
                       f"({plan.nodes[e.out].name})")
    out += ["", "sinks:"]
    for sink in plan.sinks:
        path = sink.args["path"]
        path = f"${path['param']}" if isinstance(path, dict) else path
        out.append(f"  {sink.node} ({plan.nodes[sink.node].label()}) -> {sink.format} {path or ''}".rstrip())
    return "\n".join(out) + "\n"
