"""scopeflow's runtime: what generated PySpark scripts import and run on."""
from scopeflow.runtime.job import Job  # noqa: F401
from scopeflow.runtime.launcher import main, param  # noqa: F401
from scopeflow.runtime.loop import EmitSpec, LoopSpec  # noqa: F401
from scopeflow.runtime.termination import LoopMaxError  # noqa: F401
from scopeflow.runtime.udf import apply_table_function, apply_table_functions, python_module, scalar_udf  # noqa: F401,E501

