"""What a run checks before it starts Spark: everything that can be known without the JVM.

Starting Spark takes seconds; a missing input, an unreadable one or an unsafe sink path must not
cost them. `preflight` runs before the session is built and raises `RunRefused` (exit 2, nothing
computed, nothing written) with the source's or sink's position in the `.flow` file.
"""
from __future__ import annotations

import os
from typing import Optional

from scopeflow.runtime.errors import Position, RunRefused
from scopeflow.runtime.spec import Param


def resolve(base_dir: str, path: str) -> str:
    """A path relative to the .flow file's folder (a URI or an absolute path stays as it is)."""
    if "://" in path or os.path.isabs(path):
        return path
    return os.path.join(base_dir, path)


def value(params: dict, v):
    return params[v.name] if isinstance(v, Param) else v


def position(module, op: str) -> Optional[Position]:
    record = module.OPERATORS.get(op)
    return Position(module.FLOW_FILE, *record.at) if record is not None and record.at else None


def local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def check_inputs(module, params: dict, base_dir: str) -> None:
    """Every file input exists and can be read."""
    for op, p in module.SOURCES.items():
        path = resolve(base_dir, value(params, p))
        if not local(path):
            continue  # hdfs://, s3a://...: Spark's file systems answer (at the read, with the source's position)
        path = path[len("file://"):] if path.startswith("file://") else path
        record = module.OPERATORS[op]
        what = f"source `{record.name}`" if record.name else "source"
        if not os.path.exists(path):
            raise RunRefused(f"{what}: input {path} does not exist", code="E0501", at=position(module, op),
                             label="read here", hint="check the path; relative paths are relative to the .flow "
                                                     "file (a `param` path can be given with --param NAME=PATH)")
        if not os.access(path, os.R_OK) or (os.path.isdir(path) and not os.access(path, os.X_OK)):
            raise RunRefused(f"{what}: input {path} cannot be read (permission denied)", code="E0502",
                             at=position(module, op), label="read here",
                             hint=f"give this user read access: chmod u+r {path}")


def check_streaming(module) -> None:
    """`stream` sources are checked, explained and drawn, but this version cannot run them (issue #23)."""
    for op, record in module.OPERATORS.items():
        if record.kind == "source" and record.detail.startswith("stream "):
            raise RunRefused(f"source `{record.name}` is a `stream` source: this version of scopeflow checks, "
                             f"explains and draws streaming pipelines but cannot run them yet", code="E0550",
                             at=position(module, op), label="unbounded input",
                             hint="read the files as they are now with `read FORMAT(PATH, ...)` for a batch run")


def preflight(module, params: dict, base_dir: str) -> None:
    """Refuse a run whose inputs or outputs are known to be wrong before Spark starts."""
    check_streaming(module)
    check_inputs(module, params, base_dir)
