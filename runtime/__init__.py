"""scopeflow's runtime: what generated PySpark scripts import (`from scopeflow import runtime as sf`) and run on.

It needs Spark, never the compiler: a generated job runs where scopeflow's runtime
is installed without lark. Names are imported on first use, so that importing a
light module of the runtime (`errors`, `arguments`, `cluster`) does not start with pyspark.
"""
import importlib

_EXPORTS = {
    # what a generated job declares (runtime/spec.py)
    "Operator": "scopeflow.runtime.spec",
    "Param": "scopeflow.runtime.spec",
    "LoopSpec": "scopeflow.runtime.spec",
    "Emit": "scopeflow.runtime.spec",
    "Seed": "scopeflow.runtime.spec",
    "Strategy": "scopeflow.runtime.spec",
    "Source": "scopeflow.runtime.spec",
    "Stream": "scopeflow.runtime.spec",
    "Sink": "scopeflow.runtime.spec",
    "HEAD": "scopeflow.runtime.spec",
    "FEEDBACK": "scopeflow.runtime.spec",
    "OTHER": "scopeflow.runtime.spec",
    "located": "scopeflow.runtime.spec",
    # what it calls
    "main": "scopeflow.runtime.launcher",
    "python_module": "scopeflow.runtime.udf",
    "scalar_udf": "scopeflow.runtime.udf",
    "apply_table_function": "scopeflow.runtime.udf",
    "apply_table_functions": "scopeflow.runtime.udf",
    "LoopMaxError": "scopeflow.runtime.termination",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scopeflow.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
