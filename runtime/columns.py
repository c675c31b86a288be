"""Column lists the loop runtime passes to Spark every round, converted to the JVM once.

PySpark turns a Python list of Columns into a Scala Seq on every `select`, `groupBy`, `agg` and `observe`: JVM
round trips to make a list, to add each column and to make the Seq, every time. A state's fold and a round's
counters pass the same lists every round, so their owners keep each list's Seq (`seq`) and call the JVM's
`Dataset` with it (`select`, `group`, `observe`): the same plans, fewer round trips. Over Spark Connect there is
no JVM here, and the frames' own methods are used.

While loops run, PySpark's lookups of the JVM classes it calls on every column function and every list
conversion are answered from a cache (`cached_lookups`).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Optional

from pyspark.sql import Column, DataFrame

from scopeflow.runtime.deployment import is_connect

# The JVM classes PySpark looks up by name on every call: `functions` for every `F.col`, `F.lit`, `F.sum`, ...
# (`_get_jvm_function`) and every column named by a string (`_create_column_from_name`, by its short name),
# `PythonUtils` for every list of columns it turns into a Seq (`_to_seq`). py4j asks the JVM for the class, then
# for the method, on every access: two round trips before the call itself, 32 of the 43 lookups a round of a
# chain's PageRank made (benchmarks/RESULTS.md).
STATIC_CLASSES = ("org.apache.spark.sql.functions", "functions", "PythonUtils")
# The column functions of `functions` whose result is the same column for the same constant arguments, and a value:
# a Spark 4 `Column` is an immutable tree (`ColumnNode`), made into a plan's expression anew by every `Dataset`
# that uses it. A round's body names the same columns every round (a chain's PageRank: nine `F.col` and two `F.lit`
# a round, ~0.3 ms each while the previous round's job runs beside it); while loops run they are made once.
SAME_COLUMN = frozenset({"col", "lit"})
_CONSTANT = (str, int, float, bool)
MAX_SAME = 4096  # columns kept a function, at most


class StaticMembers:
    """A JVM class (a py4j `JavaClass`) whose static methods are looked up once and then kept: a py4j method of
    a class is its name and the class's, the same object for every call. Anything else (a field, a nested class)
    is looked up every time, as py4j does."""

    def __init__(self, cls, method_type: type, same: frozenset = frozenset()):
        self.__dict__.update(_cls=cls, _method=method_type, _same=same)

    def __getattr__(self, name: str):
        member = getattr(self._cls, name)
        if isinstance(member, self._method):
            self.__dict__[name] = SameResults(member) if name in self._same else member
        return self.__dict__.get(name, member)


class SameResults:
    """A static method whose result is kept by its arguments, when they are constants (`SAME_COLUMN`)."""

    def __init__(self, member):
        self._member, self._made = member, {}

    def __call__(self, *args):
        # (by type too: 1, 1.0 and True are equal keys; NaN is no key of itself, and 0.0 == -0.0: not kept)
        if not all(type(a) in _CONSTANT and a == a and (type(a) is not float or a != 0) for a in args):
            return self._member(*args)
        key = tuple((type(a), a) for a in args)
        made = self._made.get(key)
        if made is None:
            if len(self._made) >= MAX_SAME:  # (any code of the process may call it while loops run: bounded)
                self._made.clear()
            made = self._made[key] = self._member(*args)
        return made


_cached = {"blocks": 0}  # `cached_lookups` blocks open in this process (runs of several threads may overlap)
_cached_lock = threading.Lock()


@contextmanager
def cached_lookups(spark):
    """For the duration of a block (the loops of a run, `RunContext._loop_conf`): PySpark's lookups of
    `STATIC_CLASSES` and their methods answered here, not by the JVM. They are attributes of the gateway's view
    of the JVM, which py4j asks the JVM for only when an attribute is missing; so while any such block is open,
    every thread of the process that uses that gateway gets them. Taken away when the last open block ends (blocks
    inside one another, or runs on several threads), so the session's other users then see py4j as it was. Not
    over Spark Connect (no JVM here)."""
    if is_connect(spark):
        yield
        return
    from py4j.java_gateway import JavaMember

    jvm = spark.sparkContext._jvm
    try:
        with _cached_lock:
            _cached["blocks"] += 1
            for name in STATIC_CLASSES:
                if not isinstance(vars(jvm).get(name), StaticMembers):
                    same = SAME_COLUMN if name != "PythonUtils" else frozenset()
                    setattr(jvm, name, StaticMembers(getattr(jvm, name), JavaMember, same))
        yield
    finally:
        with _cached_lock:
            _cached["blocks"] -= 1
            if _cached["blocks"] == 0:
                for name in STATIC_CLASSES:
                    if isinstance(vars(jvm).get(name), StaticMembers):
                        del vars(jvm)[name]


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
