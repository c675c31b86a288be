"""One round of a loop activation: the body's handle (`Round`, what generated round functions call) and the
round's single Spark job (`Round.materialise`).

Everything the round must keep — feedback (unless the next round computes it: a deferred feedback,
runtime/loop.py), emitted records, new `reduce`/`distinct` state, shared streams, the `until` stream — is a
lazy checkpoint; one action then computes and stores all of them in one Spark job,
which returns the size of each of their partitions and also fills every record counter (`observe`) in the
round's plans (on a cluster, a checkpoint the round's other ones read is stored by a job of its own first:
`Checkpoints.waves`). Lineage is cut every round, so a round's cost does not grow with the round count.
"""
from __future__ import annotations

from functools import reduce as _fold
from typing import Callable, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime.counters import FED_COUNTER, LATE
from scopeflow.runtime.state import DistinctState, ReduceState


class PlannedAhead(Exception):
    """A round planned during the previous round's job reached something that runs Spark jobs (a nested loop):
    it is planned again after that job (`loop.LoopExecutor.plan_ahead`)."""


class Round:
    def __init__(self, run, spec, activation, ahead: bool = False, pieces: bool = False):
        self.run = run
        self.ahead = ahead  # planned during the previous round's job: it must not run Spark jobs
        self.spec = spec
        self.index = activation.round
        self.states = activation.states  # reduce/distinct states: a round adds those its operators start
        self.preloaded = activation.preloaded  # states an incremental epoch starts from (taken once)
        self.seeds = activation.seeds if activation.round == 0 else {}
        self.received = activation.received  # records each variable received this round, when known
        self.estimate = activation.estimate  # what an incremental epoch's first round receives, about
        self.pending: list[tuple[str, DataFrame, DataFrame]] = []  # (key, pre-checkpoint frame, checkpoint)
        self._by_frame: dict[int, DataFrame] = {}
        self._key_of: dict[int, str] = {}
        self._alive: list[DataFrame] = []  # frames whose ids are keys above: they must outlive the round
        self._narrow: dict[int, DataFrame] = {}
        self._counted: dict[int, str] = {}  # id(frame) -> the counter (in its plan) that counts exactly its records
        self.same_count: dict[str, str] = {}  # operator -> the counter that also counts it
        self.nested: list[str] = []  # scopes of the loops this round ran
        self.combined: dict[str, DataFrame] = {}  # reduce -> its variable, holding the reduce's own aggregates
        self.waves = 1  # the Spark jobs the round's checkpoints are stored by (`Checkpoints.waves`)
        self.plan_size: Optional[int] = None
        self.defers = False  # it leaves its feedback to the next round's job (`loop.LoopExecutor.defers`)
        self.deferred_in = ()  # the variables' frames that are deferred plans of the previous round (to compute once)
        # Counters fused into the generated code (runtime/counters.py) add up every computation of their records. A
        # round may compute some records twice: a fold into a state's overlay reads the round's records twice (the
        # keys it meets in main, and the records; so may an incremental epoch's states it starts from), a join with
        # an incremental loop's import `pieces` (or its first round's seeds) reads the other side once a piece. Such
        # a round's counters are `observe` nodes, one per computation, of which `Counters.observed` takes the largest.
        self.fused = (run.checkpoints.counted_by_job and not pieces and not self.seeds and not self.preloaded
                      and not any(state.may_overlay(*run.overlay()) for state in self.states.values()))

    # ---- what generated round functions call ---------------------------------------------------------

    def param(self, name: str):
        return self.run.param(name)

    def positive(self, name: str) -> int:
        return self.run.positive(name)

    def count(self, df: DataFrame, op: str, same_as: Optional[str] = None) -> DataFrame:
        """Attach the record counter of operator `op` (read back after the round's job).

        `same_as`: `df` has exactly the records of operator `same_as`'s output (the compiler says so for
        a select/derive/drop right after it in a chain), so `op` reuses that counter: one `observe`
        less in the round's plan, and one JVM call less every round."""
        base = self.same_count.get(same_as, same_as)
        # --report keeps every counter: they also mark where each operator's Spark time goes
        counter = self.counter(base) if base is not None and not self.run.detailed else None
        if counter is not None and counter in self._counted.values():
            self.same_count[op] = base
            self.same_rows(df, counter)
            return df
        name = self.counter(op)
        out = self.run.counters.observe(df, name, fused=self.fused)
        self.same_rows(out, name)
        return out

    def counter(self, op: str, late: bool = False) -> str:
        """The name of `op`'s counter: `op`, or `op@round` for an operator of a deferred feedback's plan (`late`
        ones, `LoopSpec.late`), which the next round's job runs: that job reads it apart from its own counters
        (`loop.LoopExecutor.late_counts`)."""
        return f"{op}{LATE}{self.index}" if self.defers and (late or op in self.spec.late) else op

    def reduce(self, df: DataFrame, op: str, keys: list, aggs: list) -> DataFrame:
        """`reduce(by keys, name = fn(column), ...)`: fold the round's records into the keyed state."""
        state = self.states.get(op)
        if state is None:
            state = self.states[op] = ReduceState(op, list(keys), [(name, fn) for name, fn, _ in aggs])
            state.preload(self.preloaded.pop(op, None))
        if state.delta_aggs is None:  # built once per activation: the aggregates are the same every round
            state.delta_aggs = [self.run.aggregate(fn, col).alias(name) for name, fn, col in aggs]
        combined = self.combined.get(op)
        if combined is None:
            delta = state.group(df, "delta")
        elif df is combined:  # the previous round aggregated these records already (`loop.combine`)
            delta = df
        else:
            raise RuntimeError(f"internal error: reduce {op} reads a combined variable through another operator")
        out = state.step(self, delta, once=df in self.deferred_in)
        self.same_rows(out, op)  # (counted by the state's checkpoint: `KeyedState._adopt`)
        return out

    def distinct(self, df: DataFrame, op: str) -> DataFrame:
        state = self.states.get(op)
        if state is None:
            state = self.states[op] = DistinctState(op, df.columns)
            state.preload(self.preloaded.pop(op, None))
        once = df in self.deferred_in
        if state.main is not None and self.combined.get(op) is not df:
            # (records not combined by the round that fed them back, e.g. a deferred feedback: deduplicated here,
            # partitioned like the state, so the fold shuffles the round's records and not the state)
            df = df.distinct()
        out = state.step(self, df, once=once)
        self.same_rows(out, op)
        return out

    def join(self, left: DataFrame, op: str, right, fn: Callable) -> DataFrame:
        """A join of the body with an import that grows (`fn(left, right)` is the join; the import is a frame or
        `Pieces`). In the first round of an incremental epoch the import's new records also meet the other
        side's records of earlier epochs (`Seed`): what they would have met, had they been there, is what the
        loop's fixpoint lacks."""
        seed = self.seeds.get(op)
        import_left = seed[2] if seed is not None else isinstance(left, Pieces)
        if import_left:
            out = union_all([fn(piece, right) for piece in Pieces.of(left)])
        else:
            out = union_all([fn(left, piece) for piece in Pieces.of(right)])
        if seed is None:
            return out
        history, new, _ = seed
        return out.unionByName(fn(new, history) if import_left else fn(history, new))

    def in_flight_estimate(self) -> Optional[int]:
        """About how many records the round's variables received (what its `reduce`/`distinct` states fold in
        follows from them, through the body's joins): counted by the previous round (by the one before it, for a
        round planned during the previous round's job), or the new records of an incremental epoch; None when
        unknown (a fresh activation's first round). A round that proves larger only makes a later round rewrite
        its state."""
        if self.received:
            return sum(self.received.values())
        return self.estimate

    def share(self, df: DataFrame, op: str) -> DataFrame:
        """A stream read by several operators of the round: materialise it once, in the round's job."""
        return self.checkpoint(f"{op}/shared", df)

    def loop(self, spec, body: Callable, entries: dict, imports: dict):
        if self.ahead:
            raise PlannedAhead(spec.scope)
        self.nested.append(spec.scope)
        return self.run.loop(spec, body, entries, imports)

    # ---- the executor's side ----------------------------------------------------------------------------

    def same_rows(self, df: DataFrame, counter: Optional[str]) -> None:
        """`df`'s records are exactly those counted by `counter` (when not None)."""
        if counter is not None:
            self._counted[id(df)] = counter
            self._alive.append(df)

    def counter_of(self, df: DataFrame) -> Optional[str]:
        return self._counted.get(id(df))

    def checkpoint(self, key: str, df: DataFrame) -> DataFrame:
        """The lazy checkpoint of `df` under `key`, once per frame, materialised by the round's job."""
        known = self._by_frame.get(id(df))
        if known is not None:
            return known
        ck = self.run.checkpoints.make(df, self.index)  # (counted by the round's job: `materialise`)
        self.pending.append((key, df, ck))
        self._by_frame[id(df)] = self._by_frame[id(ck)] = ck
        self._alive += [df, ck]
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
        return known

    def key_of(self, ck: DataFrame) -> str:
        return self._key_of[id(ck)]

    def retained(self) -> list[DataFrame]:
        return [ck for _, _, ck in self.pending]

    # ---- the round's Spark job --------------------------------------------------------------------------

    def materialise(self, also: tuple = ()) -> tuple[dict, dict]:
        """Run the round's single Spark job; return record counts per checkpoint key and per operator.

        `also`: counters in the round's plans to return with the counts (the records fed back to combined
        variables)."""
        run = self.run
        if run.diagnostics:
            self.plan_size = sum(pre._jdf.queryExecution().logical().treeString().count("\n")
                                 for _, pre, _ in self.pending)
        frames = [pre for _, pre, _ in self.pending]
        if not run.checkpoints.counted_by_job:
            counts = tagged_counts(run, [(key, ck) for key, _, ck in self.pending])
            observed = run.counters.observed(frames)
        else:
            waves = run.checkpoints.waves([ck for _, _, ck in self.pending])
            self.waves = len(waves)
            sizes = [n for wave in waves for n in compute_checkpoints(run, wave)]
            order = [self.key_of(ck) for wave in waves for ck in wave]
            counts = dict(zip(order, sizes, strict=True))
            observed = run.counters.observed(frames)
            counts.update({name: observed.pop(name, None) if name.startswith(FED_COUNTER) else observed.get(name)
                           for name in also})
        for name, base in self.same_count.items():  # (a late counter's base is late too: `late_counts` maps it)
            if self.counter(base) in observed:
                observed[name] = observed[self.counter(base)]
        if run.detailed and run.jvm_metrics:
            run.report.time_operators([(key, pre) for key, pre, _ in self.pending])
        return counts, observed


class Pieces(tuple):
    """An import of an incremental loop kept as several prepared frames across epochs (each partitioned and
    sorted by its join keys): the one of an earlier epoch and those that the epochs since added
    (`incremental.EpochLoops.imports`). A join reads each piece as it is, so none is shuffled or sorted again."""

    @staticmethod
    def of(df) -> tuple:
        return tuple(df) if isinstance(df, Pieces) else (df,)

    def transform(self, fn: Callable, *args):
        """As `DataFrame.transform`: the generated join of an import on the left side is
        `import.transform(ctx.join, op, right, step)`."""
        return fn(self, *args)


def union_all(frames: list) -> DataFrame:
    return _fold(lambda a, b: a.unionByName(b), frames)


def compute_checkpoints(run, checkpoints: list) -> list[int]:
    """The one action of a round (classic Spark): compute and store every checkpoint in one job; return the
    number of records of each.

    The checkpoints' RDDs are unioned and their partitions' sizes computed at the RDD level
    (`RDD.zipWithIndex`, whose constructor runs one job of `Utils.getIteratorSize` over every partition but
    the last, here an empty one added for it; or `SparkContext.runJob` with scopeflow's counting function
    where it has one, runtime/jvmfunctions.py, a function Spark need not check as it checks its own closures):
    one Spark job, no SQL query to plan, no listener event to wait
    for, and no counter in the checkpointed plans. The sizes are exact, being the tasks' results (a counter is
    an accumulator, which a re-run stage fills twice). The tasks get the session's SQL settings as a SQL
    query's tasks do (`SQLExecutionRDD`)."""
    from scopeflow.runtime.checkpoints import rows_rdd

    spark = run.spark
    if not checkpoints:
        return []
    rdds = [rows_rdd(ck) for ck in checkpoints]
    parts = [rdd.getNumPartitions() for rdd in rdds]
    # (JVM handles found once per run: each step of a `spark._jvm` path is a JVM round trip, which a package's
    # name makes a failed class lookup)
    wrap = run.handle("sql-execution-rdd", lambda: spark._jvm.org.apache.spark.sql.execution.SQLExecutionRDD)
    conf = run.handle("sql-conf", lambda: spark._jsparkSession.sessionState().conf())
    fns = run.checkpoints.functions()
    if fns is not None:  # (a job whose tasks return their partitions' sizes)
        union = wrap(_fold(lambda a, b: a.union(b), rdds), conf)
        arrays = run.handle("arrays", lambda: spark._jvm.java.util.Arrays)
        sizes = java_numbers(arrays.toString(run.handle("context", lambda: spark.sparkContext._jsc.sc()).runJob(
            union, fns.count_rows, fns.any_tag)))
    else:  # (the sizes from the start of each partition, and one empty partition more)
        last = run.handle("one-empty-partition",
                          lambda: spark._jsc.parallelize(spark._jvm.java.util.ArrayList(), 1).rdd())
        starts = partition_starts(run, wrap(_fold(lambda a, b: a.union(b), rdds + [last]), conf).zipWithIndex())
        sizes = [b - a for a, b in zip(starts, starts[1:])]
    if len(sizes) != sum(parts):  # (a union keeps its inputs' partitions in order unless they share a partitioner)
        raise RuntimeError(f"internal error: {len(sizes)} partitions in the union of checkpoints of {parts}")
    out, at = [], 0
    for n in parts:
        out.append(sum(sizes[at:at + n]))
        at += n
    return out


def java_numbers(text: str) -> list[int]:
    """The numbers of a JVM array of numbers as `java.util.Arrays.toString` writes it (`[3, 0, 7]`): one JVM
    call for the whole array, not one per element."""
    return [int(x) for x in text[1:-1].split(", ")] if text != "[]" else []


def partition_starts(run, zipped) -> list[int]:
    """The index of each partition's first record in a `ZippedWithIndexRDD` (its `startIndices`, computed by
    its constructor): read in two JVM calls through the private field, or two per partition through its
    partitions' `startIndex` if that field is ever renamed or not set."""
    jvm = run.spark._jvm

    def field():
        try:
            f = jvm.java.lang.Class.forName("org.apache.spark.rdd.ZippedWithIndexRDD").getDeclaredField("startIndices")
            f.setAccessible(True)
            return f
        except Exception:  # noqa: BLE001 - py4j's error for a missing field: read the partitions instead
            return None

    f = run.handle("zipped-start-indices", field)
    arrays = run.handle("arrays", lambda: jvm.java.util.Arrays)  # (as `compute_checkpoints` finds it)
    text = arrays.toString(f.get(zipped)) if f is not None else "null"
    if text != "null":
        return java_numbers(text)
    return [p.startIndex() for p in zipped.partitions()]  # (computes them, if the field were ever lazy)


def tagged_counts(run, frames: list[tuple[str, DataFrame]]) -> dict:
    """The one action of a round over Spark Connect (and with reliable checkpoints): compute every
    checkpoint and count its records.

    A no-op write scans the union of the checkpoints (which computes and stores them) in a single stage; the
    per-frame counts are observed by that same query, so counting adds neither a shuffle nor a job."""
    from pyspark.sql import Observation

    # SQL text, not Column calls: each Column call is a JVM round trip, and this runs every round.
    tagged = union_all([df.selectExpr(f"{i} AS _sf_o") for i, (_, df) in enumerate(frames)])
    obs = Observation("round")
    counters = run.handle(("round-counters", len(frames)), lambda: [
        F.expr(f"count_if(_sf_o = {i})").alias(f"c{i}") for i in range(len(frames))])
    tagged.observe(obs, *counters).write.format("noop").mode("overwrite").save()
    values = obs.get
    return {key: int(values.get(f"c{i}") or 0) for i, (key, _) in enumerate(frames)}
