"""JVM functions of scopeflow's own for a round's checkpoints and its job, compiled in the driver.

Every round stores its checkpoints and counts their records in one Spark job (runtime/round.py). Through
Spark's public API that costs, every round (benchmarks/RESULTS.md, twenty-first and twenty-third sessions):

- `Dataset.localCheckpoint` runs as a SQL action (`withAction`: a SQL execution id, its listener events and
  the UI's plan description, 4-6 ms on a small plan) and copies each row with `map(_.copy())`, a closure that
  Spark's `ClosureCleaner` checks by reading and parsing the class that declares it, `classic.Dataset` (236 KB),
  ~2 ms;
- the counting job, through any RDD action that PySpark can call, wraps its function in a closure declared by
  `SparkContext` (205 KB), parsed again, ~2 ms.

A function of a class of its own (not a closure: nothing to clean) avoids both parses, and building the
checkpoint from the plan's RDD directly avoids the SQL action (a third class builds that RDD with the session's
SQL settings propagated, as the action does, for the jobs that building it may start). The classes are
compiled from the Java source below by Janino, the Java compiler that Spark uses for its generated code and
ships in its jars: nothing to build or install. They are compiled once per driver JVM (~0.2 s, at the first
loop's first checkpoint), and their class files go to the executors in a jar of their own
(`SparkContext.addJar`, a temporary file removed when this process exits): a task's function is a class the
executor must load by name.

The stored rows are packed: each partition's rows go into a few byte arrays (up to 16 MiB each; each row's size,
then its bytes as `UnsafeRow` holds them), which the checkpoint's `LogicalRDD` reads through a view of one row
object pointed at each in turn. Stored one object per row (as `localCheckpoint` stores them), Spark's memory
store estimates the size of the growing block by walking a sample of its rows ~100 times a partition
(`SizeEstimator`): a third of the task time of a round that rewrites a 52,400-key state, measured; packed, the
block is a few arrays, the rows take their bytes alone, and a row needs no copy object.

A round's record counters are filters on a function of scopeflow's own too (`RowCounters`, runtime/counters.py):
Spark generates their code with the operators around them, where an `observe` node would split the generated stage.
`--report`'s per-operator Spark times are read off a round's executed plan by one (`OperatorTimes`), in one JVM call
where the same walk from Python makes a few a plan node (runtime/counters.py, `operator_times`).

`functions(spark)` is None where they cannot be had (Spark Connect: no JVM here; a compile that fails, a jar
the context does not add; `spark.scopeflow.jvmFunctions=false`): then the checkpoints go through Spark's API as
before, and `--report` says so and why (`why_not`).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import weakref
import zipfile
from typing import Optional

from attrs import frozen

from scopeflow.runtime.arguments import read_setting
from scopeflow.runtime.deployment import is_connect
from scopeflow.stdlib.settings import JVM_FUNCTIONS

PACKAGE = "scopeflow.jvm"
JAR = "scopeflow-functions.jar"
OPTIONAL = {"RowCounters", "OperatorTimes"}  # functions the others work without (whatever Spark fails to compile)
SOURCES = {
    # (the driver's) a plan's rows packed for storing, built as a SQL action builds its RDD: with the session's SQL
    # settings in the thread's local properties, so the jobs that building it starts (a broadcast, a subquery) run
    # with them; marked for a local checkpoint (at `level`, unless null). `view`: its rows again.
    "PlanRows": """
public final class PlanRows {
    public Object rows(org.apache.spark.sql.classic.SparkSession session,
                       final org.apache.spark.sql.execution.SparkPlan plan, final scala.reflect.ClassTag tag,
                       org.apache.spark.storage.StorageLevel level) {
        final PackRows pack = new PackRows(plan.schema());
        org.apache.spark.rdd.RDD packed = (org.apache.spark.rdd.RDD)
            org.apache.spark.sql.execution.SQLExecution.withSQLConfPropagated(session,
                new scala.runtime.AbstractFunction0() {
                    public Object apply() { return plan.execute().mapPartitionsInternal(pack, false, tag); }
                });
        if (level != null) packed.persist(level);
        return packed.localCheckpoint();
    }
    public Object view(org.apache.spark.rdd.RDD packed, org.apache.spark.sql.execution.SparkPlan plan,
                       scala.reflect.ClassTag tag) {
        return packed.mapPartitionsInternal(new UnpackRows(plan.output().size()), true, tag);
    }
    // a frame's lazy checkpoint (`Checkpoints.direct`, which says what it is): {its Dataset, the stored RDD, the view
    // of its rows}, or null for an adaptive plan; in one call where its steps from Python took fourteen
    public Object[] checkpoint(org.apache.spark.sql.classic.SparkSession session,
                               org.apache.spark.sql.classic.Dataset df, scala.reflect.ClassTag tag,
                               org.apache.spark.storage.StorageLevel level) {
        org.apache.spark.sql.execution.QueryExecution qe = df.queryExecution();
        org.apache.spark.sql.execution.SparkPlan plan = qe.executedPlan();
        if (plan instanceof org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) return null;
        org.apache.spark.rdd.RDD stored = (org.apache.spark.rdd.RDD) rows(session, plan, tag, level);
        org.apache.spark.rdd.RDD rdd = (org.apache.spark.rdd.RDD) view(stored, plan, tag);
        org.apache.spark.sql.catalyst.plans.physical.Partitioning partitioning = plan.outputPartitioning();
        while (partitioning instanceof org.apache.spark.sql.catalyst.plans.physical.PartitioningCollection) {
            scala.collection.Seq first = ((org.apache.spark.sql.catalyst.plans.physical.PartitioningCollection)
                partitioning).partitionings();  // (the first leaf's, as `localCheckpoint` takes it)
            partitioning = (org.apache.spark.sql.catalyst.plans.physical.Partitioning) first.head();
        }
        if (partitioning.numPartitions() == 1) {
            partitioning = org.apache.spark.sql.catalyst.plans.physical.SinglePartition$.MODULE$;
        }
        org.apache.spark.sql.execution.LogicalRDD fresh = new org.apache.spark.sql.execution.LogicalRDD(
            qe.analyzed().output(), rdd, partitioning, plan.outputOrdering(), false, scala.None$.MODULE$, session,
            scala.None$.MODULE$, scala.None$.MODULE$, false);
        return new Object[] {org.apache.spark.sql.classic.Dataset$.MODULE$.ofRows(session, fresh), stored, rdd};
    }
}
// a partition's rows as few byte arrays, each row's size in 8 bytes, then its bytes (why: the module's docstring)
final class PackRows extends scala.runtime.AbstractFunction1 implements java.io.Serializable {
    private final org.apache.spark.sql.types.StructType schema;
    public PackRows(org.apache.spark.sql.types.StructType schema) { this.schema = schema; }
    public Object apply(Object rows) { return new Chunks((scala.collection.Iterator) rows, schema); }
}
// one array at a time, filled as it is asked for: the memory store reserves memory (or spills) array by array
final class Chunks extends scala.collection.AbstractIterator {
    static final int CHUNK = 16 << 20;
    static final int FIRST = 65536;
    private final scala.collection.Iterator rows;
    private final org.apache.spark.sql.types.StructType schema;
    private org.apache.spark.sql.catalyst.expressions.UnsafeProjection unsafe = null;
    private org.apache.spark.sql.catalyst.expressions.UnsafeRow pending = null;  // read, not in an array yet
    private byte[] buf = new byte[FIRST];
    Chunks(scala.collection.Iterator rows, org.apache.spark.sql.types.StructType schema) {
        this.rows = rows;
        this.schema = schema;
    }
    public boolean hasNext() { return pending != null || rows.hasNext(); }
    public Object next() {
        if (!hasNext()) throw new java.util.NoSuchElementException();
        int pos = 0;
        while (pending != null || rows.hasNext()) {
            org.apache.spark.sql.catalyst.expressions.UnsafeRow row = pending != null ? pending : unsafeRow(rows.next());
            pending = null;
            int size = row.getSizeInBytes();
            long need = (long) pos + 8L + size;
            if (pos > 0 && need > CHUNK) {  // (the upstream row is not reused before the next `rows.next()`)
                pending = row;
                break;
            }
            if (need > buf.length) {
                long grown = Math.max(need, Math.min((long) buf.length * 2L, (long) CHUNK));
                if (grown > Integer.MAX_VALUE - 16) throw new IllegalStateException("a row of " + size + " bytes");
                buf = java.util.Arrays.copyOf(buf, (int) grown);
            }
            long at = org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET + pos;
            org.apache.spark.unsafe.Platform.putLong(buf, at, size);
            row.writeToMemory(buf, at + 8);
            pos += 8 + size;
        }
        byte[] out = java.util.Arrays.copyOf(buf, pos);
        if (buf.length > CHUNK) buf = new byte[FIRST];  // (grown past a chunk by one large row)
        return out;
    }
    private org.apache.spark.sql.catalyst.expressions.UnsafeRow unsafeRow(Object r) {
        if (r instanceof org.apache.spark.sql.catalyst.expressions.UnsafeRow) {
            return (org.apache.spark.sql.catalyst.expressions.UnsafeRow) r;
        }
        if (unsafe == null) unsafe = org.apache.spark.sql.catalyst.expressions.UnsafeProjection.create(schema);
        return unsafe.apply((org.apache.spark.sql.catalyst.InternalRow) r);
    }
}
// a packed partition's rows: one row object pointed at each stored row in turn (a plan's rows are reused too)
final class UnpackRows extends scala.runtime.AbstractFunction1 implements java.io.Serializable {
    private final int fields;
    public UnpackRows(int fields) { this.fields = fields; }
    public Object apply(Object chunks) { return new PackedRows((scala.collection.Iterator) chunks, fields); }
}
final class PackedRows extends scala.collection.AbstractIterator {
    private final scala.collection.Iterator chunks;
    private final org.apache.spark.sql.catalyst.expressions.UnsafeRow row;
    private byte[] chunk = null;
    private int pos = 0;
    PackedRows(scala.collection.Iterator chunks, int fields) {
        this.chunks = chunks;
        this.row = new org.apache.spark.sql.catalyst.expressions.UnsafeRow(fields);
    }
    public boolean hasNext() {
        while (chunk == null || pos >= chunk.length) {
            if (!chunks.hasNext()) return false;
            chunk = (byte[]) chunks.next();
            pos = 0;
        }
        return true;
    }
    public Object next() {
        if (!hasNext()) throw new java.util.NoSuchElementException();
        long at = org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET + pos;
        int size = (int) org.apache.spark.unsafe.Platform.getLong(chunk, at);
        row.pointTo(chunk, at + 8, size);
        pos += 8 + size;
        return row;
    }
}""",
    # (the driver's) a round's record counters as conditions that are always true, counting the records they see
    # (those `counted` is true for) into an accumulator; `collect`: the counters in a plan and their counts, also
    # those of its `observe` nodes, one "name<TAB>count" line each (why: runtime/counters.py)
    "RowCounters": """
public final class RowCounters {
    // (the function of each counter's UDF -> its CountIf; one name for all, as Spark writes it into the generated
    // code: a name of its own would make every round's code new, to be compiled again)
    private static final java.util.Map COUNTERS = java.util.Collections.synchronizedMap(new java.util.WeakHashMap());
    public org.apache.spark.sql.Column counter(org.apache.spark.SparkContext sc, String name,
                                               org.apache.spark.sql.Column counted) {
        org.apache.spark.util.LongAccumulator acc = new org.apache.spark.util.LongAccumulator();
        sc.register(acc);
        CountIf count = new CountIf(name, acc);
        org.apache.spark.sql.expressions.UserDefinedFunction udf = org.apache.spark.sql.functions.udf(
            count, org.apache.spark.sql.types.DataTypes.BooleanType).withName("scopeflow_counter").asNondeterministic();
        COUNTERS.put(((org.apache.spark.sql.expressions.SparkUserDefinedFunction) udf).f(), count);
        return udf.apply(new org.apache.spark.sql.Column[] { counted });
    }
    public String collect(org.apache.spark.sql.execution.SparkPlan plan) {
        StringBuilder out = new StringBuilder();
        scala.collection.Iterator it = org.apache.spark.sql.execution.CollectMetricsExec$.MODULE$.collect(plan)
            .iterator();
        while (it.hasNext()) {
            scala.Tuple2 kv = (scala.Tuple2) it.next();
            line(out, (String) kv._1(), ((org.apache.spark.sql.Row) kv._2()).get(0));
        }
        visit(plan, out);
        return out.toString();
    }
    private static void visit(org.apache.spark.sql.catalyst.trees.TreeNode node, StringBuilder out) {
        if (node instanceof org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) {  // (as Spark's collect)
            visit(((org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) node).executedPlan(), out);
        } else if (node instanceof org.apache.spark.sql.execution.adaptive.QueryStageExec) {
            visit(((org.apache.spark.sql.execution.adaptive.QueryStageExec) node).plan(), out);
        }
        if (node instanceof org.apache.spark.sql.catalyst.plans.QueryPlan) {
            scala.collection.Iterator es = ((org.apache.spark.sql.catalyst.plans.QueryPlan) node).expressions()
                .iterator();
            while (es.hasNext()) visit((org.apache.spark.sql.catalyst.trees.TreeNode) es.next(), out);
        } else if (node instanceof org.apache.spark.sql.catalyst.expressions.ScalaUDF) {
            Object f = ((org.apache.spark.sql.catalyst.expressions.ScalaUDF) node).function();
            CountIf count = (CountIf) COUNTERS.get(f);
            if (count != null) line(out, count.name, Long.valueOf(count.acc.sum()));
        }
        scala.collection.Iterator cs = node.children().iterator();
        while (cs.hasNext()) visit((org.apache.spark.sql.catalyst.trees.TreeNode) cs.next(), out);
    }
    private static void line(StringBuilder out, String name, Object count) {
        out.append(name).append('\\t').append(count).append('\\n');
    }
}
// true for every record; counts those `counted` is true for (on an executor: its task's copy, which Spark merges)
final class CountIf implements org.apache.spark.sql.api.java.UDF1, java.io.Serializable {
    final transient String name;
    final org.apache.spark.util.LongAccumulator acc;
    CountIf(String name, org.apache.spark.util.LongAccumulator acc) { this.name = name; this.acc = acc; }
    public Object call(Object counted) {
        if (Boolean.TRUE.equals(counted)) acc.add(1L);
        return Boolean.TRUE;
    }
}""",
    # (the driver's; `--report`) the Spark task milliseconds per operator in an executed plan, as runtime/counters.py's
    # `operator_times` walks it there (its docstring says how), in one call: a line `op<TAB>ms` each
    "OperatorTimes": """
public final class OperatorTimes {
    public String times(org.apache.spark.sql.execution.SparkPlan root, String owner, String internal, String late) {
        java.util.LinkedHashMap out = new java.util.LinkedHashMap();
        java.util.ArrayList stack = new java.util.ArrayList();
        stack.add(new Object[] { root, owner, Boolean.FALSE });
        while (!stack.isEmpty()) {
            Object[] top = (Object[]) stack.remove(stack.size() - 1);
            org.apache.spark.sql.execution.SparkPlan node = (org.apache.spark.sql.execution.SparkPlan) top[0];
            String op = (String) top[1];
            boolean fused = ((Boolean) top[2]).booleanValue();
            String name = node.nodeName();
            if (node instanceof org.apache.spark.sql.execution.CollectMetricsExec) {
                String marker = ((org.apache.spark.sql.execution.CollectMetricsExec) node).name();
                if (!marker.startsWith(internal)) {
                    int at = marker.indexOf(late);
                    op = at < 0 ? marker : marker.substring(0, at);
                }
            }
            double ms;
            if (name.startsWith("WholeStageCodegen")) {
                fused = true;
                ms = timing(node, "pipelineTime");
            } else if (name.equals("InputAdapter")) {
                fused = false;
                ms = 0.0;
            } else {
                ms = fused ? 0.0 : timing(node, null);
            }
            if (op != null && ms != 0.0) {
                Double was = (Double) out.get(op);
                out.put(op, Double.valueOf((was == null ? 0.0 : was.doubleValue()) + ms));
            }
            scala.collection.Iterator cs = node.children().iterator();
            while (cs.hasNext()) stack.add(new Object[] { cs.next(), op, Boolean.valueOf(fused) });
        }
        StringBuilder text = new StringBuilder();
        java.util.Iterator es = out.entrySet().iterator();
        while (es.hasNext()) {
            java.util.Map.Entry e = (java.util.Map.Entry) es.next();
            text.append(e.getKey()).append('\\t').append(e.getValue()).append('\\n');
        }
        return text.toString();
    }
    private static double timing(org.apache.spark.sql.execution.SparkPlan node, String only) {
        double total = 0.0;
        scala.collection.Iterator it = node.metrics().iterator();
        while (it.hasNext()) {
            scala.Tuple2 kv = (scala.Tuple2) it.next();
            if (only != null && !only.equals(kv._1())) continue;
            org.apache.spark.sql.execution.metric.SQLMetric metric =
                (org.apache.spark.sql.execution.metric.SQLMetric) kv._2();
            String kind = metric.metricType();
            // (through the generic `value`: Janino sees two `value` methods in `SQLMetric`)
            double value = ((Number) ((org.apache.spark.util.AccumulatorV2) metric).value()).doubleValue();
            if ("timing".equals(kind)) total = total + value;
            else if ("nsTiming".equals(kind)) total = total + value / 1e6;
        }
        return total;
    }
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
    count_rows: object  # a scala.Function2[TaskContext, Iterator[_], java.lang.Long]: the partition's records
    any_tag: object  # ClassTag.AnyRef: the element type of the RDDs and arrays they make
    # `rows(session, plan, any_tag, level)`: the plan's rows packed, marked for a local checkpoint (the driver's);
    # `view(packed, plan, any_tag)`: their rows; `checkpoint(session, dataset, any_tag, level)`: a frame's lazy
    # checkpoint (`Checkpoints.direct`)
    plan_rows: object
    # `counter(sc, name, counted)`: a record counter, a condition to filter on; `collect(plan)`: a plan's counters
    # (None if they did not compile: counters are then `observe` nodes)
    row_counters: object
    # `times(plan, owner, internal, late)`: `--report`'s operator times in a plan (None: walked from Python)
    operator_times: object = None


_LOCK = threading.Lock()
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # py4j gateway -> (jar, {name: instance}) or why not
_ADDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # SparkContext -> Functions, or why not (a str)


def functions(spark) -> Optional[Functions]:
    """The functions, their jar added to `spark`'s SparkContext (once per context); None where they cannot be
    had (see the module's docstring, and `why_not`)."""
    if is_connect(spark):
        return None
    out = _added(spark)
    return out if isinstance(out, Functions) else None


def why_not(spark) -> Optional[str]:
    """Why `functions(spark)` is None (for `--report`), or None if it is not (or was never asked)."""
    if is_connect(spark):
        return "Spark Connect"
    if _switched_off(spark):
        return f"{JVM_FUNCTIONS}=false"
    with _LOCK:
        out = _ADDED.get(spark.sparkContext)
    return out if isinstance(out, str) else None


def _switched_off(spark) -> bool:
    return read_setting(spark, JVM_FUNCTIONS, "true").strip().lower() == "false"


def _added(spark):
    """`Functions` for `spark`'s context (compiled and added once per context), or why not (a str)."""
    if _switched_off(spark):
        return f"{JVM_FUNCTIONS}=false"
    sc = spark.sparkContext
    with _LOCK:
        if sc not in _ADDED:
            _ADDED[sc] = _add(spark, sc)
        return _ADDED[sc]


def _add(spark, sc):
    compiled = _compile(spark)
    if isinstance(compiled, str):
        return compiled
    jar, instances = compiled
    sc._jsc.sc().addJar(jar)  # (Spark logs a jar it cannot add and goes on: it is added if the context lists it)
    if f"/{JAR}" not in sc._jsc.sc().listJars().toString():
        return f"SparkContext.addJar did not add {jar} (see the JVM log)"
    tag = getattr(getattr(spark._jvm.scala.reflect, "ClassTag$"), "MODULE$").AnyRef()
    return Functions(instances["CountRows"], tag, instances["PlanRows"], instances.get("RowCounters"),
                     instances.get("OperatorTimes"))


def _compile(spark):
    """Compile `SOURCES` in the driver JVM (once per JVM) and write their class files into a jar: (jar path,
    {class name: instance}), or why not (a str)."""
    gateway = spark.sparkContext._gateway
    if gateway in _COMPILED:
        return _COMPILED[gateway]
    try:
        jvm = spark._jvm
        folder = tempfile.mkdtemp(prefix="scopeflow-jvm-functions-")
        atexit.register(shutil.rmtree, folder, True)
        jar = os.path.join(folder, JAR)
        instances = {}
        with zipfile.ZipFile(jar, "w") as z:
            for name, source in SOURCES.items():
                compiler = jvm.org.codehaus.janino.SimpleCompiler()
                try:
                    compiler.cook(f"package {PACKAGE};\n{source}\n")
                except Exception:  # noqa: BLE001 - (the counters need more of Spark's API than the checkpoints)
                    if name in OPTIONAL:
                        continue
                    raise
                codes = compiler.getBytecodes()
                for cls in codes.keySet().toArray():
                    z.writestr(cls.replace(".", "/") + ".class", bytes(codes.get(cls)))
                instances[name] = compiler.getClassLoader().loadClass(f"{PACKAGE}.{name}").newInstance()
        out = (jar, instances)
    except Exception as e:  # noqa: BLE001 - (no Janino, a JVM that refuses: Spark's own API still works)
        said = str(e).strip()
        out = f"could not compile them: {said.splitlines()[0][:200] if said else type(e).__name__}"
    _COMPILED[gateway] = out
    return out
