"""How many partitions a loop runs in (runtime/parallelism.py): from its inputs' size, or pinned."""
from __future__ import annotations

import json
import os
import shutil

import pytest

import reference
from conftest import EXAMPLES, read_output, write_csv
from scopeflow.api import run_file
from scopeflow.runtime.context import ONE_PARTITION_CONF
from scopeflow.runtime.errors import RuntimeFailure
from scopeflow.runtime.parallelism import (LOOP_PARTITIONS, PARTITION_BYTES, choose, estimated_bytes,
                                           unmark_cached)
from test_stdlib import random_graph

pytestmark = pytest.mark.spark


def _run_example(spark, tmp_path, name, flow, data, header, rows, out, types, params=None):
    """Run example `flow` in its own folder over `rows` written as its `data` file; (its output, its report)."""
    folder = tmp_path / name
    shutil.copy(os.path.join(EXAMPLES, flow), folder.mkdir() or folder)
    write_csv(folder / "data" / data, header, rows)
    report = folder / "run.json"
    run_file(str(folder / flow), spark=spark, report=str(report), params=params)
    with open(report) as fh:
        doc = json.load(fh)
    return read_output(str(folder / "out" / out), types), doc


def _cc_run(spark, tmp_path, name, edges):
    return _run_example(spark, tmp_path, name, "connected_components.flow", "graph.csv", ["src", "dst"], edges,
                        "components", (int, int))


def test_a_loop_over_small_inputs_runs_its_rounds_in_few_tasks_with_the_same_output(spark, tmp_path, session_at):
    """8 shuffle partitions in the session: connected components over ~300 edges runs each round's job in
    one partition per stage when scopeflow chooses (`auto`), in 8 when pinned; both equal the reference."""
    edges = random_graph(7, 120, 300)
    want = reference.connected_components(edges)
    session_at(**{"spark.sql.shuffle.partitions": 8, PARTITION_BYTES: "4194304", LOOP_PARTITIONS: "auto"})
    auto_out, auto = _cc_run(spark, tmp_path, "auto", edges)
    assert spark.conf.get("spark.sql.shuffle.partitions") == "8"  # the loop's count was the loop's only
    session_at(**{LOOP_PARTITIONS: 8})
    pinned_out, pinned = _cc_run(spark, tmp_path, "pinned", edges)

    assert dict(auto_out) == want and len(auto_out) == len(want)
    assert dict(pinned_out) == want and len(pinned_out) == len(want)
    (loop,) = auto["loops"]
    assert loop["partitions"]["partitions"] == 1, loop["partitions"]
    assert 0 < loop["partitions"]["input_bytes"] < 4194304
    assert pinned["loops"][0]["partitions"] == {"partitions": 8, "why": f"pinned by {LOOP_PARTITIONS}"}
    auto_tasks = [r["tasks"] for r in auto["rounds"]]
    pinned_tasks = [r["tasks"] for r in pinned["rounds"]]
    assert len(auto_tasks) == len(pinned_tasks) > 3  # the same rounds either way
    # a round's job has a few stages (the delta's shuffle, the state's fold, the checkpoints' count): in one
    # partition each runs a task or two; pinned to 8, the fold alone runs 8
    assert max(auto_tasks) <= 8, auto_tasks
    assert max(auto_tasks) < min(pinned_tasks), (auto_tasks, pinned_tasks)


def test_a_loop_that_carries_its_states_across_epochs_is_sized_by_a_larger_share(spark, session_at):
    """A streaming loop that carries its states (`carried`) takes `CARRIED_PARTITION_BYTES` a partition (its
    rounds scan states and imports whatever their delta: a task more than Spark runs at once only adds its
    fixed cost), unless `spark.scopeflow.loopPartitionBytes` is set, which sizes every loop."""
    session_at(**{LOOP_PARTITIONS: "auto", PARTITION_BYTES: "1"})  # (put back after the test)
    spark.conf.unset(PARTITION_BYTES)
    frame = spark.range(1_500_000)  # Spark estimates 12,000,000 bytes: 3 partitions of 4 MiB
    assert estimated_bytes(frame) == 12_000_000
    assert choose(spark, 8, [frame]).partitions == 3
    carried = choose(spark, 8, [frame], carried=True)
    assert carried.partitions == 1 and "128.0 MiB a partition" in carried.why, carried
    assert choose(spark, 8, [frame] * 12, carried=True).partitions == 2  # 144,000,000 bytes
    session_at(**{PARTITION_BYTES: "4000000"})
    assert choose(spark, 8, [frame], carried=True).partitions == 3


def test_the_count_follows_the_estimate_between_one_and_the_session_count(spark, session_at):
    session_at(**{LOOP_PARTITIONS: "auto", PARTITION_BYTES: "1000"})
    small = spark.range(10)  # Spark estimates 80 bytes
    big = spark.range(100_000)  # 800,000 bytes: 800 partitions' worth, capped at the session's count
    assert estimated_bytes(small) == 80
    assert choose(spark, 8, [small]).partitions == 1
    assert choose(spark, 8, [small, small]).partitions == 1
    assert choose(spark, 8, [spark.range(300)]).partitions == 3  # 2,400 bytes: 3 partitions of 1,000
    assert choose(spark, 8, [big, small]).partitions == 8
    # an input Spark cannot size (a checkpoint's default estimate is Long.MaxValue): the session's count
    unknown = spark.range(5).localCheckpoint(eager=False)
    from scopeflow.runtime.checkpoints import Checkpoints

    chosen = choose(spark, 8, [small, Checkpoints(spark).detach_statistics(unknown)])
    assert chosen.partitions == 8 and "not known" in chosen.why


@pytest.mark.parametrize("key, value", [(LOOP_PARTITIONS, "0"), (LOOP_PARTITIONS, "many"),
                                        (PARTITION_BYTES, "-5")])
def test_a_bad_setting_is_refused_with_a_hint(spark, session_at, key, value):
    session_at(**{key: value})
    with pytest.raises(RuntimeFailure) as err:
        choose(spark, 4, [spark.range(3)])
    assert f"{key}={value}" in str(err.value) and "--conf" in err.value.hint


def test_a_bad_setting_on_the_command_line_exits_2_before_spark_starts(run_cli):
    from conftest import without_java

    flow = os.path.join(EXAMPLES, "connected_components.flow")
    for key, value in ((LOOP_PARTITIONS, "many"), (PARTITION_BYTES, "0")):
        proc = run_cli("run", flow, "--conf", f"{key}={value}", env=without_java())
        assert proc.returncode == 2, proc.stderr
        assert f"--conf {key}={value}: expected" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("kernel", ["cc", "sssp"])
def test_a_loop_in_one_partition_shuffles_neither_its_state_nor_its_imports(spark, tmp_path, session_at, kernel):
    """In one partition every stream is in the same place, so no round needs a shuffle: after round 0 a round's
    job is one stage of one task per checkpoint (the state's, and the feedback's unless the next round computes
    it: deferred feedback, runtime/loop.py). Spark would shuffle the fold's
    union of a one-partition state with a single-partition delta, and both sides of a join of two
    single-partition streams of unknown size (`Checkpoints.detach_statistics`, `ONE_PARTITION_CONF`), into
    the same one partition. The output equals the reference."""
    session_at(**{"spark.sql.shuffle.partitions": 8, PARTITION_BYTES: "4194304", LOOP_PARTITIONS: "auto"})
    edges = random_graph(7, 120, 300)
    if kernel == "cc":
        want = reference.connected_components(edges)
        got, doc = _cc_run(spark, tmp_path, kernel, edges)
    else:
        wedges = [(a, b, float((a * 7 + b) % 5 + 1)) for a, b in edges]
        want = reference.sssp(wedges, edges[0][0])
        got, doc = _run_example(spark, tmp_path, kernel, "sssp.flow", "wgraph.csv", ["src", "dst", "w"], wedges,
                                "distances", (int, float), {"source_id": edges[0][0]})
    assert dict(got) == want and len(got) == len(want)
    (loop,) = doc["loops"]
    assert loop["partitions"]["partitions"] == 1, loop["partitions"]
    rounds = doc["rounds"]
    assert len(rounds) > 3
    assert [r["tasks"] for r in rounds[1:]] == [1 if r.get("deferred") else 2 for r in rounds[1:]], rounds
    assert any(r.get("deferred") for r in rounds)
    (key, value), = ONE_PARTITION_CONF.items()
    assert spark.conf.get(key) != value  # the loop's only


def _joined_over_a_group(spark, path, marked: bool):
    """The shape of PageRank's import: each edge with its source's out-degree (a join with a `group` of the edges),
    with an `observe` node on each operator's output where `marked` (as `--report`'s counters put them)."""
    from pyspark.sql import functions as F

    def mark(df, name):
        return df.observe(f"{name}_{marked}", F.count(F.lit(1)).alias("n")) if marked else df

    edges = mark(spark.read.schema("src long, dst long").option("header", True).csv(str(path)), "edges")
    degrees = mark(edges.groupBy("src").agg(F.count(F.lit(1)).alias("out_degree")), "degrees")
    return mark(edges.join(degrees, "src").select("src", "dst", "out_degree"), "joined")


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_report_counters_leave_the_size_estimate_as_it_is_without_them(spark, tmp_path, session_at, adaptive):
    """Spark's estimate of a join with a side of unique keys (a `group`'s) is the other side's size, but an
    `observe` node between hides the keys and Spark multiplies both sides' sizes. With `marked` the estimate
    leaves them out: the same bytes as the plan without them, directly and through a cached stream (planned
    with adaptive execution or without: the cached plan's root is another node)."""
    session_at(**{"spark.sql.adaptive.enabled": adaptive})
    path = tmp_path / "edges.csv"
    write_csv(path, ["src", "dst"], random_graph(3, 400, 2_000))
    plain, marked = (_joined_over_a_group(spark, path, m) for m in (False, True))
    want = estimated_bytes(plain)
    assert 0 < want < 1_000_000, want
    assert estimated_bytes(marked) > 100 * want  # (what Spark estimates with the counters in)
    assert estimated_bytes(marked, marked=True) == want
    assert estimated_bytes(plain, marked=True) == want
    cached = []
    try:
        for m in (False, True):
            # (a projection on top: without adaptive execution the cached plan's root is generated code)
            df = _joined_over_a_group(spark, path, m).select("dst", "src", "out_degree").persist()
            cached.append(df)
            if m:
                unmark_cached(df)
        sizes = [estimated_bytes(df.select("src", "dst"), marked=True) for df in cached]
        assert sizes[0] == sizes[1] and sizes[0] < want, sizes
    finally:
        for df in cached:
            df.unpersist()


def test_a_report_does_not_change_the_partitions_a_loop_runs_in(spark, tmp_path, session_at):
    """examples/pagerank.flow with and without `--report`: the same estimate, the same partition count (one),
    the same ranks as the plain-Python reference. (With the counters' `observe` nodes in Spark's estimate it
    read ~10^8 bytes against ~10^4 and the loop ran in 4 partitions with `--report`, in 1 without.)"""
    session_at(**{"spark.sql.shuffle.partitions": 4, PARTITION_BYTES: "4194304", LOOP_PARTITIONS: "auto"})
    edges = random_graph(11, 300, 1_500)
    vertices = sorted({v for e in edges for v in e})
    want = reference.pagerank_fixed(vertices, edges)
    chosen = []
    for report in (False, True):
        folder = tmp_path / f"report_{report}"
        shutil.copy(os.path.join(EXAMPLES, "pagerank.flow"), folder.mkdir() or folder)
        write_csv(folder / "data" / "edges.csv", ["src", "dst"], edges)
        write_csv(folder / "data" / "vertices.csv", ["id"], [(v,) for v in vertices])
        job = run_file(str(folder / "pagerank.flow"), spark=spark,
                       report=str(folder / "run.json") if report else None)
        got = dict(read_output(str(folder / "out" / "ranks"), (int, float)))
        assert got.keys() == want.keys()
        assert all(abs(got[v] - want[v]) <= 1e-9 * max(1.0, abs(want[v])) for v in want)
        (loop,) = job.report.document()["loops"]
        chosen.append(loop["partitions"])
    assert chosen[0] == chosen[1], chosen
    assert chosen[0]["partitions"] == 1 and chosen[0]["input_bytes"] < 1_000_000, chosen
