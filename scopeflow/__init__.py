"""scopeflow: scoped iterative dataflow (.flow files) compiled to PySpark.

Public API: `check_file`, `check_flow`, `compile_flow`, `compile_file` (-> PySpark source), `run_file`.

Each is imported on first use: `from scopeflow import runtime`, which every
generated job runs, must load neither the compiler nor lark.
"""
import importlib

from scopeflow.version import __version__  # noqa: F401

_API = {
    "check_file": "scopeflow.compiler",
    "check_flow": "scopeflow.compiler",
    "compile_flow": "scopeflow.compiler",
    "compile_file": "scopeflow.api",
    "run_file": "scopeflow.api",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'scopeflow' has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)
