"""Warnings about streams nobody reads and pipelines that write nothing."""
from __future__ import annotations

from scopeflow.compiler import ops
from scopeflow.compiler.plan import Plan
from scopeflow.dsl.diagnostics import Diagnostic


def check_sinks(plan: Plan, diagnostics: list) -> Plan:
    if not plan.sinks:
        diagnostics.append(Diagnostic("W0002", f"pipeline `{plan.pipeline}` has no sink: running it computes nothing",
                                      None, severity="warning",
                                      hints=("add one: sink STREAM -> csv(\"out/path\", header = true)",)))
    return plan


def check_unused_streams(plan: Plan, diagnostics: list) -> Plan:
    for n in plan.nodes.values():
        if (n.name and plan.uses(n.id) == 0 and not isinstance(n, (ops.Loop, ops.LoopVar, ops.LoopImport))
                and n.span is not None and n.span.file == plan.file):
            diagnostics.append(Diagnostic("W0003", f"stream `{n.name}` is defined but never used", n.span,
                                          severity="warning", label="unused",
                                          hints=("sink it, emit it, or remove it",)))
    return plan
