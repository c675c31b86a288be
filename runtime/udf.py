"""Python functions (docs/language.md#python-functions) as Arrow-based Spark UDFs."""
from __future__ import annotations

import functools
import os
import traceback
from typing import Callable

from scopeflow.stdlib.python_modules import load_python_module
from scopeflow.stdlib.types import spark_ddl_type


class UserFunctionError(Exception):
    """An exception raised by a user's Python function, with the .flow line that called it."""


def python_module(alias: str, path: str, flow_file: str = ""):
    """A user's module by its path relative to the .flow file (`use python "udfs.py" as u`)."""
    return load_python_module(os.path.join(os.path.dirname(flow_file), path) if flow_file else path, alias)


def scalar_udf(fn: Callable, returns: str, arg_types: tuple | list = (), flow_line: int = 0):
    """A scalar Python function as an Arrow-optimised UDF (rows move between JVM and Python as Arrow batches).

    An exception raised by `fn` is re-raised as UserFunctionError carrying the calling .flow line and the
    user's traceback (`SCOPEFLOW_USER_ERROR line N in NAME:`), which `failures.explain` turns into a short
    message instead of Py4J/JVM frames.
    """
    return _scalar_udf(fn, returns, tuple(arg_types), flow_line)


@functools.lru_cache(maxsize=1024)  # a loop builds its expressions every round: one UDF object per function
def _scalar_udf(fn: Callable, returns: str, arg_types: tuple, flow_line: int):
    from pyspark.sql import functions as F

    name = getattr(fn, "__name__", "fn")

    def call(*args):
        try:
            return fn(*args)
        except Exception as exc:
            raise _user_error(exc, flow_line, name) from None

    call.__name__ = call.__qualname__ = name  # Spark shows the UDF under the user's function name
    return F.udf(call, returnType=spark_ddl_type(returns), useArrow=True)


def _user_error(exc: BaseException, flow_line: int, name: str) -> "UserFunctionError":
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return UserFunctionError(f"SCOPEFLOW_USER_ERROR line {flow_line} in {name}:\n{tb}")


def _rows(batches):
    for batch in batches:
        yield from batch.to_pylist()


def _batches(rows, schema, size=4096):
    import pyarrow as pa

    buf = []
    for row in rows:
        buf.append(row)
        if len(buf) >= size:
            yield pa.RecordBatch.from_pylist(buf, schema=schema)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=schema)


def apply_table_function(df, fn: Callable, ddl: str, flow_line: int = 0):
    """`apply(m.fn) schema (...)`: fn(rows: Iterator[dict]) -> Iterator[dict], run over Arrow batches."""
    return apply_table_functions(df, [fn], ddl, [flow_line])


def apply_table_functions(df, fns: list, ddl: str, flow_lines: list):
    """Consecutive `apply` steps in one Arrow pass: rows flow through fn1, fn2, ... without leaving Python."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    spark_schema = _parse_datatype_string(ddl)
    arrow_schema = to_arrow_schema(spark_schema)

    def guarded(fn, line, rows):
        try:
            yield from fn(rows)
        except Exception as exc:
            raise _user_error(exc, line, getattr(fn, "__name__", "fn")) from None

    def run(batches):
        rows = _rows(batches)
        for fn, line in zip(fns, flow_lines):
            rows = guarded(fn, line, rows)
        yield from _batches(rows, arrow_schema)

    return df.mapInArrow(run, spark_schema)
