"""The loop executor: one loop activation as synchronous rounds (LANGUAGE.md section 5).

Each round calls the generated body function with the variables' records of
the round and the loop's imports. Everything the round must keep — feedback,
emitted records, new `reduce`/`distinct` state, the `until` stream — is a lazy
`localCheckpoint` with a record counter; one action then materialises all of it
in a single Spark job, which also fills the counters. Lineage is cut every round, so round
time does not grow with the round count. The operators' `observe` counters,
collected by that same job, feed the termination attempt.
"""
from __future__ import annotations

import time
from functools import reduce as _fold
from typing import Callable, Optional

from attrs import define, field
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import compat
from scopeflow.runtime.state import FLAG, DistinctState, ReduceState
from scopeflow.runtime.termination import LoopMaxError, TerminationProtocol

FED_COUNTER = "_sf_fed:"  # observe name of the counter of the records fed back to a combined variable (+ it)
COMBINE_ABOVE = "spark.scopeflow.combineAbove"  # combine a reduce's feedback after rounds that fed back at least this many records
COMBINE_ABOVE_DEFAULT = 100_000


@define
class EmitSpec:
    name: Optional[str]  # None: the loop's single output
    mode: str  # all | last | state
    node: str  # body node id


@define
class LoopSpec:
    """What the generated code tells the executor about one loop scope."""

    scope: str
    kind: str  # loop | coloop
    vars: dict  # variable -> DDL schema (column order of the variable)
    imports: dict  # import name -> columns it is joined on (partition keys), possibly empty
    feedback: dict  # variable -> node ids fed back to it
    emits: list  # EmitSpec
    operators: dict  # node id -> (FLIP-15 type, name)
    max_rounds: object = 1000  # int or {"param": name}
    on_max: str = "fail"
    rounds: object = None
    until: Optional[str] = None  # node id
    snapshot_every: object = None
    snapshot_recompute: bool = False
    var_nodes: dict = field(factory=dict)  # variable -> var node id
    combine: dict = field(factory=dict)  # variable -> its only reader, a reduce or distinct (see `combine`)


class Round:
    """The body's handle on the executor during one round."""

    def __init__(self, job, spec: LoopSpec, activation: int, index: int, states: dict):
        self.job = job
        self.spec = spec
        self.activation = activation
        self.index = index
        self.states = states
        self.pending: list[tuple[str, DataFrame, DataFrame]] = []  # (key, pre-checkpoint frame, checkpoint)
        self._by_frame: dict[int, DataFrame] = {}
        self._key_of: dict[int, str] = {}
        self._alive: list[DataFrame] = []
        self._narrow: dict[int, DataFrame] = {}
        self._counted: dict[int, str] = {}  # id(frame) -> the counter (in its plan) that counts exactly its records
        self.same_count: dict[str, str] = {}  # operator or checkpoint key -> the counter that also counts it
        self.nested: list[str] = []
        self.combined: dict[str, DataFrame] = {}  # reduce -> its variable, holding the reduce's own aggregates

    # -- what generated code calls
    def param(self, name: str):
        return self.job.param(name)

    def count(self, op: str, df: DataFrame, same_as: Optional[str] = None) -> DataFrame:
        """Attach the record counter of operator `op` (read back after the round's job).

        `same_as`: `df` has exactly the records of operator `same_as`'s output (the compiler says so for
        a select/derive/drop right after it in a chain), so `op` reuses that counter: one `observe`
        less in the round's plan, and one JVM call less every round."""
        base = self.same_count.get(same_as, same_as)
        # --report keeps every counter: they also mark where each operator's Spark time goes
        if base is not None and not self.job.detailed and base in self._counted.values():
            self.same_count[op] = base
            self.same_rows(df, base)
            return df
        out = self.job.count(op, df)
        if out is not df:
            self.same_rows(out, op)
        return out

    def same_rows(self, df: DataFrame, counter: Optional[str]) -> None:
        """`df`'s records are exactly those counted by `counter` (when not None)."""
        if counter is not None:
            self._counted[id(df)] = counter
            self._alive.append(df)

    def counter_of(self, df: DataFrame) -> Optional[str]:
        return self._counted.get(id(df))

    def reduce(self, op: str, df: DataFrame, keys: list, aggs: list) -> DataFrame:
        """`reduce(by keys, name = fn(column), ...)`: fold the round's records into the keyed state."""
        state = self.states.get(op)
        if state is None:
            state = self.states[op] = ReduceState(op, list(keys), [(name, fn) for name, fn, _ in aggs])
        if state.delta_aggs is None:  # built once per activation: the aggregates are the same every round
            state.delta_aggs = [self.job.agg_column(fn, col).alias(name) for name, fn, col in aggs]
        combined = self.combined.get(op)
        if combined is None:
            delta = df.groupBy(*keys).agg(*state.delta_aggs)
        elif df is combined:  # the previous round aggregated these records already (`combine`)
            delta = df
        else:
            raise RuntimeError(f"internal error: reduce {op} reads a combined variable through another operator")
        return self.count(op, state.step(self, delta))

    def distinct(self, op: str, df: DataFrame) -> DataFrame:
        state = self.states.get(op)
        if state is None:
            state = self.states[op] = DistinctState(op, df.columns)
        return self.count(op, state.step(self, df))

    def share(self, op: str, df: DataFrame) -> DataFrame:
        """A stream read by several operators of the round: materialise it once, in the round's job."""
        return self.checkpoint(f"{op}/shared", df)

    def loop(self, spec: LoopSpec, body: Callable, entries: dict, imports: dict) -> dict:
        self.nested.append(spec.scope)
        return self.job.loop(spec, body, entries, imports)

    # -- executor side
    def checkpoint(self, key: str, df: DataFrame) -> DataFrame:
        known = self._by_frame.get(id(df))
        if known is not None:
            return known
        counter = self.counter_of(df) if self.job.counts_in_plans() else None
        if counter is not None:  # already counted inside its plan (an operator's output, fed back as it is)
            self.same_count[key] = counter
            pre = df
        else:
            pre = self.job.checkpoint_counter(key, df)  # its record count, collected by the round's job
        ck = compat.checkpoint(self.job.spark, pre, self.index)  # localCheckpoint; cluster/Connect: see compat
        self.pending.append((key, pre, ck))
        self._by_frame[id(df)] = ck
        self._by_frame[id(ck)] = ck
        self._alive += [df, ck]  # ids are keys above: the frames must outlive the round
        self._key_of[id(ck)] = key
        return ck

    def narrowed(self, df: DataFrame, partitions: Optional[int]) -> DataFrame:
        """`df` in at most `partitions` partitions, once per frame (so a stream that is both fed back
        and emitted is still one checkpoint); a checkpoint of this round stays as it is."""
        if partitions is None or id(df) in self._by_frame:
            return df
        known = self._narrow.get(id(df))
        if known is None:
            known = self._narrow[id(df)] = df.coalesce(partitions)
            self._alive += [df, known]
            self.same_rows(known, self.counter_of(df))
        return known

    def key_of(self, ck: DataFrame) -> str:
        return self._key_of[id(ck)]


@define
class RoundRecord:
    round: int
    seconds: float
    in_flight: dict
    counts: dict
    attempt: object
    spark_jobs: int = -1  # Spark jobs the round ran (status tracker)
    stored: dict = field(factory=dict)  # variable -> records kept for the next round (fewer when combined)
    jobs: list = field(factory=list)  # when a round ran more than one Spark job: each job, and why


def run_activation(job, spec: LoopSpec, body: Callable, entries: dict, imports: dict, activation: int,
                   restore=None) -> dict:
    """Run one activation of a loop to termination; return its outputs by emit name."""
    max_rounds = job.resolve_int(spec.max_rounds)
    rounds = job.resolve_int(spec.rounds) if spec.rounds is not None else None
    if spec.combine and job.counts_in_plans():
        job.combine_above()  # (a bad setting fails before the first round, not in the second)
    protocol = TerminationProtocol(spec.scope, activation, max_rounds, spec.on_max, rounds, spec.operators)
    cached = {name: job.prepare_import(df, spec.imports.get(name) or []) for name, df in imports.items()}
    variables = {v: _as_var(job, spec, v, entries.get(v)) for v in spec.vars}
    states: dict = {}
    emitted: dict[str, list] = {e.node: [] for e in spec.emits if e.mode == "all"}
    last: dict[str, DataFrame] = {}
    held: list = []  # checkpoints of the previous round, released once the next round is materialised
    received: dict[str, int] = {}  # records each variable holds this round (the heads' counts)
    combined: dict[str, str] = {}  # variables holding their reader's per-round result, not the records (`combine`)
    round_no = 0
    if restore is not None:
        round_no, received = restore.round, dict(restore.received)
        combined = {v: op for v, op in restore.combined.items() if spec.combine.get(v) == op}
        variables = {v: restore.variables.get(v) if v in combined else _as_var(job, spec, v, restore.variables.get(v))
                     for v in spec.vars}
        states = {op: restored_state(job, op, doc, restore) for op, doc in restore.states.items()}
        emitted.update({node: pieces for node, pieces in restore.emitted.items() if node in emitted})
        last = dict(restore.last)
    first = round_no
    narrow = None  # partitions of the fed-back and emitted checkpoints from the second round on
    from scopeflow.runtime.snapshots import Level

    level = Level(spec.scope, activation, recompute=spec.snapshot_recompute)
    job.push_level(level)
    job.progress.loop_started(spec, activation)
    try:
        while True:
            started = time.perf_counter()
            level.round, level.variables, level.states = round_no, variables, states
            level.emitted, level.last, level.received, level.combined = emitted, last, received, combined
            rnd = Round(job, spec, activation, round_no, states)
            job.round_group(spec.scope, activation, round_no)
            if round_no == first:  # entry streams (or restored ones) are plans: materialise them with this round
                variables = {v: rnd.checkpoint(f"var/{v}", df) for v, df in variables.items()}
            rnd.combined = {op: variables[v] for v, op in combined.items()}
            outs = body(rnd, **variables, **cached)
            feedback = {v: _feedback_frame(rnd, v, outs) for v in spec.vars}
            # records fed back by the previous round: unknown in an activation's first round; a resumed
            # activation has them from the snapshot
            last_fed = received if round_no > first or restore is not None else {}
            raw = dict(feedback)
            fed = {v: combine(rnd, v, feedback, last_fed.get(v)) for v in spec.combine}
            fed = {v: counter for v, counter in fed.items() if counter is not None}  # variable -> counter of the raw
            fb_ck = {v: rnd.checkpoint(f"feedback/{v}", df if v in fed else rnd.narrowed(df, narrow))
                     for v, df in feedback.items()}
            emit_ck = {e.node: rnd.checkpoint(f"emit/{e.node}", rnd.narrowed(outs[e.node], narrow))
                       for e in spec.emits if e.mode in ("all", "last")}
            until_ck = rnd.checkpoint(f"until/{spec.until}", rnd.narrowed(outs[spec.until], narrow)) if spec.until else None
            group = job.round_group(spec.scope, activation, round_no)  # nested loops set their own groups
            counts, op_counts = job.materialise(rnd.pending, rnd.same_count, also=list(fed.values()))
            spark_jobs = job.jobs_in_group(group)
            # (reliable checkpoints write in jobs of their own: one job per round holds only with counts in plans)
            jobs = job.explain_jobs(group) if spark_jobs > 1 and job.counts_in_plans() else []
            for state in states.values():
                state.commit(counts)
            if round_no == first:  # (a restored combined variable: the records it stands for, as snapshotted)
                received = {v: received[v] if v in combined and v in received else counts[rnd.key_of(df)]
                            for v, df in variables.items()}
                # a reduce's feedback is combined only in some rounds: judge it by the records fed back
                narrow = _narrowing(job, {v: raw[v] if v in fed and isinstance(states.get(spec.combine[v]), ReduceState)
                                          else ck for v, ck in fb_ck.items()})
            in_flight = {v: counts[rnd.key_of(fb_ck[v])] for v in spec.vars}
            stored = dict(in_flight)
            for v, counter in fed.items():  # the records fed back, not the fewer combined ones stored
                if in_flight[v]:  # (zero combined records: zero fed back, whatever a counter says)
                    in_flight[v] = max(in_flight[v], counts.get(counter) or 0)
            for var, vid in spec.var_nodes.items():
                op_counts[vid] = received.get(var, 0)
            until_records = counts[rnd.key_of(until_ck)] if until_ck is not None else None
            attempt = protocol.attempt(round_no, in_flight, op_counts, until_records, rnd.nested)
            for node in {e.node: None for e in spec.emits if e.mode == "all"}:  # several emits may share a stream
                emitted[node].append(emit_ck[node])
                if len(emitted[node]) > job.max_emit_pieces:
                    emitted[node] = [job.compact(emitted[node])]
            for e in spec.emits:
                if e.mode == "last":
                    last[e.node] = emit_ck[e.node]
            # Free what no later round or output needs: checkpoints of the previous round and
            # this round's intermediates, never a frame that is still a variable, state or output.
            retained = {id(df) for df in [*fb_ck.values(), *last.values(), *(p for s in states.values() for p in s.parts())]}
            retained |= {id(df) for pieces in emitted.values() for df in pieces}
            job.release([df for df in [*held, *variables.values()] if id(df) not in retained])
            held = [ck for _, _, ck in rnd.pending if id(ck) not in retained]
            seconds = time.perf_counter() - started
            job.round_done(spec, activation, RoundRecord(round_no, seconds, in_flight, op_counts, attempt, spark_jobs, stored, jobs),
                           variables=fb_ck, states=states, emitted=emitted, last=last)
            if attempt.terminated:
                if attempt.decision == "max-fail":
                    raise LoopMaxError(attempt, max_rounds)
                break
            variables, received, combined = fb_ck, in_flight, {v: spec.combine[v] for v in fed}
            level.attempt = attempt.id
            job.maybe_snapshot(spec, round_no, Level(spec.scope, activation, round_no + 1, fb_ck, states, emitted,
                                                     last, in_flight, attempt.id, spec.snapshot_recompute, combined))
            round_no += 1
    finally:
        job.pop_level()
        job.progress.loop_finished(spec, activation)
        for df in cached.values():
            df.unpersist()
    job.release(held)
    return _outputs(job, spec, emitted, last, states)


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
    2 cores: +4 tasks, ~12 ms a round, against ~0.3 us per record not stored). Only where checkpoints
    count their records in their own plans (local and replicated checkpoints): the records fed back
    are counted there too, for the termination attempt.

    Replaces `feedback[var]`; returns the name of the counter of the records fed back, or None when
    the variable is not combined this round."""
    op = rnd.spec.combine[var]
    state = rnd.states.get(op)
    if state is None or not rnd.spec.feedback.get(var) or not rnd.job.counts_in_plans():
        return None
    if isinstance(state, ReduceState) and last_fed is not None and last_fed < rnd.job.combine_above():
        return None
    raw = feedback[var]
    counter = rnd.counter_of(raw)
    if counter is None:
        counter = FED_COUNTER + var
        raw = raw.observe(counter, rnd.job.record_counter())
    if isinstance(state, ReduceState):
        feedback[var] = raw.groupBy(*state.keys).agg(*state.delta_aggs)
    else:
        feedback[var] = raw.distinct()
    return counter


def _narrowing(job, fb_ck: dict) -> Optional[int]:
    """How many partitions the loop's fed-back and emitted streams need: as many as Spark runs tasks
    at once, when no feedback keeps a partitioning the next round could use.

    Such a stream is re-partitioned by whatever reads it next (the next round's group or join, a
    sink), so more partitions than task slots only add tasks to every round's job: measured on 2
    cores, connected components' rounds went from 14 to 10 tasks and ~60 to ~40 ms per job. Decided
    once per activation, from the first round's feedback checkpoints (every round builds the
    same plans). A combined feedback (`combine`) keeps its key partitioning and is never narrowed;
    a reduce's is combined in some rounds only, so what decides for it is the partitioning of the
    records fed back."""
    slots = compat.task_slots(job.spark)
    if not slots or not fb_ck or not all(compat.unknown_partitioning(ck) for ck in fb_ck.values()):
        return None
    return slots if slots < job.partitions else None


def restored_state(job, op: str, doc: dict, restore):
    """A reduce/distinct state rebuilt from a snapshot, re-partitioned by its keys."""
    if doc["kind"] == "reduce":
        state = ReduceState(op, doc["keys"], [tuple(a) for a in doc["aggs"]])
    else:
        state = DistinctState(op, doc["columns"])
    restore_frame = job.recovery.state_frame
    state.main = (restore_frame(doc["main"]).select(*state.columns, F.lit(False).alias(FLAG))
                  .repartition(job.partitions, *state.keys))
    state.main_rows = doc["main_rows"]
    return state


def _as_var(job, spec: LoopSpec, var: str, df: Optional[DataFrame]) -> DataFrame:
    columns = [c.split()[0] for c in split_top_level(spec.vars[var])]
    if df is None:
        return job.spark.createDataFrame([], spec.vars[var])
    return df.select(*columns)


def split_top_level(text: str) -> list[str]:
    """Split at the commas outside any <...> or (...): DDL fields (`m map<string,long>`), parameter lists."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<("
        depth -= ch in ">)"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _feedback_frame(rnd: Round, var: str, outs: dict) -> DataFrame:
    """The records fed back to `var`: its feedback streams, in the variable's column order."""
    spec = rnd.spec
    columns = [c.split()[0] for c in split_top_level(spec.vars[var])]
    frames = [_in_columns(outs[n], columns, rnd, f"{var}<-{n}") for n in spec.feedback.get(var, [])]
    if not frames:
        return rnd.job.spark.createDataFrame([], spec.vars[var])
    return union_all(frames)


def _in_columns(df: DataFrame, columns: list, rnd: Round, stream: str) -> DataFrame:
    """`df` with exactly `columns`, in that order; `df` itself when it already has them (a select costs
    a JVM round trip and an analysis every round). Row-preserving: `df`'s counter counts it too."""
    plain = rnd.job.same_columns  # decided once per stream: a body builds the same schemas every round
    if stream not in plain:
        plain[stream] = df.columns == columns
    if plain[stream]:
        return df
    out = df.select(*columns)
    rnd.same_rows(out, rnd.counter_of(df))
    return out


def _outputs(job, spec: LoopSpec, emitted: dict, last: dict, states: dict) -> dict:
    out = {}
    for e in spec.emits:
        if e.mode == "all":
            pieces = emitted[e.node]
            out[e.name] = union_all(pieces) if pieces else None
        elif e.mode == "last":
            out[e.name] = last.get(e.node)
        else:
            out[e.name] = states[e.node].full() if e.node in states else None
    return out


def union_all(frames: list) -> DataFrame:
    return _fold(lambda a, b: a.unionByName(b), frames)


def compute_checkpoints(spark, checkpoints: list) -> int:
    """The one action of a round (classic Spark): compute and store every checkpoint in one job;
    return the number of records of all of them together.

    The checkpoints' RDDs are unioned and counted at the RDD level: one Spark
    job, no SQL query to plan and no listener event to wait for. Record counts
    per checkpoint come from the `observe` counters inside the checkpointed
    plans, which that same job fills (`Job._observed`). The tasks get the
    session's SQL settings as a SQL query's tasks do (`SQLExecutionRDD`).
    """
    rdds = [compat.checkpoint_rdd(ck) for ck in checkpoints]
    union = _fold(lambda a, b: a.union(b), rdds)
    wrap = compat.cached(spark, "sql-execution-rdd", lambda: spark._jvm.org.apache.spark.sql.execution.SQLExecutionRDD)
    return int(wrap(union, spark._jsparkSession.sessionState().conf()).count())


def tagged_counts(frames: list[tuple[str, DataFrame]]) -> dict:
    """The one action of a round over Spark Connect: compute every checkpoint and count its records.

    A no-op write scans the union of the checkpoints (which computes and stores
    them) in a single stage; the per-frame counts are observed by that same
    query, so counting adds neither a shuffle nor a job.
    """
    from pyspark.sql import Observation

    # SQL text, not Column calls: each Column call is a JVM round trip, and this runs every round.
    tagged = union_all([df.selectExpr(f"{i} AS _sf_o") for i, (_, df) in enumerate(frames)])
    obs = Observation("round")
    counters = compat.cached(frames[0][1].sparkSession, ("round-counters", len(frames)), lambda: [
        F.expr(f"count_if(_sf_o = {i})").alias(f"c{i}") for i in range(len(frames))])  # built once per size
    tagged.observe(obs, *counters).write.format("noop").mode("overwrite").save()
    values = obs.get
    return {key: int(values.get(f"c{i}") or 0) for i, (key, _) in enumerate(frames)}


def detach_statistics(spark, ck: DataFrame) -> DataFrame:
    """The checkpoint without the statistics and constraints inherited from the plan it came from.

    Spark estimates a join's size as the product of its inputs' sizes and a
    checkpoint keeps its origin plan's estimate, so state that is joined and
    re-checkpointed every round would carry an estimate whose digits double
    each round (a `BigInt` that exhausts the heap after a few hundred rounds).
    A checkpoint is a fresh leaf: it starts from Spark's default estimate.
    """
    plan = ck._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return ck
    none, dataset = compat.cached(spark, "detach-handles", lambda: _detach_handles(spark._jvm))
    fresh = plan.copy(plan.output(), plan.rdd(), plan.outputPartitioning(), plan.outputOrdering(), plan.isStreaming(),
                      plan.stream(), spark._jsparkSession, none, none, plan.isCheckpointedInput())
    return DataFrame(dataset.ofRows(spark._jsparkSession, fresh), spark)


def _detach_handles(jvm) -> tuple:
    none = getattr(getattr(jvm.scala, "None$"), "MODULE$")
    return none, getattr(getattr(jvm.org.apache.spark.sql.classic, "Dataset$"), "MODULE$")
