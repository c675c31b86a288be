"""The plan passes, run in this order after lowering: each is a function `(plan, diagnostics) -> plan`
that returns the plan it was given or a new one, and appends what it finds to `diagnostics`."""
from __future__ import annotations

from scopeflow.compiler.chains import build_chains
from scopeflow.compiler.checks.usage import check_sinks, check_unused_streams
from scopeflow.compiler.plan import Plan

PASSES = (check_sinks, check_unused_streams, build_chains)


def run_passes(plan: Plan, diagnostics: list) -> Plan:
    for step in PASSES:
        plan = step(plan, diagnostics)
    return plan
