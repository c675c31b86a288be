"""Rounds planned while the previous round's Spark job runs (`loop.LoopExecutor.plan_ahead`), on real Spark:
the same records as rounds planned one after the other, checked against plain-Python references, and the
cases where a round must not be planned ahead."""
from __future__ import annotations

import random
import textwrap
from collections import Counter

import pytest

import reference
from conftest import read_output
from scopeflow.api import run_file
from scopeflow.runtime import loop as loop_module
from scopeflow.runtime import round as round_module
from scopeflow.runtime.arguments import SnapshotOptions
from scopeflow.runtime.errors import RuntimeFailure

pytestmark = pytest.mark.spark


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def rounds_of(job, scope: str) -> list[dict]:
    return [r for r in job.report["rounds"] if r["scope"] == scope]


def chain_of_cliques(cliques: int, size: int, seed: int) -> list[tuple[int, int]]:
    """Cliques joined in a row by one edge each, vertex ids shuffled: many small rounds."""
    ids = list(range(1, cliques * size + 1))
    random.Random(seed).shuffle(ids)
    edges = []
    for c in range(cliques):
        members = ids[c * size:(c + 1) * size]
        edges += [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]
        if c:
            edges.append((ids[c * size - 1], members[0]))
    return edges


CLOSURE = """
    source edges = read csv("edges.csv", header = true) schema (src: long, dst: long)
    hops = edges | select(mid = src, to = dst)
    closure = loop tc(p = edges) with (e = hops) {
        fresh    = p | distinct
        extended = fresh | join(e, on fresh.dst == e.mid) | select(src, dst = to)
        feedback p <- extended
        emit fresh
    }
    sink closure -> csv("out/closure", header = true)
"""


EDGES = {"edges_path": "edges.csv"}  # (examples/connected_components.flow over the test's edges)


def write_edges(tmp_path, edges) -> None:
    (tmp_path / "edges.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))


@pytest.mark.parametrize("overlay", [False, True])
def test_rounds_planned_ahead_give_the_records_of_rounds_planned_after_each_job(spark, tmp_path, example_copy,
                                                                                plan_ahead, overlay):
    # connected components over a chain of cliques (~40 rounds). With `overlay`, every state may fold into its
    # overlay, a choice a round planned ahead makes from the counts of the round before the last one
    edges = chain_of_cliques(12, 4, seed=7)
    write_edges(tmp_path, edges)
    flow = example_copy("connected_components.flow")
    if overlay:
        spark.conf.set("spark.scopeflow.stateOverlayMinKeys", "0")
        spark.conf.set("spark.scopeflow.stateOverlay", "0.5")
    try:
        runs = {}
        for on in (True, False):
            plan_ahead(on)
            job = run_file(flow, EDGES, spark=spark)
            got = dict(read_output(str(tmp_path / "out/components"), (int, int)))
            runs[on] = (job, got)
    finally:
        spark.conf.unset("spark.scopeflow.stateOverlayMinKeys")
        spark.conf.unset("spark.scopeflow.stateOverlay")
    want = reference.connected_components(edges)
    for on, (job, got) in runs.items():
        assert got == want, on
        rounds = rounds_of(job, "cc")
        # every round but the first was planned during the job of the one before; none with the setting off
        assert [r["planned_ahead"] for r in rounds] == [False] + [on] * (len(rounds) - 1)
        assert [r["spark_jobs"] for r in rounds] == [1] * len(rounds)  # its job in its own round's group
    ahead, after = (rounds_of(runs[on][0], "cc") for on in (True, False))
    # the records in flight and each operator's records are the same round by round
    assert [r["in_flight"] for r in ahead] == [r["in_flight"] for r in after]
    assert [r["counts"] for r in ahead] == [r["counts"] for r in after]
    assert len(ahead) > 10
    if overlay:  # (the overlay was used: the choice made one round late still took it)
        assert any("overlay" in r.get("states", {}).values() for r in ahead)


def test_a_distinct_loop_planned_ahead_gives_the_transitive_closure(spark, tmp_path, plan_ahead):
    rng = random.Random(3)
    edges = sorted({(rng.randrange(40), rng.randrange(40)) for _ in range(70)})
    write_edges(tmp_path, edges)
    plan_ahead(True)
    job = run_file(write(tmp_path, "tc.flow", CLOSURE), spark=spark)
    got = read_output(str(tmp_path / "out/closure"), (int, int))
    assert len(got) == len(set(got))  # each pair once
    assert set(got) == reference.transitive_closure(edges)
    rounds = rounds_of(job, "tc")
    assert len(rounds) > 3 and all(r["planned_ahead"] for r in rounds[1:])


NESTED = """
        source seeds = values (v: long) [(1), (2)]
        source edges = values (src: long, dst: long) [(1, 2), (2, 3), (3, 4), (4, 1)]
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
"""


def test_a_round_that_runs_nested_loops_is_not_planned_ahead(spark, tmp_path, plan_ahead):
    # the outer round's body runs the inner loop's rounds (Spark jobs): the next outer round is planned after
    # the outer job; the inner loop's own rounds are planned ahead
    flow = write(tmp_path, "nested.flow", NESTED)
    plan_ahead(True)
    job = run_file(flow, spark=spark)
    got = Counter(v for (v,) in read_output(str(tmp_path / "out/nested"), (int,)))
    assert got == Counter({1: 3, 2: 3, 3: 3, 4: 3})  # 3 activations, each reaching the whole cycle once
    assert [r["planned_ahead"] for r in rounds_of(job, "outer")] == [False, False, False]
    inner = rounds_of(job, "outer.inner")
    assert any(r["planned_ahead"] for r in inner)
    assert not any(r["planned_ahead"] for r in inner if r["round"] == 0)  # (a fresh activation's first round)


def test_no_round_is_planned_ahead_of_a_snapshot(spark, tmp_path, example_copy, plan_ahead):
    # a snapshot stores the activation as the round before it leaves it: the round after is planned after it
    edges = [(i, i + 1) for i in range(1, 13)]
    write_edges(tmp_path, edges)
    plan_ahead(True)
    job = run_file(example_copy("connected_components.flow"), EDGES, spark=spark,
                   snapshots=SnapshotOptions(checkpoint=str(tmp_path / "ck"), every=3))
    assert dict(read_output(str(tmp_path / "out/components"), (int, int))) == reference.connected_components(edges)
    rounds = rounds_of(job, "cc")
    assert len(rounds) > 9 and job.report["snapshots"]
    # a snapshot after rounds 2, 5, 8, ...: rounds 3, 6, 9, ... are planned after it
    assert [r["planned_ahead"] for r in rounds] == [r["round"] % 3 != 0 for r in rounds]


def test_a_round_whose_planning_ahead_fails_is_planned_again_after_the_job(spark, tmp_path, example_copy,
                                                                           plan_ahead, monkeypatch):
    # planning ahead fails once, after the round's reduce stepped its state (as a nested loop makes it fail, or
    # anything the body raises): the round is planned again after the previous round's job, and the result is
    # the same; the checkpoints the failed plan had registered are released
    from scopeflow.runtime.checkpoints import Checkpoints

    edges = chain_of_cliques(6, 3, seed=1)
    write_edges(tmp_path, edges)
    failed, registered, released = [], [], []
    reduce, checkpoint, release = round_module.Round.reduce, round_module.Round.checkpoint, Checkpoints.release

    def failing_once(self, df, op, *args, **kwargs):
        out = reduce(self, df, op, *args, **kwargs)
        if self.ahead and self.index == 4 and not failed:
            failed.append(self.index)
            raise RuntimeError("planning failed")
        return out

    def registering(self, key, df):
        ck = checkpoint(self, key, df)
        if self.ahead and self.index == 4 and not failed:
            registered.append(ck)
        return ck

    def releasing(self, frames):
        released.extend(frames)
        return release(self, frames)

    monkeypatch.setattr(round_module.Round, "reduce", failing_once)
    monkeypatch.setattr(round_module.Round, "checkpoint", registering)
    monkeypatch.setattr(Checkpoints, "release", releasing)
    plan_ahead(True)
    job = run_file(example_copy("connected_components.flow"), EDGES, spark=spark)
    assert failed == [4]
    assert registered and all(any(ck is f for f in released) for ck in registered)
    assert dict(read_output(str(tmp_path / "out/components"), (int, int))) == reference.connected_components(edges)
    rounds = rounds_of(job, "cc")
    assert [r["planned_ahead"] for r in rounds] == [r["round"] not in (0, 4) for r in rounds]


def test_a_round_whose_job_fails_while_the_next_is_planned_is_told_as_that_round(spark, tmp_path, plan_ahead):
    # the bad value is reached in round 2: its job fails while round 3 is planned; the failure names round 2,
    # and no job of the loop is left running
    (tmp_path / "edges.csv").write_text("src,dst\n1,2\n2,3\n3,x\n")
    flow = write(tmp_path, "reach.flow", """
        source edges = read csv("edges.csv", header = true) schema (src: long, dst: string)
        source seeds = values (v: long) [(1)]
        reached = loop reach(r = seeds) with (e = edges) {
            next = r | join(e, on r.v == e.src) | select(v = cast(e.dst as long)) | union(r) | distinct
            feedback r <- next
            emit next
        }
        sink reached -> csv("out/reached", header = true)
    """)
    plan_ahead(True)
    with pytest.raises(RuntimeFailure) as info:
        run_file(flow, spark=spark)
    text = info.value.render()
    assert "loop `reach`" in text and "round 2" in text, text
    assert "'x'" in text or '"x"' in text, text
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert not (tmp_path / "out/reached").exists()  # nothing written


def follows_auto(rounds: list[dict], before) -> None:
    """`planAhead=auto`: a round is planned ahead exactly when the job of the round two before it (of the loop's
    previous activation, `before`, for the second round) took at most twice as long as planning the round before
    it, unless the round before it ends 16 rounds in a row planned ahead."""
    streak = 0  # rounds planned ahead in a row, up to the round before
    for k, r in enumerate(rounds):
        last_job = rounds[k - 2]["job_seconds"] if k >= 2 else before if k == 1 else None
        pays = last_job is not None and last_job <= 2 * rounds[k - 1]["plan_seconds"] and streak < 16
        assert r["planned_ahead"] == pays, (k, last_job, rounds[k - 1]["plan_seconds"] if k else None, streak)
        assert r["plan_seconds"] > 0 and r["job_seconds"] > 0
        streak = streak + 1 if r["planned_ahead"] else 0


def test_auto_plans_ahead_while_the_last_job_took_at_most_twice_as_long_as_planning(spark, tmp_path, example_copy,
                                                                          plan_ahead):
    edges = chain_of_cliques(12, 4, seed=5)
    write_edges(tmp_path, edges)
    plan_ahead("auto")
    job = run_file(example_copy("connected_components.flow"), EDGES, spark=spark)
    assert dict(read_output(str(tmp_path / "out/components"), (int, int))) == reference.connected_components(edges)
    rounds = rounds_of(job, "cc")
    assert len(rounds) > 10
    follows_auto(rounds, None)  # (the run's first activation: its second round is planned after the first job)


def reported_job_seconds(monkeypatch, seconds: float) -> None:
    """Every round's job reported as taking `seconds` (it runs as it does; the report and planAhead=auto see
    that time)."""
    run_job = loop_module.Planned.run_job

    def timed(self):
        out = run_job(self)
        self.job_seconds = seconds
        return out

    monkeypatch.setattr(loop_module.Planned, "run_job", timed)


def test_auto_plans_a_round_after_the_job_every_16_rounds_ahead_to_time_both_alone(spark, tmp_path, plan_ahead,
                                                                                  monkeypatch):
    # planning reported as taking 1 s and every job 1.9 s: from the third round every round is planned ahead, but
    # a round planned during the job before takes longer, and so does that job, so after 16 rounds in a row
    # planned ahead one is planned after its predecessor's job; jobs of 2.1 s: none ahead
    plan = loop_module.LoopExecutor.plan

    def planned_in_one_second(self, act, ahead=False):
        out = plan(self, act, ahead)
        out.plan_seconds = 1.0
        return out

    monkeypatch.setattr(loop_module.LoopExecutor, "plan", planned_in_one_second)
    n = 45
    write_edges(tmp_path, [(v, v + 1) for v in range(1, n)])
    flow = write(tmp_path, "reach.flow", """
        source edges = read csv("edges.csv", header = true) schema (src: long, dst: long)
        out = loop reach(x = edges | where(src == 1) | select(v = src)) with (e = edges) {
            seen = x | distinct
            nxt  = seen | join(e, on seen.v == e.src) | select(v = e.dst)
            feedback x <- nxt
            emit seen
        }
        sink out -> csv("out/reached", header = true)
    """)
    plan_ahead("auto")
    reported_job_seconds(monkeypatch, 1.9)
    job = run_file(flow, spark=spark)
    assert sorted(v for (v,) in read_output(str(tmp_path / "out/reached"), (int,))) == list(range(1, n + 1))
    ahead = [r["planned_ahead"] for r in rounds_of(job, "reach")]
    # rounds 0-44 each reach the next vertex; `x` is fed back deferred (its records are counted by the next
    # round's job), so one more round runs over the empty `x` and the loop ends after it: n + 1 rounds
    assert len(ahead) == n + 1
    expected = [False, False] + ([True] * 16 + [False]) * 3
    assert ahead == expected[:len(ahead)], ahead

    reported_job_seconds(monkeypatch, 2.1)
    job = run_file(flow, spark=spark)
    assert sorted(v for (v,) in read_output(str(tmp_path / "out/reached"), (int,))) == list(range(1, n + 1))
    assert not any(r["planned_ahead"] for r in rounds_of(job, "reach"))


def test_auto_judges_a_first_round_by_the_loops_previous_activation(spark, tmp_path, plan_ahead, monkeypatch):
    # every job reported as taking no time: each round is planned ahead as soon as a job of the loop was seen,
    # in its first activation from its third round, in the later ones (by the last job before) from the second
    reported_job_seconds(monkeypatch, 0.0)
    plan_ahead("auto")
    job = run_file(write(tmp_path, "nested.flow", NESTED), spark=spark)
    got = Counter(v for (v,) in read_output(str(tmp_path / "out/nested"), (int,)))
    assert got == Counter({1: 3, 2: 3, 3: 3, 4: 3})
    inner = rounds_of(job, "outer.inner")
    for number in (1, 2, 3):
        ahead = [r["planned_ahead"] for r in inner if r["activation"] == number]
        assert len(ahead) > 2
        first = 2 if number == 1 else 1
        assert ahead == [False] * first + [True] * (len(ahead) - first), (number, ahead)
    # the outer loop's rounds run nested loops: never planned ahead, whatever the times
    assert [r["planned_ahead"] for r in rounds_of(job, "outer")] == [False, False, False]
