"""Streaming pipelines (docs/language.md#streaming) on a real Spark: files dropped into a folder in waves,
each run `--trigger available-now`, and after every epoch each sink equals the reference (networkx or plain
Python) over all files so far, as a multiset of rows. The runs here share the test session; the ones with
real processes, signals and kills are in test_streaming_recovery.py."""
from __future__ import annotations

import json
import os
import random
import time
from collections import Counter

import pytest

import reference
from conftest import read_output, write_csv
from scopeflow.api import compile_to_module
from scopeflow.runtime.arguments import SnapshotOptions
from scopeflow.runtime.errors import ExitCode
from scopeflow.runtime.launcher import execute
from scopeflow.runtime.streaming import StreamOptions

pytestmark = pytest.mark.spark

CC = """pipeline scc
source edges = stream files("in", format = "csv", header = true{extra}) schema (src: long, dst: long)
both = edges | union(edges | select(src = dst, dst = src))
init = both | select(id = src, label = src) | distinct
components = loop cc(labels = init) with (e = both) {{
    best   = labels | reduce(by id, label = min(label))
    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)
    feedback labels <- spread
    emit state best
}}
sink components -> csv("out/components", header = true)
"""

SSSP = """pipeline ssssp
param source_id: long = 1
source edges = stream files("in", format = "json") schema (src: long, dst: long, w: double)
start = edges | where(src == source_id) | group(by id = src) | select(id, dist = 0.0)
dists = loop sssp(d = start) with (e = edges) {
    best  = d | reduce(by id, dist = min(dist))
    relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist + e.w)
    feedback d <- relax
    emit state best
}
sink dists -> csv("out/distances", header = true)
"""

# a bounded source (the seeds, read as they are) joined into a loop over a stream
REACH = """pipeline sreach
source edges = stream files("in", format = "csv", header = true) schema (src: long, dst: long)
source seeds = read csv("seeds.csv", header = true) schema (v: long)
reached = loop reach(r = seeds | select(v)) with (e = edges) {
    next = r | join(e, on r.v == e.src) | select(v = e.dst) | union(r) | distinct
    feedback r <- next
    emit next
}
sink reached -> csv("out/reached", header = true)
"""

PAGERANK = """pipeline spagerank
source vertices = read csv("vertices.csv", header = true) schema (id: long)
source edges = stream files("in", format = "parquet") schema (src: long, dst: long)
degrees   = edges | group(by src, out_degree = count())
out_edges = edges | join(degrees, on edges.src == degrees.src) | select(src, dst, out_degree)
ranks = loop pr(r = vertices | select(id, rank = 1.0)) with (e = out_edges) rounds 5 {
    contrib = r | join(e, on r.id == e.src) | select(id = e.dst, c = r.rank / e.out_degree)
    next    = contrib | group(by id, s = sum(c)) | select(id, rank = 0.15 + 0.85 * s)
    feedback r <- next
    emit last next
}
sink ranks -> csv("out/ranks", header = true)
"""

KCORE = """pipeline skcore
source edges = stream files("in", format = "csv", header = true) schema (src: long, dst: long)
both = edges | union(edges | select(src = dst, dst = src))
cores = loop kcore(g = both | derive(k = 1)) {
    stable = loop peel(h = g) until empty(low) {
        deg  = h | group(by src, k = max(k), d = count())
        low  = deg | where(d < k) | select(v = src)
        kept = h | join(low, on h.src == low.v, kind = anti)
                 | join(low, on h.dst == low.v, kind = anti)
        feedback h <- kept
        emit last kept
    }
    alive = stable | group(by s = src)
    gone  = g | group(by v = src, k = max(k)) | join(alive, on v == s, kind = anti)
    emit gone | select(id = v, core = k - 1)
    feedback g <- stable | derive(k = k + 1)
}
sink cores -> csv("out/cores", header = true)
"""


class Stream:
    """A streaming pipeline in a folder of its own: its input folder `in/`, its checkpoint, its runs."""

    def __init__(self, spark, folder, text: str):
        self.spark = spark
        self.folder = folder
        folder.mkdir(exist_ok=True)
        self.flow = folder / "p.flow"
        self.flow.write_text(text)
        (folder / "in").mkdir(exist_ok=True)
        self.checkpoint = str(folder / "ck")
        self.files = 0

    def run(self, trigger="available-now", full_refresh=False, report=None):
        module = compile_to_module(str(self.flow))
        code, _ = execute(module, spark=self.spark, quiet=True, report=report,
                          snapshots=SnapshotOptions(checkpoint=self.checkpoint),
                          stream=StreamOptions(trigger, full_refresh))
        return code

    def drop_csv(self, header, rows, name=None):
        """A new file in `in/`, written beside it and moved in (a stream must never see a half-written file)."""
        self.files += 1
        name = name or f"part-{self.files:04d}.csv"
        tmp = self.folder / f".{name}"
        write_csv(tmp, header, rows)
        os.replace(tmp, self.folder / "in" / name)
        return self.folder / "in" / name

    def output(self, name, types):
        return Counter(read_output(str(self.folder / "out" / name), types))

    def manifest(self):
        folder = os.path.join(self.checkpoint, "scopeflow")
        names = sorted(n for n in os.listdir(folder) if n.startswith("epoch-"))
        with open(os.path.join(folder, names[-1])) as fh:
            return json.load(fh)


def write_weighted_json(path, edges) -> None:
    """Weighted edges (src, dst, w) as a JSON-lines file (Python writes infinities as `Infinity`, which Spark's
    JSON reader takes)."""
    with open(path, "w") as fh:
        fh.writelines(json.dumps({"src": a, "dst": b, "w": w}) + "\n" for a, b, w in edges)


def random_edges(rng, n, vertices):
    return [(rng.randrange(vertices), rng.randrange(vertices)) for _ in range(n)]


def test_connected_components_after_every_wave_equal_networkx(spark, tmp_path):
    """Four waves of edge files (one with its header's columns swapped, one repeating old edges, one isolated
    component); after each, the sink equals networkx over every file so far."""
    s = Stream(spark, tmp_path, CC.format(extra=", max_files_per_epoch = 2"))
    rng = random.Random(7)
    edges: list = []
    waves = [random_edges(rng, 12, 30), random_edges(rng, 10, 40), None, [(100, 101), (101, 102)]]
    for i, wave in enumerate(waves):
        if wave is None:  # a wave of only duplicates: nothing changes
            wave = edges[:5]
        header = ["dst", "src"] if i == 1 else ["src", "dst"]
        half = len(wave) // 2
        for part in (wave[:half], wave[half:]):
            s.drop_csv(header, [(d, c) for c, d in part] if i == 1 else part)
        edges += wave
        assert s.run(report=str(tmp_path / f"r{i}.json")) == ExitCode.OK
        want = Counter(reference.connected_components(edges).items())
        assert s.output("components", (int, int)) == want, f"after wave {i}"
        report = json.loads((tmp_path / f"r{i}.json").read_text())
        assert report["streaming"] and report["status"] == "ok"
        assert sum(e["files"] for e in report["epochs"]) == 2  # two files, at most two an epoch
        assert report["epochs"][-1]["state_rows"] == {"n001": len(edges)}
        assert all(lp["rounds"] >= 1 for e in report["epochs"] for lp in e["loops"])
    assert s.manifest()["rows_so_far"] == len(edges)


def test_files_one_per_epoch_and_an_empty_run(spark, tmp_path):
    """`max_files_per_epoch = 1`: three files are three epochs; a run with no new file runs no epoch and
    changes nothing."""
    s = Stream(spark, tmp_path, CC.format(extra=", max_files_per_epoch = 1"))
    edges = [(1, 2), (3, 4), (2, 3)]
    for e in edges:
        s.drop_csv(["src", "dst"], [e])
    report = tmp_path / "r.json"
    assert s.run(report=str(report)) == ExitCode.OK
    assert [e["epoch"] for e in json.loads(report.read_text())["epochs"]] == [0, 1, 2]
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 3: 1, 4: 1}.items())
    marker = tmp_path / "out" / "components" / "_SCOPEFLOW"
    before = (marker.stat().st_mtime_ns, marker.read_text())
    assert s.run(report=str(report)) == ExitCode.OK
    assert json.loads(report.read_text())["epochs"] == []
    assert (marker.stat().st_mtime_ns, marker.read_text()) == before
    assert json.loads(marker.read_text())["epoch"] == 2


def test_a_late_file_is_read(spark, tmp_path):
    """Spark's file source skips files older than `maxFileAge` (a week) than the newest: scopeflow reads
    every file, whatever its age."""
    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    late = s.drop_csv(["src", "dst"], [(5, 6)])
    old = time.time() - 90 * 86400
    os.utime(late, (old, old))
    assert s.run() == ExitCode.OK
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 5: 5, 6: 5}.items())


@pytest.mark.parametrize("kind", ["sssp", "reach", "pagerank", "kcore"])
def test_loops_over_waves_equal_the_reference(spark, tmp_path, kind):
    """SSSP (JSON files), reachability (a bounded seed table joined into the loop), PageRank with `rounds`
    (Parquet files; not monotone) and k-core (nested loops, `until`): after each of four waves the sink equals
    the reference over all input so far."""
    text = {"sssp": SSSP, "reach": REACH, "pagerank": PAGERANK, "kcore": KCORE}[kind]
    s = Stream(spark, tmp_path, text)
    rng = random.Random(hash(kind) % 1000)
    write_csv(tmp_path / "seeds.csv", ["v"], [(0,), (7,)])
    write_csv(tmp_path / "vertices.csv", ["id"], [(v,) for v in range(20)])
    edges: list = []
    for wave in range(4):
        new = random_edges(rng, 8, 20)
        if kind == "kcore":  # (the k-core pipeline counts a vertex's edges: a simple graph, as networkx's)
            seen = {frozenset(e) for e in edges}
            new = list({frozenset(e): e for e in new if e[0] != e[1] and frozenset(e) not in seen}.values())
        if kind == "sssp":
            new = [(u, v, float(rng.randint(1, 9))) for u, v in new] + ([(1, 2, 1.0)] if wave == 0 else [])
            path = tmp_path / "in" / f"w{wave}.json"
            write_weighted_json(path, new)
        elif kind == "pagerank":
            spark.createDataFrame(new, "src bigint, dst bigint").coalesce(1).write.parquet(
                str(tmp_path / "staged" / f"w{wave}"))
            part = next(f for f in os.listdir(tmp_path / "staged" / f"w{wave}") if f.endswith(".parquet"))
            os.replace(tmp_path / "staged" / f"w{wave}" / part, tmp_path / "in" / f"w{wave}.parquet")
        else:
            s.drop_csv(["src", "dst"], new)
        edges += new
        assert s.run() == ExitCode.OK
        if kind == "sssp":
            got, want = s.output("distances", (int, float)), Counter(reference.sssp(edges, 1).items())
        elif kind == "reach":
            got = s.output("reached", (int,))
            want = Counter((v,) for v in reference.reachable(edges, [0, 7]))
        elif kind == "pagerank":
            got = {k: v for k, v in s.output("ranks", (int, float))}
            want = reference.pagerank_fixed(range(20), edges, rounds=5)
            assert set(got) == set(want), f"after wave {wave}"
            assert all(abs(got[k] - want[k]) < 1e-9 for k in want), f"after wave {wave}"
            continue
        else:
            got = s.output("cores", (int, int))
            want = Counter(reference.core_numbers(edges).items())
        assert got == want, f"after wave {wave}"


def test_a_malformed_file_fails_the_epoch_and_a_fixed_one_continues(spark, tmp_path, capsys):
    """A malformed record fails its epoch with exit 4, naming the file; nothing of that epoch is committed
    (state and sinks stay at the last good epoch); the file fixed in place, a restart continues."""
    s = Stream(spark, tmp_path, CC.format(extra=", max_files_per_epoch = 1"))
    s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    before = s.output("components", (int, int))
    bad = s.drop_csv(["src", "dst"], [(2, 3), ("x", 4)])
    capsys.readouterr()
    assert s.run() == ExitCode.RUNTIME
    err = capsys.readouterr().err
    assert "part-0002.csv" in err and "error[E05" in err, err
    assert s.manifest()["epoch"] == 0
    assert s.output("components", (int, int)) == before
    bad.write_text("src,dst\n2,3\n3,4\n")
    assert s.run() == ExitCode.OK
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 3: 1, 4: 1}.items())


def test_a_file_changed_after_it_was_read_is_refused(spark, tmp_path, capsys):
    s = Stream(spark, tmp_path, CC.format(extra=""))
    first = s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    first.write_text("src,dst\n1,2\n2,9\n")
    s.drop_csv(["src", "dst"], [(5, 6)])
    capsys.readouterr()
    assert s.run() == ExitCode.RUNTIME
    err = capsys.readouterr().err
    assert "error[E0511]" in err and "part-0001.csv changed" in err and "--full-refresh" in err, err
    assert s.run(full_refresh=True) == ExitCode.OK  # recomputed from the files as they are now
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 9: 1, 5: 5, 6: 5}.items())


def test_a_changed_plan_is_refused_and_full_refresh_recomputes(spark, tmp_path, capsys):
    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2), (2, 3)])
    assert s.run() == ExitCode.OK
    s.flow.write_text(CC.format(extra="").replace("label = min(label)", "label = max(label)"))
    capsys.readouterr()
    assert s.run() == ExitCode.SNAPSHOT
    assert "plan changed" in capsys.readouterr().err
    assert s.run(full_refresh=True) == ExitCode.OK
    assert s.output("components", (int, int)) == Counter({1: 3, 2: 3, 3: 3}.items())


def test_a_foreign_checkpoint_folder_is_refused_and_left_alone(spark, tmp_path, capsys):
    s = Stream(spark, tmp_path, CC.format(extra=""))
    os.makedirs(s.checkpoint)
    (tmp_path / "ck" / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert s.run(full_refresh=True) == ExitCode.SNAPSHOT
    assert "not a streaming checkpoint" in capsys.readouterr().err
    assert (tmp_path / "ck" / "notes.txt").read_text() == "mine"


def test_a_replayed_epoch_writes_nothing(spark, tmp_path, capsys):
    """Spark's commit of an epoch deleted (a crash after scopeflow committed the epoch and before Spark did):
    the restart replays the epoch with the same batch id, and neither the sink nor the state change."""
    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    s.drop_csv(["src", "dst"], [(2, 3)])
    assert s.run() == ExitCode.OK
    commits = os.path.join(s.checkpoint, "spark", "commits")
    assert sorted(os.listdir(commits))[-1] == "1"
    os.remove(os.path.join(commits, "1"))
    os.remove(os.path.join(commits, ".1.crc"))  # (as a crash before Spark wrote either leaves it)
    marker = tmp_path / "out" / "components" / "_SCOPEFLOW"
    before = (marker.stat().st_mtime_ns, marker.read_text())
    capsys.readouterr()
    report = tmp_path / "r.json"
    assert s.run(report=str(report)) == ExitCode.OK
    assert (marker.stat().st_mtime_ns, marker.read_text()) == before
    assert json.loads(report.read_text())["epochs"] == []  # the replay ran no epoch of the pipeline
    assert os.path.exists(os.path.join(commits, "1"))  # ... and Spark committed it
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 3: 1}.items())


def test_state_is_compacted(spark, tmp_path, monkeypatch):
    """Eight epochs of one file each, compacting beyond 4 parts: the state is never more than COMPACT_PARTS
    parts, and older manifests are gone. The edges form a star, so each epoch's loop takes few rounds. The
    loop's states are written in the epochs that recompute it (each adds over 25 % to its input until epoch 4)
    and in the one that compacts its input (4: an epoch after a restart could not tell the records after
    older states from the rest), not in the others (`stateEvery` is 10), and once more as the run stops."""
    from scopeflow.runtime import streaming

    monkeypatch.setattr(streaming, "COMPACT_PARTS", 4)
    s = Stream(spark, tmp_path, CC.format(extra=", max_files_per_epoch = 1"))
    edges = [(0, i + 1) for i in range(8)]
    for e in edges:
        s.drop_csv(["src", "dst"], [e])
    report = tmp_path / "run.json"
    assert s.run(report=str(report)) == ExitCode.OK
    doc = json.loads(report.read_text())
    loops = [e["loops"][0] for e in doc["epochs"]]
    assert [lp["strategy"] for lp in loops] == ["recomputed"] * 4 + ["incremental"] * 4
    assert [lp["state_epoch"] for lp in loops] == [0, 1, 2, 3, 4, 4, 4, 4]
    assert [lp["state_rows"] for lp in loops] == [n + 2 for n in range(8)]
    assert doc["states_kept"]["epoch"] == 7
    m = s.manifest()
    parts = m["sources"]["n001"]["parts"]
    assert m["epoch"] == 7 and len(parts) <= 4 and sum(p["rows"] for p in parts) == 8
    assert sorted(os.listdir(os.path.join(s.checkpoint, "scopeflow", "state", "n001"))) == sorted(p["name"] for p in parts)
    assert [n for n in os.listdir(os.path.join(s.checkpoint, "scopeflow")) if n.startswith("epoch-")] == \
        ["epoch-0000000007.json"]
    # the loop's state (kept for its incremental epochs) is one part: the last epoch's
    (scope, kept), = m["loops"].items()
    assert kept["epoch"] == 7 and kept["strategy"] == "incremental"
    for op, doc in kept["states"].items():
        assert os.listdir(os.path.join(s.checkpoint, "scopeflow", "state", f"loop-{scope}-{op}")) == [doc["part"]["name"]]
    assert s.output("components", (int, int)) == Counter({v: 0 for v in range(9)}.items())


RATE = """pipeline srate
source r = stream rate(rows_per_second = 5)
counts = r | group(by parity = value % 2, n = count(), top = max(value))
sink counts -> csv("out/counts", header = true)
"""


def test_a_rate_stream_gives_each_run_its_rows_once(spark, tmp_path):
    """`stream rate(rows_per_second = 5)` under available-now: one epoch of five rows per run (Spark's plain
    rate source would give an empty one), numbered on from the last; the sink counts all rows so far."""
    s = Stream(spark, tmp_path, RATE)
    assert s.run() == ExitCode.OK
    assert s.output("counts", (int, int, int)) == Counter({(0, 3, 4), (1, 2, 3)})
    assert s.run() == ExitCode.OK
    assert s.output("counts", (int, int, int)) == Counter({(0, 5, 8), (1, 5, 9)})
    assert s.manifest()["rows_so_far"] == 10


def test_trigger_once_runs_one_epoch_over_everything_there(spark, tmp_path):
    s = Stream(spark, tmp_path, CC.format(extra=", max_files_per_epoch = 1"))
    s.drop_csv(["src", "dst"], [(1, 2)])
    s.drop_csv(["src", "dst"], [(2, 3)])
    report = tmp_path / "r.json"
    assert s.run(trigger="once", report=str(report)) == ExitCode.OK
    epochs = json.loads(report.read_text())["epochs"]
    assert [e["epoch"] for e in epochs] == [0]
    assert epochs[0]["loops"][0]["strategy"] == "recomputed"
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 3: 1}.items())


def test_a_file_removed_after_it_was_read_is_refused(spark, tmp_path, capsys):
    s = Stream(spark, tmp_path, CC.format(extra=""))
    first = s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    first.unlink()
    s.drop_csv(["src", "dst"], [(5, 6)])
    capsys.readouterr()
    assert s.run() == ExitCode.RUNTIME
    err = capsys.readouterr().err
    assert "error[E0511]" in err and "part-0001.csv was removed after epoch 0 read it" in err, err
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1}.items())  # still epoch 0's


def test_state_lost_behind_sparks_checkpoint_is_refused(spark, tmp_path, capsys):
    """scopeflow's state deleted while Spark's offsets and commits stay: the next epoch would run over part of
    the input only. It is refused (exit 5), and --full-refresh recomputes."""
    import shutil

    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    shutil.rmtree(os.path.join(s.checkpoint, "scopeflow"))
    s.drop_csv(["src", "dst"], [(2, 3)])
    capsys.readouterr()
    assert s.run() == ExitCode.SNAPSHOT
    assert "lacks the input" in capsys.readouterr().err
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1}.items())
    assert s.run(full_refresh=True) == ExitCode.OK
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 3: 1}.items())


def test_file_names_with_glob_characters_are_read_literally(spark, tmp_path):
    """`w[1].csv` is one file, not a pattern that matches `w1.csv`: each file is read once, as it is named."""
    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2)], name="w[1].csv")
    s.drop_csv(["src", "dst"], [(7, 8), (8, 9)], name="w1.csv")
    s.drop_csv(["src", "dst"], [(20, 21)], name="a{b,c}*?.csv")
    assert s.run() == ExitCode.OK
    assert s.manifest()["rows_so_far"] == 4
    assert s.output("components", (int, int)) == Counter(
        {1: 1, 2: 1, 7: 7, 8: 7, 9: 7, 20: 20, 21: 20}.items())


def test_a_restart_with_other_param_values_is_refused(spark, tmp_path, capsys):
    """The sinks hold the result for the params the query started with: a restart with other values is
    refused (exit 5), as a changed plan is."""
    s = Stream(spark, tmp_path, "param lo: long = 0\n" + CC.format(extra="").replace(
        "both = edges |", "both = edges | where(src >= lo) |"))
    s.drop_csv(["src", "dst"], [(1, 2)])
    module = compile_to_module(str(s.flow))
    run = lambda lo: execute(module, params={"lo": lo}, spark=spark, quiet=True,  # noqa: E731
                             snapshots=SnapshotOptions(checkpoint=s.checkpoint),
                             stream=StreamOptions("available-now"))[0]
    assert run(0) == ExitCode.OK
    capsys.readouterr()
    assert run(2) == ExitCode.SNAPSHOT
    err = capsys.readouterr().err
    assert "error: checkpoint refused: its params' values (lo=2, was 0) changed" in err, err


def test_full_refresh_leaves_another_pipelines_checkpoint_alone(spark, tmp_path, capsys):
    other = Stream(spark, tmp_path / "o", CC.format(extra="").replace("pipeline scc", "pipeline other"))
    (tmp_path / "o").mkdir(exist_ok=True)
    other.drop_csv(["src", "dst"], [(1, 2)])
    assert other.run() == ExitCode.OK
    mine = Stream(spark, tmp_path, CC.format(extra=""))
    mine.checkpoint = other.checkpoint
    capsys.readouterr()
    assert mine.run(full_refresh=True) == ExitCode.SNAPSHOT
    assert "belongs to pipeline `other`" in capsys.readouterr().err
    assert json.loads(open(os.path.join(other.checkpoint, "stream.json")).read())["pipeline"] == "other"
    assert other.run() == ExitCode.OK


def test_state_without_sparks_checkpoint_is_refused(spark, tmp_path, capsys):
    """Spark's checkpoint deleted while scopeflow's state stays: a new query would read every file again and
    skip its first epochs as committed. It is refused (exit 5)."""
    import shutil

    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    shutil.rmtree(os.path.join(s.checkpoint, "spark"))
    s.drop_csv(["src", "dst"], [(2, 3)])
    capsys.readouterr()
    assert s.run() == ExitCode.SNAPSHOT
    assert "Spark's checkpoint" in capsys.readouterr().err
    assert s.run(full_refresh=True) == ExitCode.OK
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1, 3: 1}.items())


def test_an_empty_file_fails_the_epoch(spark, tmp_path, capsys):
    """Spark passes over an empty file and marks it seen: rows written into it later would be lost. The epoch
    fails (E0512); with the file removed, the run goes on."""
    s = Stream(spark, tmp_path, CC.format(extra=""))
    s.drop_csv(["src", "dst"], [(1, 2)])
    (tmp_path / "in" / "empty.csv").write_text("")
    capsys.readouterr()
    assert s.run() == ExitCode.RUNTIME
    assert "error[E0512]" in capsys.readouterr().err
    (tmp_path / "in" / "empty.csv").unlink()
    assert s.run() == ExitCode.OK
    assert s.output("components", (int, int)) == Counter({1: 1, 2: 1}.items())


def test_full_refresh_with_no_input_leaves_no_old_result(spark, tmp_path):
    """--full-refresh over a folder emptied since: the sinks hold the result over no input, not the old one."""
    s = Stream(spark, tmp_path, CC.format(extra=""))
    f = s.drop_csv(["src", "dst"], [(1, 2)])
    assert s.run() == ExitCode.OK
    f.unlink()
    assert s.run(full_refresh=True) == ExitCode.OK
    assert s.output("components", (int, int)) == Counter()
