"""`scopeflow graph`: draw the Plan IR as DOT (SVG/PNG/PDF through graphviz) or Mermaid.

What the picture shows:

- sources (cylinders) and sinks (folders, one per `sink` statement);
- every operator as a rounded box, its kind in bold with its key arguments
  (`join inner on id=src`, `reduce by id: label=min`, `where d < k`, the
  field list of a `select`), the stream name and node id underneath; the
  stateful `reduce` / `distinct` of a loop get a double border;
- each `loop` / `coloop` scope as a nested cluster labelled with its kind,
  name and options (rounds, until, max, on max). The plan's `loop` node is
  not drawn: the cluster stands for it, and its edges repeat the entry,
  import and emit edges;
- loop variables (`var`, the FLIP-15 heads) as orange inverted houses that
  receive the entry edge; `with` imports as grey parallelograms inside the
  cluster with a blue edge from the outer stream; loop outputs (`loop_out`)
  as green houses outside the cluster, reached by a green `emit` edge;
- feedback edges as red dashed arcs back to the head, labelled `feedback`,
  which do not constrain the ranking (so the body still reads top-down);
- chains (`Plan.chains` with more than one operator) as dotted inner
  clusters labelled with the chain id: one fused function in the PySpark;
- the schema and the full operator arguments in the tooltip of each node.

Node ids in the DOT text are the plan's node ids (`n001`, ...), sinks are
`sink1`, `sink2`, ... in `Plan.sinks` order, clusters are
`cluster_loop_<scope id>` and `cluster_chain_<chain id>`; everything is
written in definition order, so the text is stable (golden-tested).

Run statistics (`--stats run.json`, written by `scopeflow run --report`):

    {
      "pipeline": "connected_components",
      "loops": [
        {"scope": "cc",              # Scope.id (dotted for nested loops)
         "activations": 1,           # activations of the loop
         "rounds": [7],              # rounds per activation
         "attempts": 7}              # termination attempts, all activations
      ],
      "operators": {
        "n009": {"records": 1234,    # records output, all rounds and activations (pipeline operators
                                     # and loop outputs that feed a sink too: what the run computed)
                 "seconds": 0.42}    # Spark task time in the operator, from the SQL metrics of the
                                     # rounds' plans (operators computed in loop rounds; summed over tasks)
      }
    }

Every key is optional and unknown keys are ignored. Edges are labelled with
the record count of their source node (`1,234 rec`); an `emit` edge shows
the count of the loop output it feeds when the report has one (for `emit
last` / `emit state` that is what leaves the loop). Operator labels get their
time, loop clusters their activations, rounds and termination attempts.
"""
from __future__ import annotations

import html
import math
import os
import re
import shutil
from typing import Iterable

from attrs import define, field, frozen

from scopeflow.compiler import ops
from scopeflow.compiler.incremental import loop_strategies
from scopeflow.compiler.plan import Plan, Scope
from scopeflow.dsl.diagnostics import InternalError

IMAGE_FORMATS = ("svg", "png", "pdf")
TEXT_FORMATS = ("dot", "mmd")
MAX_LABEL = 42  # characters of an operator's argument line before it is clipped
INSTALL_HINT = "install graphviz (Debian/Ubuntu: `apt-get install graphviz`, macOS: `brew install graphviz`)"


class GraphvizMissing(RuntimeError):
    """The `dot` binary is needed for svg/png/pdf and is not on PATH."""


class GraphvizFailed(RuntimeError):
    """`dot` ran and refused the graph (a bug in this module, or a broken graphviz install)."""


# ---- the look: declarative tables --------------------------------------------------------

FONT = "Helvetica"
GRAPH_ATTRS = {
    "rankdir": "TB", "fontname": FONT, "fontsize": "12", "nodesep": "0.3", "ranksep": "0.38",
    "labelloc": "t", "labeljust": "l", "bgcolor": "white", "pad": "0.2",
}
NODE_DEFAULTS = {
    "fontname": FONT, "fontsize": "10", "shape": "box", "style": "rounded,filled", "fillcolor": "white",
    "color": "#475569", "penwidth": "1.1", "margin": "0.14,0.05", "height": "0.36",
}
EDGE_DEFAULTS = {"fontname": FONT, "fontsize": "9", "color": "#64748b", "fontcolor": "#334155", "arrowsize": "0.7"}

# Every operator class the graph draws, and whether its title is its stream's name (the user's source, a loop
# variable, an import, a loop output) or its kind (an operator: its name goes underneath). Its shape and colours
# are NODE_STYLE[kind] (a plain rounded box when the kind has none). A `Loop` is drawn as its scope's cluster.
TITLED: dict[type, bool] = {
    **{cls: True for cls in (ops.Source, ops.Values, ops.LoopVar, ops.LoopImport, ops.LoopOutput)},
    **{cls: False for cls in (ops.Select, ops.Derive, ops.Drop, ops.Where, ops.Explode, ops.Union, ops.Join,
                              ops.Group, ops.Apply, ops.Top, ops.Reduce, ops.Distinct, ops.Sort, ops.Limit,
                              ops.Loop)},
}

# Shapes and colours per node kind (a `kind` is an op, or "sink", or "stateful" for reduce/distinct in a loop).
NODE_STYLE = {
    "source": {"shape": "cylinder", "style": "filled", "fillcolor": "#dbeafe", "color": "#1d4ed8"},
    "values": {"shape": "cylinder", "style": "filled", "fillcolor": "#dbeafe", "color": "#1d4ed8"},
    "sink": {"shape": "folder", "style": "filled", "fillcolor": "#dcfce7", "color": "#15803d"},
    "var": {"shape": "invhouse", "style": "filled", "fillcolor": "#fed7aa", "color": "#c2410c", "penwidth": "1.4"},
    "import": {"shape": "parallelogram", "style": "filled", "fillcolor": "#e2e8f0", "color": "#475569"},
    "loop_out": {"shape": "house", "style": "filled", "fillcolor": "#bbf7d0", "color": "#15803d"},
    "stateful": {"peripheries": "2"},
}
EDGE_STYLE = {
    "data": {},
    "entry": {"color": "#c2410c", "penwidth": "1.3"},
    "import": {"color": "#2563eb", "style": "dashed", "fontcolor": "#1d4ed8"},
    "feedback": {"color": "#dc2626", "fontcolor": "#b91c1c", "style": "dashed", "penwidth": "1.5",
                 "constraint": "false", "tailport": "e", "headport": "e"},
    "emit": {"color": "#15803d", "fontcolor": "#166534", "penwidth": "1.5"},
    "sink": {"color": "#15803d"},
}
LOOP_STYLE = {"style": "rounded,filled", "color": "#ea580c", "penwidth": "1.4", "fontsize": "11", "labeljust": "l",
              "margin": "10"}
LOOP_FILL = ("#fff7ed", "#ffedd5", "#fed7aa", "#fdba74")  # darker with nesting depth
CHAIN_STYLE = {"style": "dotted,rounded", "color": "#64748b", "fontcolor": "#64748b", "fontsize": "8",
               "labeljust": "r", "margin": "6"}
SUB_COLOR = "#64748b"  # the small grey line under an operator


def clip(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def schema_text(node: ops.Operator) -> str:
    return "\n".join(f"  {f.name}: {f.type}" for f in node.schema.fields) or "  (no fields)"


# ---- run statistics ----------------------------------------------------------------------

@define
class RunStats:
    """The parts of a run report the graph uses; anything missing is simply not drawn."""

    records: dict = field(factory=dict)  # node id -> int
    seconds: dict = field(factory=dict)  # node id -> float
    loops: dict = field(factory=dict)  # scope id -> {"activations", "rounds", "attempts"}

    @classmethod
    def of(cls, report) -> "RunStats":
        stats = cls()
        if not isinstance(report, dict):
            return stats
        ops = report.get("operators")
        for nid, op in (ops.items() if isinstance(ops, dict) else ()):
            if not isinstance(op, dict):
                continue
            if _is_number(op.get("records")):
                stats.records[str(nid)] = int(op["records"])
            if _is_number(op.get("seconds")):
                stats.seconds[str(nid)] = float(op["seconds"])
        loops = report.get("loops")
        for loop in (loops if isinstance(loops, list) else ()):
            if isinstance(loop, dict) and loop.get("scope") is not None:
                stats.loops[str(loop["scope"])] = loop
        return stats

    def loop_text(self, scope: Scope) -> str:
        loop = self.loops.get(scope.id)
        if not loop:
            return ""
        parts = []
        if _is_number(loop.get("activations")):
            n = int(loop["activations"])
            parts.append(f"{n:,} activation{'' if n == 1 else 's'}")
        raw = loop.get("rounds")
        rounds = [int(r) for r in raw if _is_number(r)] if isinstance(raw, list) else []
        if rounds:
            total = sum(rounds)
            detail = "" if len(rounds) == 1 else (
                f" ({'+'.join(map(str, rounds))})" if len(rounds) <= 4 else f" (max {max(rounds)})")
            parts.append(f"{total:,} round{'' if total == 1 else 's'}{detail}")
        if _is_number(loop.get("attempts")):
            n = int(loop["attempts"])
            parts.append(f"{n:,} attempt{'' if n == 1 else 's'}")
        return " · ".join(parts)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def records_text(n: int) -> str:
    return f"{n:,} rec"


def seconds_text(s: float) -> str:
    if s < 0.001:
        return "<1 ms"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


# ---- the drawing model: what is drawn, independent of the output syntax --------------------

@define
class DrawNode:
    id: str
    kind: str  # an op, or "sink"
    title: str  # bold first line
    detail: str  # the argument line
    sub: str  # small grey line: stream name, id, time
    tooltip: str
    stateful: bool = False
    inline: bool = True  # detail on the title's line (`join inner on id=src`) or on its own (a source's path)

    def lines(self) -> list[str]:
        """The plain text lines of the label, the first one starting with the bold title."""
        first = f"{self.title} {self.detail}" if self.inline and self.detail else self.title
        return [first] + ([self.detail] if self.detail and not self.inline else [])


@define
class DrawEdge:
    src: str
    dst: str
    kind: str  # data | entry | import | feedback | emit | sink
    label: str = ""
    tooltip: str = ""


@define
class Drawing:
    plan: Plan
    stats: RunStats
    nodes: dict = field(factory=dict)  # id -> DrawNode, definition order
    edges: list = field(factory=list)
    sink_ids: list = field(factory=list)
    strategies: dict = field(factory=dict)  # streaming loops: incremental or recomputed (compiler/incremental.py)

    def strategy_text(self, scope: Scope) -> str:
        """How epochs evaluate a streaming loop: "incremental", or "recomputed: " and the first reason."""
        s = self.strategies.get(scope.id)
        if s is None:
            return ""
        return "incremental across epochs" if s.incremental else f"recomputed each epoch: {s.reasons[0]}"


def _titled(node: ops.Operator) -> bool:
    if type(node) not in TITLED:
        raise InternalError(f"the graph cannot draw operator class {type(node).__name__} ({node.id})")
    return TITLED[type(node)]


def _draw_node(plan: Plan, node: ops.Operator, stats: RunStats) -> DrawNode:
    desc = node.describe()
    titled = _titled(node)
    if titled:  # named by the user's stream; a loop output's mode is on its emit edge
        title = f"with {node.name}" if isinstance(node, ops.LoopImport) else node.name or node.kind
        detail = desc if isinstance(node, (ops.Source, ops.Values)) else ""
        sub = ["var", node.id] if isinstance(node, ops.LoopVar) else [node.id]
    else:
        title, detail = node.kind, desc
        sub = ([node.name] if node.name else []) + [node.id]
    if node.id in stats.seconds:
        sub.append(seconds_text(stats.seconds[node.id]))
    stateful = node.stateful and plan.scope_of(node.id).kind != "pipeline"
    return DrawNode(node.id, node.kind, title, clip(detail), " · ".join(sub), _node_tooltip(plan, node, desc, stats),
                    stateful, inline=not titled)


def _node_tooltip(plan: Plan, node: ops.Operator, desc: str, stats: RunStats) -> str:
    scope = plan.scope_of(node.id)
    chain = plan.chain_of(node.id)
    tip = [f"{node.id} {node.kind}{' ' + node.name if node.name else ''}  [{scope.kind} {scope.id}"
           f"{', chain ' + chain.id if chain else ''}]"]
    if desc:
        tip.append(desc)
    tip += ["schema:", schema_text(node)]
    if node.id in stats.records:
        tip.append(f"records: {stats.records[node.id]:,}")
    if node.id in stats.seconds:
        tip.append(f"time: {seconds_text(stats.seconds[node.id])}")
    return "\n".join(tip)


def _draw_sinks(plan: Plan, d: Drawing) -> None:
    for i, sink in enumerate(plan.sinks, 1):
        sid = f"sink{i}"
        where = str(sink.path) if sink.path is not None else ""
        node = plan.nodes[sink.node]
        tip = f"{sid} sink {sink.format} {where}".rstrip() + f"\nfrom {node.id} {node.label()}\nschema:\n" + \
            schema_text(node)
        d.nodes[sid] = DrawNode(sid, "sink", sink.format, clip(where), "sink", tip, inline=False)
        d.sink_ids.append(sid)
        d.edges.append(_edge(plan, d.stats, sink.node, sid, "sink"))


def _edge(plan: Plan, stats: RunStats, src: str, dst: str, kind: str) -> DrawEdge:
    words = {"feedback": "feedback", "emit": _emit_word(plan, dst) if kind == "emit" else ""}.get(kind, "")
    counted = dst if kind == "emit" and dst in stats.records else src
    count = stats.records.get(counted)
    label = "\n".join(p for p in (words, records_text(count) if count is not None else "") if p)
    tip = f"{kind}: {src} -> {dst}" + (f"\n{count:,} records" if count is not None else "")
    return DrawEdge(src, dst, kind, label, tip)


def _emit_word(plan: Plan, out_id: str) -> str:
    node = plan.nodes[out_id]
    return "emit" + ("" if node.mode == "all" else f" {node.mode}") + (f" as {node.emit}" if node.emit else "")


def build_drawing(plan: Plan, stats=None) -> Drawing:
    """Decide what is drawn: every node but `loop` nodes, every edge that does not touch one, the sinks."""
    rs = stats if isinstance(stats, RunStats) else RunStats.of(stats)
    d = Drawing(plan, rs, strategies=loop_strategies(plan))
    loops = {nid for nid, n in plan.nodes.items() if isinstance(n, ops.Loop)}
    for node in plan.nodes.values():
        if node.id not in loops:
            d.nodes[node.id] = _draw_node(plan, node, rs)
    for e in plan.edges:
        if e.src not in loops and e.dst not in loops:
            d.edges.append(_edge(plan, rs, e.src, e.dst, e.kind))
    _draw_sinks(plan, d)
    return d


def loop_title(scope: Scope) -> str:
    return f"{scope.kind} {scope.name}"


def loop_options(plan: Plan, scope: Scope) -> str:
    return scope.options.text(plan)


def _scope_items(plan: Plan, scope: Scope) -> Iterable[tuple[str, object]]:
    """What a scope contains, in definition order: ("node", id), ("chain", Chain) or ("scope", Scope)."""
    chains = {c.id: c for c in plan.chains if len(c.nodes) > 1}
    seen_chains = set()
    for nid in scope.nodes:
        node = plan.nodes[nid]
        if isinstance(node, ops.Loop):
            child = plan.scopes.get(node.body)
            if child is not None:
                yield "scope", child
            continue
        chain = plan.chain_of(nid)
        chain = chains.get(chain.id) if chain else None
        if chain is None:
            yield "node", nid
        elif chain.id not in seen_chains:
            seen_chains.add(chain.id)
            yield "chain", chain
    # a child scope without a loop node in this scope (not made by lowering, but drawable)
    drawn = {plan.nodes[n].body for n in scope.nodes if isinstance(plan.nodes[n], ops.Loop)}
    for cid in scope.children:
        if cid not in drawn and cid in plan.scopes:
            yield "scope", plan.scopes[cid]


# ---- DOT ---------------------------------------------------------------------------------

def _q(s: str) -> str:
    """A DOT double-quoted string (escString: `\\n` is a line break)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@frozen
class _Html:
    """A graphviz HTML-like label, written as `label=<...>` instead of a quoted string."""

    text: str


def _attrs(attrs: dict) -> str:
    out = []
    for k, v in attrs.items():
        if k == "label" and isinstance(v, _Html):
            out.append(f"label=<{v.text}>")
        else:
            out.append(f"{k}={_q(str(v))}")
    return ", ".join(out)


def _esc(s: str) -> str:
    return html.escape(s, quote=True)


def _node_label(n: DrawNode) -> _Html:
    first, *rest = n.lines()
    lines = [f"<B>{_esc(n.title)}</B>{_esc(first[len(n.title):])}"] + [_esc(x) for x in rest]
    if n.sub:
        lines.append(f'<FONT POINT-SIZE="8" COLOR="{SUB_COLOR}">{_esc(n.sub)}</FONT>')
    return _Html("<BR/>".join(lines))


def _node_attrs(n: DrawNode) -> dict:
    attrs = {"label": _node_label(n)}
    attrs.update(NODE_STYLE.get(n.kind, {}))
    if n.stateful:
        attrs.update(NODE_STYLE["stateful"])
    attrs["tooltip"] = n.tooltip
    return attrs


def _edge_attrs(e: DrawEdge) -> dict:
    attrs = dict(EDGE_STYLE.get(e.kind, {}))
    if e.label:
        attrs["label"] = e.label
    attrs["tooltip"] = e.tooltip
    return attrs


def _cluster_label(plan: Plan, scope: Scope, stats: RunStats, strategies: dict) -> _Html:
    lines = [f'<B>{_esc(loop_title(scope))}</B>']
    opts = loop_options(plan, scope)
    if opts:
        lines.append(f'<FONT POINT-SIZE="9">{_esc(opts)}</FONT>')
    strategy = strategies.get(scope.id)
    if strategy is not None:
        color = "#15803d" if strategy.incremental else "#6b7280"
        text = "incremental across epochs" if strategy.incremental else "recomputed each epoch"
        lines.append(f'<FONT POINT-SIZE="9" COLOR="{color}">{_esc(text)}</FONT>')
    run = stats.loop_text(scope)
    if run:
        lines.append(f'<FONT POINT-SIZE="9" COLOR="#9a3412">{_esc(run)}</FONT>')
    return _Html("<BR ALIGN=\"LEFT\"/>".join(lines) + "<BR ALIGN=\"LEFT\"/>")


def _dot_scope(d: Drawing, scope: Scope, indent: str, out: list) -> None:
    """Write a scope's contents in definition order: nodes, chain clusters, nested loop clusters."""
    for kind, item in _scope_items(d.plan, scope):
        if kind == "node":
            out.append(f"{indent}{item} [{_attrs(_node_attrs(d.nodes[item]))}];")
        elif kind == "chain":
            _dot_chain(d, item, indent, out)
        else:
            _dot_loop(d, item, indent, out)


def _dot_chain(d: Drawing, chain, indent: str, out: list) -> None:
    attrs = {"label": f"chain {chain.id}", **CHAIN_STYLE, "tooltip": _chain_tip(d.plan, chain)}
    out.append(f"{indent}subgraph {_q('cluster_chain_' + chain.id)} {{")
    out.append(f"{indent}  graph [{_attrs(attrs)}];")
    for nid in chain.nodes:
        out.append(f"{indent}  {nid} [{_attrs(_node_attrs(d.nodes[nid]))}];")
    out.append(f"{indent}}}")


def _dot_loop(d: Drawing, scope: Scope, indent: str, out: list) -> None:
    strategy = d.strategy_text(scope)
    attrs = {"label": _cluster_label(d.plan, scope, d.stats, d.strategies), **LOOP_STYLE,
             "fillcolor": LOOP_FILL[min(scope.depth, len(LOOP_FILL)) - 1],
             "tooltip": f"{loop_title(scope)} [{scope.id}]: {loop_options(d.plan, scope)}"
                        + (f"; {strategy}" if strategy else "")}
    out.append(f"{indent}subgraph {_q('cluster_loop_' + scope.id)} {{")
    out.append(f"{indent}  graph [{_attrs(attrs)}];")
    _dot_scope(d, scope, indent + "  ", out)
    out.append(f"{indent}}}")


def _chain_tip(plan: Plan, chain) -> str:
    return f"chain {chain.id}: " + " -> ".join(plan.nodes[n].label() for n in chain.nodes)


def plan_to_dot(plan: Plan, stats=None) -> str:
    """The plan as DOT text; `stats` is a run report dict (see the module docstring) or None."""
    d = build_drawing(plan, stats)
    title = f"pipeline {plan.pipeline}" + (" (streaming)" if plan.streaming else "")
    out = [f"digraph {_q(plan.pipeline)} {{",
           f"  graph [{_attrs({**GRAPH_ATTRS, 'label': _Html(f'<B>{_esc(title)}</B>'), 'tooltip': title})}];",
           f"  node [{_attrs(NODE_DEFAULTS)}];",
           f"  edge [{_attrs(EDGE_DEFAULTS)}];"]
    _dot_scope(d, plan.scopes["pipeline"], "  ", out)
    for sid in d.sink_ids:
        out.append(f"  {sid} [{_attrs(_node_attrs(d.nodes[sid]))}];")
    for e in d.edges:
        out.append(f"  {e.src} -> {e.dst} [{_attrs(_edge_attrs(e))}];")
    for src, dst in layout_edges(plan):
        out.append(f"  {src} -> {dst} [style=\"invis\"];")
    out.append("}")
    return "\n".join(out) + "\n"


def layout_edges(plan: Plan) -> list[tuple[str, str]]:
    """Invisible edges that rank each loop output below its loop's feedback sources, so the output
    sits under the cluster instead of beside the emitted operator."""
    out = []
    for scope in plan.loop_scopes():
        for emit in scope.emits:
            for _, src in scope.feedback:
                if src != emit.node and emit.out in plan.nodes and (src, emit.out) not in out:
                    out.append((src, emit.out))
    return out


def dot_edge_count(dot: str) -> int:
    """How many visible edges `plan_to_dot` wrote (one per line; invisible layout edges not counted)."""
    return sum(1 for line in dot.splitlines() if _EDGE_LINE.match(line) and 'style="invis"' not in line)


_EDGE_LINE = re.compile(r"\s*\w+ -> \w+ \[")


# ---- Mermaid -----------------------------------------------------------------------------

MERMAID_SHAPE = {  # kind -> (open, close)
    "source": ('[("', '")]'),
    "values": ('[("', '")]'),
    "sink": ('>"', '"]'),
    "var": ('{{"', '"}}'),
    "import": ('[/"', '"/]'),
    "loop_out": ('[\\"', '"/]'),
    "stateful": ('[["', '"]]'),
}
MERMAID_ARROW = {"data": "-->", "entry": "-->", "import": "-.->", "feedback": "-.->", "emit": "==>", "sink": "-->"}
MERMAID_CLASSES = {
    "source": "fill:#dbeafe,stroke:#1d4ed8",
    "sink": "fill:#dcfce7,stroke:#15803d",
    "head": "fill:#fed7aa,stroke:#c2410c",
    "import": "fill:#e2e8f0,stroke:#475569",
    "out": "fill:#bbf7d0,stroke:#15803d",
    "loop": "fill:#fff7ed,stroke:#ea580c",
    "chain": "fill:none,stroke:#64748b,stroke-dasharray:3 3",
}
_MERMAID_CLASS_OF = {"source": "source", "values": "source", "sink": "sink", "var": "head", "import": "import",
                     "loop_out": "out"}


def _mm(s: str) -> str:
    """Text inside a quoted Mermaid label: quotes, angle brackets and bars as entity codes."""
    return s.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;").replace("|", "#124;")


def _mermaid_node(n: DrawNode) -> str:
    lines = n.lines() + [n.sub]
    o, c = MERMAID_SHAPE.get("stateful" if n.stateful else n.kind, ('("', '")'))
    return f"{n.id}{o}{'<br/>'.join(_mm(x) for x in lines if x)}{c}"


def plan_to_mermaid(plan: Plan, stats=None) -> str:
    """The plan as a Mermaid flowchart: a subgraph per loop scope, a dotted one per chain."""
    d = build_drawing(plan, stats)
    out = ["flowchart TB"]
    scope_ids = {sid: f"scope{i}" for i, sid in enumerate(s.id for s in plan.loop_scopes())}
    chain_ids: list = []

    def walk(scope: Scope, indent: str) -> None:
        for kind, item in _scope_items(plan, scope):
            if kind == "node":
                out.append(f"{indent}{_mermaid_node(d.nodes[item])}")
            if kind == "chain":
                chain_ids.append(f"chain_{item.id}")
                out.append(f'{indent}subgraph {chain_ids[-1]}["chain {item.id}"]')
                out.append(f"{indent}  direction TB")
                for nid in item.nodes:
                    out.append(f"{indent}  {_mermaid_node(d.nodes[nid])}")
                out.append(f"{indent}end")
            if kind == "scope":
                label = " · ".join(p for p in (loop_title(item), loop_options(plan, item),
                                               d.strategy_text(item).split(":")[0], d.stats.loop_text(item)) if p)
                out.append(f'{indent}subgraph {scope_ids[item.id]}["{_mm(label)}"]')
                out.append(f"{indent}  direction TB")
                walk(item, indent + "  ")
                out.append(f"{indent}end")

    walk(plan.scopes["pipeline"], "  ")
    for sid in d.sink_ids:
        out.append(f"  {_mermaid_node(d.nodes[sid])}")
    for e in d.edges:
        arrow = MERMAID_ARROW.get(e.kind, "-->")
        label = e.label.replace("\n", " · ")
        out.append(f"  {e.src} {arrow}|{_mm(label)}| {e.dst}" if label else f"  {e.src} {arrow} {e.dst}")
    for cls, style in MERMAID_CLASSES.items():
        out.append(f"  classDef {cls} {style}")
    by_class: dict = {}
    for n in d.nodes.values():
        cls = _MERMAID_CLASS_OF.get(n.kind)
        if cls:
            by_class.setdefault(cls, []).append(n.id)
    for cls, ids in by_class.items():
        out.append(f"  class {','.join(ids)} {cls}")
    if scope_ids:
        out.append(f"  class {','.join(scope_ids.values())} loop")
    if chain_ids:
        out.append(f"  class {','.join(chain_ids)} chain")
    return "\n".join(out) + "\n"


# ---- rendering ---------------------------------------------------------------------------

def output_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in IMAGE_FORMATS + TEXT_FORMATS:
        known = ", ".join("." + f for f in IMAGE_FORMATS + TEXT_FORMATS)
        raise ValueError(f"cannot tell the graph format from `{path}`: use one of {known}")
    return ext


def dot_to_image(dot: str, fmt: str) -> bytes:
    """Run graphviz `dot` on the DOT text; GraphvizMissing if the binary is not installed."""
    if shutil.which("dot") is None:
        raise GraphvizMissing(f"drawing .{fmt} needs the graphviz `dot` program, which is not on PATH; "
                              f"{INSTALL_HINT}, or write .dot or .mmd instead")
    try:
        import graphviz
    except ImportError as err:  # a hard dependency, but a broken environment deserves a clear message
        raise GraphvizMissing("drawing .{0} needs the `graphviz` Python package: pip install graphviz "
                              "(or write .dot or .mmd instead)".format(fmt)) from err

    try:
        return graphviz.Source(dot).pipe(format=fmt, quiet=True)
    except graphviz.ExecutableNotFound as err:
        raise GraphvizMissing(f"graphviz `dot` could not be run ({err}); {INSTALL_HINT}") from err
    except graphviz.CalledProcessError as err:
        stderr = (err.stderr or b"").decode(errors="replace").strip()
        raise GraphvizFailed(f"graphviz `dot -T{fmt}` failed: {stderr or err}") from err


def render(plan: Plan, path: str, stats=None) -> str:
    """Write the graph to `path` in the format its extension names; return the path."""
    fmt = output_format(path)
    if fmt == "dot":
        data = plan_to_dot(plan, stats).encode()
    elif fmt == "mmd":
        data = plan_to_mermaid(plan, stats).encode()
    else:
        data = dot_to_image(plan_to_dot(plan, stats), fmt)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    return path
