"""The loop executor on real Spark: cost per round, termination, loop semantics, outputs."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import textwrap
from collections import Counter

import pytest

import reference
from conftest import EXAMPLES, read_output, write_csv
from scopeflow.compiler.graph import seconds_text
from scopeflow.api import run_file

pytestmark = pytest.mark.spark


def write_flow(tmp_path, text: str, name="t.flow") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def loop_rounds(job, scope):
    return [r for r in job.report["rounds"] if r["scope"] == scope]


# ---- cost per round ---------------------------------------------------------------------


@pytest.mark.parametrize("example,scopes", [("connected_components.flow", ["cc"]),
                                            ("sssp.flow", ["sssp"]),
                                            ("kcore.flow", ["kcore", "kcore.peel"])])
def test_every_round_is_one_spark_job(spark, example_copy, example, scopes):
    job = run_file(example_copy(example), spark=spark)
    for scope in scopes:
        assert_one_job_per_round(job, scope)


def test_rounds_name_their_jobs_and_put_the_callers_tags_back(spark, example_copy):
    # a round's stages are named after it in Spark's UI (its call site, which Spark then does not look for
    # frame by frame); after the loop, the job group, description and call site are the caller's again
    sc = spark.sparkContext
    sc.setJobGroup("caller", "the caller's jobs")
    sc.setLocalProperty("callSite.short", "caller site")
    try:
        job = run_file(example_copy("connected_components.flow"), spark=spark)
        tags = {key: sc.getLocalProperty(key) for key in ("spark.jobGroup.id", "spark.job.description",
                                                          "callSite.short", "callSite.long")}
    finally:
        sc.setLocalProperty("callSite.short", None)
        sc.setJobGroup(None, None)
    assert tags == {"spark.jobGroup.id": "caller", "spark.job.description": "the caller's jobs",
                    "callSite.short": "caller site", "callSite.long": None}
    sc._jsc.sc().listenerBus().waitUntilEmpty(10_000)  # (the status tracker learns of stages from Spark's bus)
    tracker = sc.statusTracker()
    for round_no in (1, 2):
        stages = {s for j in tracker.getJobIdsForGroup(f"scopeflow:{job.run_id}:cc#1/r{round_no}")
                  for s in tracker.getJobInfo(j).stageIds}
        assert stages, round_no
        # (Spark's status store keeps at most spark.ui.retainedStages stages and this suite's shared session runs
        # far more: a job may list a stage the store has dropped; seen in CI as None)
        names = {info.name for info in map(tracker.getStageInfo, stages) if info is not None}
        # (a stage is named after the round that made its RDD: a shuffle read back may be an earlier round's)
        assert f"loop cc round {round_no}" in names and all(n.startswith("loop cc round ") for n in names), names


def assert_one_job_per_round(job, scope: str) -> None:
    rounds = loop_rounds(job, scope)
    assert rounds, scope
    why = "\n".join(f"{scope} activation {r['activation']} round {r['round']}: " + " | ".join(r["jobs"])
                    for r in rounds if "jobs" in r)  # a string: pytest shortens the repr of a structure
    assert [r["spark_jobs"] for r in rounds] == [1] * len(rounds), why
    assert [r["waves"] for r in rounds] == [1] * len(rounds)  # local mode: one job stores a round's checkpoints


def test_one_job_per_round_with_more_tasks_than_slots(spark, example_copy, many_partitions):
    # k-core's inner loop reads its entry checkpoint in two shuffles; with more partitions than task
    # slots, the two stages each compute some of its partitions (see the test below)
    job = run_file(example_copy("kcore.flow"), spark=spark)
    for scope in ("kcore", "kcore.peel"):
        assert_one_job_per_round(job, scope)
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "kcore.csv"), (int, int))
    cores = read_output(os.path.join(os.path.dirname(job.flow_file), "out", "cores"), (int, int))
    assert Counter(cores) == Counter(reference.core_numbers(edges).items())


def test_a_checkpoint_computed_by_two_stages_is_counted_in_full(spark):
    # A round checkpoint read by two shuffles has each partition computed by whichever stage gets to
    # it first. Spark 4.3's `observe` keeps only the tasks of the stage with the highest RDD id; an
    # operator's record counter must still count every partition (`LOOP_CONF`). Here two jobs split
    # the partitions on purpose, the later one on a child RDD.
    from scopeflow.runtime.checkpoints import Checkpoints, rows_rdd
    from scopeflow.runtime.context import LOOP_CONF, restore_conf, set_conf
    from scopeflow.runtime.counters import Counters

    counters, checkpoints = Counters(spark), Checkpoints(spark)
    saved = set_conf(spark, LOOP_CONF)
    try:
        pre = spark.range(0, 1000, 1, 2).observe("n001", counters.column)
        ck = checkpoints.make(pre)
        rdd = rows_rdd(ck)
        jvm = spark._jvm
        child = jvm.org.apache.spark.api.java.JavaRDD(
            rdd, getattr(getattr(jvm.scala.reflect, "ClassTag$"), "MODULE$").AnyRef()).glom()
        first = spark.sparkContext._gateway.new_array(jvm.int, 1)
        first[0] = 0
        # partition 0 in a stage of the child RDD (the higher id); Spark's local checkpoint then
        # computes the missing partition 1 in a job of the checkpoint RDD itself
        child.collectPartitions(first)
        assert rdd.count() == 1000  # (reads the two stored partitions)
        observed = counters.observed([pre])
        checkpoints.release([ck])
    finally:
        restore_conf(spark, saved)
    assert observed["n001"] == 1000


@pytest.mark.parametrize("mode", ["local", "replicated"])
def test_a_round_checkpoint_knows_its_rdd(spark, mode):
    # a round's checkpoint keeps the RDD it stores its blocks under (read several times a round: the job that
    # stores it, its release) and the RDD of its rows, which its `LogicalRDD` reads (the same RDD, or the rows
    # of the packed one: `Checkpoints.direct`); a frame made from it is no checkpoint
    from scopeflow.runtime.checkpoints import Checkpoints, checkpoint_rdd, is_checkpoint, rows_rdd

    checkpoints = Checkpoints(spark)
    checkpoints.mode = mode
    ck = checkpoints.make(spark.range(0, 10, 1, 2))
    assert "_sf_checkpoint_rdd" not in vars(ck)  # (`Checkpoints.direct`: read from the JVM when first asked for)
    kept = checkpoint_rdd(ck)
    assert is_checkpoint(ck) and checkpoint_rdd(ck) is kept and vars(ck)["_sf_checkpoint_rdd"] is kept
    assert rows_rdd(ck).id() == ck._jdf.queryExecution().logical().rdd().id()
    assert kept.getStorageLevel().replication() == (2 if mode == "replicated" else 1)
    derived = ck.where("id > 3")
    assert "_sf_checkpoint_rdd" not in vars(derived) and not is_checkpoint(derived)
    assert rows_rdd(ck).count() == 10  # (its job stores it)
    assert kept.isCheckpointed()
    assert kept.getStorageLevel().useMemory()
    checkpoints.release([ck, derived])
    assert not kept.getStorageLevel().useMemory()  # (released: its blocks are dropped)


def round_result_tasks(spark, job, scope: str, round_no: int) -> int:
    """Tasks of the final stage of a round's one Spark job (the stage that computes its checkpoints)."""
    tracker = spark.sparkContext.statusTracker()
    job_id = min(tracker.getJobIdsForGroup(f"scopeflow:{job.run_id}:{scope}#1/r{round_no}"))  # later: the sink's
    return tracker.getStageInfo(max(tracker.getJobInfo(job_id).stageIds)).numTasks


@pytest.fixture
def many_partitions(spark):
    """More shuffle partitions than the session runs tasks at once (then restored)."""
    from scopeflow.runtime.deployment import task_slots

    slots = task_slots(spark)
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(slots + 2))
    yield slots, slots + 2
    spark.conf.set("spark.sql.shuffle.partitions", saved)


def test_task_slots_of_local_masters():
    from scopeflow.runtime.deployment import local_slots

    assert local_slots("local") == 1
    assert local_slots("local[3]") == 3
    assert local_slots("local[3,2]") == 3
    assert local_slots("local[*]") == (os.cpu_count() or 1)
    assert local_slots("local[*,4]") == (os.cpu_count() or 1)
    assert local_slots("local-cluster[2,1,1024]") is None  # executors are processes: Spark's parallelism
    assert local_slots("spark://127.0.0.1:7077") is None


def test_fed_back_stream_is_narrowed_to_task_slots(spark, tmp_path, many_partitions):
    # the variable is read by a join (no combiner) and fed back a join's projection: no partitioning the
    # next round could use, so from the second round on it is checkpointed in as many partitions as
    # Spark runs tasks at once (the emitted variable too)
    slots, partitions = many_partitions
    flow = write_flow(tmp_path, """
        source edges = values (src: long, dst: long) [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (2, 7), (7, 8)]
        out = loop l(x = edges | where(src == 1) | select(v = src)) with (e = edges) {
            nxt = x | join(e, on x.v == e.src) | select(v = e.dst)
            feedback x <- nxt
            emit x
        }
        sink out -> csv("out/o", header = true)
    """)
    job = run_file(flow, spark=spark)
    rounds = loop_rounds(job, "l")
    assert len(rounds) == 6
    for r in rounds[1:]:
        assert round_result_tasks(spark, job, "l", r["round"]) == 2 * slots
    assert Counter(read_output(str(tmp_path / "out/o"), (int,))) == Counter((v,) for v in range(1, 9))


def test_rounds_are_planned_without_constraint_propagation_and_the_setting_is_put_back(spark, tmp_path, monkeypatch):
    # Spark infers `isnotnull` filters for a join's keys from the plan's constraints; over a round's plans that
    # is planning time every round for filters an inner join applies anyway (benchmarks/RESULTS.md), so loops
    # plan without it, and the session's value is back when they end
    from scopeflow.runtime.checkpoints import Checkpoints

    key = "spark.sql.constraintPropagation.enabled"
    seen = []
    make = Checkpoints.make

    def spying(self, df, round_no=None):
        seen.append((spark.conf.get(key), df._jdf.queryExecution().optimizedPlan().toString(), df))
        return make(self, df, round_no)

    monkeypatch.setattr(Checkpoints, "make", spying)
    flow = write_flow(tmp_path, """
        source edges = values (src: long, dst: long) [(1, 2), (2, 3), (3, 4), (2, 5)]
        out = loop l(x = edges | where(src == 1) | select(v = src)) with (e = edges) {
            nxt = x | join(e, on x.v == e.src) | select(v = e.dst)
            feedback x <- nxt
            emit x
        }
        sink out -> csv("out/o", header = true)
    """)
    before = spark.conf.get(key)
    run_file(flow, spark=spark)
    assert spark.conf.get(key) == before == "true"
    joins = [(plan, df) for _, plan, df in seen if "Join Inner" in plan]
    assert joins and not [plan for plan, _ in joins if "isnotnull" in plan]
    assert {value for value, _, _ in seen} == {"false"}
    # the control: the same round's query, planned again with the session's setting, gets the filters
    assert "isnotnull" in joins[0][1].select("*")._jdf.queryExecution().optimizedPlan().toString()
    assert Counter(read_output(str(tmp_path / "out/o"), (int,))) == Counter((v,) for v in (1, 2, 3, 4, 5))


def test_rounds_build_their_generated_stages_from_evaluators_and_the_setting_is_put_back(spark, tmp_path, monkeypatch):
    # Spark cleans the closure of every generated stage of every plan it runs (it reads the class that declares it
    # from its jar); built from an evaluator a stage has no closure to clean, and a round's plans are new every round
    # (benchmarks/RESULTS.md, twenty-ninth session). The session's value is back when the loop ends.
    from scopeflow.runtime.checkpoints import Checkpoints, rows_rdd

    key = "spark.sql.execution.usePartitionEvaluator"
    seen = []
    make = Checkpoints.make

    def spying(self, df, round_no=None):
        ck = make(self, df, round_no)
        seen.append((spark.conf.get(key), rows_rdd(ck).toDebugString(), df))
        return ck

    monkeypatch.setattr(Checkpoints, "make", spying)
    flow = write_flow(tmp_path, """
        source edges = values (src: long, dst: long) [(1, 2), (2, 3), (3, 4), (2, 5)]
        out = loop l(x = edges | where(src == 1) | select(v = src)) with (e = edges) {
            nxt = x | join(e, on x.v == e.src) | select(v = e.dst) | group(by v)
            feedback x <- nxt
            emit x
        }
        sink out -> csv("out/o", header = true)
    """)
    before = spark.conf.get(key, "false")
    run_file(flow, spark=spark)
    assert spark.conf.get(key, "false") == before == "false"
    assert seen and {value for value, _, _ in seen} == {"true"}
    assert all("MapPartitionsWithEvaluatorRDD" in lineage for _, lineage, _ in seen)
    # the control: the same round's query, run with the session's setting, builds its stages from closures
    control = seen[-1][2].select("*")._jdf.queryExecution().executedPlan().execute().toDebugString()
    assert "MapPartitionsWithEvaluatorRDD" not in control and "MapPartitionsRDD" in control
    assert Counter(read_output(str(tmp_path / "out/o"), (int,))) == Counter((v,) for v in (1, 2, 3, 4, 5))


def test_a_stage_compiled_in_one_round_is_not_compiled_again_where_another_plan_numbers_it_otherwise(spark):
    # Spark keeps the classes it compiles by their source, which by default names the class after the stage's
    # number in its plan; a round's plans change shape, and so do their stages' numbers. Loops name the classes
    # without it (`LOOP_CONF`): a stage compiled as the first of one plan is not compiled again as the third of
    # the next (while Spark keeps it: scopeflow's session keeps 1,000 classes, `session.local_defaults`). The
    # control, with the number, compiles it again.
    import random

    from pyspark.sql import functions as F

    from scopeflow.runtime.context import CODEGEN_ID_IN_CLASS_NAME, LOOP_CONF, settings
    from scopeflow.runtime.deployment import CODEGEN_CACHE_ENTRIES

    assert not spark.streams.active  # (nothing else compiles in this JVM meanwhile)
    codegen = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def compiles(df) -> int:
        before = codegen.getCount()
        df.collect()
        return codegen.getCount() - before

    def renumbered(tag: int) -> int:
        """The classes compiled for `y join x` after `x` and `y` ran alone, each the first stage of its plan; `tag`
        makes their code new to the session."""
        scan = spark.range(60).localCheckpoint()
        x = scan.select((F.col("id") % tag).alias("k"), (F.col("id") * tag + 1).alias("v")).where(F.col("v") % 7 == 3)
        y = scan.select((F.col("id") % (tag + 1)).alias("k"), (F.col("id") * (tag + 2)).alias("w"))
        assert compiles(x) > 0 and compiles(y) > 0
        return compiles(y.join(x, "k"))  # (x's stage is numbered 3 there: y's scan and sort come first)

    tag = random.randrange(1_000, 100_000)
    with settings(spark, LOOP_CONF):
        renumbered(tag)  # (the join's own stages, compiled once)
        assert renumbered(tag + 3) == 0
    with settings(spark, {**LOOP_CONF, CODEGEN_ID_IN_CLASS_NAME: "true"}):
        renumbered(tag + 6)
        assert renumbered(tag + 9) > 0
    # the session's size of Spark's cache of classes (static: set as the session starts)
    assert spark.sparkContext.getConf().get(CODEGEN_CACHE_ENTRIES) == "1000"


def test_a_spark_connect_session_gets_the_runtime_sql_defaults_and_not_the_static_ones():
    # a Connect server refuses a static setting (with a warning on the client): the cache size is the server's
    from scopeflow.runtime.deployment import CODEGEN_CACHE_ENTRIES, STATIC_SQL_DEFAULTS, connect_defaults
    from scopeflow.runtime.session import local_defaults

    assert CODEGEN_CACHE_ENTRIES in STATIC_SQL_DEFAULTS and CODEGEN_CACHE_ENTRIES in local_defaults()
    sent = connect_defaults(local_defaults(), {"spark.sql.shuffle.partitions": "3"})
    assert sent["spark.sql.shuffle.partitions"] == "3" and sent["spark.sql.session.timeZone"] == "UTC"
    assert not STATIC_SQL_DEFAULTS & set(sent)


@pytest.mark.parametrize("above, ahead", [(0, True), (20, True), (20, False)])
def test_feedback_is_combined_by_its_only_reader(spark, example_copy, many_partitions, combine_above, stored_feedback,
                                                 above, ahead):
    # `labels` is read only by `reduce best`: the records fed back are aggregated by id in the round that
    # feeds them back, so the next round stores one record per vertex, partitioned like the state, and
    # folds it without a shuffle of either. That happens in the first round and after rounds that fed back
    # at least `spark.scopeflow.combineAbove` records; a round planned during the previous round's job goes by
    # the round before that (and the second round, planned before any count, combines). Attempts and the
    # report count every record fed back.
    slots, partitions = many_partitions
    combine_above(above)
    flow = example_copy("connected_components.flow")
    spark.conf.set("spark.scopeflow.planAhead", str(ahead).lower())
    try:
        job = run_file(flow, spark=spark)
    finally:
        spark.conf.unset("spark.scopeflow.planAhead")
    lag = 2 if ahead else 1
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "graph.csv"), (int, int))
    both = edges + [(d, s) for s, d in edges]
    state, x, expected = {}, sorted({(s, s) for s, _ in both}), []
    while True:  # the loop in plain Python: records fed back, and those stored (combined or not), per round
        delta = {}
        for k, v in x:
            delta[k] = min(v, delta.get(k, v))
        changed = {k: v for k, v in delta.items() if k not in state or v < state[k]}
        state.update(changed)
        combined = len(expected) < lag or expected[-lag]["in_flight"] >= above
        x = [(d, changed[s]) for s, d in both if s in changed]
        expected.append({"in_flight": len(x), "stored": len({k for k, _ in x}) if combined else len(x),
                         "combined": combined})
        if not x:
            break
    rounds = loop_rounds(job, "cc")
    assert [r["planned_ahead"] for r in rounds] == [False] + [ahead] * (len(rounds) - 1)
    assert [{"in_flight": r["in_flight"]["labels"], "stored": r["stored"]["labels"],
             "combined": e["combined"]} for r, e in zip(rounds, expected)] == expected
    assert sum(e["stored"] for e in expected) < sum(e["in_flight"] for e in expected) / (1.5 if above == 0 else 1.2)
    attempts = [a for a in job.report["attempts"] if a["scope"] == "cc"]
    assert [a["in_flight"]["labels"] for a in attempts] == [e["in_flight"] for e in expected]
    node = {f"{o.kind} {o.name}" if o.name else o.kind: op for op, o in job.operators.items()}
    assert [r["counts"][node["var labels"]] for r in rounds[1:]] == [e["in_flight"] for e in expected[:-1]]
    for r, e in zip(rounds[1:], expected[1:]):
        # combined: the state and the feedback, both keyed by id; else the feedback narrowed to the task slots
        want = 2 * partitions if e["combined"] else partitions + slots
        assert round_result_tasks(spark, job, "cc", r["round"]) == want
    if above:
        assert not all(e["combined"] for e in expected[:-1]), "the graph should test both cases"
    got = read_output(os.path.join(os.path.dirname(flow), "out/components"), (int, int))
    assert len(got) == len(dict(got)) and dict(got) == reference.connected_components(edges) == state


def _run_with_deferral(spark, flow: str, on: bool):
    spark.conf.set("spark.scopeflow.deferFeedback", str(on).lower())
    try:
        return run_file(flow, spark=spark)
    finally:
        spark.conf.unset("spark.scopeflow.deferFeedback")


def test_deferred_feedback_is_counted_by_the_next_round(spark, example_copy):
    # connected components' feedback (`labels <- relax`) is computed from `reduce best`'s output and the import
    # alone: after its first round a round stores nothing for it, and the next round's job computes it where it
    # reads it (one Spark job a round all the same). The report still gives every round's records in flight and
    # every operator's records, exactly: completed once the next round's job has counted them.
    flow = example_copy("connected_components.flow")
    job = _run_with_deferral(spark, flow, True)
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "graph.csv"), (int, int))
    both = edges + [(d, s) for s, d in edges]
    state, x, fed = {}, sorted({(s, s) for s, _ in both}), []
    while True:  # the loop in plain Python: records fed back per round
        delta = {}
        for k, v in x:
            delta[k] = min(v, delta.get(k, v))
        changed = {k: v for k, v in delta.items() if k not in state or v < state[k]}
        state.update(changed)
        x = [(d, changed[s]) for s, d in both if s in changed]
        fed.append(len(x))
        if not x:
            break
    rounds = loop_rounds(job, "cc")
    assert len(rounds) == len(fed) >= 4
    assert [r.get("deferred") for r in rounds] == [None] + [["labels"]] * (len(rounds) - 1)
    assert [r["in_flight"]["labels"] for r in rounds] == fed
    assert [r["stored"]["labels"] for r in rounds[1:]] == [0] * (len(rounds) - 1) and rounds[0]["stored"]["labels"]
    assert [a["in_flight"]["labels"] for a in job.report["attempts"] if a["scope"] == "cc"] == fed
    node = {f"{o.kind} {o.name}" if o.name else o.kind: op for op, o in job.operators.items()}
    assert [r["counts"][node["var labels"]] for r in rounds[1:]] == fed[:-1]
    assert [r["counts"][node["select spread"]] for r in rounds] == fed
    assert all(r["spark_jobs"] == 1 for r in rounds)
    got = read_output(os.path.join(os.path.dirname(flow), "out/components"), (int, int))
    assert len(got) == len(dict(got)) and dict(got) == reference.connected_components(edges) == state
    stored = _run_with_deferral(spark, flow, False)  # every round stores its feedback: the same records, counted
    assert [r["in_flight"] for r in loop_rounds(stored, "cc")] == [r["in_flight"] for r in rounds]
    assert not any(r.get("deferred") for r in loop_rounds(stored, "cc"))
    assert {op: e["records"] for op, e in stored.report["operators"].items()} == \
        {op: e["records"] for op, e in job.report["operators"].items()}
    assert read_output(os.path.join(os.path.dirname(flow), "out/components"), (int, int)) == got


PATH_SSSP = """
    source edges = read csv("edges.csv", header = true) schema (src: long, dst: long, w: double)
    source seed = values (id: long, dist: double) [(1, 0.0)]
    out = loop sp(d = seed) with (e = edges) {options} {{
        best  = d | reduce(by id, dist = min(dist))
        relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist + e.w)
        feedback d <- relax
        emit best as changes
        emit state best as final
    }}
    sink out.final -> csv("out/final", header = true)
    sink out.changes -> csv("out/changes", header = true)
"""


def test_a_loop_whose_state_counts_what_an_extra_round_receives_is_not_deferred(spark, tmp_path):
    # `ticks` counts the loop's rounds and `n` the import's records once per round: both receive records in a round
    # whose variable is empty, so a round the loop would not run would change them. The loop stores its feedback,
    # and its outputs are those of the loop run by hand: reach 2 and 3 from 1 in rounds 1 and 2, nothing in round 3.
    flow = write_flow(tmp_path, """
        source edges = values (src: long, dst: long) [(1, 2), (2, 3)]
        start = edges | where(src == 1) | select(id = src)
        out = loop reach(d = start) with (e = edges) {
            seen  = d | distinct
            next  = seen | join(e, on seen.id == e.src) | select(id = e.dst)
            ticks = seen | group(n = count()) | select(k = 1) | reduce(by k, rounds = count())
            n     = e | reduce(by src, n = count())
            feedback d <- next
            emit state seen as seen
            emit state ticks as ticks
            emit state n as n
        }
        sink out.seen -> csv("out/seen", header = true)
        sink out.ticks -> csv("out/ticks", header = true)
        sink out.n -> csv("out/n", header = true)
    """)
    for on in (True, False):
        job = _run_with_deferral(spark, flow, on)
        assert not any(r.get("deferred") for r in loop_rounds(job, "reach"))
        assert sorted(read_output(str(tmp_path / "out/seen"), (int,))) == [(1,), (2,), (3,)]
        assert read_output(str(tmp_path / "out/ticks"), (int, int)) == [(1, 3)]
        assert sorted(read_output(str(tmp_path / "out/n"), (int, int))) == [(1, 3), (2, 3)]


def test_a_state_reading_a_deferred_feedback_rewrites_itself(spark, tmp_path):
    # a fold into the overlay reads the round's records twice (runtime/state.py): a loop whose state may fold into
    # its overlay stores its feedback, and a state that grew that large in the round that deferred reads the plan
    # and rewrites itself, so the plan is computed once. With overlays from 3 keys on, the path's `best` folds into
    # its overlay from round 3 on (after round 2: 3 keys), never in a round after a deferred one; the records are
    # the same either way
    (tmp_path / "edges.csv").write_text("src,dst,w\n" + "".join(f"{v},{v + 1},1.0\n" for v in range(1, 9)))
    flow = write_flow(tmp_path, PATH_SSSP.format(options=""))
    settings = {"spark.scopeflow.stateOverlay": "1", "spark.scopeflow.stateOverlayMinKeys": "3",
                "spark.scopeflow.planAhead": "false"}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        stored, deferred = (loop_rounds(_run_with_deferral(spark, flow, on), "sp") for on in (False, True))
    finally:
        for key in settings:
            spark.conf.unset(key)
    assert "overlay" in [how for r in stored for how in r.get("states", {}).values()]
    assert any(r.get("deferred") for r in deferred)
    assert [r["round"] for r in deferred if r.get("deferred")] == [1, 2]  # (after round 2 `best` may overlay)
    assert [r.get("states") for r in deferred][3] == {next(iter(deferred[3]["states"])): "rewrite"}  # reads round 2's
    for before, r in zip(deferred, deferred[1:]):
        assert not (before.get("deferred") and "overlay" in r.get("states", {}).values()), (before, r)
    assert "overlay" in [how for r in deferred for how in r.get("states", {}).values()]
    assert [r["in_flight"] for r in deferred][:len(stored)] == [r["in_flight"] for r in stored]
    assert sorted(read_output(str(tmp_path / "out/final"), (int, float))) == [(v, float(v - 1)) for v in range(1, 10)]


@pytest.mark.parametrize("options", ["", "max 7", "max 6", "max 5", "rounds 4"])
def test_deferred_feedback_runs_a_round_that_changes_nothing(spark, tmp_path, options):
    # On the path 1 -> 2 -> ... -> 6 round r reaches vertex r + 1, and round 5's relax is empty (vertex 6 has no
    # arc out). A round that deferred its feedback knows only that its `reduce` changed a key: it runs round 6,
    # which receives nothing and changes nothing, and every output is what the loop gives without it. Where
    # the loop may end by count after a round (`max`, `rounds`), that round stores its feedback and counts it:
    # `max 6` ends as without deferral, `max 5` fails as without it.
    from scopeflow.runtime.termination import LoopMaxError

    (tmp_path / "edges.csv").write_text("src,dst,w\n" + "".join(f"{v},{v + 1},1.0\n" for v in range(1, 6)))
    flow = write_flow(tmp_path, PATH_SSSP.format(options=options))
    runs = {}
    for on in (False, True):
        if options == "max 5":
            with pytest.raises(LoopMaxError) as info:
                _run_with_deferral(spark, flow, on)
            assert info.value.attempt.round == 4 and info.value.attempt.in_flight == {"d": 1}
            continue
        job = _run_with_deferral(spark, flow, on)
        rounds = loop_rounds(job, "sp")
        outputs = {name: sorted(read_output(str(tmp_path / "out" / name), (int, float))) for name in ("final", "changes")}
        runs[on] = (rounds, outputs)
    if options == "max 5":
        return
    (stored, out_stored), (deferred, out_deferred) = runs[False], runs[True]
    last = 3 if options == "rounds 4" else 5
    want = [(v, float(v - 1)) for v in range(1, last + 2)]
    assert out_stored == out_deferred == {"final": want, "changes": want}
    assert [r["in_flight"]["d"] for r in stored] == [1] * last + [0 if last == 5 else 1]
    extra = options in ("", "max 7")
    assert len(deferred) == len(stored) + extra
    assert [r["in_flight"]["d"] for r in deferred] == [r["in_flight"]["d"] for r in stored] + [0] * extra
    limit = {"": 1000, "max 7": 7, "max 6": 6, "rounds 4": 4}[options]
    assert [bool(r.get("deferred")) for r in deferred] == [0 < r["round"] < limit - 1 for r in deferred]
    if extra:
        assert deferred[-1]["counts"] and not any(deferred[-1]["counts"].values())


def test_bad_combine_threshold_is_a_clear_runtime_failure(spark, example_copy, combine_above, monkeypatch):
    from scopeflow.runtime import loop
    from scopeflow.runtime.errors import RuntimeFailure

    flow = example_copy("connected_components.flow")
    combine_above("lots")
    rounds = []
    monkeypatch.setattr(loop, "Round", lambda *a, **k: rounds.append(a) or pytest.fail("a round started"))
    with pytest.raises(RuntimeFailure) as info:
        run_file(flow, spark=spark)
    assert rounds == [], "fails before the loop's first round"
    assert "spark.scopeflow.combineAbove=lots" in str(info.value) and "number of records" in str(info.value)
    assert info.value.code == "E0120"
    assert not os.path.exists(os.path.join(os.path.dirname(flow), "out/components"))


def test_feedback_is_deduplicated_when_a_distinct_reads_it(spark, example_copy, stored_feedback):
    flow = example_copy("transitive_closure.flow")
    job = run_file(flow, spark=spark)
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "edges.csv"), (int, int))
    seen, p, expected = set(), list(edges), []
    while True:
        fresh = set(p) - seen
        seen |= fresh
        p = [(s, t) for s, m in fresh for mid, t in edges if mid == m]
        expected.append({"in_flight": len(p), "stored": len(set(p))})
        if not p:
            break
    rounds = loop_rounds(job, "tc")
    assert [{"in_flight": r["in_flight"]["p"], "stored": r["stored"]["p"]} for r in rounds] == expected
    assert any(e["stored"] < e["in_flight"] for e in expected)
    got = read_output(os.path.join(os.path.dirname(flow), "out/closure"), (int, int))
    assert Counter(got) == Counter(reference.transitive_closure(edges)) and set(got) == seen


def countdown_flow(tmp_path, seed: list, max_rounds: int) -> str:
    """A loop whose reduce keeps each key's minimum and feeds back minimum - 1 while it is positive."""
    rows = ", ".join(f"({k}, {v})" for k, v in seed)
    return write_flow(tmp_path, f"""
        source seed = values (k: long, v: long) [{rows}]
        out = loop l(x = seed) max {max_rounds} {{
            best = x | reduce(by k, v = min(v))
            again = best | select(k, v = v - 1) | where(v > 0)
            feedback x <- again
            emit state best
        }}
        sink out -> csv("out/o", header = true)
    """)


def test_fed_back_state_keeps_its_partitioning(spark, tmp_path, many_partitions, stored_feedback):
    # a reduce's output is hash-partitioned by its keys, which the next round's fold uses: not narrowed
    slots, partitions = many_partitions
    flow = countdown_flow(tmp_path, [(1, 5), (2, 7), (3, 9), (1, 4)], max_rounds=10)
    job = run_file(flow, spark=spark)
    rounds = loop_rounds(job, "l")
    assert len(rounds) > 2
    for r in rounds[1:]:
        assert round_result_tasks(spark, job, "l", r["round"]) == 2 * partitions
    assert sorted(read_output(str(tmp_path / "out/o"), (int, int))) == [(1, 1), (2, 1), (3, 1)]


@pytest.mark.parametrize("defer", [True, False])
def test_round_counts_are_exact(spark, tmp_path, defer):
    # records received, output by the reduce and in flight per round, against a plain-Python run of the loop
    flow = countdown_flow(tmp_path, [(1, 5), (2, 7), (3, 9), (1, 4), (4, 1)], max_rounds=20)
    job = _run_with_deferral(spark, flow, defer)
    state, x, expected = {}, [(1, 5), (2, 7), (3, 9), (1, 4), (4, 1)], []
    while True:
        delta = {}
        for k, v in x:
            delta[k] = min(v, delta.get(k, v))
        changed = {k: v for k, v in delta.items() if k not in state or v < state[k]}
        state.update(changed)
        again = [(k, v - 1) for k, v in changed.items() if v - 1 > 0]
        expected.append({"received": len(x), "best": len(changed), "select": len(changed), "where": len(again),
                         "in_flight": len(again)})
        x = again
        if not again:
            break
    if defer and changed:  # the last round changed keys and fed nothing back: deferred, it runs one more round
        expected.append({"received": 0, "best": 0, "select": 0, "where": 0, "in_flight": 0})
    node = {f"{o.kind} {o.name}" if o.name else o.kind: op for op, o in job.operators.items()}  # "var x" -> n00k
    # the select reuses the reduce's counter and the fed-back stream the where's (same records)
    got = [{"received": r["counts"][node["var x"]], "best": r["counts"][node["reduce best"]],
            "select": r["counts"][node["select"]], "where": r["counts"][node["where again"]],
            "in_flight": r["in_flight"]["x"]} for r in loop_rounds(job, "l")]
    assert got == expected
    assert sorted(read_output(str(tmp_path / "out/o"), (int, int))) == sorted(state.items())


@pytest.mark.soak
def test_600_rounds_without_plan_growth(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source seed = values (n: long) [(0)]
        counted = loop count(c = seed) rounds 600 {
            next = c | select(n = n + 1)
            feedback c <- next
            emit last next
        }
        sink counted -> csv("out/counted", header = true)
    """)
    job = run_file(flow, spark=spark, diagnostics=True)
    rounds = loop_rounds(job, "count")
    assert len(rounds) == 600
    assert read_output(str(tmp_path / "out/counted"), (int,)) == [(600,)]
    sizes = {r["plan_size"] for r in rounds[1:]}
    assert len(sizes) == 1, f"plan grows with the round count: {sorted(sizes)[:3]}...{sorted(sizes)[-3:]}"
    first = sum(r["seconds"] for r in rounds[1:101]) / 100
    last = sum(r["seconds"] for r in rounds[-100:]) / 100
    print(f"\nmean round time: rounds 1-100 {first * 1000:.1f} ms, rounds 500-599 {last * 1000:.1f} ms")


# ---- termination --------------------------------------------------------------------------


def test_attempts_record_flip15_types_and_decision(spark, example_copy):
    job = run_file(example_copy("connected_components.flow"), spark=spark)
    attempts = [a for a in job.report["attempts"] if a["scope"] == "cc"]
    ids = [a["id"] for a in attempts]
    assert ids == sorted(set(ids)), "attempt ids are fresh and increasing"
    assert [a["decision"] for a in attempts[:-1]] == ["continue"] * (len(attempts) - 1)
    last = attempts[-1]
    assert last["decision"] == "no-feedback" and last["in_flight"] == {"labels": 0}
    ops = last["operators"]
    types = {o["name"]: o["type"] for o in ops.values()}
    assert types["labels"] == 1 and types["spread"] == 2 and types["best"] == 3
    # every BUSY operator of a continuing round produced records; IDLE ones none
    for a in attempts:
        for o in a["operators"].values():
            assert (o["status"] == "BUSY") == (o["records"] > 0)
    assert all(a["in_flight"]["labels"] > 0 for a in attempts[:-1])


def test_until_empty_stops_after_the_empty_round(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source xs = values (n: long) [(1), (2), (3), (4), (5)]
        rest = loop shrink(s = xs) until empty(small) {
            small = s | where(n <= 2)
            kept  = s | select(n = n - 2) | where(n > 0)
            feedback s <- kept
            emit last kept
        }
        sink rest -> csv("out/rest", header = true)
    """)
    job = run_file(flow, spark=spark)
    # round 0: {1..5}, small={1,2}; round 1: {1,2,3}, small={1,2}; round 2: {1}, small={1};
    # round 3 never happens because kept of round 2 is empty -> no feedback
    rounds = loop_rounds(job, "shrink")
    assert job.report["attempts"][-1]["decision"] in ("until-empty", "no-feedback")
    assert len(rounds) == 3


def test_until_empty_fires_before_feedback_runs_dry(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source xs = values (n: long) [(10)]
        out = loop walk(s = xs) until empty(big) max 50 {
            big  = s | where(n > 3)
            next = s | select(n = n - 1)
            feedback s <- next
            emit next
        }
        sink out -> csv("out/walk", header = true)
    """)
    job = run_file(flow, spark=spark)
    got = sorted(v for (v,) in read_output(str(tmp_path / "out/walk"), (int,)))
    # rounds hold 10, 9, ..., 3; `big` is empty in the round holding 3, which still emits 2
    assert got == list(range(2, 10))
    assert job.report["attempts"][-1]["decision"] == "until-empty"


def test_until_stream_read_by_one_operator(spark, tmp_path):
    """The `until` stream is what the round returns: it ends its chain even when a single operator reads it
    (fused into that operator's chain, it was never bound in the round function)."""
    flow = write_flow(tmp_path, """
        source s = values (x: long) [(3), (5), (1), (9)]
        r = loop l(v = s) until empty(nxt) {
            nxt = v | where(x > 1) | select(x = x - 1)
            out = nxt | where(x % 3 != 0)
            feedback v <- out
            emit out
        }
        sink r -> csv("out/r", header = true)
    """)
    job = run_file(flow, spark=spark)
    v, want = [3, 5, 1, 9], []
    while True:  # the same rounds in plain Python
        nxt = [x - 1 for x in v if x > 1]
        out = [x for x in nxt if x % 3 != 0]
        want += out
        if not out or not nxt:
            break
        v = out
    assert Counter(read_output(str(tmp_path / "out" / "r"), (int,))) == Counter((x,) for x in want)
    assert len(loop_rounds(job, "l")) > 2


def test_max_fail_exit_code_3_prints_last_attempt(tmp_path, run_cli):
    flow = write_flow(tmp_path, """
        source seed = values (n: long) [(0)]
        forever = loop spin(c = seed) max 5 {
            next = c | select(n = n + 1)
            feedback c <- next
            emit next
        }
        sink forever -> csv("out/f", header = true)
    """)
    proc = run_cli("run", flow, "--quiet")
    assert proc.returncode == 3, proc.stderr
    err = proc.stderr
    assert "did not terminate within max 5 rounds" in err
    assert "round 4" in err and "c = 1" in err
    assert "BUSY operators: " in err and "next (1 records)" in err
    assert not os.path.exists(tmp_path / "out/f"), "a failed run writes no output"


def test_on_max_stop_accepts_the_result(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source seed = values (n: long) [(0)]
        capped = loop spin(c = seed) max 5 on max stop {
            next = c | select(n = n + 1)
            feedback c <- next
            emit last next
        }
        sink capped -> csv("out/c", header = true)
    """)
    job = run_file(flow, spark=spark)
    assert read_output(str(tmp_path / "out/c"), (int,)) == [(5,)]
    assert job.report["attempts"][-1]["decision"] == "max-stop"


# ---- loop semantics ---------------------------------------------------------------------


def test_emit_all_last_and_state_and_reduce_emits_only_changed_keys(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source xs = values (k: long, v: long) [(1, 5), (2, 7)]
        out = loop acc(s = xs) rounds 3 {
            total = s | reduce(by k, t = sum(v))
            again = s | where(k == 1)
            feedback s <- again
            emit total as changes
            emit last total as final_changes
            emit state total as state
        }
        sink out.changes -> csv("out/changes", header = true)
        sink out.final_changes -> csv("out/final", header = true)
        sink out.state -> csv("out/state", header = true)
    """)
    run_file(flow, spark=spark)
    changes = Counter(read_output(str(tmp_path / "out/changes"), (int, int)))
    # round 0: k1=5, k2=7 are new; rounds 1, 2: only k=1 is fed back and changes (10, 15); k2 unchanged
    assert changes == Counter({(1, 5): 1, (2, 7): 1, (1, 10): 1, (1, 15): 1})
    assert read_output(str(tmp_path / "out/final"), (int, int)) == [(1, 15)]
    assert sorted(read_output(str(tmp_path / "out/state"), (int, int))) == [(1, 15), (2, 7)]


def test_an_emitted_output_its_rounds_counted_empty_is_one_spark_knows_is_empty(spark, tmp_path, monkeypatch):
    # the loop ends by itself: its last round's `next` is empty, counted by that round's job; given as a frame Spark
    # knows is empty, what reads it is planned as reading nothing (the join below reads only `edges`). Outputs with
    # records stay as they were, also an `emit` of every round of the stream whose last round is empty.
    from scopeflow.runtime import loop

    given = []
    outputs = loop.LoopExecutor.outputs

    def spying(self):
        out = outputs(self)
        given.append(out)
        return out

    monkeypatch.setattr(loop.LoopExecutor, "outputs", spying)
    flow = write_flow(tmp_path, """
        source edges = values (src: long, dst: long) [(1, 2), (2, 3), (3, 4), (5, 6)]
        out = loop l(x = edges | where(src == 1) | select(v = src)) with (e = edges) {
            next = x | join(e, on x.v == e.src) | select(v = e.dst)
            feedback x <- next
            emit last next as final
            emit next as every
            emit x as seen
        }
        last = out.final
        sink edges | join(last, on edges.src == last.v, kind = left) | select(src, dst, v = last.v)
            -> csv("out/o", header = true)
        sink out.seen -> csv("out/seen", header = true)
        sink out.every -> csv("out/every", header = true)
    """)
    run_file(flow, spark=spark)
    (out,) = given
    plans = {name: df._jdf.queryExecution().optimizedPlan() for name, df in out.items()}
    assert plans["final"].getClass().getSimpleName() == "LocalRelation" and plans["final"].data().isEmpty()
    assert plans["seen"].getClass().getSimpleName() != "LocalRelation"
    assert plans["every"].getClass().getSimpleName() != "LocalRelation"  # (the stream `final` is the last of)
    assert out["final"].schema.simpleString() == "struct<v:bigint>"
    assert sorted(read_output(str(tmp_path / "out/o"), (int, int, str))) == [
        (1, 2, ""), (2, 3, ""), (3, 4, ""), (5, 6, "")]
    assert sorted(read_output(str(tmp_path / "out/seen"), (int,))) == [(1,), (2,), (3,), (4,)]
    assert sorted(read_output(str(tmp_path / "out/every"), (int,))) == [(2,), (3,), (4,)]


def test_coloop_variable_declared_with_schema_starts_empty(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source xs = values (n: long) [(1), (2)]
        out = coloop pingpong(a = xs, b: (m: long, tag: string)) rounds 4 {
            to_b = a | select(m = n * 10, tag = "a")
            to_a = b | select(n = m + 1)
            feedback b <- to_b
            feedback a <- to_a
            emit b as seen_by_b
        }
        sink out.seen_by_b -> csv("out/b", header = true)
    """)
    run_file(flow, spark=spark)
    got = Counter(read_output(str(tmp_path / "out/b"), (int, str)))
    # round 0: b empty; round 1: b = {10, 20}; round 2: a = {11, 21}, b empty; round 3: b = {110, 210}
    assert got == Counter({(10, "a"): 1, (20, "a"): 1, (110, "a"): 1, (210, "a"): 1})


def test_nested_loop_state_is_fresh_per_activation(spark, tmp_path):
    flow = write_flow(tmp_path, """
        source seeds = values (v: long) [(1), (2)]
        source edges = values (src: long, dst: long) [(1, 2), (2, 3), (3, 1)]
        out = loop outer(o = seeds) with (e = edges) rounds 3 {
            reached = loop inner(r = o) with (e2 = e) {
                next = r | join(e2, on r.v == e2.src) | select(v = e2.dst) | union(r) | distinct
                feedback r <- next
                emit next
            }
            feedback o <- o
            emit reached
        }
        sink out -> csv("out/nested", header = true)
    """)
    job = run_file(flow, spark=spark)
    got = Counter(v for (v,) in read_output(str(tmp_path / "out/nested"), (int,)))
    # each of the 3 inner activations starts with empty `distinct` state and emits {1, 2, 3} once
    assert got == Counter({1: 3, 2: 3, 3: 3})
    assert job.report["loops"]["outer.inner"]["activations"] == 3


def test_config_values_json_and_parquet(spark, tmp_path):
    flow = write_flow(tmp_path, """
        pipeline formats
        config "spark.sql.shuffle.partitions" = "3"
        source xs = values (id: long, name: string) [(1, "a"), (2, "b"), (3, null)]
        sink xs | where(name is not null) -> json("out/j")
        sink xs | derive(len = length(coalesce(name, ""))) -> parquet("out/p")
    """)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert before != "3"
    run_file(flow, spark=spark)
    assert spark.conf.get("spark.sql.shuffle.partitions") == before  # `config` was for that run only
    rows = []
    for part in glob.glob(str(tmp_path / "out/j/part-*.json")):
        rows += [json.loads(line) for line in open(part)]
    assert sorted((r["id"], r["name"]) for r in rows) == [(1, "a"), (2, "b")]
    back = write_flow(tmp_path, """
        source p = read parquet("out/p")
        sink p | where(len > 0) | select(id) -> csv("out/back", header = true)
    """, "back.flow")
    run_file(back, spark=spark)
    assert sorted(read_output(str(tmp_path / "out/back"), (int,))) == [(1,), (2,)]


# ---- CLI, exit codes, outputs ----------------------------------------------------------------


def test_run_cli_progress_trace_and_report(example_copy, run_cli, tmp_path):
    flow = example_copy("connected_components.flow")
    report = tmp_path / "run.json"
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = run_cli("run", flow, "--trace", "--report", str(report), env=dict(os.environ, TMPDIR=str(temp)))
    assert proc.returncode == 0, proc.stderr
    assert not list(temp.glob("scopeflow-jvm-*.log")), "a run that succeeded leaves no JVM log behind"
    assert "attempt #" in proc.stderr and "decision: no-feedback" in proc.stderr
    assert "rounds/activation" in proc.stderr  # the summary table
    assert "out/components" in proc.stderr
    data = json.loads(report.read_text())
    assert data["status"] == "ok"
    assert data["loops"][0]["scope"] == "cc" and data["loops"][0]["activations"] == 1
    first = data["rounds"][0]
    assert first["counts"]["n009"] == 30  # best: every vertex is new in round 0
    assert data["attempts"][-1]["decision"] == "no-feedback"
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data/graph.csv"), (int, int))
    got = dict(read_output(os.path.join(os.path.dirname(flow), "out/components"), (int, int)))
    assert got == reference.connected_components(edges)
    # the run report drives the annotated topology graph
    dot = tmp_path / "cc.dot"
    proc = run_cli("graph", flow, "-o", str(dot), "--stats", str(report))
    assert proc.returncode == 0, proc.stderr
    text = dot.read_text()
    rounds = len(data["rounds"])
    assert f"{rounds} rounds" in text and "1 activation" in text
    best_total = data["operators"]["n009"]["records"]
    assert f"{best_total:,} rec" in text
    # counts beyond the loop, from the same run: pipeline operators (once, not once per round), the sink
    ops = data["operators"]
    assert ops["n002"]["records"] == len(edges) and ops["n002"]["name"] == "select"
    assert ops["n003"]["records"] == 2 * len(edges)  # both directions
    assert ops["n012"]["records"] == len(got) == data["sinks"][0]["records"]
    assert re.search(rf'n002 -> n003 \[label="{len(edges)} rec"', text)
    assert re.search(rf'n012 -> sink1 \[[^]]*label="{len(got)} rec"', text)
    assert re.search(rf'n009 -> n012 \[[^]]*label="emit state\\n{len(got)} rec"', text)
    # Spark task time of the loop's operators, from the SQL metrics of the rounds' plans; the reduce
    # owns its state fold (an aggregation over a shuffle), more than a scan of its checkpoint
    for op in ("n009", "n010", "n011"):
        assert ops[op]["seconds"] > 0, op
        assert f"time: {seconds_text(ops[op]['seconds'])}" in text
    assert ops["n009"]["seconds"] > ops["n011"]["seconds"]  # the fold vs a projection


def test_a_shared_streams_counter_adds_up_partitions_computed_by_different_stages(spark, tmp_path, monkeypatch):
    """A shared (cached) pipeline stream read by two stages that run at once has some of its partitions computed
    by each (a loop's entry and its import, in one round job). Its counter in the report still counts every
    record: Spark 4.3's counters keep one stage's tasks unless told otherwise, and a cached plan keeps the
    settings it was cached with. The interleaving is forced here: right after `both` is shared, a job computes
    its second partition alone (the other stage's task, in a real run)."""
    import shutil

    from scopeflow.runtime.context import RunContext

    share = RunContext.share

    def share_then_compute_one_partition(self, df, op, **kw):
        df = share(self, df, op, **kw)
        if op == "n003":  # (union both: the input's rows, then their reversal, a partition each)
            rdd = df.select("src").rdd
            assert rdd.getNumPartitions() == 2
            assert spark.sparkContext.runJob(rdd, lambda rows: [sum(1 for _ in rows)], [1]) == [len(edges)]
        return df

    monkeypatch.setattr(RunContext, "share", share_then_compute_one_partition)
    edges = [(1, 2), (2, 3), (4, 5), (6, 6), (7, 8)]
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), tmp_path)
    write_csv(tmp_path / "data" / "graph.csv", ["src", "dst"], edges)
    run_file(str(tmp_path / "connected_components.flow"), spark=spark, report=str(tmp_path / "run.json"))
    ops = json.loads((tmp_path / "run.json").read_text())["operators"]
    assert ops["n002"]["records"] == len(edges)
    assert ops["n003"]["records"] == 2 * len(edges)  # (one partition's, 5, before)
    got = dict(read_output(str(tmp_path / "out" / "components"), (int, int)))
    assert got == reference.connected_components(edges)


def test_a_counter_under_a_sort_counts_its_stream_once(spark, session_at, tmp_path):
    """A `sort` samples its input in a job of its own, then computes it again: the counters below it count the
    records once, as Spark's default keeps one stage's tasks (summing every task counted 1978 of 989), also in a
    shared stream's cached plan (runtime `RunContext.share`)."""
    if tuple(int(v) for v in spark.version.split(".")[:2]) < (4, 3):
        pytest.skip("before Spark 4.3 a counter sums every task: the records below a sort are counted twice")
    session_at(**{"spark.sql.shuffle.partitions": 2})  # (one partition: a sort samples nothing)
    rows = [((i * 7919) % 1000, i) for i in range(1000)]
    write_csv(tmp_path / "data" / "x.csv", ["a", "b"], rows)
    (tmp_path / "s.flow").write_text(textwrap.dedent("""\
        pipeline sorted
        source x = read csv("data/x.csv", header = true) schema (a: long, b: long)
        y = x | where(a > 10) | select(a, c = b + 1) | sort(by a)
        sink y -> csv("out/y", header = true)
        sink y -> csv("out/y2", header = true)
        z = x | where(a < 500) | sort(by b desc)
        sink z -> csv("out/z", header = true)
    """))
    run_file(str(tmp_path / "s.flow"), spark=spark, report=str(tmp_path / "run.json"))
    doc = json.loads((tmp_path / "run.json").read_text())
    y = sorted((a, b + 1) for a, b in rows if a > 10)
    z = sorted((a, b) for a, b in rows if a < 500)
    for out, want in (("y", y), ("y2", y), ("z", z)):
        assert sorted(read_output(str(tmp_path / "out" / out), (int, int))) == want
    counted = sorted((e["name"], e["records"]) for e in doc["operators"].values())
    assert counted == sorted([("where", len(y)), ("select", len(y)), ("sort y", len(y)),
                              ("where", len(z)), ("sort z", len(z))]), doc["operators"]
    assert sorted(s["records"] for s in doc["sinks"]) == sorted([len(y), len(y), len(z)])


def test_report_written_when_a_rounds_operator_times_cannot_be_read(tmp_path, monkeypatch):
    """--report reads operator times from each round's plans on a thread of its own; a walk that fails (a run
    that stopped Spark) leaves the report written, saying its times are incomplete, with the times it has.
    (The plans here are Python stand-ins, walked from Python: no JVM function.)"""
    from scopeflow.runtime import jvmfunctions
    from scopeflow.runtime.report import RunReport

    monkeypatch.setattr(jvmfunctions, "functions", lambda spark: None)
    report = RunReport("p", "f", {})

    class Broken:  # a frame whose plan cannot be read
        @property
        def _jdf(self):
            raise RuntimeError("the JVM is gone")

    class Plan:  # an executed plan of one node with one timing metric, as py4j shows it
        def __init__(self, ms):
            self.ms = ms

        def nodeName(self):
            return "SortMergeJoin"

        def name(self):
            return "SortMergeJoin"

        def metrics(self):
            metric = type("M", (), {"metricType": lambda _: "timing", "value": lambda _: self.ms})()
            pair = type("KV", (), {"_1": lambda _: "time", "_2": lambda _: metric})()
            return Seq([pair])

        def children(self):
            return Seq([])

    class Seq(list):
        def iterator(self):
            box = type("It", (), {})()
            box.pending = list(self)
            box.hasNext = lambda: bool(box.pending)
            box.next = lambda: box.pending.pop(0)
            return box

    class Frame:
        sparkSession = None

        def __init__(self, ms):
            qe = type("QE", (), {"executedPlan": lambda _: Plan(ms)})()
            self._jdf = type("J", (), {"queryExecution": lambda _: qe})()

    report.time_operators([("n003/state", Frame(5.0))])  # a round whose plans are read
    report.time_operators([("n009/state", Broken())])
    report.time_operators([("n003/state", Frame(2.0))])  # a later round, read after the failed walk
    path = tmp_path / "run.json"
    report.write(str(path), "failed", "boom")
    data = json.loads(path.read_text())
    assert data["status"] == "failed" and data["operator_times"].startswith("incomplete")
    assert data["operators"]["n003"]["seconds"] == 0.007 and "n009" not in data["operators"]
    report.write(str(path), "failed", "boom")  # written again: nothing left to wait for
    assert json.loads(path.read_text())["operators"]["n003"]["seconds"] == 0.007


def test_missing_input_names_the_source_and_line(tmp_path, run_cli):
    """Refused before Spark starts (exit 2, no JVM, so no JVM log), naming the source and its line."""
    flow = write_flow(tmp_path, """
        source edges = read csv("nope/edges.csv", header = true) schema (src: long, dst: long)
        sink edges -> csv("out/x", header = true)
    """)
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = run_cli("run", flow, "--quiet", env=dict(os.environ, TMPDIR=str(temp)))
    assert proc.returncode == 2  # refused before Spark starts: no JVM, so no JVM log either
    assert not list(temp.glob("scopeflow-jvm-*.log")), "no Spark was started"
    assert "error[E0501]: source `edges`: input " in proc.stderr  # (after the check's warning W0001)
    assert f"{flow}:2:1" in proc.stderr and "nope/edges.csv" in proc.stderr
    assert "Traceback" not in proc.stderr and "py4j" not in proc.stderr


def test_jvm_log_is_removed_at_exit_only_when_no_run_failed(tmp_path, monkeypatch):
    from scopeflow.runtime import session

    monkeypatch.setitem(session._jvm_log, "keep", False)
    log = tmp_path / "scopeflow-jvm-1.log"
    log.write_text("spark's own output")
    session._discard_jvm_log(str(log))  # what exit does when every run succeeded
    assert not log.exists()
    log.write_text("spark's own output")
    session.keep_jvm_log()  # a run failed; a later run of the same process succeeds
    session._discard_jvm_log(str(log))
    assert log.read_text() == "spark's own output"


def test_usage_and_compile_errors(tmp_path, example_copy, run_cli):
    flow = example_copy("connected_components.flow")
    proc = run_cli("run", flow, "--param", "edge_path=x")
    assert proc.returncode == 2 and "did you mean `edges_path`" in proc.stderr
    bad = write_flow(tmp_path, "x = nothing | distinct\nsink x -> console()\n", "bad.flow")
    proc = run_cli("run", bad)
    assert proc.returncode == 1 and "E0101" in proc.stderr


def test_missing_java_is_explained(tmp_path, example_copy, run_cli):
    flow = example_copy("connected_components.flow")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.path.dirname(os.path.realpath(os.sys.executable))
    proc = run_cli("run", flow, env=env)
    assert proc.returncode == 4
    assert "Java was not found" in proc.stderr and "openjdk-17" in proc.stderr


def test_failed_run_keeps_previous_output(spark, tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,2\n3,4\n")
    flow = write_flow(tmp_path, """
        source xs = read csv("in.csv", header = true) schema (a: long, b: long)
        sink xs | select(a, s = a + b) -> csv("out/sums", header = true)
    """)
    run_file(flow, spark=spark)
    before = sorted(read_output(str(tmp_path / "out/sums"), (int, int)))
    assert before == [(1, 3), (3, 7)]
    data.write_text("a,b\n1,2\n3,not-a-number\n")
    with pytest.raises(Exception):
        run_file(flow, spark=spark)
    assert sorted(read_output(str(tmp_path / "out/sums"), (int, int))) == before
    assert not [p for p in os.listdir(tmp_path / "out") if "__staging" in p or "__previous" in p]


def test_loop_reduce_and_distinct_treat_null_keys_as_one_key(spark, tmp_path):
    """A null key is a key: it folds into one state row and is output only when it changes."""
    flow = write_flow(tmp_path, """
        source xs = values (k: long, v: long) [(null, 1), (null, 2), (1, 3), (1, 4)]
        out = loop acc(s = xs) rounds 3 {
            total = s | reduce(by k, t = sum(v))
            seen = s | select(k, one = 1) | distinct
            feedback s <- s
            emit total as changes
            emit state total as state
            emit seen as seen
        }
        sink out.changes -> csv("out/changes", header = true)
        sink out.state -> csv("out/state", header = true)
        sink out.seen -> csv("out/seen", header = true)
    """)
    run_file(flow, spark=spark)

    def key(text):  # Spark writes a null as an empty CSV field
        return None if text == "" else int(text)

    def rows(name):
        return read_output(str(tmp_path / "out" / name), (key, int))

    # plain-Python reference: three rounds each feed the same four records back
    state, changes = {}, []
    for _ in range(3):
        delta = {}
        for k, v in [(None, 1), (None, 2), (1, 3), (1, 4)]:
            delta[k] = delta.get(k, 0) + v
        for k, t in delta.items():
            state[k] = state.get(k, 0) + t
            changes.append((k, state[k]))
    assert Counter(rows("changes")) == Counter(changes)
    assert Counter(rows("state")) == Counter(state.items())
    assert Counter(rows("seen")) == Counter({(None, 1): 1, (1, 1): 1})  # each distinct record output once


def test_a_misspelled_setting_in_run_files_conf_is_refused_before_spark_starts(example_copy, monkeypatch):
    from scopeflow.runtime import launcher
    from scopeflow.runtime.errors import RuntimeFailure

    monkeypatch.setattr(launcher, "build_session", lambda *a, **k: pytest.fail("Spark started"))
    with pytest.raises(RuntimeFailure) as info:
        run_file(example_copy("connected_components.flow"), conf={"spark.scopeflow.incremnetal": "off"})
    assert info.value.code == "E0120"
    assert "did you mean spark.scopeflow.incremental?" in str(info.value)


def test_a_bad_scopeflow_entry_of_the_sessions_spark_conf_is_refused_as_the_run_starts(spark, example_copy):
    # (spark-submit --conf, spark-defaults.conf and a builder's config all land in the SparkConf)
    from scopeflow.runtime.errors import RuntimeFailure

    flow = example_copy("connected_components.flow")
    jconf = spark.sparkContext._jsc.sc().conf()
    for key, value, says in [("spark.scopeflow.loopPartiton", "2", "did you mean spark.scopeflow.loopPartitions?"),
                             ("spark.scopeflow.checkpoint", "files", "expected auto, local, replicated or reliable")]:
        jconf.set(key, value)
        try:
            with pytest.raises(RuntimeFailure) as info:
                run_file(flow, spark=spark)
        finally:
            jconf.remove(key)
        assert info.value.code == "E0120" and says in str(info.value), str(info.value)
        assert not os.path.exists(os.path.join(os.path.dirname(flow), "out/components"))


def test_a_flows_config_applies_to_its_run_on_a_callers_session(spark, example_copy, capsys, monkeypatch):
    """`config` reaches a session the caller gave (scopeflow's own keys too, which Spark does not know),
    only for the run: after it the session has its own values again, also when the run failed."""
    from scopeflow.runtime import loop
    from scopeflow.runtime.errors import RuntimeFailure

    flow = example_copy("connected_components.flow")
    text = open(flow).read()
    open(flow, "w").write('config "spark.scopeflow.combineAbove" = "7"\n'
                          'config "spark.sql.warehouse.dir" = "/elsewhere"\n' + text)
    seen = []

    def failing_round(*args, **kwargs):
        seen.append(spark.conf.get("spark.scopeflow.combineAbove", None))
        raise RuntimeFailure("the round failed")

    monkeypatch.setattr(loop, "Round", failing_round)
    with pytest.raises(RuntimeFailure, match="the round failed"):
        run_file(flow, spark=spark)
    assert seen == ["7"]
    assert spark.conf.get("spark.scopeflow.combineAbove", None) is None
    assert "config spark.sql.warehouse.dir is fixed when a Spark session starts" in capsys.readouterr().err
    assert spark.conf.get("spark.sql.warehouse.dir") != "/elsewhere"


def test_source_and_sink_options_given_as_params(spark, tmp_path):
    """`sep = sep` reads the param's value (a param option was once silently dropped)."""
    (tmp_path / "in.csv").write_text("a;b\n1;2\n3;4\n")
    flow = write_flow(tmp_path, """
        param sep: string = ";"
        param out_sep: string = "|"
        source t = read csv("in.csv", header = true, sep = sep) schema (a: long, b: long)
        sink t | select(a, b, c = a + b) -> csv("out/t", header = true, sep = out_sep)
    """)
    run_file(flow, spark=spark)
    lines = [ln for p in sorted((tmp_path / "out" / "t").glob("part-*.csv")) for ln in p.read_text().splitlines()]
    assert sorted(set(lines)) == ["1|2|3", "3|4|7", "a|b|c"]


NULL_ROWS = [  # (key, v, b, the round in which the record reaches the reduce)
    (1, None, None, 0), (1, None, None, 1),  # only nulls, over two rounds
    (2, 1, False, 0), (2, None, None, 1),  # a value, then a null
    (3, None, None, 0), (3, 2, False, 1),  # a null, then a value
    (4, None, True, 0), (4, 5, None, 2),
    (5, 3, False, 0), (5, 4, True, 1), (5, None, None, 2),
    (6, None, None, 1), (6, None, True, 2),
]


def _sql_aggregate(values, fn):
    """An aggregate as Spark SQL defines it: nulls are skipped; over no non-null value it is null
    (count: 0)."""
    present = [v for v in values if v is not None]
    if fn == "count":
        return len(present)
    return fn(present) if present else None


def test_reduce_folds_nulls_as_one_aggregate_over_every_round(spark, tmp_path):
    """`reduce` inside a loop equals one aggregate over all the records it received, nulls included:
    a null partial result (a round of only nulls) holds no value, it is not a zero or a false."""
    rows = ", ".join("(" + ", ".join("null" if x is None else str(x).lower() for x in r) + ")" for r in NULL_ROWS)
    flow = write_flow(tmp_path, f"""
        source xs = values (k: long, v: long, b: boolean, r: long) [{rows}]
        out = loop acc(x = xs) {{
            now = x | where(r == 0)
            st = now | reduce(by k, s = sum(v), n = count(v), lo = min(v), hi = max(v), a = any(b), e = all(b))
            feedback x <- x | where(r > 0) | derive(r = r - 1)
            emit state st
        }}
        sink out -> csv("out/state", header = true)
    """)
    run_file(flow, spark=spark)

    def opt(t):
        return lambda text: None if text == "" else t(text)

    got = read_output(str(tmp_path / "out" / "state"),
                      (int, opt(int), int, opt(int), opt(int), opt(lambda s: s == "true"), opt(lambda s: s == "true")))
    want = []
    for k in sorted({r[0] for r in NULL_ROWS}):
        vs = [v for kk, v, _, _ in NULL_ROWS if kk == k]
        bs = [b for kk, _, b, _ in NULL_ROWS if kk == k]
        want.append((k, _sql_aggregate(vs, sum), _sql_aggregate(vs, "count"), _sql_aggregate(vs, min),
                     _sql_aggregate(vs, max), _sql_aggregate(bs, any), _sql_aggregate(bs, all)))
    assert sorted(got) == want
    assert want[0] == (1, None, 0, None, None, None, None)  # the case a zero-filled fold got wrong


class _MetricsMap:
    """The two faces of a JVM `Map[String, Row]` that `_metric_pairs` reads: its text, or its entries."""

    class _Entry:
        def __init__(self, name, n):
            self.name, self.n = name, n

        def _1(self):
            return self.name

        def _2(self):
            return self

        def get(self, i):
            return self.n

    def __init__(self, text: str, entries: dict):
        self.text, self.entries = text, entries

    def toString(self):  # noqa: N802 - the JVM's name
        return self.text

    def size(self):
        return len(self.entries)

    def iterator(self):
        items = iter([self._Entry(k, v) for k, v in self.entries.items()])

        class It:
            def __init__(self):
                self.nxt = next(items, None)

            def hasNext(self):  # noqa: N802
                return self.nxt is not None

            def next(self):
                cur, self.nxt = self.nxt, next(items, None)
                return cur

        return It()


def test_while_loops_run_pysparks_jvm_classes_are_looked_up_once(spark, tmp_path, monkeypatch):
    # every `F.col` makes py4j ask the JVM for `functions`, then for `col`, before calling it; every list of
    # columns PySpark converts asks for `PythonUtils` and `toSeq`. While loops run the answers are kept.
    from pyspark.sql import functions as F
    from pyspark.sql.classic.column import _to_java_column, _to_seq
    from py4j.java_gateway import JavaMember
    from scopeflow.runtime import columns
    from scopeflow.runtime.columns import STATIC_CLASSES, StaticMembers, cached_lookups

    jvm = spark.sparkContext._jvm
    client = jvm._gateway_client
    send = client.send_command
    lookups = []  # py4j's reflection commands (`r` + a sub-command): the JVM asked what a name is

    def counting(command, *args, **kwargs):
        if command.startswith("r\n"):
            lookups.append(command.split("\n")[1:3])
        return send(command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", counting)

    def asked(fn) -> int:
        lookups.clear()
        fn()
        return len(lookups)

    use = lambda: _to_seq(spark.sparkContext, [F.col("a"), F.lit(1), F.sum("b")], _to_java_column)  # noqa: E731
    assert asked(use) >= 8  # (three functions and PythonUtils.toSeq: two questions each)
    with cached_lookups(spark):
        assert set(STATIC_CLASSES) <= set(vars(jvm))
        use()
        assert asked(use) == 0, lookups
        with cached_lookups(spark):  # (a block inside another keeps the outer one's cache)
            assert asked(use) == 0
        assert asked(use) == 0
        assert str(F.col("a")._jc) == "a" and str(F.lit(1)._jc) == "1"  # (the same calls, answered)
        # a column of constants is the column made before: by value and type, not NaN, not a zero (0.0 == -0.0)
        assert F.col("a")._jc is F.col("a")._jc and F.lit(1)._jc is F.lit(1)._jc and F.lit("x")._jc is F.lit("x")._jc
        assert [str(F.lit(v)._jc) for v in (1, 1.0, True, 0.0, -0.0)] == ["1", "1.0", "true", "0.0", "-0.0"]
        assert F.lit(0.0)._jc is not F.lit(0.0)._jc and F.lit(float("nan"))._jc is not F.lit(float("nan"))._jc
        assert F.col("b")._jc is not F.col("a")._jc
    assert not set(STATIC_CLASSES) & set(vars(jvm))
    assert F.col("a")._jc is not F.col("a")._jc  # (outside loops, PySpark's own: a new column every time)
    assert asked(use) >= 8
    with pytest.raises(ZeroDivisionError), cached_lookups(spark):  # (a block that fails takes them away too)
        1 / 0
    assert not set(STATIC_CLASSES) & set(vars(jvm))
    # only methods are kept: a class's field (or nested class) is asked for every time, as py4j does
    members = StaticMembers(jvm.java.lang.Integer, JavaMember)
    assert members.MAX_VALUE == 2147483647 and "MAX_VALUE" not in vars(members)
    assert members.valueOf("7") == 7 and "valueOf" in vars(members)
    # a run's loops use it (fewer questions than without), and leave py4j as it was
    flow = countdown_flow(tmp_path, [(1, 6), (2, 5)], max_rounds=10)
    run = lambda: run_file(flow, spark=spark)  # noqa: E731
    cached = asked(run)
    assert sorted(read_output(str(tmp_path / "out/o"), (int, int))) == [(1, 1), (2, 1)]
    assert not set(STATIC_CLASSES) & set(vars(jvm))
    monkeypatch.setattr(columns, "cached_lookups", lambda spark: contextlib.nullcontext())
    assert asked(run) > cached + 5 * 4  # (5 rounds or more, each asking more than 4 times; measured: 107 and 328)


def test_metric_counters_are_read_from_the_maps_text_or_entry_by_entry():
    from scopeflow.runtime.counters import metric_pairs as _metric_pairs

    entries = {"_sf_nk:n005": 10, "n012": 0, "_sf_fed:x": 3}
    text = "HashMap(_sf_nk:n005 -> [10], n012 -> [0], _sf_fed:x -> [3])"
    assert sorted(_metric_pairs(_MetricsMap(text, entries))) == sorted(entries.items())
    # text that does not parse into every entry (a name with ", " in it): read entry by entry
    odd = {"a, b": 1, "n1": 2}
    assert sorted(_metric_pairs(_MetricsMap("Map(a, b -> [1], n1 -> [2])", odd))) == sorted(odd.items())
    assert _metric_pairs(_MetricsMap("Map()", {})) == []


class _Handles:
    """What `round.compute_checkpoints` reads of a run: the session, its checkpoints and its cache of JVM handles."""

    def __init__(self, spark, preset: dict, checkpoints=None):
        self.spark, self._handles, self.checkpoints = spark, dict(preset), checkpoints

    def handle(self, key, build):
        if key not in self._handles:
            self._handles[key] = build()
        return self._handles[key]


@pytest.mark.parametrize("start_indices", ["functions", "field", "partitions"])
def test_a_rounds_job_counts_each_checkpoint_from_its_partitions(spark, start_indices):
    # the records of every checkpoint of a round, in one Spark job, from its partitions' sizes: also an
    # empty checkpoint, one of no partitions at all, and one read by another (whose partitions were stored
    # before the job, by a job of their own); counted by scopeflow's JVM function (runtime/jvmfunctions.py) or,
    # without it, by `zipWithIndex` (its start indices read from its field or from its partitions)
    from scopeflow.runtime.checkpoints import Checkpoints, checkpoint_rdd, rows_rdd
    from scopeflow.runtime.jobs import jobs_in_group
    from scopeflow.runtime.round import compute_checkpoints
    from scopeflow.stdlib.settings import JVM_FUNCTIONS

    if start_indices != "functions":
        spark.conf.set(JVM_FUNCTIONS, "false")
    try:
        checkpoints = Checkpoints(spark)
        assert (checkpoints.functions() is not None) == (start_indices == "functions")
    finally:
        spark.conf.unset(JVM_FUNCTIONS)
    frames = [spark.range(0, 1000, 1, 3), spark.range(0, 0, 1, 2), spark.createDataFrame([], "id long"),
              spark.range(0, 77, 1, 1), spark.range(0, 500, 1, 4).where("id % 7 = 3")]
    cks = [checkpoints.make(df) for df in frames]
    cks.append(checkpoints.make(cks[0].where("id < 10")))
    assert rows_rdd(cks[0]).count() == 1000  # stored now
    group = f"count-checkpoints-{start_indices}"
    spark.sparkContext.setJobGroup(group, "count checkpoints")
    try:
        run = _Handles(spark, {"zipped-start-indices": None} if start_indices == "partitions" else {}, checkpoints)
        got = compute_checkpoints(run, cks)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert got == [1000, 0, 0, 77, len([i for i in range(500) if i % 7 == 3]), 10]
    assert jobs_in_group(spark, group, at_least=2) == 1  # (waits for the listener bus to deliver a second one)
    assert all(checkpoint_rdd(ck).isCheckpointed() for ck in cks if checkpoint_rdd(ck).getNumPartitions())
    checkpoints.release(cks)


def test_a_round_with_more_jobs_than_one_says_which(spark):
    from scopeflow.runtime import jobs as compat

    compat.set_job_group(spark, "scopeflow:test:explain", "two jobs")
    try:
        spark.range(10).count()
        spark.range(5).repartition(2).collect()
    finally:
        spark.sparkContext._jsc.clearJobGroup()
    lines = compat.describe_jobs(spark, "scopeflow:test:explain")
    # (adaptive execution runs each query as several jobs: as many lines as jobs, each with its stages)
    assert len(lines) == compat.jobs_in_group(spark, "scopeflow:test:explain") >= 2, lines
    assert all(" SUCCEEDED: " in line for line in lines), lines
    assert "collect at " in lines[-1] and lines[-1].count("; ") == 1, lines  # its two stages, by id
    assert lines[-1].endswith(": 2/2 tasks"), lines  # (repartition(2): the result stage ran both of its tasks)
    if spark.conf.get("spark.sql.adaptive.enabled") == "true":  # its shuffle ran in a job of its own
        assert "skipped (" in lines[-1].split("; ")[0] and "skipped" not in lines[-2], lines
