"""AST -> checked plan -> PySpark / graph. `check_flow` chains the stages (docs/architecture.md):
`flow_to_ast` (dsl), `ast_to_plan` (lowering), `run_passes`; `plan_to_pyspark` and the graph read the result."""
from __future__ import annotations

import os
from typing import Optional

from attrs import define, field

from scopeflow.compiler.lower import ast_to_plan
from scopeflow.compiler.passes import run_passes
from scopeflow.compiler.plan import Plan
from scopeflow.dsl.diagnostics import Diagnostic, FlowError
from scopeflow.dsl.files import read_flow
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


def check_flow(text: str, file: str = "<input>", base_dir: Optional[str] = None, loader=None) -> Compiled:
    """Parse, lower and run the plan passes; never raises for user errors (they are in `diagnostics`).

    `loader` reads what the program imports and its inputs' metadata (`compiler.loader.FileLoader`)."""
    try:
        program = flow_to_ast(text, file)
    except FlowError as err:
        return Compiled(None, err.diagnostics)
    plan, diags = ast_to_plan(program, base_dir, loader)
    if not any(d.is_error for d in diags):
        plan = run_passes(plan, diags)
    return Compiled(plan, _ordered(diags))


def check_file(path: str) -> Compiled:
    """`check_flow` of the file at `path` (UnreadableFlow when it cannot be read or is not UTF-8)."""
    return check_flow(read_flow(path), path, os.path.dirname(os.path.abspath(path)))


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
