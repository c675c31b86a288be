"""Python functions (LANGUAGE.md section 7) as Arrow-based Spark UDFs."""
from __future__ import annotations

import functools
import sys
import traceback
from typing import Callable

from scopeflow.compiler.types import spark_ddl_type


class UserFunctionError(Exception):
    """An exception raised by a user's Python function, with the .flow line that called it."""


def python_module(alias: str, path: str):
    from scopeflow.compiler.scopes import load_python_module

    return load_python_module(path, alias)


@functools.lru_cache(maxsize=None)
def scalar_udf(fn: Callable, returns: str, arg_types: tuple | list = ()):
    """A scalar Python function as an Arrow-optimised UDF (rows move between JVM and Python as Arrow batches)."""
    from pyspark.sql import functions as F

    return F.udf(fn, returnType=spark_ddl_type(returns), useArrow=True)


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
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    spark_schema = _parse_datatype_string(ddl)
    arrow_schema = to_arrow_schema(spark_schema)
    name = getattr(fn, "__name__", "fn")

    def run(batches):
        try:
            yield from _batches(fn(_rows(batches)), arrow_schema)
        except Exception as exc:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            raise UserFunctionError(f"SCOPEFLOW_USER_ERROR line {flow_line} in {name}:\n{tb}") from None

    return df.mapInArrow(run, spark_schema)


def excepthook_hint() -> None:  # pragma: no cover - debugging aid
    sys.stderr.write("set --verbose to see Spark's own log output\n")
