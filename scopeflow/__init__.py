"""scopeflow: scoped iterative dataflow (.flow files) compiled to PySpark.

Public API: `check_file`, `compile_flow`, `compile_file` (-> PySpark source), `run_file`.
"""
from scopeflow.compiler import check_file, check_flow, compile_flow  # noqa: F401

__version__ = "0.1.0"


def compile_file(path: str) -> str:
    """The generated standalone PySpark script for a .flow file (FlowError on errors)."""
    import os

    from scopeflow.compiler.codegen import plan_to_pyspark
    from scopeflow.dsl.diagnostics import FlowError

    result = check_file(path)
    if result.errors:
        raise FlowError(result.errors)
    return plan_to_pyspark(result.plan, os.path.abspath(path))
