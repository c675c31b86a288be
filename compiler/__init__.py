"""AST -> checked plan -> PySpark / graph. `compile_flow` chains the stages."""
from __future__ import annotations

import os
from typing import Optional

from attrs import define, field

from scopeflow.compiler.chains import DEFAULT_MAX_CHAIN, build_chains
from scopeflow.compiler.checks import run_checks
from scopeflow.compiler.lower import ast_to_plan
from scopeflow.compiler.plan import Plan
from scopeflow.dsl.diagnostics import Diagnostic, FlowError
from scopeflow.dsl.parser import flow_to_ast


@define
class Compiled:
    plan: Optional[Plan]
    diagnostics: list[Diagnostic] = field(factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]


def check_flow(text: str, file: str = "<input>", base_dir: Optional[str] = None,
               max_chain: int = DEFAULT_MAX_CHAIN) -> Compiled:
    """Parse, lower, check and chain; never raises for user errors (they are in `diagnostics`)."""
    try:
        program = flow_to_ast(text, file)
    except FlowError as err:
        return Compiled(None, err.diagnostics)
    plan, diags = ast_to_plan(program, base_dir)
    if not any(d.is_error for d in diags):
        diags += run_checks(plan)
        build_chains(plan, max_chain)
    return Compiled(plan, _ordered(diags))


def check_file(path: str, max_chain: int = DEFAULT_MAX_CHAIN) -> Compiled:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return check_flow(text, path, os.path.dirname(os.path.abspath(path)), max_chain)


def compile_flow(text: str, file: str = "<input>", base_dir: Optional[str] = None) -> Plan:
    """The checked plan, or FlowError with every error of the file."""
    result = check_flow(text, file, base_dir)
    if result.errors:
        raise FlowError(result.errors)
    return result.plan


def _ordered(diags: list[Diagnostic]) -> list[Diagnostic]:
    def key(d):
        s = d.span
        return (0 if d.is_error else 1, s.file if s else "", s.line if s else 0, s.col if s else 0)

    return sorted(diags, key=key)
