"""Whole-plan checks, run in order after lowering. Each is a function Plan -> diagnostics."""
from __future__ import annotations

from scopeflow.compiler.checks.usage import check_sinks, check_unused_streams

CHECKS = (check_sinks, check_unused_streams)


def run_checks(plan) -> list:
    out = []
    for check in CHECKS:
        out += check(plan)
    return out
