"""`scopeflow show F.flow STREAM`: the plan that computes one stream and prints its first rows.

The pipeline is cut down to what the stream needs (a loop it depends on runs whole, with every output;
another loop does not run at all), its sinks are replaced by one console sink, and chains are
rebuilt. Nothing is written.
"""
from __future__ import annotations

from typing import Optional

from attrs import evolve

from scopeflow.compiler import ops
from scopeflow.compiler.chains import build_chains
from scopeflow.compiler.plan import Plan, Sink
from scopeflow.dsl.diagnostics import did_you_mean


class NotShowable(ValueError):
    def __init__(self, message: str, hints: tuple = ()):
        super().__init__(message)
        self.hints = hints


def find_stream(plan: Plan, name: str) -> str:
    """The id of the pipeline-level stream (or loop output, `loop.output`) called `name`."""
    shown = {n.name: nid for nid, n in plan.nodes.items()
             if n.name and n.scope == "pipeline" and not isinstance(n, ops.Loop)}
    if name in shown:
        return shown[name]
    loops = [n for n in plan.nodes.values() if isinstance(n, ops.Loop) and n.name == name and n.scope == "pipeline"]
    if loops:
        body = plan.scopes[loops[0].body]
        outputs = [n.name for n in plan.nodes.values() if isinstance(n, ops.LoopOutput) and n.body == body.id]
        raise NotShowable(f"`{name}` is a {body.kind}, not a stream",
                          (f"show what it emits: {', '.join(f'`{o}`' for o in outputs)}",))
    inner = [n for n in plan.nodes.values() if n.name == name]
    if inner:
        scope = plan.scopes[inner[0].scope]
        outputs = [n.name for n in plan.nodes.values()
                   if isinstance(n, ops.LoopOutput) and n.body == _outermost(plan, scope.id) and n.name]
        raise NotShowable(f"`{name}` is computed inside {scope.kind} `{scope.name}`, round by round",
                          (f"show what the loop emits: {', '.join(f'`{o}`' for o in outputs)}",) if outputs else ())
    raise NotShowable(f"the pipeline has no stream `{name}`", did_you_mean(name, shown))


def preview_plan(plan: Plan, name: str, rows: int) -> tuple[Plan, str]:
    """(the plan that prints `rows` rows of stream `name`, the stream's id). NotShowable if it cannot."""
    target = find_stream(plan, name)
    needed = _needed(plan, target)
    nodes = {nid: _bounded(n) for nid, n in plan.nodes.items() if nid in needed}
    scopes = {}
    for sid, s in plan.scopes.items():
        if s.kind != "pipeline" and s.loop_node not in needed:
            continue
        scopes[sid] = evolve(s, nodes=tuple(n for n in s.nodes if n in needed),
                             children=tuple(c for c in s.children if plan.scopes[c].loop_node in needed))
    edges = tuple(e for e in plan.edges if e.src in needed and e.dst in needed)
    shown = evolve(plan, nodes=nodes, scopes=scopes, edges=edges, chains=(), streaming=False,
                   sinks=(Sink(target, "console", None, (("rows", rows),)),))
    return build_chains(shown, []), target


def streams_read_now(plan: Plan, shown_from: Plan) -> list[str]:
    """The `stream files(...)` sources of `plan` that the preview `shown_from` reads as their folders are now."""
    return [n.name for nid, n in plan.nodes.items() if isinstance(n, ops.Source) and n.streaming
            and nid in shown_from.nodes]


def _bounded(node: ops.Operator) -> ops.Operator:
    """A preview reads a `stream files(...)` source as the files in its folder are now (a batch read of the
    folder); a `rate` stream has no rows until a query runs."""
    if not (isinstance(node, ops.Source) and node.streaming):
        return node
    if node.format == "rate":
        raise NotShowable(f"`{node.name}` is a `stream rate(...)`: its rows are made as the streaming query runs",
                          ("run the pipeline (scopeflow run F.flow --trigger available-now) and read its sinks",))
    options = dict(node.options)
    fmt = options.pop("format")
    options.pop("max_files_per_epoch", None)
    return evolve(node, streaming=False, format=fmt, options=tuple(options.items()))


def _needed(plan: Plan, target: str) -> set:
    """Every operator the target's records depend on; a loop needed is needed whole (all its scopes'
    operators and all its outputs)."""
    into: dict = {}
    for e in plan.edges:
        into.setdefault(e.dst, []).append(e.src)
    needed: set = set()
    todo = [target]
    while todo:
        nid = todo.pop()
        if nid in needed:
            continue
        needed.add(nid)
        node = plan.nodes[nid]
        todo += list(node.inputs) + into.get(nid, [])
        loop = _outermost(plan, node.scope) if node.scope != "pipeline" else (
            node.body if isinstance(node, ops.LoopOutput) else None)
        if loop is not None:
            todo += _whole_loop(plan, loop)
    return needed


def _outermost(plan: Plan, scope_id: str) -> Optional[str]:
    """The pipeline-level loop scope that holds `scope_id`."""
    s = plan.scopes[scope_id]
    while s.parent not in (None, "pipeline"):
        s = plan.scopes[s.parent]
    return s.id if s.kind != "pipeline" else None


def _whole_loop(plan: Plan, loop: str) -> list:
    out = []
    for s in plan.scopes.values():
        if s.id == loop or s.id.startswith(loop + "."):
            out += list(s.nodes)
            if s.loop_node:
                out.append(s.loop_node)
    out += [nid for nid, n in plan.nodes.items() if isinstance(n, ops.LoopOutput) and n.body == loop]
    return out
