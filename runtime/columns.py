"""Column lists the loop runtime passes to Spark every round, converted to the JVM once.

PySpark turns a Python list of Columns into a Scala Seq on every `select`, `groupBy`, `agg` and `observe`: JVM
round trips to make a list, to add each column and to make the Seq, every time. A state's fold and a round's
counters pass the same lists every round, so their owners keep each list's Seq (`seq`) and call the JVM's
`Dataset` with it (`select`, `group`, `observe`): the same plans, fewer round trips. Over Spark Connect there is
no JVM here, and the frames' own methods are used.
"""
from __future__ import annotations

from typing import Optional

from pyspark.sql import Column, DataFrame

from scopeflow.runtime.deployment import is_connect


def seq(spark, cols: list[Column]):
    """A Scala Seq of `cols` for the JVM calls below; None over Spark Connect."""
    if is_connect(spark):
        return None
    return spark._jvm.PythonUtils.toSeq([c._jc for c in cols])


class ColumnSeqs:
    """The Seqs of one owner's column lists by name (and the list's first column used), made on first use. A
    list that is not the one a Seq was made from gets a new Seq. (It holds no reference to its owner: a state
    must be freed as soon as nothing uses it, and its checkpoints' blocks with it.)"""

    def __init__(self):
        self._made: dict = {}  # (name, start) -> (the list, the Seq of list[start:])

    def get(self, spark, name: str, cols: list[Column], start: int = 0):
        made = self._made.get((name, start))
        if made is None or made[0] is not cols:
            made = self._made[(name, start)] = (cols, seq(spark, cols[start:]))
        return made[1]


def select(df: DataFrame, cols: list[Column], jseq) -> DataFrame:
    """`df.select(*cols)`, with `jseq` the Seq of `cols` (None: through PySpark)."""
    if jseq is None:
        return df.select(*cols)
    return DataFrame(df._jdf.select(jseq), df.sparkSession)


def group(df: DataFrame, keys: list[Column], aggs: list[Column], jkeys, jrest) -> DataFrame:
    """`df.groupBy(*keys).agg(*aggs)`, with `jkeys` the Seq of `keys` and `jrest` that of `aggs[1:]`."""
    if jkeys is None or jrest is None:
        return df.groupBy(*keys).agg(*aggs)
    return DataFrame(df._jdf.groupBy(jkeys).agg(aggs[0]._jc, jrest), df.sparkSession)


def observe(df: DataFrame, name: str, column: Column, empty: Optional[object]) -> DataFrame:
    """`df.observe(name, column)`, with `empty` an empty Seq (None: through PySpark)."""
    if empty is None:
        return df.observe(name, column)
    return DataFrame(df._jdf.observe(name, column._jc, empty), df.sparkSession)
