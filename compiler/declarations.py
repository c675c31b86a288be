"""Stage 1 of lowering: the program's top-level declarations, which every later statement may use
whatever their order: `pipeline`, `param`, `config`, `use python` (the module is imported through the
loader, for its functions' signatures), `from ... import` (imported .flow files are parsed, their defs
collected, recursively) and `def`.
"""
from __future__ import annotations

import os
from typing import Callable, Optional

from attrs import define, field

from scopeflow.compiler.plan import PythonModule
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import FlowError, did_you_mean
from scopeflow.dsl.files import UnreadableFlow
from scopeflow.stdlib.settings import SETTINGS, setting_problem
from scopeflow.stdlib.types import SCALARS, is_valid_type, widen


@define
class Declarations:
    pipeline: str
    params: dict = field(factory=dict)  # name -> (type, default value)
    config: dict = field(factory=dict)  # Spark key -> value (text)
    udfs: dict = field(factory=dict)  # alias -> PythonModule
    failed_udfs: set = field(factory=set)  # aliases whose `use python` failed (their calls are not reported again)
    defs: dict = field(factory=dict)  # name -> (DefDecl, the folder of the file that defines it)


def declarations(program: A.Program, base_dir: str, loader, error: Callable) -> Declarations:
    """Collect the top-level declarations of `program`; report problems through `error(code, message,
    span, label, hints)`."""
    decl = Declarations(os.path.splitext(os.path.basename(program.file))[0])
    for stmt in program.stmts:
        if isinstance(stmt, A.DefDecl):
            if stmt.name in decl.defs:
                error("E0102", f"operator `{stmt.name}` is defined twice", stmt.span, "second definition",
                      ["rename one of them"])
            decl.defs[stmt.name] = (stmt, base_dir)
        elif isinstance(stmt, A.ImportDecl):
            _import(decl, stmt, base_dir, loader, error)
    for stmt in program.stmts:
        handler = _DECLARE.get(type(stmt))
        if handler is not None:
            handler(decl, stmt, base_dir, loader, error)
    return decl


def fits(declared: str, literal: str) -> bool:
    """Whether a literal of type `literal` can stand for a value of type `declared` (dates are written as strings)."""
    return widen(declared, literal) == declared or (declared in ("date", "timestamp") and literal == "string")


def _pipeline(decl, stmt: A.PipelineDecl, base_dir, loader, error) -> None:
    decl.pipeline = stmt.name


def _param(decl, stmt: A.ParamDecl, base_dir, loader, error) -> None:
    if not is_valid_type(stmt.type):
        return error("E0119", f"unknown type `{stmt.type}`", stmt.span, "bad type", did_you_mean(stmt.type, SCALARS))
    lit = stmt.default
    if not fits(stmt.type, lit.type):
        return error("E0117", f"param `{stmt.name}` is {stmt.type} but its default is {lit.type}", lit.span,
                     "wrong type", [f"give a {stmt.type} default"])
    if stmt.name in decl.params:
        return error("E0102", f"param `{stmt.name}` is declared twice", stmt.span, "second declaration",
                     ["remove one declaration or rename it"])
    decl.params[stmt.name] = (stmt.type, lit.value)


def _config(decl, stmt: A.ConfigDecl, base_dir, loader, error) -> None:
    v = stmt.value.value
    value = str(v).lower() if isinstance(v, bool) else str(v)
    problem = setting_problem(stmt.key, value)  # (a setting of scopeflow's own; Spark checks its own when it starts)
    if problem:
        known = stmt.key in SETTINGS
        return error("E0120", f"config \"{stmt.key}\"" + (f" = \"{value}\": {problem}" if known else f": {problem}"),
                     stmt.value.span if known else stmt.span, "bad value" if known else "unknown setting",
                     ["docs/cli.md lists the settings scopeflow reads"])
    decl.config[stmt.key] = value


def _use(decl, stmt: A.UseDecl, base_dir, loader, error) -> None:
    if stmt.alias in decl.udfs or stmt.alias in decl.failed_udfs:
        return error("E0102", f"Python module alias `{stmt.alias}` is declared twice", stmt.span,
                     "second declaration", ["give each module its own alias"])
    path = os.path.join(base_dir, stmt.path)
    if not loader.is_file(path):
        decl.failed_udfs.add(stmt.alias)
        return error("E0110", f"Python module `{stmt.path}` not found", stmt.span, "no such file",
                     [f"looked for {path}; paths are relative to the .flow file"])
    try:
        functions = loader.python_functions(path, stmt.alias)
    except Exception as exc:  # the user's module failed to import: show why
        decl.failed_udfs.add(stmt.alias)
        return error("E0110", f"Python module `{stmt.path}` failed to import: {type(exc).__name__}: {exc}",
                     stmt.span, "import failed", ["the module is imported when the pipeline is checked; fix the error"])
    decl.udfs[stmt.alias] = PythonModule(stmt.alias, path, functions)


def _import(decl, stmt: A.ImportDecl, base_dir: str, loader, error) -> None:
    path = _resolve_import(stmt, base_dir, loader, error)
    if path is None:
        return
    from scopeflow.dsl.parser import flow_to_ast

    try:
        lib = flow_to_ast(loader.read_text(path), path)
    except FlowError as err:
        for d in err.diagnostics:
            error(d.code, d.message, d.span, d.label, d.hints)
        return
    except UnreadableFlow as err:
        error("E0105", f"cannot import `{stmt.path}`: {err.reason}", stmt.span, "cannot be read",
              [f"{path}: {err.hint}"])
        return
    lib_defs: dict[str, A.DefDecl] = {}
    for s in lib.stmts:
        if isinstance(s, A.DefDecl):
            lib_defs[s.name] = s
        elif isinstance(s, A.ImportDecl):
            _import(decl, s, os.path.dirname(path), loader, error)
    for name, span in zip(stmt.names, stmt.name_spans):
        if name not in lib_defs:
            error("E0106", f"`{stmt.path}` has no operator `{name}`", span, "not defined there",
                  did_you_mean(name, lib_defs))
            continue
        decl.defs[name] = (lib_defs[name], os.path.dirname(path))
    for name, d in lib_defs.items():  # helpers a library def calls stay reachable, unexported
        decl.defs.setdefault(name, (d, os.path.dirname(path)))


def _resolve_import(stmt: A.ImportDecl, base_dir: str, loader, error) -> Optional[str]:
    if stmt.path.startswith("stdlib:"):
        module = stmt.path.split(":", 1)[1]
        path = loader.stdlib_path(module)
        if path is None:
            libs = loader.stdlib_modules()
            error("E0105", f"no stdlib module `{module}`", stmt.span, "unknown module",
                  list(did_you_mean(module, libs)) or [f"stdlib modules: {', '.join(libs) or 'none'}"])
        return path
    path = os.path.join(base_dir, stmt.path)
    if not loader.is_file(path):
        error("E0105", f"cannot import `{stmt.path}`: file not found", stmt.span, "no such file",
              [f"looked for {path}"])
        return None
    return path


_DECLARE = {A.PipelineDecl: _pipeline, A.ParamDecl: _param, A.ConfigDecl: _config, A.UseDecl: _use}
