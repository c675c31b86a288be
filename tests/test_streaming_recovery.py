"""Streaming pipelines as real processes: SIGKILLs at every window of an epoch (Spark's offset log, the state
write, the sink's swap, scopeflow's commit, Spark's commit log) and at random moments, restarts until done;
a long-running processing-time query polled while files arrive and stopped by SIGTERM; the compiled script.
Every result is checked against networkx over the files so far."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

import reference
from conftest import read_output, write_csv
from test_streaming import SSSP as STREAM_SSSP, write_weighted_json

pytestmark = pytest.mark.spark

CC = """pipeline scc
source edges = stream files("in", format = "csv", header = true, max_files_per_epoch = 1) schema (src: long, dst: long)
both = edges | union(edges | select(src = dst, dst = src))
init = both | select(id = src, label = src) | distinct
components = loop cc(labels = init) with (e = both) {
    best   = labels | reduce(by id, label = min(label))
    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)
    feedback labels <- spread
    emit state best
}
sink components -> csv("out/components", header = true)
"""


def scopeflow(*args):
    return [sys.executable, "-m", "scopeflow.cli", *args]


class Folder:
    def __init__(self, tmp_path):
        self.root = tmp_path
        (tmp_path / "in").mkdir()
        self.flow = tmp_path / "p.flow"
        self.flow.write_text(CC)
        self.checkpoint = tmp_path / "ck"
        self.edges: list = []
        self.waves: list = []  # the edges after each file

    def drop(self, rows) -> None:
        n = len(self.waves)
        write_csv(self.root / f".w{n}.csv", ["src", "dst"], rows)
        os.replace(self.root / f".w{n}.csv", self.root / "in" / f"w{n:03d}.csv")
        self.edges += rows
        self.waves.append(list(self.edges))

    def start(self, *args, fault=None, trigger="available-now", incremental="auto"):
        env = dict(os.environ)
        env.pop("SCOPEFLOW_FAULT", None)
        if fault:
            env["SCOPEFLOW_FAULT"] = fault
        return subprocess.Popen(scopeflow("run", str(self.flow), "--trigger", trigger, "--checkpoint",
                                          str(self.checkpoint), "--conf", f"spark.scopeflow.incremental={incremental}",
                                          *args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)

    def sink(self):
        return Counter(read_output(str(self.root / "out" / "components"), (int, int)))

    def expected(self, edges=None):
        return Counter(reference.connected_components(self.edges if edges is None else edges).items())

    def committed(self) -> int:
        """The last epoch scopeflow committed (-1: none)."""
        folder = self.checkpoint / "scopeflow"
        names = [n for n in os.listdir(folder) if n.startswith("epoch-")] if folder.is_dir() else []
        return max((int(n[6:16]) for n in names), default=-1)

    def log_offsets_of_files(self) -> dict:
        """{file name: the offset of Spark's file-source log that holds it} (files of equal times come in any
        order, so which file is read when is Spark's choice, kept in its checkpoint)."""
        out = {}
        folder = self.checkpoint / "spark" / "sources" / "0"
        for name in os.listdir(folder) if folder.is_dir() else ():
            if name.startswith("."):
                continue
            for line in (folder / name).read_text().splitlines()[1:]:
                entry = json.loads(line)
                out[os.path.basename(entry["path"])] = entry["batchId"]
        return out

    def expected_at(self, epoch: int):
        """networkx over the files of epochs up to `epoch`: those up to the source-log offset that Spark's
        offset log gives as the end of that epoch. (A log offset is not an epoch: a run killed after its source
        logged a file and before the epoch's offsets were written puts that file and the next in one epoch.)"""
        lines = (self.checkpoint / "spark" / "offsets" / str(epoch)).read_text().splitlines()
        end = json.loads(lines[2])["logOffset"]
        rows = [r for name, b in self.log_offsets_of_files().items() if b <= end
                for r in reference.read_csv_rows(str(self.root / "in" / name), (int, int))]
        return self.expected(rows)

    def writes(self) -> list:
        log = self.checkpoint / "scopeflow" / "writes.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def path_waves(folder: Folder, files: int, rng) -> None:
    """`files` files of a shuffled path, so every epoch's loop runs several rounds and the components merge."""
    order = list(range(files * 4))
    rng.shuffle(order)
    for i in range(files):
        folder.drop([(v, v + 1) for v in order[i * 4:(i + 1) * 4]])


@pytest.mark.soak
def test_a_kill_in_every_window_of_an_epoch_loses_and_repeats_nothing(tmp_path):
    """Ten files, one an epoch. Each run is SIGKILLed at another point of an epoch: after Spark's offset log
    (epoch start), after the stream's part is written, after the loop's state is written, in a sink's swap,
    after the sink's commit, before scopeflow's commit, after scopeflow's commit and before Spark's commit
    log; the runs' loops are incremental (from the previous epoch's fixpoint) or recomputed in turn. Then a
    run to the end: the sink equals networkx over all files, and every epoch was written once."""
    f = Folder(tmp_path)
    path_waves(f, 10, random.Random(3))
    faults = [("stream-epoch-start@2", "off"), ("stream-part-written@2", "always"),
              ("stream-loop-state-written@1", "always"),
              ("sink-commit@1", "always"), ("sink-committed@2", "off"), ("stream-before-commit@1", "always"),
              ("stream-epoch-committed@2", "always")]
    for fault, mode in faults:
        before = f.committed()
        # (every epoch writes its loop's states, so that a kill lands in an epoch's state write)
        proc = f.start("--conf", "spark.scopeflow.incremental.stateEvery=1", fault=fault, incremental=mode)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == -signal.SIGKILL, (fault, proc.returncode, err)
        assert f.committed() >= before
        marker = tmp_path / "out" / "components" / "_SCOPEFLOW"
        if marker.exists():  # whatever the window, the sink is one epoch's whole result
            epoch = json.loads(marker.read_text())["epoch"]
            assert f.sink() == f.expected_at(epoch), (fault, epoch)
    proc = f.start(incremental="always")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert f.committed() == 9
    assert f.sink() == f.expected()
    writes = [(w["epoch"], w["sink"]) for w in f.writes()]
    assert len(writes) == len(set(writes)), Counter(writes).most_common(3)
    assert {e for e, _ in writes} <= set(range(10))
    marker = json.loads((tmp_path / "out" / "components" / "_SCOPEFLOW").read_text())
    assert marker["epoch"] == 9


def test_a_killed_run_starts_from_the_states_last_written_and_a_clean_stop_keeps_its_last(tmp_path):
    """`spark.scopeflow.incremental.stateEvery=3`: an incremental loop's states go to the checkpoint in the epoch
    that recomputes it and then every third epoch, not in every one. A run SIGKILLed right after committing
    epoch 5 leaves epoch 3's. The next run's first epoch starts from them with every record after epoch 3
    (incremental; the report counts those records) and equals networkx; that run stops cleanly, and keeps its
    last epoch's states for the run after it."""
    f = Folder(tmp_path)
    for edge in [(0, 1), (2, 3), (4, 5), (6, 7), (1, 2), (5, 6)]:  # epochs 4 and 5 merge what 0-3 left apart
        f.drop([edge])
    every = ("--conf", "spark.scopeflow.incremental.stateEvery=3")
    proc = f.start(*every, fault="stream-epoch-committed@6", incremental="always")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, err
    assert f.committed() == 5

    def kept() -> dict:
        manifest = json.loads((f.checkpoint / "scopeflow" / f"epoch-{f.committed():010d}.json").read_text())
        (scope, loop), = manifest["loops"].items()
        for op, doc in loop["states"].items():  # the parts of older states are gone
            assert os.listdir(f.checkpoint / "scopeflow" / "state" / f"loop-{scope}-{op}") == [doc["part"]["name"]]
        return loop

    assert kept()["epoch"] == 3
    f.drop([(10, 11), (11, 12)])  # (a run that started from epoch 3's states with these alone would miss them)
    f.drop([(12, 13), (3, 50)])
    report = tmp_path / "run.json"
    proc = f.start(*every, "--report", str(report), incremental="always")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert f.committed() == 7
    assert f.sink() == f.expected()
    doc = json.loads(report.read_text())
    first, second = ([lp for lp in e["loops"] if lp["scope"] == "cc"][0] for e in doc["epochs"])
    since = 1 + 1 + 2  # the records of epochs 4, 5 and 6
    assert first["strategy"] == "incremental", first
    assert "since epoch 3's fixpoint" in first["why"] and f"({since} records)" in first["why"], first
    assert (first["state_epoch"], second["state_epoch"]) == (6, 6)  # (epoch 6 is three after 3)
    assert doc["states_kept"]["epoch"] == 7 and kept()["epoch"] == 7
    assert first["state_rows"] == len({v for e in f.waves[-2] for v in e})  # (a vertex of each edge's ends)
    assert second["state_rows"] == len({v for e in f.edges for v in e})


@pytest.mark.soak
def test_random_kills_across_twelve_epochs(tmp_path):
    """SIGKILLs at random moments (paced by the epochs committed, plus a random delay that lands mid-epoch,
    mid-loop, mid-state-write or mid-sink-write) until the query has processed all twelve files, every epoch
    after the first incremental (from the previous epoch's fixpoint, `spark.scopeflow.incremental=always`);
    the sink equals networkx, and after every kill it equals networkx over the files of the epochs up to the
    one its marker names (never a partial epoch)."""
    rng = random.Random(int(os.environ.get("SCOPEFLOW_SEED", "23")))
    f = Folder(tmp_path)
    path_waves(f, 12, rng)
    kills = 0
    for _ in range(40):
        proc = f.start("--report", str(tmp_path / "run.json"), incremental="always")
        target = f.committed() + rng.randint(1, 2)
        while proc.poll() is None and f.committed() < target:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 2.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            marker = tmp_path / "out" / "components" / "_SCOPEFLOW"
            if marker.exists():
                epoch = json.loads(marker.read_text())["epoch"]
                assert f.sink() == f.expected_at(epoch), f"the sink is not epoch {epoch}'s result"
            continue
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        break
    assert kills >= 3, "the runs ended before they could be killed"
    manifest = json.loads((f.checkpoint / "scopeflow" / f"epoch-{f.committed():010d}.json").read_text())
    assert len(manifest["sources"]["n001"]["files"]) == 12 and manifest["rows_so_far"] == len(f.edges)
    # one file an epoch, but a kill after Spark's source logged a file and before it wrote the epoch's offsets
    # puts that file and the next into one epoch
    assert f.committed() >= 9
    assert f.sink() == f.expected() == f.expected_at(f.committed())
    writes = [(w["epoch"], w["sink"]) for w in f.writes()]
    assert len(writes) == len(set(writes))
    # the last run's epochs (those not committed when it started) ran incrementally, after the first epoch
    epochs = json.loads((tmp_path / "run.json").read_text())["epochs"]
    assert all(e["loops"][0]["strategy"] == "incremental" for e in epochs if e["epoch"] > 0), epochs


def test_a_running_query_sees_files_as_they_arrive_and_stops_on_sigterm(tmp_path):
    """`--trigger processing-time=1s` runs until stopped. Files dropped while it runs show in the sink; every
    state a reader polling the sink sees equals networkx over some prefix of the files. SIGTERM stops it at
    an epoch boundary, exit 0; a restart continues (nothing new: no epoch runs)."""
    f = Folder(tmp_path)
    rng = random.Random(5)
    f.drop([(1, 2)])
    prefixes = [f.expected(f.waves[0])]
    proc = f.start(trigger="processing-time=1s", *["--report", str(tmp_path / "r.json")])
    seen = []
    try:
        for wave in range(3):
            deadline = time.monotonic() + 240
            while f.committed() < wave and time.monotonic() < deadline and proc.poll() is None:
                if (tmp_path / "out" / "components" / "_SCOPEFLOW").exists():
                    try:
                        seen.append(f.sink())
                    except FileNotFoundError:  # between the two renames of a swap: no folder for an instant
                        pass
                time.sleep(0.1)
            assert f.committed() >= wave, proc.poll()
            f.drop([(rng.randrange(30), rng.randrange(30)) for _ in range(5)])
            prefixes.append(f.expected(f.waves[-1]))
        deadline = time.monotonic() + 240
        while f.committed() < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert f.committed() == 3
        seen.append(f.sink())
    finally:
        os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "stopped (SIGTERM) after epoch 3" in err, err
    assert seen and all(s in prefixes for s in seen)
    assert f.sink() == f.expected()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["status"] == "stopped" and [e["epoch"] for e in report["epochs"]] == [0, 1, 2, 3]
    again = f.start()
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert f.sink() == f.expected()


def test_the_compiled_script_runs_the_stream(tmp_path):
    """`scopeflow compile` then `python job.py --trigger available-now`: the same epochs, the same sink."""
    f = Folder(tmp_path)
    f.drop([(1, 2), (3, 4)])
    f.drop([(2, 3)])
    job = tmp_path / "job.py"
    out = subprocess.run(scopeflow("compile", str(f.flow), "-o", str(job)), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    run = subprocess.run([sys.executable, str(job), "--trigger", "available-now", "--checkpoint",
                          str(f.checkpoint)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "epoch 1: 1 file" in run.stderr
    assert f.sink() == f.expected()


def test_a_loop_killed_mid_epoch_resumes_from_its_snapshot(tmp_path):
    """`--snapshot-every 4`: the loops inside an epoch take snapshots as in batch. A run SIGKILLed once the
    epoch's loop has a snapshot replays the epoch from that snapshot (fewer rounds), with the same sink."""
    f = Folder(tmp_path)
    order = list(range(60))
    random.Random(9).shuffle(order)
    f.drop([(v, v + 1) for v in order])  # a path: ~60 rounds
    loops = f.checkpoint / "scopeflow" / "loops"
    proc = f.start("--snapshot-every", "4")
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not any(
            name == "manifest.json" for _, _, names in os.walk(loops) for name in names):
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert f.committed() == -1
    again = f.start("--snapshot-every", "4", "--report", str(tmp_path / "r.json"))
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert f.sink() == f.expected()
    (epoch,) = json.loads((tmp_path / "r.json").read_text())["epochs"]
    resumed_at = epoch["resumed_from"]["stack"][0]["round"]
    assert resumed_at >= 4 and epoch["loops"][0]["first_round"] > 0, epoch  # not from round 0
    assert not loops.exists() or not os.listdir(loops)  # an epoch's loop snapshots go when it commits


# test_streaming.SSSP, one file an epoch
SSSP = STREAM_SSSP.replace('format = "json")', 'format = "json", max_files_per_epoch = 1)')
assert SSSP != STREAM_SSSP


def test_a_kill_while_an_epoch_that_left_minus_infinity_runs_again_from_nothing(tmp_path):
    """An incremental epoch that leaves -Infinity in the distances runs its loop again from nothing
    (test_incremental.py). A run SIGKILLed as that starts leaves the epoch uncommitted; the next run repeats it
    (incremental, then again from nothing), recomputes the epoch after it, and ends with the rounds in plain
    Python over every file, each epoch written once."""
    f = Folder(tmp_path)
    f.flow.write_text(SSSP)
    inf = float("inf")
    waves = [[(1, 2, 1.0), (2, 3, 4.0), (3, 4, inf)], [(1, 3, -inf)], [(4, 5, 1.0)]]
    for i, wave in enumerate(waves):
        write_weighted_json(tmp_path / "in" / f"w{i:03d}.json", wave)
        time.sleep(0.01)  # (distinct modification times: Spark reads the files in order)
    proc = f.start(fault="stream-loop-redo", incremental="always")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, err
    assert f.committed() == 0
    again = f.start("--report", str(tmp_path / "r.json"), incremental="always")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert f.committed() == 2
    got = read_output(str(tmp_path / "out" / "distances"), (int, float))
    want = reference.sssp_rounds([e for wave in waves for e in wave], 1)
    assert {k: reference.spark_order(v) for k, v in got} == {k: reference.spark_order(v) for k, v in want.items()}
    epochs = json.loads((tmp_path / "r.json").read_text())["epochs"]
    assert [(e["epoch"], e["loops"][0]["strategy"]) for e in epochs] == [(1, "recomputed"), (2, "recomputed")]
    assert "ran again from nothing" in epochs[0]["loops"][0]["why"], epochs[0]["loops"]
    assert "holds -Infinity" in epochs[1]["loops"][0]["why"], epochs[1]["loops"]
    writes = [(w["epoch"], w["sink"]) for w in f.writes()]
    assert sorted(e for e, _ in writes) == [0, 1, 2], writes


def test_a_run_from_nothing_killed_after_its_last_snapshot_is_resumed_not_run_a_third_time(tmp_path):
    """`--snapshot-every 1`: the run from nothing that follows an incremental epoch which left -Infinity takes
    snapshots as any loop does. Killed once it finished its rounds (before the epoch commits), the next run
    resumes it from its last snapshot, knows it for the run from nothing (the epoch's second activation), and
    does not run the loop a third time; the sink equals the rounds in plain Python."""
    f = Folder(tmp_path)
    f.flow.write_text(SSSP)
    inf = float("inf")
    waves = [[(1, 2, 1.0), (2, 3, 4.0), (3, 4, inf)], [(1, 3, -inf), (4, 5, 1.0), (5, 6, 1.0)]]
    for i, wave in enumerate(waves):
        write_weighted_json(tmp_path / "in" / f"w{i:03d}.json", wave)
        time.sleep(0.01)
    snap = ("--snapshot-every", "1")
    proc = f.start(*snap, fault="stream-loop-redone", incremental="always")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, err
    assert f.committed() == 0
    again = f.start(*snap, "--report", str(tmp_path / "r.json"), incremental="always")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    (epoch,) = json.loads((tmp_path / "r.json").read_text())["epochs"]
    assert epoch["resumed_from"]["stack"][0]["activation"] == 2, epoch["resumed_from"]
    assert "ran again from nothing (resumed from its snapshot)" in epoch["loops"][0]["why"], epoch["loops"]
    got = read_output(str(tmp_path / "out" / "distances"), (int, float))
    want = reference.sssp_rounds([e for wave in waves for e in wave], 1)
    assert {k: reference.spark_order(v) for k, v in got} == {k: reference.spark_order(v) for k, v in want.items()}


def test_ctrl_c_stops_at_an_epoch_boundary(tmp_path):
    """SIGINT (Ctrl-C) while an epoch's loop runs: the epoch finishes and commits, then the query stops,
    exit 0, saying where it stopped."""
    f = Folder(tmp_path)
    order = list(range(40))
    random.Random(4).shuffle(order)
    f.drop([(v, v + 1) for v in order])  # ~40 rounds: the signal comes mid-loop
    proc = f.start(trigger="processing-time=1s")
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not (f.checkpoint / "spark" / "offsets" /
                                                                        "0").exists():
        time.sleep(0.05)
    time.sleep(3)
    assert proc.poll() is None and f.committed() == -1, "the epoch ended before the signal"
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "stopping after the epoch in progress (Ctrl-C" in err and "stopped (Ctrl-C) after epoch 0" in err, err
    assert f.committed() == 0 and f.sink() == f.expected()
