"""scopeflow's JVM functions (runtime/jvmfunctions.py): round checkpoints made from the executed plan's RDD and
round jobs counted by a function of scopeflow's own, on real local Spark, against what Spark's own API makes."""
from __future__ import annotations

import os
import shutil
import sys
from collections import Counter

import pytest

import reference
from conftest import EXAMPLES, read_output, write_csv
from scopeflow.api import run_file
from scopeflow.runtime import jvmfunctions
from scopeflow.runtime.checkpoints import Checkpoints, checkpoint_rdd
from scopeflow.runtime.context import LOOP_CONF, settings
from scopeflow.runtime.round import compute_checkpoints
from scopeflow.stdlib.settings import JVM_FUNCTIONS, STATE_OVERLAY_MIN_KEYS

pytestmark = pytest.mark.spark


class Run:
    """What `compute_checkpoints` reads of its run: the session, the checkpoints and its JVM handles."""

    def __init__(self, spark):
        self.spark = spark
        self.checkpoints = Checkpoints(spark)
        self._handles: dict = {}

    def handle(self, key, build):
        if key not in self._handles:
            self._handles[key] = build()
        return self._handles[key]


@pytest.fixture
def functions_off(spark):
    spark.conf.set(JVM_FUNCTIONS, "false")
    yield
    spark.conf.unset(JVM_FUNCTIONS)


def _keyed(spark, n: int, partitions: int):
    from pyspark.sql import functions as F

    rows = spark.range(n).select((F.col("id") % 97).alias("k"), F.col("id").alias("v"))
    return rows.repartition(partitions, "k").groupBy("k").agg(F.min("v").alias("v"), F.count("v").alias("n"))


def test_the_functions_compile_once_and_their_jar_is_added_once(spark):
    one, two = jvmfunctions.functions(spark), jvmfunctions.functions(spark)
    assert one is not None and one is two
    jars = [j for j in spark.sparkContext._jsc.sc().listJars().toString().split(", ") if "scopeflow-functions" in j]
    assert len(jars) == 1, spark.sparkContext._jsc.sc().listJars().toString()


def test_a_direct_checkpoint_holds_what_local_checkpoint_holds_and_keeps_the_placement(spark):
    with settings(spark, LOOP_CONF):
        run = Run(spark)
        df = _keyed(spark, 5000, 3)
        ck = run.checkpoints.direct(df)
        assert ck is not None, "the loop's plan should be checkpointed directly"
        assert not checkpoint_rdd(ck).isCheckpointed()  # lazy: stored by the round's job
        assert compute_checkpoints(run, [ck]) == [97]
        assert checkpoint_rdd(ck).isCheckpointed()  # the job cut the lineage
        want = sorted(tuple(r) for r in df.localCheckpoint(eager=True).collect())
        assert sorted(tuple(r) for r in ck.collect()) == want
        # the placement is the plan's (hash by k in 3), so an aggregate by k shuffles nothing
        assert "hashpartitioning(k#" in ck._jdf.queryExecution().logical().outputPartitioning().toString()
        plan = ck.groupBy("k").count()._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan, plan
        # no statistics inherited from the plan: Spark's default estimate, as `detach_statistics` leaves it
        def size(frame):
            return frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()

        detached = run.checkpoints.detach_statistics(df.localCheckpoint(eager=False))
        assert size(ck) == size(detached) == (1 << 63) - 1  # (spark.sql.defaultSizeInBytes)
        assert size(df.localCheckpoint(eager=False)) < size(ck)  # (what a checkpoint would inherit)


def test_a_one_partition_checkpoint_says_single_partition(spark):
    with settings(spark, LOOP_CONF):
        run = Run(spark)
        ck = run.checkpoints.direct(_keyed(spark, 1000, 1))
        assert ck._jdf.queryExecution().logical().outputPartitioning().toString() == "SinglePartition"
        assert compute_checkpoints(run, [ck]) == [97]


def test_the_round_job_counts_each_checkpoint_with_or_without_the_functions(spark, functions_off):
    """Several checkpoints (one empty, different partition counts) in one job: the counts per checkpoint are the
    same through scopeflow's counting function and through `zipWithIndex`, and right."""
    from pyspark.sql import functions as F

    def frames():
        return [_keyed(spark, 3000, 4), spark.range(10).where(F.col("id") < 0),
                spark.range(1234).repartition(2), _keyed(spark, 50, 1)]

    with settings(spark, LOOP_CONF):
        without = Run(spark)  # (the fixture turned them off)
        assert without.checkpoints.functions() is None
        cks = [without.checkpoints.make(df) for df in frames()]
        assert not any(vars(ck).get("_sf_checkpoint_rdd") is None for ck in cks)
        assert compute_checkpoints(without, cks) == [97, 0, 1234, 50]
        spark.conf.unset(JVM_FUNCTIONS)
        with_fns = Run(spark)
        assert with_fns.checkpoints.functions() is not None
        cks = [with_fns.checkpoints.make(df) for df in frames()]
        assert compute_checkpoints(with_fns, cks) == [97, 0, 1234, 50]
        assert [ck.count() for ck in cks] == [97, 0, 1234, 50]


def test_an_adaptive_plan_is_checkpointed_by_spark(spark):
    """Loops plan without adaptive execution (`LOOP_CONF`); a plan that has it is checkpointed by Spark's own
    `localCheckpoint` (`direct` declines), with the same rows."""
    with settings(spark, {"spark.sql.adaptive.enabled": "true"}):
        run = Run(spark)
        df = _keyed(spark, 500, 2)
        assert run.checkpoints.direct(df) is None
        ck = run.checkpoints.make(df)
        assert compute_checkpoints(run, [ck]) == [97]
        assert sorted(tuple(r) for r in ck.collect()) == sorted(tuple(r) for r in df.collect())


def test_a_checkpoint_of_a_plan_with_a_join_and_a_sort_says_what_local_checkpoint_says(spark):
    """The placement (a join's: a collection, its first leaf) and the ordering of a direct checkpoint are those of
    Spark's own `localCheckpoint` of the same frame."""
    with settings(spark, LOOP_CONF):
        run = Run(spark)
        a, b = _keyed(spark, 2000, 3), _keyed(spark, 1000, 3).withColumnRenamed("v", "w").withColumnRenamed("n", "m")
        joined = a.join(b, "k").sortWithinPartitions("k")
        ck = run.checkpoints.direct(joined)
        spark_ck = joined.localCheckpoint(eager=False)

        def placement(frame):
            plan = frame._jdf.queryExecution().logical()
            return plan.outputPartitioning().toString(), plan.outputOrdering().toString()

        assert placement(ck) == placement(spark_ck)
        assert "hashpartitioning(k#" in placement(ck)[0] and "k#" in placement(ck)[1], placement(ck)
        assert compute_checkpoints(run, [ck]) == [97]
        assert sorted(tuple(r) for r in ck.collect()) == sorted(tuple(r) for r in spark_ck.collect())


def test_without_the_functions_the_report_says_why(spark, monkeypatch):
    """A source Janino cannot compile: no functions (Spark's API makes the checkpoints) and the report says
    why; `jvmFunctions=false` says so too."""
    from scopeflow.runtime import jvmfunctions as jf

    monkeypatch.setattr(jf, "SOURCES", {**jf.SOURCES, "Broken": "public final class Broken { not java }"})
    monkeypatch.setattr(jf, "_COMPILED", type(jf._COMPILED)())
    monkeypatch.setattr(jf, "_ADDED", type(jf._ADDED)())
    with settings(spark, LOOP_CONF):
        run = Run(spark)
        assert run.checkpoints.functions() is None
        ck = run.checkpoints.make(_keyed(spark, 500, 2))
        assert compute_checkpoints(run, [ck]) == [97]
        assert run.checkpoints.describe().startswith("local, spark api (could not compile them: ")
    monkeypatch.undo()
    spark.conf.set(JVM_FUNCTIONS, "false")
    try:
        run = Run(spark)
        run.checkpoints.make(_keyed(spark, 500, 2))
        assert run.checkpoints.describe() == f"local, spark api ({JVM_FUNCTIONS}=false)"
    finally:
        spark.conf.unset(JVM_FUNCTIONS)


def test_counters_that_do_not_compile_leave_the_checkpoint_functions_and_counters_observe(spark, monkeypatch):
    """The counters need more of Spark's API than the checkpoints (a `UDF1`, `SparkUserDefinedFunction.f`): where
    they do not compile, the other functions still do, and counters are `observe` nodes."""
    import attrs

    from scopeflow.runtime import jvmfunctions as jf
    from scopeflow.runtime.counters import Counters

    monkeypatch.setattr(jf, "SOURCES", {**jf.SOURCES, "RowCounters": "public final class RowCounters { not java }"})
    monkeypatch.setattr(jf, "_COMPILED", type(jf._COMPILED)())
    _, instances = jf._compile(spark)  # (not added to the context: its jar is there already)
    assert set(instances) == set(jf.SOURCES) - {"RowCounters"}
    fns = jf.functions(spark)
    monkeypatch.setattr(jf, "functions", lambda _: attrs.evolve(fns, row_counters=None))
    counters = Counters(spark)
    counted = counters.observe(spark.range(5), "n001")
    assert counters.fused() is False
    assert "CollectMetrics n001" in counted._jdf.queryExecution().executedPlan().toString()
    counted.collect()
    assert counters.observed([counted]) == {"n001": 5}


@pytest.mark.parametrize("setting", [None, "false"])
def test_loops_give_the_reference_results_with_and_without_the_functions(spark, example_copy, monkeypatch, setting):
    made = Counter()
    direct = Checkpoints.direct

    def counting(self, df):
        out = direct(self, df)
        made["direct" if out is not None else "api"] += 1
        return out

    monkeypatch.setattr(Checkpoints, "direct", counting)
    if setting is not None:
        spark.conf.set(JVM_FUNCTIONS, setting)
    try:
        flow = example_copy("sssp.flow")
        job = run_file(flow, spark=spark)
    finally:
        spark.conf.unset(JVM_FUNCTIONS)
    got = dict(read_output(os.path.join(os.path.dirname(flow), "out/distances"), (int, float)))
    wedges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "wgraph.csv"), (int, int, float))
    want = reference.sssp(wedges, 1)
    assert set(got) == set(want)
    assert all(got[k] == pytest.approx(want[k]) for k in want)
    how = [loop["checkpoints"] for loop in job.report["loops"].values()]
    if setting is None:
        assert made["direct"] > 0 and made["api"] == 0, made
        assert how == ["local, jvm functions"]
    else:
        assert made["direct"] == 0 and made["api"] > 0, made
        assert how == [f"local, spark api ({JVM_FUNCTIONS}=false)"]


def test_a_bad_jvm_functions_setting_is_a_usage_error_before_spark_starts(run_cli, tmp_path):
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), tmp_path)
    write_csv(tmp_path / "data" / "graph.csv", ["src", "dst"], [(1, 2)])
    out = run_cli("run", str(tmp_path / "connected_components.flow"), "--conf", f"{JVM_FUNCTIONS}=maybe",
                  env={**os.environ, "JAVA_HOME": "/nonexistent", "PATH": os.path.dirname(sys.executable)})
    assert out.returncode == 2, out.stderr
    assert f"--conf {JVM_FUNCTIONS}=maybe: expected true or false" in out.stderr, out.stderr
    assert not (tmp_path / "out").exists()


def test_a_direct_checkpoint_stores_its_rows_packed_and_reads_back_every_kind_of_value(spark):
    # a partition's rows are stored in a few byte arrays (runtime/jvmfunctions.py): the block holds one array for
    # small partitions and several past a chunk's 16 MiB, and the rows read back are exactly the plan's, whatever
    # their values (fixed and variable width, nulls, nested); an empty partition stores nothing
    from pyspark.sql import functions as F

    with settings(spark, LOOP_CONF):
        run = Run(spark)
        values = spark.range(0, 3000, 1, 3).select(
            F.col("id"), F.when(F.col("id") % 5 == 0, None).otherwise(F.concat(F.lit("v"), F.col("id"))).alias("s"),
            (F.col("id") / 7).cast("decimal(30,5)").alias("d"), F.array(F.col("id"), F.col("id") * 2).alias("a"),
            F.create_map(F.col("id"), F.lit("m")).alias("m"), F.struct(F.col("id").alias("x")).alias("t"),
            F.when(F.col("id") % 2 == 0, F.lit(1.5)).alias("f"))
        want = sorted(values.collect(), key=lambda r: r.id)
        ck = run.checkpoints.direct(values)
        assert compute_checkpoints(run, [ck]) == [3000]
        assert sorted(ck.collect(), key=lambda r: r.id) == want
        assert checkpoint_rdd(ck).count() == 3  # one array a partition
        big = spark.range(0, 48, 1, 1).select(F.col("id"), F.expr("repeat('x', 1048576)").alias("s"))
        ck_big = run.checkpoints.direct(big)
        assert compute_checkpoints(run, [ck_big]) == [48]
        assert checkpoint_rdd(ck_big).count() == 4  # 48 rows of 1 MiB: arrays of up to 16 MiB
        assert ck_big.select(F.sum(F.length("s")).alias("n"), F.sum("id").alias("i")).first() == (48 * 1048576, 1128)
        empty = run.checkpoints.direct(spark.range(0, 0, 1, 2))
        assert compute_checkpoints(run, [empty]) == [0]
        assert checkpoint_rdd(empty).count() == 0 and empty.collect() == []
        run.checkpoints.release([ck, ck_big, empty])


def _round_plans(monkeypatch) -> list:
    """The executed plans of the round checkpoints made from here on, as text."""
    plans = []
    direct = Checkpoints.direct

    def keeping(self, df):
        plans.append(df._jdf.queryExecution().executedPlan().toString())
        return direct(self, df)

    monkeypatch.setattr(Checkpoints, "direct", keeping)
    return plans


def test_round_counters_are_conditions_in_the_generated_code_and_count_what_observe_counts(spark, example_copy,
                                                                                           monkeypatch):
    """With the functions (and without `--report`), a round's record counters are filters on scopeflow's counting
    function, fused into the generated code of the operators around them: no `CollectMetrics` node in a round's
    plans. Every round counts what Spark's `observe` counts (the functions off), operators, the state's changed
    keys and the records in flight alike."""
    plans = _round_plans(monkeypatch)
    fused = run_file(example_copy("sssp.flow"), spark=spark).report
    assert plans and not any("CollectMetrics" in p for p in plans), plans[0]
    assert sum("scopeflow_counter" in p for p in plans) >= len(plans) // 2, plans
    spark.conf.set(JVM_FUNCTIONS, "false")
    try:
        observed = run_file(example_copy("sssp.flow"), spark=spark).report
    finally:
        spark.conf.unset(JVM_FUNCTIONS)

    def counts(report):
        return [(r["round"], r["counts"], r["in_flight"], r.get("states")) for r in report["rounds"]]

    assert counts(fused) == counts(observed)
    assert fused["operators"] == observed["operators"]
    assert sum(sum(r["counts"].values()) for r in fused["rounds"]) > 0


RELAX_THEN_REDUCE = """pipeline sssp
source edges = read csv("data/wgraph.csv", header = true) schema (src: long, dst: long, w: double)
start = edges | where(src == 1) | group(by id = src) | select(id, dist = 0.0)
dists = loop sssp(d = start) with (e = edges) {
    relax = d | join(e, on d.id == e.src) | select(id = e.dst, dist = d.dist + e.w)
    best  = relax | reduce(by id, dist = min(dist))
    feedback d <- best
    emit state best
}
sink dists -> csv("out/distances", header = true)
"""


def test_round_counters_count_once_what_a_fold_into_the_overlay_reads_twice(spark, example_copy, monkeypatch):
    """A fold into a state's overlay reads the round's records twice (the keys it meets in main, and the records),
    so Spark computes the operators below it twice. An `observe` counter counts each computation apart (the
    largest is read); a fused counter would add both up, so such rounds count with `observe`."""
    flow = example_copy("sssp.flow")
    with open(flow, "w") as fh:
        fh.write(RELAX_THEN_REDUCE)

    def report(functions: bool):
        conf = {STATE_OVERLAY_MIN_KEYS: "0", **({} if functions else {JVM_FUNCTIONS: "false"})}
        with settings(spark, conf):
            return run_file(flow, spark=spark).report

    plans = _round_plans(monkeypatch)
    fused = report(True)
    # (the first rounds, whose state is not there yet or not stored, are fused; those that may fold are not)
    assert any("scopeflow_counter" in p for p in plans) and any("CollectMetrics" in p for p in plans)
    observed = report(False)
    assert any(how == "overlay" for r in fused["rounds"] for how in r.get("states", {}).values()), fused["rounds"]
    assert [r["counts"] for r in fused["rounds"]] == [r["counts"] for r in observed["rounds"]]
    got = dict(read_output(os.path.join(os.path.dirname(flow), "out/distances"), (int, float)))
    arcs = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "wgraph.csv"), (int, int, float))
    want = reference.sssp(arcs, 1)  # (the source's distance here: the shortest way back to it)
    want[1] = min(want[u] + w for u, v, w in arcs if v == 1 and u in want)
    assert got == pytest.approx(want)


@pytest.mark.parametrize("example", ["pagerank.flow", "sssp.flow"])
def test_a_rounds_generated_code_is_the_same_every_round(spark, example_copy, monkeypatch, example):
    """No counter's name or id is in the code Spark generates for a round (Spark writes a function's name into its
    error handling): after the first rounds, a round compiles no code. (SSSP defers its feedback: its deferred plans'
    counters are named after their round.)"""
    from scopeflow.runtime.round import Round

    codegen = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    compiled, fused = [], []
    materialise = Round.materialise

    def counting(self, also=()):
        out = materialise(self, also)
        compiled.append(codegen.getCount())
        fused.append(self.fused)
        return out

    monkeypatch.setattr(Round, "materialise", counting)
    plans = _round_plans(monkeypatch)
    job = run_file(example_copy(example), spark=spark)
    assert len(compiled) >= 8 and all(fused), (compiled, fused)
    assert any("scopeflow_counter" in p for p in plans) and not any("CollectMetrics" in p for p in plans)
    if example == "sssp.flow":
        assert any(r.get("deferred") for r in job.report["rounds"])
    assert compiled[-1] == compiled[3], compiled


def test_a_round_that_may_fold_into_an_overlay_or_read_an_input_twice_counts_with_observe():
    """`Round.fused`: a round counts with fused counters only where it computes its records once. Not where a
    state may fold into its overlay (it reads the round's records twice), an incremental epoch's first round starts
    from earlier states (which may fold into theirs), seeds a join or joins import pieces; nor with checkpoints
    that are not counted by the round's job."""
    from types import SimpleNamespace

    from scopeflow.runtime.loop import Activation
    from scopeflow.runtime.round import Round
    from scopeflow.runtime.state import DistinctState

    def fused(counted=True, pieces=False, **act):
        run = SimpleNamespace(checkpoints=SimpleNamespace(counted_by_job=counted), overlay=lambda: (0.25, 10))
        return Round(run, None, Activation("l", 1, **act), pieces=pieces).fused

    small, large = DistinctState("n001", ["v"]), DistinctState("n001", ["v"])
    small.main, small.main_rows, large.main, large.main_rows = object(), 9, object(), 10
    assert fused() and fused(round=3, states={"n001": small})
    assert not fused(round=3, states={"n001": large})
    assert not fused(preloaded={"n001": (None, 0)})
    assert not fused(seeds={"n002": ()})
    assert fused(round=1, seeds={"n002": ()})  # (seeds are round 0's)
    assert not fused(pieces=True)
    assert not fused(counted=False)


def test_the_operator_times_walked_in_the_jvm_are_those_walked_from_python(spark, session_at):
    """`--report`'s per-operator Spark time of a round's plan, read in one JVM call (`OperatorTimes`), is what the
    walk from Python reads off the same executed plan: by the operators' markers (a deferred plan's `op@round` is
    the operator's; scopeflow's own counters mark nothing), the frame's owner from the root down."""
    from pyspark.sql import functions as F

    from scopeflow.runtime.counters import INTERNAL, operator_times, walked_times

    session_at(**{"spark.sql.adaptive.enabled": "false"})  # (as in loops: the plan's nodes are there to walk)
    fns = jvmfunctions.functions(spark)
    assert fns is not None and fns.operator_times is not None
    n = F.count(F.lit(1)).alias("n")
    base = spark.range(0, 30_000, 1, 3).select((F.col("id") % 97).alias("k"), F.col("id").alias("v"))
    grouped = base.observe("n001", n).groupBy("k").agg(F.sum("v").alias("s")).observe("n002@3", n)
    joined = grouped.join(base.observe("n003", n), "k").observe(INTERNAL + "fed:x", n).select("k", "s", "v")
    assert len(joined.collect()) == 30_000
    plan = joined._jdf.queryExecution().executedPlan()
    want = walked_times(plan, "n005", {})
    got = operator_times([("n005/state", joined)])
    assert {"n002", "n003", "n005"} <= set(want) and "n002@3" not in want and sum(want.values()) > 0, want
    assert not any(op.startswith(INTERNAL) for op in want), want
    assert got == pytest.approx(want, rel=1e-12, abs=1e-9)
    twice = operator_times([("n005/state", joined), ("n005/shared", joined)])  # (one owner's frames add up)
    assert twice == pytest.approx({op: 2 * ms for op, ms in want.items()}, rel=1e-12, abs=1e-9)
    assert operator_times([("feedback/x", joined)]) == pytest.approx(walked_times(plan, None, {}), rel=1e-12)
