"""The loop executor: one loop activation as synchronous rounds (docs/language.md#loops).

An activation's state is one object, `Activation`: the records each variable holds for the
current round, the `reduce`/`distinct` states, the loop outputs so far. Each round is planned
(`LoopExecutor.plan`: the generated body function is called with the variables and the imports,
and what the next round and the outputs need is checkpointed, lazily), runs its one Spark job
(`round.Round.materialise`) and then the termination attempt on its counters (`finish`); then the
activation advances to the next round. A snapshot stores the activations of the scope stack,
and a resumed run starts from the one it restores.

A feedback computed from the round's `reduce`/`distinct` outputs and imports alone may be left to the next
round's job (`LoopExecutor.defers`): the next round's variable is its plan over this round's state
checkpoints, and that job's counters complete this round's counts (`late_counts`).

While a round's job runs on another thread, the driver may plan the next round over the round's
lazy checkpoints (`plan_ahead`, `spark.scopeflow.planAhead`). Planning a round is mostly JVM work
(analysis, optimisation, physical planning) and costs about as much as a small round's job: a loop
of small rounds in several partitions took ~0.7 of the time (benchmarks/RESULTS.md). Where a
round's job keeps the cores busy, planning during it only competes with it (on 2 cores, such a
job took 1.7x and its planning 3x as long), so by default a round is planned ahead only while the
previous round's job took at most twice as long as planning a round (`may_plan_ahead`; side by side both take
longer, so at least every 17th round of an activation is planned after the job before it, timing both alone).
"""
from __future__ import annotations

import time
import weakref
from typing import Callable, Optional

from attrs import define, evolve, field
from pyspark.sql import DataFrame

from scopeflow.runtime import jobs
from scopeflow.runtime.counters import FED_COUNTER, LATE
from scopeflow.runtime.deployment import task_slots
from scopeflow.runtime.checkpoints import unknown_partitioning
from scopeflow.runtime.report import RoundRecord
from scopeflow.runtime.round import Pieces, Round, union_all
from scopeflow.runtime.spec import LoopSpec, ddl_columns
from scopeflow.runtime.state import ReduceState
from scopeflow.runtime.termination import LoopMaxError, TerminationProtocol

MAX_EMIT_PIECES = 256  # an `emit` stream's per-round checkpoints are folded into one beyond this many
# planAhead=auto (`LoopExecutor.may_plan_ahead`): plan ahead while the last job took at most this many times as long
# as planning a round; and after this many rounds of an activation in a row planned ahead, plan one after its
# predecessor's job, to time both alone again (side by side both take longer)
AHEAD_RATIO = 2.0
AHEAD_PROBE = 16


@define
class Activation:
    """One activation of a loop, at the start of its current round (or, once a round ended, of the next)."""

    scope: str
    number: int  # 1, 2, ... per loop scope over the run
    round: int = 0
    variables: dict = field(factory=dict)  # variable -> its records this round (or its reader's aggregates)
    received: dict = field(factory=dict)  # variable -> records it holds this round ({}: not counted yet)
    combined: dict = field(factory=dict)  # variable -> the operator whose per-round result it holds (combine)
    states: dict = field(factory=dict)  # operator -> state.KeyedState of a reduce or distinct
    emitted: dict = field(factory=dict)  # `emit` stream -> its checkpoints of every round so far
    last: dict = field(factory=dict)  # `emit last` stream -> its checkpoint of the last round
    attempt: int = 0  # the id of the last termination attempt
    recompute: bool = False  # `snapshot recompute`: snapshots keep positions only
    resumed: bool = False  # restored from a snapshot (its counts of the round are known)
    # an incremental epoch's start (runtime/incremental.py): the previous epoch's states, by operator, which
    # the states take in round 0, and what the seeded joins add to round 0 (join -> (history, new records, the
    # import is the left side))
    preloaded: dict = field(factory=dict)
    seeds: dict = field(factory=dict)
    estimate: Optional[int] = None  # about how many records an incremental epoch's first round receives


@define(eq=False)
class Planned:
    """A round whose plans are built, before its Spark job (`LoopExecutor.plan`)."""

    rnd: Round
    group: str  # the job group its job runs in
    variables: dict  # variable -> the records it holds this round (checkpointed in a first round)
    fed: dict  # combined variable -> the counter of the records fed back to it
    fb_ck: dict  # variable -> the checkpoint of what it holds next round
    emit_ck: dict  # emitted stream -> its checkpoint
    until_ck: Optional[DataFrame]
    started: float
    props: object = None  # the JVM's local properties of the driver thread that planned it (`jobs.run_aside`)
    plan_seconds: float = 0.0  # how long planning it took
    job_seconds: Optional[float] = None  # how long its Spark job took (`run_job`)
    adopted: bool = False  # its states adopted the frames its job stores (before the next round was planned)
    known: set = field(factory=set)  # (planned ahead) the states that existed before it was planned
    # deferred feedback (`LoopExecutor.defers`): variable -> the counter of its records, which the next round's
    # job fills; the keys its anchors changed; its report entries, completed by the next round (`late_counts`)
    deferred: dict = field(factory=dict)
    changed: dict = field(factory=dict)
    entries: tuple = ()

    def run_job(self) -> tuple[dict, dict]:
        """Run its Spark job (`Round.materialise`); return the counts."""
        started = time.perf_counter()
        try:
            return self.rnd.materialise(also=tuple(self.fed.values()))
        finally:
            self.job_seconds = time.perf_counter() - started


def run_activation(run, spec: LoopSpec, body: Callable, entries: dict, imports: dict, act: Activation) -> dict:
    """Run one activation of a loop to termination; return its outputs by emit name."""
    if act.resumed:  # a combined variable holds its reader's aggregates, not the variable's columns
        act.combined = {v: op for v, op in act.combined.items() if spec.combine.get(v) == op}
        restored = act.variables
        act.variables = {v: restored.get(v) if v in act.combined else _as_variable(run, spec, v, restored.get(v))
                         for v in spec.vars}
    else:
        act.variables = {v: _as_variable(run, spec, v, entries.get(v)) for v in spec.vars}
    act.emitted = {e.node: act.emitted.get(e.node, []) for e in spec.emits if e.mode == "all"}
    return LoopExecutor(run, spec, body, imports, act).execute()


class LoopExecutor:
    def __init__(self, run, spec: LoopSpec, body: Callable, imports: dict, act: Activation):
        self.run = run
        self.spec = spec
        self.body = body
        self.act = act
        self.first = act.round  # the first round this executor runs
        self.max_rounds = run.resolve(spec.max_rounds)
        rounds = run.resolve(spec.rounds) if spec.rounds is not None else None
        self.protocol = TerminationProtocol(spec.scope, act.number, self.max_rounds, spec.on_max, rounds,
                                            spec.operators, run.attempt_ids)
        # (an incremental loop's growing imports come prepared, as `Pieces` kept across epochs by their owner)
        self.imports = {name: df if isinstance(df, Pieces) else run.prepare_import(df, spec.imports.get(name) or [])
                        for name, df in imports.items()}
        self.pieces = any(len(Pieces.of(df)) > 1 for df in self.imports.values())  # (`Round.fused`)
        self.held: list = []  # checkpoints of the previous round, released once the next round is stored
        self.narrow: Optional[int] = None  # partitions of the fed-back and emitted checkpoints after round one
        self.narrow_from: Optional[dict] = None  # the first round's feedback, which `narrow` is decided from
        self.same_columns: dict = {}  # "var<-node" -> does the fed-back stream have the variable's columns already
        self.ahead_mode = run.plan_ahead()  # plan a round during the previous round's job: "auto", "true" or None
        self.ahead_streak = 0  # rounds planned ahead in a row, up to the current one
        # (mode, emitted stream) -> the records its output holds, where this executor counted every piece of it (not
        # a resumed activation's earlier pieces) and the round's job counted them exactly: an output known to be
        # empty is given as one (`outputs`)
        self.emit_records: dict = {(e.mode, e.node): 0 for e in spec.emits
                                   if e.mode == "last" or (e.mode == "all" and not act.emitted.get(e.node))}
        self.finished: Optional[float] = None  # when the last round ended
        self.previous: Optional[Planned] = None  # the last round, if it deferred feedback its successor counts
        self.fanout: dict = {}  # deferred variable -> records fed back per key its anchors changed, last known
        self.deferred_frames = weakref.WeakSet()  # the deferred plans handed to a next round (`Round.deferred_in`)
        if spec.combine and run.checkpoints.counted_by_job:
            run.combine_above()  # (a bad setting fails before the first round, not in the second)

    def execute(self) -> dict:
        run, spec, act = self.run, self.spec, self.act
        run.stack.append(act)
        run.progress.loop_started(spec, act.number)
        try:
            planned = self.plan(act)
            while True:
                ahead = job = None
                self.ahead_streak = self.ahead_streak + 1 if planned.rnd.ahead else 0
                try:
                    if self.may_plan_ahead(planned):
                        job = jobs.run_aside(run.spark, planned.props, planned.run_job)
                        ahead = self.plan_ahead(planned)
                        counts, observed = job.result()
                    else:
                        run.round_group(spec.scope, act.number, act.round)  # (a round planned ahead: set again)
                        counts, observed = planned.run_job()
                    attempt, feedback, in_flight, fed = self.finish(planned, counts, observed)
                except BaseException:  # (a failed job, Ctrl-C: no round after this one)
                    self.drop(ahead)
                    if job is not None:  # never leave a round's job running behind the loop
                        jobs.stop_aside(run.spark, planned.group, job)
                    raise
                if attempt.terminated:
                    self.drop(ahead)
                    if attempt.decision == "max-fail":
                        raise LoopMaxError(attempt, self.max_rounds)
                    break
                act.variables, act.received = feedback, in_flight
                act.seeds, act.estimate = {}, None  # (round 0's only)
                act.combined = {v: spec.combine[v] for v in fed}
                act.attempt, act.round = attempt.id, act.round + 1
                run.maybe_snapshot(spec, act.round - 1)
                planned = ahead if ahead is not None else self.plan(act)
        finally:
            run.stack.pop()
            run.progress.loop_finished(spec, act.number)
            for df in self.imports.values():
                if not isinstance(df, Pieces):
                    df.unpersist()
        run.checkpoints.release(self.held)
        return self.outputs()

    def plan(self, act: Activation, ahead: bool = False) -> Planned:
        """Build the plans of `act`'s current round: run the generated body, and checkpoint (lazily) what the
        next round and the outputs need. Nothing runs on Spark here (but nested loops, which run their rounds).
        A plan that fails releases the checkpoints it had registered."""
        started = time.perf_counter()
        rnd = Round(self.run, self.spec, act, ahead, self.pieces)
        try:
            return self.plan_round(rnd, act, started)
        except BaseException:
            self.run.release(rnd.retained())  # (the round does not run: its checkpoints are of no use)
            raise

    def plan_round(self, rnd: Round, act: Activation, started: float) -> Planned:
        run, spec = self.run, self.spec
        if self.narrow_from is not None and act.round > self.first:
            self.narrow, self.narrow_from = narrowing(run, self.narrow_from), None
        run.round_group(spec.scope, act.number, act.round)
        last_fed = dict(act.received)  # the records the previous round fed back (unknown in a fresh first round)
        variables = act.variables
        if act.round == self.first:  # entry streams (or restored ones) are plans: materialise them with this round
            variables = {v: rnd.checkpoint(f"var/{v}", df) for v, df in variables.items()}
        rnd.combined = {op: variables[v] for v, op in act.combined.items()}
        rnd.defers = self.defers(act)
        rnd.deferred_in = self.deferred_frames
        outs = self.body(rnd, **variables, **self.imports)
        feedback = {v: self.feedback_frame(rnd, v, outs) for v in spec.vars}
        raw = dict(feedback)
        deferred = {v: self.deferred_counter(rnd, v, feedback) for v in spec.defer} if rnd.defers else {}
        fed = {v: combine(rnd, v, feedback, last_fed.get(v)) for v in spec.combine if v not in deferred}
        fed = {v: counter for v, counter in fed.items() if counter is not None}  # variable -> counter of the raw
        fb_ck = {v: df if v in deferred else
                 rnd.checkpoint(f"feedback/{v}", df if v in fed else rnd.narrowed(df, self.narrow))
                 for v, df in feedback.items()}
        self.deferred_frames.update(fb_ck[v] for v in deferred)
        emit_ck = {e.node: rnd.checkpoint(f"emit/{e.node}", rnd.narrowed(outs[e.node], self.narrow))
                   for e in spec.emits if e.mode in ("all", "last")}
        until_ck = rnd.checkpoint(f"until/{spec.until}", rnd.narrowed(outs[spec.until], self.narrow)) \
            if spec.until else None
        if act.round == self.first:
            # (decided as the second round is planned: after the first round's job, or during it)
            # a reduce's feedback is combined only in some rounds: judge it by the records fed back
            self.narrow_from = {v: raw[v] if v in fed and isinstance(act.states.get(spec.combine[v]), ReduceState)
                                else ck for v, ck in fb_ck.items()}
        group = run.round_group(spec.scope, act.number, act.round)  # nested loops set their own groups
        props = jobs.local_properties(run.spark) if self.ahead_mode else None
        return Planned(rnd, group, variables, fed, fb_ck, emit_ck, until_ck, started, props,
                       plan_seconds=time.perf_counter() - started, deferred=deferred)

    def defers(self, act: Activation) -> bool:
        """Does `act`'s round leave what it feeds back to the variables of `spec.defer` to the next round's job
        (compiler/plan.py, `Plan.deferred_feedback`)? Such a variable holds, for the next round, the plan of its
        records over this round's state checkpoints and the imports: the round stores one frame less and its
        plan one checkpoint less (measured: benchmarks/RESULTS.md). Not in the executor's first round (its
        variables are entry or restored streams, stored and counted as they are), not in a round after which
        the loop may end by count (`rounds`, `max`: that decision needs the exact count) or a snapshot is due
        (it stores what is in flight), and only where the round's job fills the counters
        (`RunContext.defer_feedback`, `spark.scopeflow.deferFeedback`). A fold into a state's overlay reads the
        round's records twice: not while a state is large enough for one (there the overlay saves more than a
        checkpoint; a state that grew that large in this round reads the plan and rewrites itself instead,
        `KeyedState.step`'s `once`)."""
        spec, protocol = self.spec, self.protocol
        if not spec.defer or act.round == self.first or not self.run.defer_feedback():
            return False
        if any(state.may_overlay(*self.run.overlay()) for state in act.states.values()):
            return False
        limit = min(self.max_rounds, protocol.rounds if protocol.rounds is not None else self.max_rounds)
        snapshots = self.run.snapshots
        return act.round + 1 < limit and (snapshots is None or not snapshots.due(spec, act.round))

    @staticmethod
    def deferred_counter(rnd: Round, var: str, feedback: dict) -> str:
        """The counter of the records fed back to deferred `var`, in its plan (filled by the next round's job)."""
        counter = rnd.counter_of(feedback[var])
        if counter is None:
            counter = rnd.counter(FED_COUNTER + var, late=True)
            feedback[var] = rnd.run.counters.observe(feedback[var], counter, fused=rnd.fused)
        return counter

    def may_plan_ahead(self, planned: Planned) -> bool:
        """Plan the next round while this one's job runs? Not after a loop's last round by count (`rounds`,
        `max`), when a round runs nested loops (their rounds are Spark jobs), when a snapshot is due after this
        round (it stores the activation as the round leaves it), while an incremental epoch's earlier states are
        not all taken by their operators, or after Ctrl-C.

        With `planAhead=auto` (the default), only while the previous round's job (of this activation or, in its
        first round, of the loop's previous activation in this run, `RunContext.job_seconds`; a streaming epoch
        is a run of its own) took at most `AHEAD_RATIO` times as long as planning this round did. A round is
        planned in about the time the last one took, so a job that takes much longer is one that keeps the cores
        busy with records, and planning during it only slows both down (measured: incremental connected
        components' rounds, jobs of ~0.34 s against ~0.11 s of planning, took 1.2x as long planned ahead); a job
        about as long as planning leaves a core to it (connected components on a path of 400 vertices with trees,
        jobs of ~53 ms against ~44 ms: 0.74x the time of planning every round after the job before). Both times are
        measured as the rounds run.
        A round planned ahead was planned during the job before, and both took longer than alone (3x and 1.7x in
        the incremental rounds, whose ratio then looks like 1.7): so after `AHEAD_PROBE` rounds of this activation
        in a row planned ahead, the next is planned after its predecessor's job, which times both alone again.
        (The count is the activation's: a streaming epoch's or a nested loop's activations of fewer rounds than
        that keep comparing times taken side by side once they plan ahead; each starts again from times taken
        alone.)"""
        run, act, protocol = self.run, self.act, self.protocol
        last = act.round + 1 >= (protocol.rounds if protocol.rounds is not None else self.max_rounds)
        last_job = run.job_seconds.get(self.spec.scope)
        pays = self.ahead_mode == "true" or (
            last_job is not None and last_job <= AHEAD_RATIO * planned.plan_seconds
            and self.ahead_streak < AHEAD_PROBE)
        return (self.ahead_mode is not None and pays and not last and not planned.rnd.nested and not act.preloaded
                and not run.interrupts.requested and (run.snapshots is None or not run.snapshots.due(self.spec, act.round)))

    def plan_ahead(self, planned: Planned) -> Optional[Planned]:
        """Plan the round after `planned` while `planned`'s job runs, over its lazy checkpoints (their blocks exist
        once that job is done, before this round's job starts).

        What the plan decides from the counts of `planned`'s job, it decides one round late: whether a state's
        fold goes into its overlay (the records in flight), and whether a reduce's feedback is combined (the
        records fed back); the round after a fresh first round decides them knowing no count (it combines, and
        rewrites its states unless an incremental epoch's estimate says the change is small). Both choose how a
        round computes, not what: the records are the same either way.
        Whether the loop goes on is decided after the job; a plan of a round that does not run is dropped
        (`drop`). None when planning failed: the round is planned again after the job, and fails there if
        it fails again."""
        act, spec = self.act, self.spec
        self.adopt(planned)  # the next round folds into this round's states
        # (after a fresh first round no count is known yet: an incremental epoch's estimate stands in)
        view = evolve(act, round=act.round + 1, variables=planned.fb_ck, seeds={},
                      combined={v: spec.combine[v] for v in planned.fed})
        known = set(act.states)
        try:
            ahead = self.plan(view, ahead=True)
        except Exception:  # noqa: BLE001 - planned again after the job, where a real failure is told
            self.forget(known, None)
            return None
        except BaseException:
            self.forget(known, None)
            raise
        ahead.known = known
        return ahead

    def adopt(self, planned: Planned) -> None:
        """The states take the frames `planned`'s job stores (once: before the next round is planned, or after
        the job)."""
        if not planned.adopted:
            for state in self.act.states.values():
                state.adopt()
            planned.adopted = True

    def drop(self, ahead: Optional[Planned]) -> None:
        """Forget a round planned ahead that does not run."""
        if ahead is not None:
            self.forget(ahead.known, ahead.rnd)

    def forget(self, known: set, rnd: Optional[Round]) -> None:
        states = self.act.states
        for op in list(states):
            if op in known:
                states[op].discard()
            else:  # started by the round planned ahead
                del states[op]
        if rnd is not None:
            self.run.release(rnd.retained())  # (the round does not run: its checkpoints are of no use)

    def finish(self, planned: Planned, counts: dict, op_counts: dict):
        """After the round's job: adopt its states, read its counts, run the termination attempt and report the
        round; return (attempt, feedback checkpoints, records fed back, combined variables)."""
        run, spec, act = self.run, self.spec, self.act
        rnd, group, fed, fb_ck = planned.rnd, planned.group, planned.fed, planned.fb_ck
        job_ids = run.job_ids(group, rnd.waves)
        spark_jobs = -1 if job_ids is None else len(job_ids)  # (-1: unknown, over Spark Connect)
        # (reliable checkpoints write in jobs of their own: one job per round, or per wave of checkpoints on a
        # cluster, holds only for the RDD-level round job)
        more = spark_jobs > rnd.waves and run.checkpoints.counted_by_job
        jobs_seen = run.explain_jobs(group) if more else []
        self.adopt(planned)
        if planned.job_seconds is not None:
            run.job_seconds[spec.scope] = planned.job_seconds
        folds = {op: state.commit(counts, op_counts) for op, state in act.states.items()}
        if rnd.index == self.first:
            self.first_round_counts(rnd, planned.variables, counts)
        self.late_counts(op_counts)
        in_flight = {v: counts[rnd.key_of(fb_ck[v])] for v in spec.vars if v not in planned.deferred}
        stored = {**in_flight, **{v: 0 for v in planned.deferred}}
        for v, counter in planned.deferred.items():
            if counter in op_counts:  # (counted by a counter of this round's job: e.g. a `select` of the reduce's output)
                in_flight[v] = op_counts[counter]
                continue
            # none in flight if its anchors changed nothing, else some (or none after all: the next round counts them)
            planned.changed[v] = changed = sum(op_counts.get(a, 1) for a in spec.defer[v])
            in_flight[v] = 0 if changed == 0 else max(1, round(changed * self.fanout.get(v, 1.0)))
        for v, counter in fed.items():  # the records fed back, not the fewer combined ones stored
            if in_flight[v]:  # (zero combined records: zero fed back, whatever a counter says)
                in_flight[v] = max(in_flight[v], counts.get(counter) or 0)
        op_counts.update({vid: act.received.get(var, 0) for var, vid in spec.var_nodes.items()})
        until_records = counts[rnd.key_of(planned.until_ck)] if planned.until_ck is not None else None
        attempt = self.protocol.attempt(act.round, in_flight, op_counts, until_records, rnd.nested)
        if attempt.terminated and planned.deferred:  # (its anchors changed nothing: its deferred plans are empty)
            op_counts.update({op: op_counts.get(op, 0) for op in spec.late})
        exact = run.checkpoints.counted_by_job  # (each checkpoint's partitions counted: `round.compute_checkpoints`)
        self.keep_outputs(planned.emit_ck, {node: counts.get(rnd.key_of(ck)) if exact else None
                                            for node, ck in planned.emit_ck.items()})
        self.release(rnd, planned.variables, fb_ck)
        # (a round planned during the previous one's job: its time counts from that job's end)
        now = time.perf_counter()
        seconds = now - max(planned.started, self.finished or planned.started)
        self.finished = now
        planned.entries = run.round_done(spec, act.number, RoundRecord(
            act.round, seconds, in_flight, op_counts, attempt, spark_jobs, stored, jobs_seen, rnd.plan_size,
            {op: how for op, how in folds.items() if how}, rnd.waves, rnd.ahead, planned.plan_seconds,
            planned.job_seconds, tuple(planned.deferred)))
        if run.detailed:  # (--report: counted off the round's path; -1 over Spark Connect)
            run.report.count_tasks(planned.entries[0], lambda: run.tasks_of_jobs(group, job_ids))
        self.previous = planned if planned.deferred and not attempt.terminated else None
        return attempt, fb_ck, in_flight, fed

    def late_counts(self, op_counts: dict) -> None:
        """Take out of this round's counters those of the previous round's deferred plans, which this round's job
        ran (named `op@round`, `Round.counter`): the records that round fed back, and its operators' records.
        Complete that round's report with them, and make them this round's variables' record counts."""
        previous, self.previous = self.previous, None
        late = {name: op_counts.pop(name) for name in [n for n in op_counts if LATE in n]}
        if previous is None:
            return
        suffix = f"{LATE}{previous.rnd.index}"
        fed = {v: late[counter] for v, counter in previous.deferred.items() if v in previous.changed and counter in late}
        counts = {name[:-len(suffix)]: n for name, n in late.items()
                  if name.endswith(suffix) and not name.startswith(FED_COUNTER)}
        for name, base in previous.rnd.same_count.items():
            if base in counts:
                counts[name] = counts[base]
        for v, n in fed.items():
            if previous.changed.get(v):
                self.fanout[v] = n / previous.changed[v]
        self.act.received.update(fed)
        self.run.report.late_counts(self.spec, previous.entries, counts, fed)

    def first_round_counts(self, rnd: Round, variables: dict, counts: dict) -> None:
        """What the first round learns: the records each variable held (a restored combined variable: as
        snapshotted)."""
        act = self.act
        act.received = {v: act.received[v] if v in act.combined and v in act.received else counts[rnd.key_of(df)]
                        for v, df in variables.items()}

    def keep_outputs(self, emit_ck: dict, records: dict) -> None:
        """Keep the round's emitted checkpoints as the loop's outputs; `records`: their counts, by stream."""
        act = self.act
        for node in {e.node: None for e in self.spec.emits if e.mode == "all"}:  # several emits may share a stream
            if ("all", node) in self.emit_records:
                known, n = self.emit_records["all", node], records.get(node)
                self.emit_records["all", node] = None if known is None or n is None else known + n
            act.emitted[node].append(emit_ck[node])
            if len(act.emitted[node]) > MAX_EMIT_PIECES:
                # (in this round's job group: the next round's may be set already, and counts its jobs)
                self.run.round_group(self.spec.scope, act.number, act.round)
                act.emitted[node] = [union_all(act.emitted[node]).localCheckpoint(eager=True)]
        for e in self.spec.emits:
            if e.mode == "last":
                act.last[e.node] = emit_ck[e.node]
                self.emit_records["last", e.node] = records.get(e.node)

    def release(self, rnd: Round, variables: dict, fb_ck: dict) -> None:
        """Free what no later round or output needs: checkpoints of the previous round and this round's
        intermediates, never a frame that is still a variable, state or output."""
        act = self.act
        keep = [*fb_ck.values(), *act.last.values(), *(p for s in act.states.values() for p in s.parts())]
        keep += [df for pieces in act.emitted.values() for df in pieces]
        retained = {id(df) for df in keep}
        self.run.release([df for df in [*self.held, *variables.values()] if id(df) not in retained])
        self.held = [ck for ck in rnd.retained() if id(ck) not in retained]

    def feedback_frame(self, rnd: Round, var: str, outs: dict) -> DataFrame:
        """The records fed back to `var`: its feedback streams, in the variable's column order."""
        columns = ddl_columns(self.spec.vars[var])
        frames = [self.in_columns(outs[n], columns, rnd, f"{var}<-{n}") for n in self.spec.feedback.get(var, [])]
        if not frames:
            return self.run.spark.createDataFrame([], self.spec.vars[var])
        return union_all(frames)

    def in_columns(self, df: DataFrame, columns: list, rnd: Round, stream: str) -> DataFrame:
        """`df` with exactly `columns`, in that order; `df` itself when it already has them (a select costs
        a JVM round trip and an analysis every round). Row-preserving: `df`'s counter counts it too."""
        if stream not in self.same_columns:  # decided once per stream: a body builds the same schemas every round
            self.same_columns[stream] = df.columns == columns
        if self.same_columns[stream]:
            return df
        out = df.select(*columns)
        rnd.same_rows(out, rnd.counter_of(df))
        return out

    def outputs(self):
        """The loop's value: its single output, or {emit name: output}.

        An emitted output its rounds counted no record of is given as an empty frame Spark knows is empty (a
        zero `limit` of it, which the optimizer makes an empty relation): what reads it is planned as reading
        nothing, with no job over the other side of a join with it, no shuffle for an outer join with it. (stdlib's
        `connected_components` when its first loop ends by itself: the vertices that changed in its last round,
        none, joined with every edge.)"""
        act, out = self.act, {}
        for e in self.spec.emits:
            if e.mode == "all":
                pieces = act.emitted[e.node]
                out[e.name] = self.known_empty(e, union_all(pieces) if pieces else None)
            elif e.mode == "last":
                out[e.name] = self.known_empty(e, act.last.get(e.node))
            else:
                out[e.name] = act.states[e.node].full() if e.node in act.states else None
            if e.mode == "all" and self.spec.incremental and e.node in act.states:
                # a distinct's records of every round are its state, also those of earlier epochs it started from
                out[e.name] = act.states[e.node].full()
        return out

    def known_empty(self, emit, df: Optional[DataFrame]) -> Optional[DataFrame]:
        return df.limit(0) if df is not None and self.emit_records.get((emit.mode, emit.node)) == 0 else df


def combine(rnd: Round, var: str, feedback: dict, last_fed: Optional[int]) -> Optional[str]:
    """Combine the records fed back to `var` with its only reader's per-round step, in this round's job.

    The compiler names the reader (`Plan.feedback_combiner`): a `reduce`, whose aggregation by key
    runs here instead of in the next round, or a `distinct`, whose records are deduplicated here. The
    next round stores and reads one record per key (or distinct record) instead of every record fed
    back, already partitioned like the reader's state, so its fold needs no shuffle. The reader's
    output is the same.

    A distinct is always combined: otherwise its fold shuffles the whole state with the round's
    records every round. A reduce's fold shuffles only the round's records either way, so combining
    saves only the records it merges, and costs a stage's worth of tasks: it is combined in the first
    round and after rounds that fed back at least `spark.scopeflow.combineAbove` records (measured on
    2 cores: +4 tasks, ~12 ms a round, against ~0.3 us per record not stored); a round planned during
    the previous round's job goes by the round before that (`LoopExecutor.plan_ahead`). Only where the round's
    job fills the counters in its plans (local and replicated checkpoints, `Checkpoints.counted_by_job`):
    the records fed back are counted there, for the termination attempt.

    Replaces `feedback[var]`; returns the name of the counter of the records fed back, or None when
    the variable is not combined this round."""
    op = rnd.spec.combine[var]
    state = rnd.states.get(op)
    if state is None or not rnd.spec.feedback.get(var) or not rnd.run.checkpoints.counted_by_job:
        return None
    if isinstance(state, ReduceState) and last_fed is not None and last_fed < rnd.run.combine_above():
        return None
    raw = feedback[var]
    counter = rnd.counter_of(raw)
    if counter is None:
        counter = FED_COUNTER + var
        raw = rnd.run.counters.observe(raw, counter, fused=rnd.fused)
    if isinstance(state, ReduceState):
        feedback[var] = state.group(raw, "delta")
    else:
        feedback[var] = raw.distinct()
    return counter


def narrowing(run, fb_ck: dict) -> Optional[int]:
    """How many partitions the loop's fed-back and emitted streams need: as many as Spark runs tasks
    at once, when no feedback keeps a partitioning the next round could use.

    Such a stream is re-partitioned by whatever reads it next (the next round's group or join, a
    sink), so more partitions than task slots only add tasks to every round's job: measured on 2
    cores, connected components' rounds went from 14 to 10 tasks and ~60 to ~40 ms per job. Decided
    once per activation, from the first round's feedback checkpoints (every round builds the
    same plans). A combined feedback (`combine`) keeps its key partitioning and is never narrowed;
    a reduce's is combined in some rounds only, so what decides for it is the partitioning of the
    records fed back."""
    slots = task_slots(run.spark)
    if not slots or not fb_ck or not all(unknown_partitioning(ck) for ck in fb_ck.values()):
        return None
    return slots if slots < run.loop_partitions else None


def _as_variable(run, spec: LoopSpec, var: str, df: Optional[DataFrame]) -> DataFrame:
    """An entry stream in the variable's column order (a variable with no entry starts empty)."""
    if df is None:
        return run.spark.createDataFrame([], spec.vars[var])
    return df.select(*ddl_columns(spec.vars[var]))
