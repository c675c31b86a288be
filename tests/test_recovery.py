"""Snapshots and exact recovery with real processes and real signals (SIGKILL), checked against references."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import reference
from conftest import EXAMPLES, read_output

pytestmark = pytest.mark.spark
DATA = os.path.join(EXAMPLES, "data")


def scopeflow(*args, env=None):
    return [sys.executable, "-m", "scopeflow.cli", *args]


def copy_example(tmp_path, name):
    shutil.copytree(os.path.join(DATA), tmp_path / "data", dirs_exist_ok=True)
    shutil.copy(os.path.join(EXAMPLES, name), tmp_path / name)
    return str(tmp_path / name)


def write_path_graph(path, vertices: int, seed: int) -> None:
    """A path 1 - 2 - ... - n with its edges in shuffled order: connected components takes ~n rounds."""
    order = list(range(1, vertices))
    random.Random(seed).shuffle(order)
    path.write_text("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in order))


class Harness:
    """Runs `scopeflow run` as a subprocess, SIGKILLs it, resumes, until it completes.

    Kills are paced by the job's own progress, not by the wall clock: a kill comes once the run has
    committed a random number of new snapshots since it started, plus a random extra delay that lands
    it mid-round, mid-snapshot-write or mid-sink-commit.  So every kill is a real interruption and every
    resume makes progress, on a slow machine and on a fast one alike.
    """

    def __init__(self, flow, args, rng, checkpoint):
        self.flow = flow
        self.args = ["--checkpoint", str(checkpoint), *args]
        self.rng = rng
        self.checkpoint = checkpoint
        self.kills = 0
        self.resumes = 0

    def start(self, resume: bool, fault: str | None = None):
        env = dict(os.environ)
        env.pop("SCOPEFLOW_FAULT", None)
        if fault:
            env["SCOPEFLOW_FAULT"] = fault
        cmd = scopeflow("run", self.flow, "--quiet", *self.args, *(["--resume"] if resume else []))
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)

    def committed(self) -> int:
        """Sequence number of the newest committed snapshot (0 when there is none)."""
        try:
            names = os.listdir(self.checkpoint)
        except FileNotFoundError:
            return 0
        return max([int(n[5:]) for n in names if n.startswith("snap-") and not n.endswith(".tmp")
                    and os.path.exists(os.path.join(self.checkpoint, n, "manifest.json"))], default=0)

    def kill_after_progress(self, proc, snapshots: int, extra: float) -> bool:
        """SIGKILL the process group once `snapshots` new snapshots are committed, `extra` s later.

        False if the run finished first."""
        target = self.committed() + snapshots
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if self.committed() >= target:
                time.sleep(extra)
                if proc.poll() is not None:
                    break
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self.kills += 1
                return True
            time.sleep(0.05)
        proc.communicate(timeout=600)
        return False

    def run(self, kills: int, most_snapshots: int = 3, faults=()):
        """Up to `kills` progress-paced kills, then one run per fault (killed at that code point), then to the end."""
        resume = False
        for _ in range(kills):
            proc = self.start(resume)
            finished = not self.kill_after_progress(proc, self.rng.randint(1, most_snapshots),
                                                    self.rng.uniform(0.0, 1.5))
            resume = True
            if finished:
                assert proc.returncode == 0, proc.stderr.read()
                return proc
            self.resumes += 1
        for fault in faults:
            proc = self.start(resume, fault)
            proc.communicate(timeout=600)
            assert proc.returncode in (0, -signal.SIGKILL), proc.returncode
            if proc.returncode == 0:
                return proc
            self.kills += 1
            resume = True
        proc = self.start(True)
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        return proc


def _kill_cc_on_a_path(tmp_path, rng) -> int:
    """Connected components on a 100-vertex path (edges shuffled): ~100 rounds, a snapshot every 3."""
    cc = copy_example(tmp_path, "connected_components.flow")
    write_path_graph(tmp_path / "data" / "path100.csv", 100, seed=11)
    h = Harness(cc, ["--param", "edges_path=data/path100.csv", "--snapshot-every", "3"], rng, tmp_path / "ck")
    h.run(12, most_snapshots=2, faults=["snapshot-write", "sink-commit"])
    got = read_output(str(tmp_path / "out/components"), (int, int))
    edges = reference.read_csv_rows(str(tmp_path / "data" / "path100.csv"), (int, int))
    assert Counter(got) == Counter(reference.connected_components(edges).items())
    return h.kills


def _kill_sssp(tmp_path, rng) -> int:
    sp = copy_example(tmp_path, "sssp.flow")
    h = Harness(sp, ["--snapshot-every", "1"], rng, tmp_path / "ck")
    h.run(3, most_snapshots=1, faults=["snapshot-write"])
    got = read_output(str(tmp_path / "out/distances"), (int, float))
    wedges = reference.read_csv_rows(os.path.join(DATA, "wgraph.csv"), (int, int, float))
    assert Counter(got) == Counter(reference.sssp(wedges, 1).items())
    return h.kills


def _kill_nested_kcore(tmp_path, rng) -> int:
    """Snapshots inside the inner loop hold the outer loop's round too."""
    kc = copy_example(tmp_path, "kcore.flow")
    h = Harness(kc, ["--snapshot-every", "1"], rng, tmp_path / "ck")
    h.run(3, most_snapshots=2, faults=["snapshot-write"])
    got = read_output(str(tmp_path / "out/cores"), (int, int))
    edges = reference.read_csv_rows(os.path.join(DATA, "kcore.csv"), (int, int))
    assert Counter(got) == Counter(reference.core_numbers(edges).items())
    return h.kills


@pytest.mark.soak
def test_kill_and_resume_cc_sssp_kcore_match_references(tmp_path):
    """At least 20 SIGKILL/resume cycles over three pipelines; every output equals its reference exactly.

    The three pipelines run side by side (each its own processes, directories and random stream), so
    the many JVM start-ups overlap; kills are paced by each run's own snapshot progress."""
    cases = [_kill_cc_on_a_path, _kill_sssp, _kill_nested_kcore]
    dirs = []
    for i, case in enumerate(cases):
        dirs.append(tmp_path / case.__name__.strip("_"))
        dirs[-1].mkdir()
    with ThreadPoolExecutor(len(cases)) as pool:
        futures = [pool.submit(case, d, random.Random(20261122 + i)) for i, (case, d) in enumerate(zip(cases, dirs))]
        kills = [f.result() for f in futures]
    print(f"\n{sum(kills)} SIGKILLs ({', '.join(map(str, kills))}), all outputs exact")
    assert sum(kills) >= 20


def _report(path):
    with open(path) as fh:
        return json.load(fh)


@pytest.mark.soak
def test_resume_mid_nested_loop_continues_where_it_stopped(tmp_path, run_cli):
    kc = copy_example(tmp_path, "kcore.flow")
    ck = str(tmp_path / "ck")
    env = dict(os.environ, SCOPEFLOW_FAULT="snapshot-write")
    # first run dies while writing its first snapshot: that snapshot has no manifest and does not exist
    proc = subprocess.run(scopeflow("run", kc, "--quiet", "--checkpoint", ck, "--snapshot-every", "2"),
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL
    report = tmp_path / "r.json"
    proc = run_cli("run", kc, "--checkpoint", ck, "--snapshot-every", "2", "--resume", "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    assert "not usable" in proc.stderr and "no committed manifest" in proc.stderr
    edges = reference.read_csv_rows(os.path.join(DATA, "kcore.csv"), (int, int))
    assert Counter(read_output(str(tmp_path / "out/cores"), (int, int))) == \
        Counter(reference.core_numbers(edges).items())
    # a run that takes snapshots inside the inner loop, killed after one, resumes mid-inner-loop
    shutil.rmtree(tmp_path / "out")
    proc = subprocess.Popen(scopeflow("run", kc, "--quiet", "--checkpoint", ck, "--snapshot-every", "1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline:  # wait for a snapshot taken inside the nested loop
        snaps = [d for d in os.listdir(ck) if d.startswith("snap-") and
                 os.path.exists(os.path.join(ck, d, "manifest.json"))]
        nested = [d for d in snaps if len(json.load(open(os.path.join(ck, d, "manifest.json")))["stack"]) == 2]
        if nested or proc.poll() is not None:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    proc = run_cli("run", kc, "--checkpoint", ck, "--resume", "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    data = _report(report)
    if "resumed_from" in data:
        assert data["resumed_from"]["stack"][0]["scope"] == "kcore"
    assert Counter(read_output(str(tmp_path / "out/cores"), (int, int))) == \
        Counter(reference.core_numbers(edges).items())


def _snapshots(ck):
    return sorted(d for d in os.listdir(ck) if d.startswith("snap-"))


def _interrupted_run(tmp_path, flow, ck, every="3", extra=()):
    env = dict(os.environ, SCOPEFLOW_FAULT="sink-commit")
    proc = subprocess.run(scopeflow("run", flow, "--quiet", "--checkpoint", ck, "--snapshot-every", every, *extra),
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL
    assert _snapshots(ck)


def test_refusals_exit_5_and_touch_nothing(tmp_path, run_cli):
    cc = copy_example(tmp_path, "connected_components.flow")
    ck = str(tmp_path / "ck")
    _interrupted_run(tmp_path, cc, ck)
    before = {d: sorted(os.listdir(os.path.join(ck, d))) for d in _snapshots(ck)}

    # changed plan: the message says what changed
    text = open(cc).read()
    open(cc, "w").write(text.replace("min(label)", "max(label)"))
    proc = run_cli("run", cc, "--checkpoint", ck, "--resume")
    assert proc.returncode == 5, proc.stderr
    assert "plan changed" in proc.stderr and "changed: n009" in proc.stderr and "reduce best" in proc.stderr
    open(cc, "w").write(text)

    # changed input
    data = tmp_path / "data" / "graph.csv"
    original = data.read_text()
    data.write_text(original + "999,998\n")
    proc = run_cli("run", cc, "--checkpoint", ck, "--resume")
    assert proc.returncode == 5 and "input changed" in proc.stderr and "graph.csv" in proc.stderr
    data.write_text(original)

    # foreign snapshot (another pipeline's)
    latest = os.path.join(ck, _snapshots(ck)[-1], "manifest.json")
    manifest = json.load(open(latest))
    foreign = dict(manifest, pipeline="someone_else")
    saved = open(latest).read()
    open(latest, "w").write(json.dumps(foreign))
    proc = run_cli("run", cc, "--checkpoint", ck, "--resume")
    assert proc.returncode == 5 and "taken by pipeline `someone_else`" in proc.stderr
    open(latest, "w").write(saved)
    assert {d: sorted(os.listdir(os.path.join(ck, d))) for d in _snapshots(ck)} == before
    assert not os.path.exists(tmp_path / "out" / "components"), "refused runs write no output"


@pytest.mark.soak
def test_corrupt_and_truncated_snapshots_fall_back_or_refuse(tmp_path, run_cli):
    cc = copy_example(tmp_path, "connected_components.flow")
    ck = str(tmp_path / "ck")
    _interrupted_run(tmp_path, cc, ck, every="2", extra=("--keep-snapshots", "3"))
    snaps = _snapshots(ck)
    assert len(snaps) >= 2
    newest = os.path.join(ck, snaps[-1])
    part = next(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(newest, "data")) for f in fs
                if f.endswith(".parquet"))
    with open(part, "r+b") as fh:  # truncate a data file of the newest snapshot
        fh.truncate(max(1, os.path.getsize(part) // 2))
    proc = run_cli("run", cc, "--checkpoint", ck, "--resume", "--trace")
    assert proc.returncode == 0, proc.stderr
    assert f"snapshot {snaps[-1]} is not usable" in proc.stderr and "checksum mismatch" in proc.stderr
    edges = reference.read_csv_rows(os.path.join(DATA, "graph.csv"), (int, int))
    assert dict(read_output(str(tmp_path / "out/components"), (int, int))) == reference.connected_components(edges)

    # every snapshot corrupt: refuse with exit 5, leave them and the output as they are
    _interrupted_run(tmp_path, cc, ck, every="2")
    out_before = sorted(read_output(str(tmp_path / "out/components"), (int, int)))
    for snap in _snapshots(ck):
        with open(os.path.join(ck, snap, "manifest.json"), "w") as fh:
            fh.write("{not json")
    listing = sorted(os.listdir(ck))
    proc = run_cli("run", cc, "--checkpoint", ck, "--resume")
    assert proc.returncode == 5 and "no usable snapshot" in proc.stderr
    assert sorted(os.listdir(ck)) == listing
    assert sorted(read_output(str(tmp_path / "out/components"), (int, int))) == out_before


def test_resume_without_snapshot_starts_fresh_and_says_so(tmp_path, run_cli):
    cc = copy_example(tmp_path, "connected_components.flow")
    proc = run_cli("run", cc, "--checkpoint", str(tmp_path / "ck"), "--resume")
    assert proc.returncode == 0 and "starting from the beginning" in proc.stderr


@pytest.mark.soak
@pytest.mark.parametrize("mode", ["async", "recompute"])
def test_async_and_recompute_modes_give_the_same_output(tmp_path, mode):
    cc = copy_example(tmp_path, "connected_components.flow")
    write_path_graph(tmp_path / "data" / "path36.csv", 36, seed=3)  # ~36 rounds: room for a kill after 12
    args = ["--param", "edges_path=data/path36.csv", "--snapshot-every", "4"]
    args += ["--async-snapshots"] if mode == "async" else ["--snapshot-mode", "recompute"]
    h = Harness(cc, args, random.Random(7), tmp_path / "ck")
    h.run(1, faults=["sink-commit"])  # killed mid-loop, then again while committing the sink
    assert h.kills == 2, "every kill must land before the run completes"
    edges = reference.read_csv_rows(str(tmp_path / "data" / "path36.csv"), (int, int))
    assert Counter(read_output(str(tmp_path / "out/components"), (int, int))) == \
        Counter(reference.connected_components(edges).items())


def test_the_snapshot_recompute_loop_option_keeps_positions_only(tmp_path, run_cli):
    """`snapshot recompute` on one loop (docs/language.md#loops): its snapshots hold no state, and a resumed
    run recomputes the loop and gives the uninterrupted run's output."""
    cc = copy_example(tmp_path, "connected_components.flow")
    text = open(cc).read()
    assert "with (e = both) {" in text
    open(cc, "w").write(text.replace("with (e = both) {", "with (e = both) snapshot every 2 snapshot recompute {"))
    ck = str(tmp_path / "ck")
    _interrupted_run(tmp_path, cc, ck, every="1000")  # the loop's own `snapshot every 2` decides
    with open(os.path.join(ck, _snapshots(ck)[-1], "manifest.json")) as fh:
        level = json.load(fh)["stack"][0]
    assert level["scope"] == "cc" and level["recompute"] is True and "variables" not in level and "states" not in level
    proc = run_cli("run", cc, "--checkpoint", ck, "--resume")
    assert proc.returncode == 0, proc.stderr
    edges = reference.read_csv_rows(os.path.join(DATA, "graph.csv"), (int, int))
    assert dict(read_output(str(tmp_path / "out/components"), (int, int))) == reference.connected_components(edges)


def _grid_edges(n: int) -> list[tuple[int, int, float]]:
    """A weighted grid with edges right and down: many paths reach each vertex, so many records per key."""
    out = []
    for i in range(n):
        for j in range(n):
            v = i * n + j + 1
            if j + 1 < n:
                out.append((v, v + 1, float((i * 7 + j * 3) % 5 + 1)))
            if i + 1 < n:
                out.append((v, v + n, float((i * 3 + j * 5) % 4 + 1)))
    return out


COMBINED_FLOWS = {
    # the variable has a column its reduce does not read: the snapshot holds the reduce's aggregates
    "reduce": ("""
        pipeline via
        source edges = read csv("edges.csv", header = true) schema (src: long, dst: long, w: double)
        start = edges | where(src == 1) | group(by id = src) | select(id, dist = 0.0, via = id)
        dists = loop sp(d = start) with (e = edges) {
            best  = d | reduce(by id, dist = min(dist))
            relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist + e.w, via = best.id)
            feedback d <- relax
            emit state best
        }
        sink dists -> csv("out/o", header = true)
    """, "sp", "d"),
    "distinct": ("""
        pipeline tc
        source edges = read csv("edges.csv", header = true) schema (src: long, dst: long, w: double)
        hops = edges | select(mid = src, to = dst)
        closure = loop tc(p = edges | select(src, dst)) with (e = hops) {
            fresh    = p | distinct
            extended = fresh | join(e, on fresh.dst == e.mid) | select(src, dst = to)
            feedback p <- extended
            emit fresh
        }
        sink closure -> csv("out/o", header = true)
    """, "tc", "p"),
}


@pytest.mark.parametrize("case,above", [("distinct", 0), ("reduce", 0), ("reduce", 10 ** 6)])
def test_resume_from_a_snapshot_of_combined_feedback(spark, tmp_path, monkeypatch, combine_above, case, above):
    # records fed back to a variable whose only reader combines them are snapshotted combined; a run
    # resumed from such a snapshot mid-loop gives the reference result, and combines in the same rounds
    # as the uninterrupted run (above = 10**6: a reduce's feedback is combined in the first round only)
    import textwrap

    from scopeflow.api import run_file
    from scopeflow.runtime.arguments import SnapshotOptions
    from scopeflow.runtime.snapshots import SnapshotStore

    text, scope, var = COMBINED_FLOWS[case]
    edges = _grid_edges(5)
    with open(tmp_path / "edges.csv", "w") as fh:
        fh.write("src,dst,w\n" + "".join(f"{s},{d},{w}\n" for s, d, w in edges))
    flow = tmp_path / "f.flow"
    flow.write_text(textwrap.dedent(text))
    ck = str(tmp_path / "ck")
    combine_above(above)  # 0: every round's feedback combined, however few records
    if case == "reduce":
        types, want = (int, float), set(reference.sssp(edges, 1).items())
    else:
        types, want = (int, int), reference.transitive_closure([(s, d) for s, d, _ in edges])
    with monkeypatch.context() as m:  # the first run leaves its snapshots, as a run that died at its end
        m.setattr(SnapshotStore, "finished", lambda self: self.wait())
        job = run_file(str(flow), spark=spark, snapshots=SnapshotOptions(checkpoint=ck, every=1, keep=100))
    rounds = [r for r in job.report["rounds"] if r["scope"] == scope]
    combined_rounds = [r["round"] for r in rounds if r["stored"][var] < r["in_flight"][var]]
    if above == 0:
        assert combined_rounds, "nothing to combine in this graph"
    else:
        assert not [n for n in combined_rounds if n > 0], "a reduce combined after rounds below the threshold"
    assert set(read_output(str(tmp_path / "out/o"), types)) == want
    snaps = _snapshots(ck)
    assert len(snaps) == len(rounds) - 1 >= 4
    keep = snaps[2]  # after round 2: its variable holds the combined records of round 2
    with open(os.path.join(ck, keep, "manifest.json")) as fh:
        level = json.load(fh)["stack"][0]
    assert level["round"] == 3 and list(level["combined"]) == ([var] if above == 0 else [])
    assert level["received"][var] == rounds[2]["in_flight"][var]  # the records fed back, not the stored ones
    for later in snaps[3:]:
        shutil.rmtree(os.path.join(ck, later))
    os.remove(os.path.join(ck, "sinks.json"))
    shutil.rmtree(tmp_path / "out")
    job = run_file(str(flow), spark=spark, snapshots=SnapshotOptions(checkpoint=ck, every=1, keep=100, resume=True))
    assert job.report["resumed_from"]["snapshot"] == keep
    resumed = [r for r in job.report["rounds"] if r["scope"] == scope]
    assert [r["round"] for r in resumed] == [r["round"] for r in rounds[3:]]
    assert [r["in_flight"] for r in resumed] == [r["in_flight"] for r in rounds[3:]]
    assert [r["stored"] for r in resumed] == [r["stored"] for r in rounds[3:]]
    assert resumed[0]["counts"][next(k for k, o in job.operators.items() if (o.kind, o.name) == ("var", var))] \
        == rounds[2]["in_flight"][var]
    got = read_output(str(tmp_path / "out/o"), types)
    assert len(got) == len(set(got)) and set(got) == want
