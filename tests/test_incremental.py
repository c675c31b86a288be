"""Incremental loops across epochs (docs/language.md#incremental-loops) on a real Spark: edge files dropped in
waves, one epoch each (`--trigger available-now`), every epoch of a monotone loop run from the previous epoch's
fixpoint, and after every epoch the sink equals networkx (or plain Python) over all files so far. The report's
strategy, rounds and record counts are checked too: an incremental epoch must cost what it changes. Kills of
real processes in incremental epochs are in test_streaming_recovery.py; which loops qualify, and why not, is
in test_incremental_rules.py."""
from __future__ import annotations

import json
import math
import os
import random
import time
from collections import Counter

import pytest

import reference
from test_streaming import CC, SSSP, Stream, random_edges, write_weighted_json

pytestmark = pytest.mark.spark

REACH = """pipeline ireach
source edges = stream files("in", format = "csv", header = true) schema (src: long, dst: long)
source seeds = stream files("seeds", format = "csv", header = true) schema (v: long)
reached = loop reach(r = seeds | select(v)) with (e = edges) {
    next = r | join(e, on r.v == e.src) | select(v = e.dst) | union(r) | distinct
    feedback r <- next
    emit next
}
sink reached -> csv("out/reached", header = true)
"""


@pytest.fixture
def incremental(spark):
    """Set `spark.scopeflow.incremental` (auto | off | always) and the change threshold for one test."""
    keys = ("spark.scopeflow.incremental", "spark.scopeflow.incremental.maxChange")

    def set_to(mode, max_change=None):
        spark.conf.set(keys[0], mode)
        if max_change is not None:
            spark.conf.set(keys[1], str(max_change))

    yield set_to
    for k in keys:
        spark.conf.unset(k)


def epoch_loop(report: str, scope: str) -> dict:
    """The last epoch's entry for loop `scope` in a streaming run report."""
    with open(report) as fh:
        doc = json.load(fh)
    entry = doc["epochs"][-1]
    return next(lp for lp in entry["loops"] if lp["scope"] == scope)


def cc_run(spark, folder, waves):
    """CC over `waves` (lists of edges), one file and one epoch each; after every epoch the sink equals
    networkx over the edges so far. Returns each epoch's loop entry of the report."""
    s = Stream(spark, folder, CC.format(extra=""))
    edges, loops = [], []
    for wave in waves:
        edges += wave
        s.drop_csv(["src", "dst"], wave)
        report = str(folder / "run.json")
        assert s.run(report=report) == 0
        loops.append(epoch_loop(report, "cc"))
        assert s.output("components", (int, int)) == Counter(reference.connected_components(edges).items()), \
            len(loops) - 1
    return s, loops


@pytest.mark.soak
def test_connected_components_from_the_previous_fixpoint_equal_networkx_after_every_wave(spark, tmp_path,
                                                                                        incremental):
    """Seven waves of random edges (new vertices, merges, repeats): waves 1-6 run incrementally, each equals
    networkx over all waves so far; the same waves with incremental evaluation off give the same sinks."""
    rng = random.Random(11)
    waves = [random_edges(rng, 40, 80)] + [random_edges(rng, 12, 100) for _ in range(6)]
    incremental("always")
    on, loops = cc_run(spark, tmp_path / "on", waves)
    assert [lp["strategy"] for lp in loops] == ["recomputed"] + ["incremental"] * 6
    assert "no fixpoint of an earlier epoch" in loops[0]["why"]
    incremental("off")  # the same seven files, one an epoch, in one run that recomputes every epoch
    off = Stream(spark, tmp_path / "off", CC.format(extra=", max_files_per_epoch = 1"))
    for i, wave in enumerate(waves):
        off.drop_csv(["src", "dst"], wave, name=f"w{i}.csv")
    assert off.run(report=str(tmp_path / "off.json")) == 0
    with open(tmp_path / "off.json") as fh:
        epochs = json.load(fh)["epochs"]
    assert [(e["epoch"], e["loops"][0]["strategy"]) for e in epochs] == [(i, "recomputed") for i in range(7)]
    assert "off" in epochs[-1]["loops"][0]["why"]
    assert on.output("components", (int, int)) == off.output("components", (int, int))


@pytest.mark.parametrize("mode", ["auto", "true"])
def test_sssp_from_the_previous_fixpoint_equals_dijkstra_after_every_wave(spark, tmp_path, incremental, plan_ahead,
                                                                          mode):
    """Shortest paths (reduce min over `dist + w`) over six waves of weighted edges, some shorter than the
    paths found before: each incremental epoch equals networkx's Dijkstra over all edges so far. Also with
    `planAhead=true`, which plans an epoch's rounds ahead wherever it may (`auto`, the default, judges by jobs
    of the same run, and each epoch is a run of its own)."""
    incremental("always")
    plan_ahead(mode)
    sssp_waves(spark, tmp_path)


def sssp_waves(spark, tmp_path) -> None:
    rng = random.Random(5)
    s = Stream(spark, tmp_path, SSSP)
    edges = []
    for wave in range(7):
        new = [(rng.randrange(40) if wave else 1, rng.randrange(40), float(rng.randint(1 if wave < 4 else 0, 9)))
               for _ in range(25 if wave == 0 else 8)]
        edges += new
        write_weighted_json(tmp_path / "in" / f"w{wave}.json", new)
        assert s.run(report=str(tmp_path / "run.json")) == 0
        lp = epoch_loop(str(tmp_path / "run.json"), "sssp")
        assert lp["strategy"] == ("incremental" if wave else "recomputed"), lp
        got = {k: v for k, v in s.output("distances", (int, float))}
        assert got == pytest.approx(reference.sssp(edges, 1)), wave


def test_reachability_from_the_previous_fixpoint_equals_networkx_after_every_wave(spark, tmp_path, incremental):
    """Reachability (`distinct`, the variable joined with the edges): new edges and new seeds in six waves;
    a new edge from a vertex reached long ago is pushed across from the variable's history."""
    incremental("always")
    rng = random.Random(8)
    s = Stream(spark, tmp_path, REACH)
    (tmp_path / "seeds").mkdir()
    edges, seeds = [], []
    for wave in range(7):
        new = random_edges(rng, 30 if wave == 0 else 6, 60)
        edges += new
        s.drop_csv(["src", "dst"], new)
        if wave in (0, 3):
            seeds += [(rng.randrange(60),)]
            from conftest import write_csv

            write_csv(tmp_path / "seeds" / f"s{wave}.csv", ["v"], seeds[-1:])
        assert s.run(report=str(tmp_path / "run.json")) == 0
        assert epoch_loop(str(tmp_path / "run.json"), "reach")["strategy"] == ("incremental" if wave else
                                                                                "recomputed")
        want = Counter((v,) for v in reference.reachable(edges, [v for v, in seeds]))
        assert s.output("reached", (int,)) == want, wave


def test_each_kind_of_epoch(spark, tmp_path, incremental):
    """Edges inside a component, a merge of two components, new isolated vertices, repeated old edges (a
    round that pushes them and one that finds nothing changed), and an epoch too large for the threshold
    (recomputed, and said why)."""
    incremental("auto", max_change=0.5)
    a = [(i, i + 1) for i in range(0, 9)]  # component 0..9
    b = [(i, i + 1) for i in range(20, 29)]  # component 20..29
    c = [(i, i + 1) for i in range(40, 70)]  # component 40..70
    waves = [a + b + c,
             [(2, 7), (3, 9)],  # inside component 0..9: nothing changes
             [(25, 5)],  # merges 20..29 into 0..9
             [(100, 101), (200, 200)],  # a new component and a vertex with a self-loop
             [(2, 3), (21, 22), (40, 41)],  # already there
             [(i, i + 1) for i in range(300, 340)]]  # 40 edges on 53: recomputed
    s, loops = cc_run(spark, tmp_path, waves)
    assert [lp["strategy"] for lp in loops] == ["recomputed"] + ["incremental"] * 4 + ["recomputed"]
    assert loops[1]["rounds"] <= 2 and loops[3]["rounds"] <= 3  # (a new 2-vertex component: as in batch)
    assert loops[2]["rounds"] >= 2  # the merge relabels 20..29
    # repeated edges: round 0 pushes the labels of their ends across them (6 records), round 1 finds no change
    assert loops[4]["rounds"] <= 2 and loops[4]["fed_back"] <= 6 and loops[4]["records"] <= 40, loops[4]
    assert "more than spark.scopeflow.incremental.maxChange = 50 %" in loops[5]["why"]


def test_an_epoch_costs_what_it_changes(spark, tmp_path, incremental):
    """A base of one large component (3,000 vertices around a hub) and a small one (10 vertices); an epoch adds 4 edges
    inside the small one (larger ids than the large one's). The records its loop processes (the report's count over every round and operator)
    are a few per vertex of the small component, not of the graph: against the first epoch's recompute, a
    thousandth. Then an epoch whose new edge merges the small component into the large one: the small one is
    relabelled, the large one is not touched."""
    incremental("always")
    big = [(1000, i) for i in range(1001, 4000)]
    small = [(i, i + 1) for i in range(5000, 5009)]
    s, loops = cc_run(spark, tmp_path, [big + small, [(5000, 5005), (5002, 5008), (5001, 5009), (5003, 5007)],
                                        [(5008, 1500)]])
    base, inside, merge = loops
    assert base["records"] > 20_000
    assert inside["strategy"] == "incremental" and inside["records"] <= 10 * (10 + 2 * 4), inside
    assert merge["records"] <= 20 * (10 + 2), merge  # 10 relabelled vertices and the new edge, both ways


def test_an_import_on_the_left_of_its_join(spark, tmp_path, incremental):
    """The edges on the join's left side (`e | join(best, ...)`): the import is kept as pieces across epochs
    and its new records meet the state on the right; four waves equal networkx after each."""
    incremental("always")
    flow = CC.format(extra="").replace("best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)",
                                       "e | join(best, on e.src == best.id) | select(id = e.dst, label = best.label)")
    assert "e | join(best" in flow
    rng = random.Random(3)
    s = Stream(spark, tmp_path, flow)
    edges = []
    for wave in range(4):
        new = random_edges(rng, 30 if wave == 0 else 5, 50)
        edges += new
        s.drop_csv(["src", "dst"], new)
        assert s.run(report=str(tmp_path / "run.json")) == 0
        assert epoch_loop(str(tmp_path / "run.json"), "cc")["strategy"] == ("incremental" if wave else "recomputed")
        assert s.output("components", (int, int)) == Counter(reference.connected_components(edges).items()), wave


def test_a_loop_whose_states_carry_across_epochs_is_sized_by_the_larger_share(spark, tmp_path, incremental,
                                                                            session_at):
    """Without `loopPartitionBytes` set, an incremental-capable streaming loop is sized with 128 MiB a partition
    (runtime/parallelism.py), raised to the tasks Spark runs at once, in its first (recomputed) epoch and in its
    incremental ones; the same loop in a batch run takes the 4 MiB rule. Both equal networkx."""
    from conftest import read_output, write_csv
    from scopeflow.api import run_file
    from scopeflow.runtime.deployment import task_slots
    from scopeflow.runtime.parallelism import PARTITION_BYTES

    incremental("always")
    session_at(**{"spark.sql.shuffle.partitions": 8, PARTITION_BYTES: "1"})  # (put back after the test)
    spark.conf.unset(PARTITION_BYTES)
    rng = random.Random(5)
    waves = [random_edges(rng, 30, 60), random_edges(rng, 5, 60)]
    _, loops = cc_run(spark, tmp_path / "stream", waves)  # (each epoch equal to networkx)
    assert [lp["strategy"] for lp in loops] == ["recomputed", "incremental"], loops
    for lp in loops:
        assert lp["partitions"] == min(task_slots(spark), 8), lp
        assert "128.0 MiB a partition" in lp["partitions_why"], lp["partitions_why"]
    edges = [e for wave in waves for e in wave]
    batch = tmp_path / "batch"
    write_csv(batch / "in" / "edges.csv", ["src", "dst"], edges)
    flow = CC.format(extra="").replace('stream files("in", format = "csv", header = true)',
                                       'read csv("in", header = true)')
    assert "read csv" in flow
    (batch / "p.flow").write_text(flow)
    run_file(str(batch / "p.flow"), spark=spark, report=str(batch / "run.json"))
    with open(batch / "run.json") as fh:
        (loop,) = json.load(fh)["loops"]
    assert "4.0 MiB a partition" in loop["partitions"]["why"], loop["partitions"]
    assert Counter(read_output(str(batch / "out" / "components"), (int, int))) == \
        Counter(reference.connected_components(edges).items())


def test_an_incremental_loop_keeps_the_partitions_its_input_needs_and_grows_them_when_outgrown(spark, tmp_path,
                                                                                                incremental, session_at,
                                                                                                monkeypatch):
    """12 shuffle partitions, and a loop input that needs fewer: the first epoch recomputes in the count its input
    needs. Incremental epochs after it run in that count, from states read back from the checkpoint (a new run)
    and from states kept in this process (a second epoch of the same run), also when a larger
    `loopPartitionBytes` would now give their input fewer (the count never shrinks: the states and imports would
    be shuffled for it). An epoch whose input outgrows the count, its states and imports kept in this process,
    runs in more partitions, and the epoch after it keeps those. The states and import pieces each epoch leaves
    are in the count the report gives; every epoch equals networkx."""
    from scopeflow.runtime.deployment import task_slots
    from scopeflow.runtime.incremental import EpochLoops

    if task_slots(spark) >= 9:
        pytest.skip("needs a session that runs fewer than 9 tasks at once (a streaming loop runs in at least those)")
    incremental("always")
    session_at(**{"spark.sql.shuffle.partitions": 12})
    left = []  # per committed epoch: the partition counts of the states and import pieces it left

    def committed(self):
        for carry in self.pending.values():
            frames = [p for pieces in carry.pieces.values() for p in pieces] + \
                [held[2][0] for held in carry.states.values()]  # (`KeyedState.carried`: its main)
            left.append({df._jdf.rdd().getNumPartitions() for df in frames})
        return original(self)

    original = EpochLoops.committed
    monkeypatch.setattr(EpochLoops, "committed", committed)
    rng = random.Random(11)
    s = Stream(spark, tmp_path, CC.format(extra=", max_files_per_epoch = 1"))
    edges, report = [], str(tmp_path / "run.json")

    def run(per_partition, *waves):
        nonlocal edges
        session_at(**{"spark.scopeflow.loopPartitionBytes": per_partition})
        left.clear()
        for i, wave in enumerate(waves):  # one epoch each, in this order (a stream takes the oldest first)
            stamp = time.time() + i
            os.utime(s.drop_csv(["src", "dst"], wave), (stamp, stamp))
        assert s.run(report=report) == 0
        for wave in waves:
            edges += wave
        assert s.output("components", (int, int)) == Counter(reference.connected_components(edges).items())
        with open(report) as fh:
            loops = [next(lp for lp in e["loops"] if lp["scope"] == "cc") for e in json.load(fh)["epochs"]]
        assert left == [{lp["partitions"]} for lp in loops], (left, loops)
        return loops

    base, = run(1000, random_edges(rng, 150, 400))  # ~8 KiB of input (as Spark estimates it): 9 partitions
    assert base["strategy"] == "recomputed" and task_slots(spark) < base["partitions"] < 12, base
    assert "a partition" in base["partitions_why"]
    small = run(1 << 20, random_edges(rng, 5, 400), random_edges(rng, 5, 400))  # 1 partition's worth now
    assert [lp["strategy"] for lp in small] == ["incremental"] * 2
    assert [lp["partitions"] for lp in small] == [base["partitions"]] * 2, small
    assert all(f"carry across epochs in {base['partitions']} partitions" in lp["partitions_why"] for lp in small)
    grown = run(2500, random_edges(rng, 5, 400), random_edges(rng, 2000, 3000), random_edges(rng, 5, 3000))
    assert [lp["strategy"] for lp in grown] == ["incremental"] * 3
    assert grown[0]["partitions"] == base["partitions"], grown[0]  # (its input still fits)
    assert grown[1]["partitions"] == 12 and "outgrew" in grown[1]["partitions_why"], grown[1]
    assert grown[2]["partitions"] == 12, grown[2]


TWO_LOOPS = """pipeline itwo
source xs = stream files("in", format = "csv", header = true, max_files_per_epoch = 1) schema (src: long, dst: long)
source ys = stream files("y", format = "csv", header = true, max_files_per_epoch = 1) schema (src: long, dst: long)
xe = xs | union(xs | select(src = dst, dst = src))
ye = ys | union(ys | select(src = dst, dst = src))
xi = xe | select(id = src, label = src) | distinct
yi = ye | select(id = src, label = src) | distinct
cx = loop ccx(labels = xi) with (e = xe) {
    best   = labels | reduce(by id, label = min(label))
    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)
    feedback labels <- spread
    emit state best
}
cy = loop ccy(labels = yi) with (e = ye) {
    best   = labels | reduce(by id, label = min(label))
    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)
    feedback labels <- spread
    emit state best
}
sink cx -> csv("out/x", header = true)
sink cy -> csv("out/y", header = true)
"""


def test_loops_whose_states_are_of_different_epochs_each_start_with_every_record_since_theirs(spark, tmp_path,
                                                                                            incremental, monkeypatch):
    """Two incremental loops over two streams (`stateEvery` 10, a stream's input compacted beyond 2 parts). Run 1:
    epoch 0 reads a file of each stream, epochs 1, 2 and 4 a file of `xs`, epoch 3 a file of `xs` with no row
    (an epoch that runs nothing: the loops keep what they hold in memory, and epoch 4 starts from it). Epoch 2
    compacts `xs`'s input, so `ccx` writes its states then; `ccy`'s stay epoch 0's. The run ends as a kill after
    its last commit leaves it (it writes nothing more as it stops). Run 2 gets a file of each stream: `ccx`
    starts from epoch 2's states with `xs`'s records after epoch 2, `ccy` from epoch 0's with `ys`'s after
    epoch 0; both sinks equal networkx."""
    from conftest import write_csv
    from scopeflow.runtime import streaming

    monkeypatch.setattr(streaming, "COMPACT_PARTS", 2)
    monkeypatch.setattr(streaming.StreamRun, "_flush", lambda self: None)  # (what a SIGKILL after the commit leaves)
    incremental("always")
    s = Stream(spark, tmp_path, TWO_LOOPS)
    (tmp_path / "y").mkdir()
    dropped = {"in": [], "y": []}

    def drop(folder, rows):
        n = sum(map(len, dropped.values()))
        tmp, path = tmp_path / f".f{n}.csv", tmp_path / folder / f"f{n:03d}.csv"
        write_csv(tmp, ["src", "dst"], rows)
        os.replace(tmp, path)
        stamp = time.time() + n  # (a stream takes the oldest first)
        os.utime(path, (stamp, stamp))
        dropped[folder].append(rows)

    def check(report):
        for out, folder in (("x", "in"), ("y", "y")):
            edges = [e for rows in dropped[folder] for e in rows]
            assert s.output(out, (int, int)) == Counter(reference.connected_components(edges).items()), out
        with open(report) as fh:
            return [{lp["scope"]: lp for lp in e["loops"]} for e in json.load(fh)["epochs"]]

    drop("in", [(1, 2)])
    drop("y", [(10, 11)])
    for rows in ([(3, 4)], [(2, 3)], [], [(5, 6)]):
        drop("in", rows)
    assert s.run(report=str(tmp_path / "r1.json")) == 0
    epochs = check(tmp_path / "r1.json")
    assert [sorted(e) for e in epochs] == [["ccx", "ccy"]] * 3 + [[]] + [["ccx", "ccy"]], epochs  # (epoch 3 ran nothing)
    assert [e["ccx"]["state_epoch"] for e in epochs if e] == [0, 0, 2, 2]
    assert [e["ccy"]["state_epoch"] for e in epochs if e] == [0, 0, 0, 0]
    assert epochs[4]["ccx"]["why"].startswith("the epoch adds"), epochs[4]["ccx"]  # (from what epoch 3 held)
    manifest = s.manifest()
    assert manifest["epoch"] == 4 and {sc: lp["epoch"] for sc, lp in manifest["loops"].items()} == \
        {"ccx": 2, "ccy": 0}
    drop("in", [(6, 1)])
    drop("y", [(20, 21)])
    assert s.run(report=str(tmp_path / "r2.json")) == 0
    (epoch,) = check(tmp_path / "r2.json")
    assert epoch["ccx"]["strategy"] == epoch["ccy"]["strategy"] == "incremental", epoch
    assert "since epoch 2's fixpoint" in epoch["ccx"]["why"] and "(2 records)" in epoch["ccx"]["why"], epoch
    assert "since epoch 0's fixpoint" in epoch["ccy"]["why"] and "(1 record)" in epoch["ccy"]["why"], epoch


EARLIEST = """pipeline earliest
source starts = stream files("in", format = "csv", header = true) schema (id: long, t: long)
source legs = read csv("legs.csv", header = true) schema (src: long, dst: long, dep: long, dur: long)
arrival = loop ea(a = starts) with (e = legs) {
    best = a | reduce(by id, t = min(t))
    next = best | join(e, on best.id == e.src) | select(id = e.dst, t = greatest(best.t, e.dep) + e.dur)
    feedback a <- next
    emit state best
}
sink arrival -> csv("out/arrival", header = true)
"""


def earliest_arrival(starts: list, legs: list) -> dict:
    """EARLIEST's rounds in plain Python, with Spark's nulls: `min` skips a null unless a key has nothing else, and
    `greatest` skips it. Synchronous rounds, as the loop runs: a round folds what the last one sent, and sends on
    from the keys it changed."""
    best: dict = {}
    sent = list(starts)
    while sent:
        changed = {}
        for key, t in sent:
            old = best.get(key, "none")
            new = t if old in ("none", None) else old if t is None else min(old, t)
            if old == "none" or new != old:
                best[key] = changed[key] = new
        sent = [(dst, (dep if t is None else max(t, dep)) + dur)
                for key, t in changed.items() for src, dst, dep, dur in legs if src == key]
    return best


def test_a_null_value_that_greatest_skips_makes_the_loop_recomputed(spark, tmp_path, incremental):
    """A start time not known yet (null) gives `greatest(null, dep) = dep`: a better arrival than the real time
    later gives. Carried over from the previous epoch's fixpoint, it would stay (2 arrives at 6, where a batch run
    over both files says 10), so the loop is recomputed every epoch and equals the rounds in plain Python."""
    incremental("always")
    legs = [(1, 2, 5, 1)]
    s = Stream(spark, tmp_path, EARLIEST)
    (tmp_path / "legs.csv").write_text("src,dst,dep,dur\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in legs))
    starts: list = []
    for wave in ([(1, None)], [(1, 9)]):
        starts += wave
        s.drop_csv(["id", "t"], wave)
        assert s.run(report=str(tmp_path / "run.json")) == 0
        assert epoch_loop(str(tmp_path / "run.json"), "ea")["strategy"] == "recomputed"
        got = s.output("arrival", (int, lambda v: int(v) if v else None))
        assert got == Counter(earliest_arrival(starts, legs).items()), len(starts)
    assert got[(2, 10)] == 1  # (the case itself: the null's 6 would have stayed)


def test_an_epoch_that_leaves_minus_infinity_in_a_state_is_run_again_from_nothing(spark, tmp_path, incremental):
    """-Infinity is the best distance a `min` keeps, and `-Infinity + Infinity` is NaN, which Spark orders above
    every number: pushed across an edge of weight Infinity, the better value gives the worse result. Epoch 0
    reaches 3 at 5.0 and pushes it to 4 (5.0 + Infinity = Infinity). Epoch 1 adds 1 -> 3 at -Infinity: a run over
    both files reaches 3 at -Infinity in round 1, before 5.0 could arrive, and 4 gets NaN; an epoch starting from
    epoch 0's fixpoint would keep Infinity. The epoch sees the -Infinity it left, runs the loop again from nothing
    and says so; the next epoch recomputes because the state holds it. Every epoch equals the rounds in plain
    Python, and a run with incremental evaluation off gives the same sinks."""
    inf = float("inf")
    waves = [[(1, 2, 1.0), (2, 3, 4.0), (3, 4, inf)], [(1, 3, -inf)], [(4, 5, 1.0), (2, 6, 2.0)]]
    incremental("always")
    s = Stream(spark, tmp_path / "on", SSSP)
    edges, whys = [], []
    for i, wave in enumerate(waves):
        edges += wave
        write_weighted_json(tmp_path / "on" / "in" / f"w{i}.json", wave)
        assert s.run(report=str(tmp_path / "run.json")) == 0
        lp = epoch_loop(str(tmp_path / "run.json"), "sssp")
        whys.append((lp["strategy"], lp["why"]))
        got = {k: reference.spark_order(v) for k, v in s.output("distances", (int, float))}
        assert got == {k: reference.spark_order(v) for k, v in reference.sssp_rounds(edges, 1).items()}, i
    dists = dict(list(s.output("distances", (int, float))))
    assert math.isnan(dists[4]) and math.isnan(dists[5])  # (the case itself: not Infinity)
    assert whys[0][0] == whys[1][0] == whys[2][0] == "recomputed", whys
    assert "it left -Infinity in `dist` of reduce `best`, so it ran again from nothing" in whys[1][1], whys
    assert "`dist` of reduce `best` holds -Infinity" in whys[2][1], whys
    assert s.manifest()["loops"]["sssp"]["infinite"] == "`dist` of reduce `best`"
    incremental("off")
    off = Stream(spark, tmp_path / "off", SSSP)
    for i, wave in enumerate(waves):
        write_weighted_json(tmp_path / "off" / "in" / f"w{i}.json", wave)
        assert off.run() == 0
    assert {k: reference.spark_order(v) for k, v in off.output("distances", (int, float))} == \
        {k: reference.spark_order(v) for k, v in s.output("distances", (int, float))}


LONG_SSSP = SSSP.replace("w: double", "w: long").replace("dist = 0.0", "dist = cast(0 as long)")


@pytest.fixture
def ansi_off(spark):
    spark.conf.set("spark.sql.ansi.enabled", "false")
    yield
    spark.conf.unset("spark.sql.ansi.enabled")


def test_long_arithmetic_that_wraps_around_makes_the_loop_recomputed(spark, tmp_path, incremental, ansi_off):
    """With `spark.sql.ansi.enabled=false` a `long` overflow wraps around: `2 + Long.MaxValue` is the lowest `long`
    but one, so a worse distance gives a better result. Epoch 0 reaches 2 at 2 and 3 at `2 + Long.MaxValue`
    (wrapped); epoch 1 adds 0 -> 2 at 0, and a run over both files reaches 3 only from 2 at 0: `Long.MaxValue`.
    Started from epoch 0's fixpoint, 3 would keep the wrapped value. The loop is recomputed (the reason names the
    setting), and equals the rounds in plain Python with wrapping `long`s."""
    incremental("always")
    top = 2 ** 63 - 1
    waves = [[(0, 1, 1), (1, 2, 1), (2, 3, top)], [(0, 2, 0)]]
    s = Stream(spark, tmp_path, LONG_SSSP.replace("param source_id: long = 1", "param source_id: long = 0"))
    edges = []
    for i, wave in enumerate(waves):
        edges += wave
        write_weighted_json(tmp_path / "in" / f"w{i}.json", wave)
        assert s.run(report=str(tmp_path / "run.json")) == 0
        lp = epoch_loop(str(tmp_path / "run.json"), "sssp")
        assert dict(list(s.output("distances", (int, int)))) == \
            reference.sssp_rounds(edges, 0, 0, reference.wrapping_add), i
    assert lp["strategy"] == "recomputed" and "spark.sql.ansi.enabled=false" in lp["why"], lp
    assert "`dist + w` in select `relax`" in lp["why"], lp
    assert dict(list(s.output("distances", (int, int))))[3] == top  # (the case itself: not wrapped)


def test_a_fixpoint_that_wrapped_around_is_no_start_once_overflows_fail(spark, tmp_path, incremental, ansi_off):
    """Epoch 0 runs with `spark.sql.ansi.enabled=false`: 3 is at `2 + Long.MaxValue`, wrapped. With ANSI mode back
    on, a run over all input fails on that overflow; so must the next epoch, though its new edge (0 -> 5) reaches
    nothing that overflows: it recomputes the loop (the manifest says the fixpoint wrapped) instead of starting
    from the wrapped one, and fails, committing nothing."""
    incremental("always")
    s = Stream(spark, tmp_path, LONG_SSSP.replace("param source_id: long = 1", "param source_id: long = 0"))
    for i, wave in enumerate([[(0, 1, 1), (1, 2, 1), (2, 3, 2 ** 63 - 1)], [(0, 5, 1)]]):
        write_weighted_json(tmp_path / "in" / f"w{i}.json", wave)
        if i == 0:
            assert s.run() == 0
            assert dict(list(s.output("distances", (int, int))))[3] == -2 ** 63 + 1
            assert s.manifest()["loops"]["sssp"]["wrapped"] is True
            spark.conf.unset("spark.sql.ansi.enabled")
        else:
            assert s.run() != 0
    assert s.manifest()["epoch"] == 0
