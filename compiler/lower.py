"""Lower the AST into the Plan IR (`ast_to_plan`), collecting diagnostics.

Stages (docs/architecture.md):

1. `declarations.py`: params, config, Python modules, imported and local defs;
2. the walk (this module): the statements in order. Names resolve in the scope tree
   (`scopes.py`); a def call is expanded in place (`defs.py`), a loop builds its scope
   (`loops.py`), sources and sinks read their arguments (`sources.py`), and every operator
   is typed by its rule (`operators.py`) and added to the plan under construction;
3. the plan passes (`passes.py`), run by `compiler.check_flow`.

Errors are collected, not first-only: a statement whose stream cannot be lowered reports
once (`fail` raises `Failed`, which the statement catches), and its name is defined as
failed so that its readers do not report it again.
"""
from __future__ import annotations

import os
from typing import Optional

from scopeflow.compiler import defs, loops, operators, ops, sources
from scopeflow.compiler import expr as X
from scopeflow.compiler.builder import PlanBuilder
from scopeflow.compiler.declarations import declarations
from scopeflow.compiler.loader import FileLoader
from scopeflow.compiler.lowering import Failed, Lowering
from scopeflow.compiler.plan import Plan
from scopeflow.compiler.scopes import Scope, Symbol
from scopeflow.compiler.types import Schema
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import Diagnostic, did_you_mean


def ast_to_plan(program: A.Program, base_dir: Optional[str] = None, loader=None) -> tuple[Plan, list[Diagnostic]]:
    """Lower a parsed program; returns the plan and every diagnostic found (errors and warnings)."""
    base = base_dir if base_dir is not None else os.path.dirname(os.path.abspath(program.file))
    lw = Lowering(base, loader or FileLoader(), PlanBuilder("", program.file))
    lw.decl = declarations(program, base, lw.loader, lw.error)
    lw.plan.pipeline = lw.plan.scopes["pipeline"].name = lw.decl.pipeline
    top = Scope("pipeline", "pipeline", "the pipeline")
    for stmt in program.stmts:
        lower_statement(lw, stmt, top, in_def=False)
    sources.check_sink_paths(lw)
    sources.check_stream_sinks(lw)
    return lw.plan.freeze(lw.decl.params, lw.decl.config, lw.decl.udfs), lw.diags


# ---- statements ----------------------------------------------------------------------------------


def lower_statement(lw: Lowering, stmt: A.Stmt, scope: Scope, in_def: bool) -> None:
    try:
        _STATEMENTS.get(type(stmt), _declaration)(lw, stmt, scope, in_def)
    except Failed:
        if isinstance(stmt, (A.Assign, A.SourceDecl)):
            scope.define(Symbol(stmt.name, None, None, span=stmt.span))
        elif isinstance(stmt, (A.Feedback, A.Emit)):
            lw.failed.add((scope.owner, type(stmt).__name__))


_DECLARED = {A.PipelineDecl: "`pipeline`", A.ParamDecl: "`param`", A.ConfigDecl: "`config`",
             A.UseDecl: "`use python`", A.ImportDecl: "`from ... import`", A.DefDecl: "`def`"}


def _declaration(lw: Lowering, stmt, scope: Scope, in_def: bool) -> None:
    """Declarations are read before the walk (`declarations.py`); inside a body they are errors."""
    if scope.owner != "pipeline" or in_def:
        where = "a loop body" if scope.owner != "pipeline" else "a def body"
        lw.error("E0113", f"{_DECLARED[type(stmt)]} is not allowed in {where}", stmt.span, "move it to the top level",
                 ["`pipeline`, `param`, `config`, `use`, `from` and `def` are declared at the top level"])


def _return(lw: Lowering, stmt: A.Return, scope: Scope, in_def: bool) -> None:
    if not in_def:
        lw.error("E0108", "`return` is only allowed at the end of a def", stmt.span, "outside a def",
                 ["at the top level, define a stream: `name = STREAM`"])


def lower_assign(lw: Lowering, stmt: A.Assign, scope: Scope, in_def: bool) -> None:
    if isinstance(stmt.expr.head, A.Loop) and not stmt.expr.ops:
        result = loops.lower_loop(lw, stmt.expr.head, scope, out_name=stmt.name)
        if isinstance(result, dict):
            lw.define(scope, Symbol(stmt.name, None, None, outputs=result, span=stmt.span))
            return
        nid, schema = result
    else:
        nid, schema = lower_stream(lw, stmt.expr, scope)
    node = lw.plan.nodes[nid]
    if node.name is None or isinstance(node, (ops.LoopVar, ops.LoopImport)) or node.name != stmt.name:
        if node.name is not None:  # an alias: `x = y` adds an identity node, so both names survive
            nid = lw.plan.add(ops.Select, scope.owner, [nid], schema, stmt.span,
                              items=tuple((f.name, X.TCol(f.name, f.type)) for f in schema.fields))
        lw.plan.rename(nid, lw.hygienic(stmt.name))
    lw.define(scope, Symbol(stmt.name, nid, schema, span=stmt.span))


# ---- streams ---------------------------------------------------------------------------------------


def lower_stream(lw: Lowering, e: A.StreamExpr, scope: Scope, binary=None) -> tuple[str, Schema]:
    """The operators of `head | op | op ...`; returns the last one's id and its (qualified) schema."""
    head = e.head
    if isinstance(head, A.Ref):
        nid, schema = lower_ref(lw, head, scope, binary)
    elif isinstance(head, A.Loop):
        result = loops.lower_loop(lw, head, scope, out_name=None)
        if isinstance(result, dict):
            lw.fail("E0208", f"loop `{head.name}` has several named emits; assign it and use `name.output`",
                    head.span, "several outputs",
                    [f"e.g. `out = loop {head.name}(...) {{ ... }}`, then `out.{next(iter(result))}`"])
        nid, schema = result
    else:
        nid, schema = defs.expand_call(lw, head, None, scope)
    for op in e.ops:
        if isinstance(op, A.OpCall):
            nid, schema = defs.expand_call(lw, op, (nid, schema), scope)
        else:
            nid, schema = operators.lower_operator(lw, op, nid, schema, scope)
    return nid, schema


def lower_ref(lw: Lowering, ref: A.Ref, scope: Scope, binary=None) -> tuple[str, Schema]:
    s, owner = scope.lookup(ref.name)
    if s is None:
        _unknown(lw, ref, scope)
    if s.node is None and s.outputs is None:
        raise Failed()  # its definition already failed and was reported
    if owner.owner != scope.owner:
        _scope_crossing(lw, ref, scope, owner, binary)
    if s.outputs is not None:
        if ref.member is None:
            lw.fail("E0118", f"loop output `{ref.name}` has several streams", ref.span, "not a stream",
                    [f"use one of: {', '.join(f'{ref.name}.{m}' for m in s.outputs)}"])
        if ref.member not in s.outputs:
            lw.fail("E0118", f"loop `{ref.name}` has no output `{ref.member}`", ref.span, "unknown output",
                    did_you_mean(ref.member, s.outputs))
        nid, schema = s.outputs[ref.member]
        return nid, schema.qualified(ref.name).qualified(ref.member)
    if ref.member is not None:
        lw.fail("E0118", f"`{ref.name}` is a stream, not a loop with named outputs", ref.span,
                "no member", [f"write `{ref.name}`"])
    return s.node, s.schema.unqualified().qualified(ref.name)


def _unknown(lw: Lowering, ref: A.Ref, scope: Scope) -> None:
    child = scope.local_to_child(ref.name)
    if child:
        lw.fail("E0203", f"`{ref.name}` is local to {child} and invisible outside it", ref.span,
                "loop-local stream", [f"emit it from the loop: `emit {ref.name} as {ref.name}`"])
    if ref.name in lw.decl.defs:
        lw.fail("E0101", f"`{ref.name}` is an operator, not a stream", ref.span, "operator",
                [f"call it: `{ref.name}(...)`"])
    if lw.calls and scope.hidden_by_def(ref.name):
        lw.fail("E0101", f"`{ref.name}` is defined outside operator `{lw.calls[-1][0]}`, which sees only its "
                "parameters and its own streams", ref.span, "not visible in the def",
                [f"pass it in as a stream parameter, e.g. `{ref.name}: (...)`"])
    lw.fail("E0101", f"unknown stream `{ref.name}`", ref.span, "not defined",
            did_you_mean(ref.name, scope.visible_names()))


def _scope_crossing(lw: Lowering, ref: A.Ref, scope: Scope, owner: Scope, binary) -> None:
    mine, theirs = scope.label, owner.label
    hint = f"import it into the loop: with ({ref.name} = {ref.name})"
    if binary is not None:
        op, left_label = binary
        lw.fail("E0202", f"{op} between a stream of {left_label} and `{ref.name}` ({theirs}) crosses scopes",
                ref.span, f"`{ref.name}` lives outside {mine}", [hint])
    lw.fail("E0201", f"{mine} refers to `{ref.name}` of {theirs}", ref.span, f"`{ref.name}` lives outside {mine}",
            [hint])


# Statements other than these are declarations (`_declaration`).
_STATEMENTS = {A.Assign: lower_assign, A.SourceDecl: sources.lower_source, A.SinkDecl: sources.lower_sink,
               A.Feedback: loops.lower_feedback, A.Emit: loops.lower_emit, A.Return: _return}
