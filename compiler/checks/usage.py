"""Warnings about streams nobody reads and pipelines that write nothing."""
from __future__ import annotations

from scopeflow.dsl.diagnostics import Diagnostic


def check_sinks(plan) -> list[Diagnostic]:
    if plan.sinks:
        return []
    return [Diagnostic("W0002", f"pipeline `{plan.pipeline}` has no sink: running it computes nothing", None,
                       severity="warning", hints=("add one: sink STREAM -> csv(\"out/path\", header = true)",))]


def check_unused_streams(plan) -> list[Diagnostic]:
    used = {e.src for e in plan.edges}
    used |= {s.node for s in plan.sinks}
    used |= {src for s in plan.scopes.values() for _, src in s.feedback}
    used |= {e.node for s in plan.scopes.values() for e in s.emits}
    used |= {s.options.get("until") for s in plan.scopes.values()}
    out = []
    for n in plan.nodes.values():
        if (n.name and n.id not in used and n.op not in ("loop", "var", "import")
                and n.span is not None and n.span.file == plan.file):
            out.append(Diagnostic("W0003", f"stream `{n.name}` is defined but never used", n.span, severity="warning",
                                  label="unused", hints=("sink it, emit it, or remove it",)))
    return out
