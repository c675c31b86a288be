"""Two JVM functions of scopeflow's own for a round's checkpoints and its job, compiled in the driver.

Every round stores its checkpoints and counts their records in one Spark job (runtime/round.py). Through
Spark's public API that costs, every round (benchmarks/RESULTS.md, twenty-first and twenty-third sessions):

- `Dataset.localCheckpoint` runs as a SQL action (`withAction`: a SQL execution id, its listener events and
  the UI's plan description, 4-6 ms on a small plan) and copies each row with `map(_.copy())`, a closure that
  Spark's `ClosureCleaner` checks by reading and parsing the class that declares it, `classic.Dataset` (236 KB),
  ~2 ms;
- the counting job, through any RDD action that PySpark can call, wraps its function in a closure declared by
  `SparkContext` (205 KB), parsed again, ~2 ms.

A function of a class of its own (not a closure: nothing to clean) avoids both parses, and building the
checkpoint from the plan's RDD directly avoids the SQL action. The two classes are compiled from the Java
source below by Janino, the Java compiler that Spark uses for its generated code and ships in its jars: nothing
to build or install. They are compiled once per driver JVM (~0.2 s, at the first loop's first checkpoint),
and their class files go to the executors in a jar of their own (`SparkContext.addJar`, a temporary file
removed when this process exits): a task's function is a class the executor must load by name.

`functions(spark)` is None where they cannot be had (Spark Connect: no JVM here; a compile or `addJar` that
fails; `spark.scopeflow.jvmFunctions=false`): then the checkpoints go through Spark's API as before.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import zipfile
from typing import Optional

from attrs import frozen

from scopeflow.runtime.arguments import read_setting
from scopeflow.runtime.deployment import is_connect
from scopeflow.stdlib.settings import JVM_FUNCTIONS

PACKAGE = "scopeflow.jvm"
SOURCES = {
    # a row of an executed plan's iterator is reused for the next one: a stored row must be a copy
    "CopyRows": """
public final class CopyRows extends scala.runtime.AbstractFunction1 implements java.io.Serializable {
    public Object apply(Object row) { return ((org.apache.spark.sql.catalyst.InternalRow) row).copy(); }
}""",
    # a task's result: the records of its partition (reading them stores the checkpoints they come from)
    "CountRows": """
public final class CountRows extends scala.runtime.AbstractFunction2 implements java.io.Serializable {
    public Object apply(Object context, Object rows) {
        scala.collection.Iterator it = (scala.collection.Iterator) rows;
        long n = 0L;
        while (it.hasNext()) { it.next(); n++; }
        return Long.valueOf(n);
    }
}""",
}


@frozen
class Functions:
    copy_rows: object  # a scala.Function1[InternalRow, InternalRow]: `InternalRow.copy`
    count_rows: object  # a scala.Function2[TaskContext, Iterator[_], java.lang.Long]: the partition's records
    any_tag: object  # ClassTag.AnyRef: the element type of the RDDs and arrays they make


_LOCK = threading.Lock()
_COMPILED: dict = {}  # id of the py4j gateway -> (jar path, {class name: instance}); None: compiling failed
_ADDED: dict = {}  # id of the JVM SparkContext's application -> Functions (the jar added to it)


def functions(spark) -> Optional[Functions]:
    """The functions, their jar added to `spark`'s SparkContext (once per application); None where they
    cannot be had (see the module's docstring)."""
    if is_connect(spark) or read_setting(spark, JVM_FUNCTIONS, "true").strip().lower() == "false":
        return None
    sc = spark.sparkContext
    app = sc.applicationId
    with _LOCK:
        if app in _ADDED:
            return _ADDED[app]
        compiled = _compile(spark)
        out = None
        if compiled is not None:
            jar, instances = compiled
            try:
                sc._jsc.sc().addJar(jar)
                tag = getattr(getattr(spark._jvm.scala.reflect, "ClassTag$"), "MODULE$").AnyRef()
                out = Functions(instances["CopyRows"], instances["CountRows"], tag)
            except Exception:  # noqa: BLE001 - (a jar the context refuses: Spark's own API still works)
                out = None
        _ADDED[app] = out
        return out


def _compile(spark) -> Optional[tuple]:
    """Compile `SOURCES` in the driver JVM (once per JVM) and write their class files into a jar."""
    key = id(spark.sparkContext._gateway)
    if key in _COMPILED:
        return _COMPILED[key]
    out = None
    try:
        jvm = spark._jvm
        folder = tempfile.mkdtemp(prefix="scopeflow-jvm-functions-")
        atexit.register(shutil.rmtree, folder, True)
        jar = os.path.join(folder, "scopeflow-functions.jar")
        instances = {}
        with zipfile.ZipFile(jar, "w") as z:
            for name, source in SOURCES.items():
                compiler = jvm.org.codehaus.janino.SimpleCompiler()
                compiler.cook(f"package {PACKAGE};\n{source}\n")
                codes = compiler.getBytecodes()
                for cls in codes.keySet().toArray():
                    z.writestr(cls.replace(".", "/") + ".class", bytes(codes.get(cls)))
                instances[name] = compiler.getClassLoader().loadClass(f"{PACKAGE}.{name}").newInstance()
        out = (jar, instances)
    except Exception:  # noqa: BLE001 - (no Janino, a JVM that refuses: Spark's own API still works)
        out = None
    _COMPILED[key] = out
    return out
