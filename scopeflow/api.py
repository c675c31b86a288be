"""Compile a .flow file and run it: what `scopeflow run` and Python callers use.

This is the face's job, not the runtime's: it needs the compiler (and lark) to
turn the file into the generated module, then hands that module to the runtime
(`runtime.launcher.execute`), exactly as `python job.py` does.
"""
from __future__ import annotations

import os
import types
from typing import Optional

from scopeflow.compiler import check_file
from scopeflow.compiler.codegen import plan_to_pyspark
from scopeflow.dsl.diagnostics import FlowError
from scopeflow.runtime.arguments import SnapshotOptions, parse_params
from scopeflow.runtime.launcher import execute


def checked_plan(path: str):
    """The checked plan of a .flow file (FlowError with every error of the file)."""
    result = check_file(path)
    if result.errors:
        raise FlowError(result.errors)
    return result.plan


def compile_file(path: str) -> str:
    """The generated standalone PySpark script for a .flow file (FlowError on errors)."""
    return plan_to_pyspark(checked_plan(path), os.path.abspath(path))


def load_generated(code: str, flow_file: str) -> types.ModuleType:
    """Execute generated source as a module (not as __main__)."""
    module = types.ModuleType(f"scopeflow_job_{abs(hash(flow_file))}")
    module.__file__ = flow_file + ".py"
    exec(compile(code, module.__file__, "exec"), module.__dict__)
    return module


def plan_to_module(plan, path: str) -> types.ModuleType:
    """The generated module of a checked plan of the .flow file at `path`."""
    flow_file = os.path.abspath(path)
    return load_generated(plan_to_pyspark(plan, flow_file), flow_file)


def compile_to_module(path: str) -> types.ModuleType:
    """The generated module of a .flow file; FlowError on compile errors."""
    return plan_to_module(checked_plan(path), path)


def run_file(path: str, params: Optional[dict] = None, spark=None, report: Optional[str] = None,
             raise_errors: bool = True, snapshots: Optional[SnapshotOptions] = None, **opts):
    """Run a .flow file from Python. Returns the run (its `report` holds rounds, attempts, counts)."""
    module = compile_to_module(path)
    values = parse_params(module.PARAMS, [f"{k}={v}" for k, v in (params or {}).items()])
    _, run = execute(module, params=values, spark=spark, report=report, raise_errors=raise_errors,
                     snapshots=snapshots, **opts)
    return run
