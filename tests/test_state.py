"""`reduce`/`distinct` state between rounds (runtime/state.py): a round folds a small delta into the state's
overlay and a large one into main (a rewrite), and either way the operator's output (the keys the round
changed) and the state equal a plain-Python fold of every delta so far."""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
from collections import Counter

import pytest

import reference
from conftest import EXAMPLES, read_output, write_csv
from scopeflow.api import run_file
from scopeflow.stdlib.settings import STATE_OVERLAY, STATE_OVERLAY_MIN_KEYS
from scopeflow.runtime.checkpoints import Checkpoints
from scopeflow.runtime.counters import Counters
from scopeflow.runtime.state import DistinctState, ReduceState

pytestmark = pytest.mark.spark

AGGS = [("lo", "min"), ("hi", "max"), ("total", "sum"), ("n", "count"), ("some", "any"), ("every", "all")]


class Run:
    """What a state reads of its run: the overlay share, the checkpoints and the counters (the real ones)."""

    def __init__(self, spark, share: float):
        self.share = share
        self.checkpoints = Checkpoints(spark)
        self.counters = Counters(spark)

    def overlay(self) -> tuple[float, int]:
        return self.share, 0  # (a state of any size may have an overlay)


class Round:
    """One round as the state sees it: its estimate of the records in flight and its checkpoints (stored here
    as the round's job would, then counted)."""

    def __init__(self, run: Run, estimate):
        self.run, self.estimate, self.pending = run, estimate, []

    def in_flight_estimate(self):
        return self.estimate

    def checkpoint(self, key, df):
        ck = df.localCheckpoint(eager=True)
        self.pending.append((key, df, ck))
        return ck

    def job(self) -> tuple[dict, dict]:
        counts = {key: ck.count() for key, _, ck in self.pending}
        return counts, self.run.counters.observed([df for _, df, _ in self.pending])


def fold(fn, old, new):
    """A partial result merged into another, nulls holding no value (stdlib's folds, in Python)."""
    if old is None or new is None:
        return new if old is None else old
    return {"min": min, "max": max, "sum": lambda a, b: a + b, "count": lambda a, b: a + b,
            "any": lambda a, b: a or b, "all": lambda a, b: a and b}[fn](old, new)


def random_delta(rng, keys: int, size: int) -> dict:
    """One record per key (a round's aggregated delta); None among the keys and the values."""
    out = {}
    for k in rng.sample([None, *range(keys)], size):
        out[k] = (rng.choice([None, rng.randint(-50, 50)]), rng.randint(-50, 50), rng.choice([None, rng.randint(0, 9)]),
                  rng.randint(1, 3), rng.choice([None, True, False]), rng.choice([None, True, False]))
    return out


SCHEMA = "k long, lo long, hi long, total long, n long, some boolean, every boolean"


@pytest.mark.parametrize("share", [0.25, 0.0])
def test_a_reduce_state_folds_every_aggregate_like_plain_python_through_overlays_and_rewrites(spark, share):
    rng = random.Random(11)
    run = Run(spark, share)
    state = ReduceState("n001", ["k"], AGGS)
    want: dict = {}
    # small deltas go to the overlay (share 0.25 of ~200 keys); the 9th round's is large (a rewrite), and
    # the overlay itself outgrows the share after a few rounds (a rewrite too)
    sizes = [150, 12, 30, 7, 1, 40, 25, 60, 180, 3, 9, 2, 20]
    folds = []
    for size in sizes:
        delta = random_delta(rng, 200, size)
        frame = spark.createDataFrame([(k, *v) for k, v in delta.items()], SCHEMA).repartition("k")
        rnd = Round(run, len(delta))
        out = state.step(rnd, frame)
        state.adopt()
        folds.append(state.commit(*rnd.job()))
        changed = {}
        for k, values in delta.items():
            old = want.get(k)
            new = values if old is None else tuple(fold(fn, o, v) for (_, fn), o, v in zip(AGGS, old, values))
            if new != old:
                changed[k] = new
            want[k] = new
        got = {r["k"]: tuple(r[a] for a, _ in AGGS) for r in out.collect()}
        assert got == changed
        full = {r["k"]: tuple(r[a] for a, _ in AGGS) for r in state.full().collect()}
        assert full == want and state.rows == len(want)
    assert folds[0] == "first"
    if share:
        assert "overlay" in folds and "rewrite" in folds[1:], folds
    else:
        assert set(folds[1:]) == {"rewrite"}, folds


def test_a_distinct_state_through_overlays_and_rewrites_keeps_each_record_once(spark):
    rng = random.Random(5)
    run = Run(spark, 0.25)
    state = DistinctState("n002", ["a", "b"])
    seen: set = set()
    folds = []
    for size in [80, 5, 9, 1, 70, 4, 12]:
        records = [(rng.choice([None, *range(30)]), rng.choice([None, "x", "y", "z"])) for _ in range(size)]
        frame = spark.createDataFrame(records, "a long, b string")
        rnd = Round(run, size)
        out = state.step(rnd, frame)
        state.adopt()
        folds.append(state.commit(*rnd.job()))
        got = sorted(out.collect(), key=repr)
        assert [tuple(r) for r in got] == sorted(set(records) - seen, key=repr)
        seen |= set(records)
        assert sorted(map(tuple, state.full().collect()), key=repr) == sorted(seen, key=repr)
        assert state.rows == len(seen)
    assert "overlay" in folds and "rewrite" in folds[1:], folds


def _min_label_after(edges: list, steps: int) -> dict:
    """Every vertex's label after `steps` rounds of synchronous min-label propagation (plain Python)."""
    nbrs: dict = {}
    for a, b in edges:
        nbrs.setdefault(a, set()).add(b)
        nbrs.setdefault(b, set()).add(a)
    label = {v: v for v in nbrs}
    for _ in range(steps):
        label = {v: min([label[v], *(label[u] for u in nbrs[v])]) for v in nbrs}
    return label


def _tail_edges(pairs: int, path: int) -> list:
    """Disjoint pairs (settled in the first rounds) and a path in id order (a label walks it, a vertex a round)."""
    ids = list(range(path, path + 2 * pairs))
    random.Random(3).shuffle(ids)
    return [(i, i + 1) for i in range(path - 1)] + [(ids[2 * k], ids[2 * k + 1]) for k in range(pairs)]


def test_a_state_nothing_uses_is_freed_at_once(spark):
    """A state holds its checkpoints: when nothing refers to it, it goes at once (and their blocks with it), not
    at Python's next full collection. Its JVM Seqs of column lists (runtime/columns.py) refer nowhere back."""
    import gc
    import weakref

    from pyspark.sql import functions as F

    state = ReduceState("n1", ["id"], [("d", "min")])
    df = spark.createDataFrame([(1, 2.0), (1, 1.0)], "id long, d double")
    state.delta_aggs = [F.min("d").alias("d")]
    assert [tuple(r) for r in state.group(df, "delta").collect()] == [(1, 1.0)]
    assert sorted(tuple(r) for r in state._select(df, "plain").collect()) == [(1, 1.0), (1, 2.0)]
    ref = weakref.ref(state)
    gc.disable()
    try:
        del state
        assert ref() is None
    finally:
        gc.enable()


def test_a_long_tail_of_small_rounds_folds_into_the_overlay_with_the_same_components(spark, tmp_path):
    edges = _tail_edges(150, 18)
    want = reference.connected_components(edges)
    runs = {}
    # (~320 keys: under the default's minimum, a state is rewritten every round)
    counted = {}
    for name, settings in (("overlay", {STATE_OVERLAY_MIN_KEYS: "0"}),
                           ("rewrite", {STATE_OVERLAY_MIN_KEYS: "0", STATE_OVERLAY: "0"}), ("default", {}),
                           ("stored", {STATE_OVERLAY_MIN_KEYS: "0", "spark.scopeflow.deferFeedback": "false"})):
        for key, value in settings.items():
            spark.conf.set(key, value)
        try:
            folder = tmp_path / name
            shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), folder.mkdir() or folder)
            write_csv(folder / "data" / "graph.csv", ["src", "dst"], edges)
            run_file(str(folder / "connected_components.flow"), spark=spark, report=str(folder / "run.json"))
        finally:
            for key in settings:
                spark.conf.unset(key)
        with open(folder / "run.json") as fh:
            doc = json.load(fh)
        got = read_output(str(folder / "out" / "components"), (int, int))
        assert dict(got) == want and len(got) == len(want)
        runs[name] = [how for r in doc["rounds"] for how in r.get("states", {}).values()]
        # (the records: the same whether a round stores its feedback or defers it, as `default` does here)
        counted[name] = ([r["in_flight"] for r in doc["rounds"]],
                         {op: e["records"] for op, e in doc["operators"].items()})
        # (the shared union, read by the loop's entry and its import at once: every record, once; a CI run read half,
        # tests/test_runtime.py forces how)
        assert doc["operators"]["n003"]["records"] == 2 * len(edges), name
    # the path's rounds change a vertex or two of ~320: they fold into the overlay
    assert runs["overlay"].count("overlay") >= 10, runs["overlay"]
    assert len(runs["rewrite"]) == len(runs["overlay"]) == len(runs["default"])
    assert set(runs["rewrite"]) == set(runs["default"]) == {"first", "rewrite"}, runs
    # (which rounds go into the overlay depends on planning ahead, which follows measured times: not compared)
    assert counted["overlay"] == counted["rewrite"] == counted["default"] == counted["stored"]


@pytest.mark.parametrize("setting, says", [
    (f"{STATE_OVERLAY}=half", "expected a share of a state's keys from 0 to 1"),
    (f"{STATE_OVERLAY}=1.5", "expected a share of a state's keys from 0 to 1"),
    (f"{STATE_OVERLAY}=-0.1", "expected a share of a state's keys from 0 to 1"),
    (f"{STATE_OVERLAY_MIN_KEYS}=many", "expected a number of keys, at least 0"),
])
def test_a_bad_overlay_setting_is_a_usage_error_before_spark_starts(run_cli, tmp_path, setting, says):
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), tmp_path)
    write_csv(tmp_path / "data" / "graph.csv", ["src", "dst"], [(1, 2)])
    out = run_cli("run", str(tmp_path / "connected_components.flow"), "--conf", setting,
                  env={**os.environ, "JAVA_HOME": "/nonexistent", "PATH": os.path.dirname(sys.executable)})
    assert out.returncode == 2, out.stderr
    assert f"--conf {setting}: {says}" in out.stderr
    assert not (tmp_path / "out").exists()


def test_a_run_resumed_from_a_snapshot_taken_mid_overlay_rewrites_the_restored_state_first(spark, tmp_path,
                                                                                           monkeypatch):
    """A snapshot holds the state with its overlay applied, and its exact size; a resumed run starts from it as
    main (read back from files), rewrites it into a round checkpoint before any round folds into an overlay, and
    ends with the reference components."""
    from scopeflow.runtime.arguments import SnapshotOptions
    from scopeflow.runtime.snapshots import SnapshotStore

    edges = _tail_edges(150, 18)
    want = reference.connected_components(edges)
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), tmp_path)
    write_csv(tmp_path / "data" / "graph.csv", ["src", "dst"], edges)
    flow, ck = str(tmp_path / "connected_components.flow"), str(tmp_path / "ck")
    spark.conf.set(STATE_OVERLAY_MIN_KEYS, "0")
    try:
        with monkeypatch.context() as m:  # the first run leaves its snapshots, as a run that died at its end
            m.setattr(SnapshotStore, "finished", lambda self: self.wait())
            job = run_file(flow, spark=spark, snapshots=SnapshotOptions(checkpoint=ck, every=1, keep=100))
        folds = [list(r.get("states", {}).values()) for r in job.report["rounds"]]
        mid = next(i for i, f in enumerate(folds) if i > 4 and f == ["overlay"] and folds[i - 1] == ["overlay"])
        snaps = sorted(d for d in os.listdir(ck) if d.startswith("snap-"))
        keep = snaps[mid]  # after round `mid`, which folded into the overlay
        with open(os.path.join(ck, keep, "manifest.json")) as fh:
            level = json.load(fh)["stack"][0]
        assert level["round"] == mid + 1
        (state,) = level["states"].values()
        assert state["main_rows"] == len(want)  # every vertex, counted across main and the overlay
        # the snapshot holds the labels after round `mid` (main with the overlay applied): min-label propagation
        # `mid` steps from every vertex labelled with itself
        i = state["main"]["frame"]
        held = {r["id"]: r["label"] for r in spark.read.parquet(os.path.join(ck, keep, "data"))
                .where(f"_f = {i}").select(f"s{i}.*").collect()}
        assert held == _min_label_after(edges, mid)
        for later in snaps[mid + 1:]:
            shutil.rmtree(os.path.join(ck, later))
        os.remove(os.path.join(ck, "sinks.json"))
        shutil.rmtree(tmp_path / "out")
        job = run_file(flow, spark=spark, snapshots=SnapshotOptions(checkpoint=ck, every=1, keep=100, resume=True))
    finally:
        spark.conf.unset(STATE_OVERLAY_MIN_KEYS)
    assert job.report["resumed_from"]["snapshot"] == keep
    after = [list(r.get("states", {}).values()) for r in job.report["rounds"]]
    assert after[0] == ["rewrite"] and ["overlay"] in after[1:], after
    got = read_output(str(tmp_path / "out" / "components"), (int, int))
    assert dict(got) == want and len(got) == len(want)


def test_incremental_epochs_carry_a_state_with_its_overlay_and_read_it_back(spark, tmp_path):
    """Streaming connected components, every epoch after the first from the previous fixpoint, with overlays
    on a small state: three epochs in one run (the state and its overlay carried in this process), then one in
    a second run (the state read back from the checkpoint); after each run the sink equals the reference."""
    from test_streaming import CC, Stream

    # a path 1000 - 1010 - ... - 1110 (its labels settle in the overlay, main keeps older ones) and disjoint
    # pairs; the first wave ties the pair (1055, 4000) to the path's far end: its label 1055 lies between that
    # vertex's label in main and its true one (1000), so a fold that lost the carried overlay goes wrong
    path = list(range(1000, 1120, 10))
    base = list(zip(path, path[1:])) + [(1055, 4000)] + [(5000 + 2 * k, 5001 + 2 * k) for k in range(100)]
    waves = [base, [(1055, path[-1])], [(5001, 5002)], [(5003, 10_000), (10_000, 10_001)]]
    spark.conf.set(STATE_OVERLAY_MIN_KEYS, "0")
    spark.conf.set("spark.scopeflow.incremental", "always")
    try:
        s = Stream(spark, tmp_path / "s", CC.format(extra=", max_files_per_epoch = 1"))
        for i, wave in enumerate(waves[:3]):  # (read in the order of their modification times)
            path = s.drop_csv(["src", "dst"], wave, name=f"w{i}.csv")
            os.utime(path, (1e9 + 10 * i, 1e9 + 10 * i))
        assert s.run(report=str(tmp_path / "one.json")) == 0
        want = reference.connected_components([e for w in waves[:3] for e in w])
        assert s.output("components", (int, int)) == Counter(want.items())
        s.drop_csv(["src", "dst"], waves[3], name="w3.csv")
        assert s.run(report=str(tmp_path / "two.json")) == 0
    finally:
        spark.conf.unset(STATE_OVERLAY_MIN_KEYS)
        spark.conf.unset("spark.scopeflow.incremental")
    want = reference.connected_components([e for w in waves for e in w])
    assert s.output("components", (int, int)) == Counter(want.items())
    for name, epochs in (("one", [0, 1, 2]), ("two", [3])):
        with open(tmp_path / f"{name}.json") as fh:
            entries = json.load(fh)["epochs"]
        assert [e["epoch"] for e in entries] == epochs
        assert [e["loops"][0]["strategy"] for e in entries] == ["recomputed" if n == 0 else "incremental" for n in epochs]
        assert entries[-1]["loops"][0]["state_rows"] == len(want if name == "two" else
                                                             reference.connected_components(
                                                                 [e for w in waves[:3] for e in w]))
