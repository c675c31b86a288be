"""Round checkpoints: how a run cuts lineage every round, by the kind of session (`mode`).

- **local**: `localCheckpoint` (blocks on the local executor), statistics detached;
- **replicated** (a cluster's default): `localCheckpoint` stored on two executors, so a
  lost executor loses no loop state;

  both made from the executed plan's RDD with scopeflow's own functions where it has them
  (`Checkpoints.direct`, runtime/jvmfunctions.py): what `localCheckpoint` makes without its SQL action
  and closure check, its rows stored packed in a few byte arrays a partition;
- **reliable** (`spark.scopeflow.checkpoint=reliable`): `checkpoint` files in the checkpoint
  directory (a filesystem every node shares); survives any executor loss, and costs a Spark
  job of its own per checkpointed frame;
- **connect**: the server's `localCheckpoint`, and every `CONNECT_RESET_EVERY` rounds a
  Parquet copy instead (`_connect_reset`).
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import uuid
from collections import Counter
from types import SimpleNamespace
from typing import Optional

from pyspark.sql import DataFrame

from scopeflow.runtime import jvmfunctions
from scopeflow.runtime.arguments import check_setting, read_setting
from scopeflow.runtime.deployment import is_connect, is_local, local_slots, master
from scopeflow.stdlib.settings import CHECKPOINT, CHECKPOINT_DIR, CONNECT_RESET, CONNECT_SCRATCH

CONNECT_RESET_EVERY = 8
_UNKNOWN = object()
_RDD_ID = re.compile(r"\[(\d+)\] at ")  # an RDD in `toDebugString`: "MapPartitionsRDD[475] at ..."


def checkpoint_mode(spark) -> str:
    if is_connect(spark):
        return "connect"
    mode = spark.sparkContext._conf.get(CHECKPOINT, "auto")  # not getConf(): it copies every entry over py4j
    check_setting(CHECKPOINT, mode)
    mode = mode.strip().lower()
    if mode == "auto":
        return "local" if is_local(spark) else "replicated"
    return mode


class Checkpoints:
    """The round checkpoints of one run."""

    def __init__(self, spark):
        self.spark = spark
        self.mode = checkpoint_mode(spark)
        self._jvm: Optional[SimpleNamespace] = None  # JVM handles for `detach_statistics` and `direct` (`_handles`)
        self._scratch: Optional[str] = None  # Connect: where `_connect_reset` writes
        self._functions: object = _UNKNOWN  # jvmfunctions.Functions or None (not to be had), once looked up
        self.made: Counter = Counter()  # local and replicated checkpoints made: "direct", "api" (`describe`)

    @property
    def counted_by_job(self) -> bool:
        """Does the round's one RDD-level job store the checkpoints, return their sizes and fill the counters in
        their plans (`round.compute_checkpoints`)? Not over Connect (no JVM) and not for reliable checkpoints
        (Spark's second write job recomputes them, and their counters)."""
        return self.mode not in ("connect", "reliable")

    def make(self, df: DataFrame, round_no: Optional[int] = None) -> DataFrame:
        """The lazy checkpoint of a round's frame (materialised by the round's one Spark job)."""
        if self.mode == "connect":
            every = read_setting(self.spark, CONNECT_RESET, CONNECT_RESET_EVERY, int)
            if round_no is not None and every > 0 and round_no % every == every - 1:
                return self._connect_reset(df)
            return df.localCheckpoint(eager=False)
        if self.mode == "reliable":
            self._reliable_dir()
            return self.detach_statistics(df.checkpoint(eager=False))
        direct = self.direct(df)
        self.made["direct" if direct is not None else "api"] += 1
        if direct is not None:
            return direct
        if self.mode == "replicated":
            from pyspark import StorageLevel

            return self.detach_statistics(df.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK_2))
        return self.detach_statistics(df.localCheckpoint(eager=False))

    def functions(self):
        """scopeflow's JVM functions (runtime/jvmfunctions.py) for this run's local and replicated checkpoints
        and round jobs, or None (then Spark's own API makes them)."""
        if self._functions is _UNKNOWN:
            self._functions = jvmfunctions.functions(self.spark) if self.counted_by_job else None
        return self._functions

    def describe(self) -> str:
        """How this run's round checkpoints were made, for `--report` (a loop's `checkpoints`): the mode, and for
        `local` and `replicated` `jvm functions` (all by `direct`), `spark api` (none: with why, where the
        functions could not be had) or `jvm functions for N of M` (the rest by Spark's API)."""
        if not self.counted_by_job:
            return self.mode
        direct, api = self.made["direct"], self.made["api"]
        if api == 0 and direct:
            return f"{self.mode}, jvm functions"
        if direct == 0:
            why = jvmfunctions.why_not(self.spark)
            return f"{self.mode}, spark api" + (f" ({why})" if why else "")
        return f"{self.mode}, jvm functions for {direct} of {direct + api}"

    def direct(self, df: DataFrame) -> Optional[DataFrame]:
        """The lazy checkpoint of `df` made from its executed plan's RDD: the rows packed by scopeflow's function
        into a few byte arrays a partition (runtime/jvmfunctions.py), that RDD marked for a local checkpoint (on
        two executors if `replicated`; `checkpoint_rdd`), and the view of its rows (`rows_rdd`) under a
        `LogicalRDD` of the frame's output with the plan's output partitioning (a collection's first) and
        ordering, and no statistics. That is what `localCheckpoint` then `detach_statistics` make
        (`Dataset.checkpoint`, `LogicalRDD.fromDataset`), without the SQL action `localCheckpoint` runs as and
        without Spark's closure check of `classic.Dataset` (runtime/jvmfunctions.py; measured in
        benchmarks/RESULTS.md). The rows are computed and stored by the job that first reads them, as before.
        Without the SQL action, the plan's metrics are not reset before it runs (a round's plans are new, and
        run once) and a job that building the RDD starts (a broadcast, a subquery) has no SQL execution id; it
        has the session's SQL settings, which the RDD is built with (`jvmfunctions`' `PlanRows`).

        None (the caller takes `localCheckpoint`) without the functions, and for an adaptive plan (loops plan
        without adaptive execution: `context.LOOP_CONF`), which Spark runs in stages as it plans it."""
        fns = self.functions()
        if fns is None:
            return None
        made = fns.plan_rows.checkpoint(self.spark._jsparkSession, df._jdf, fns.any_tag,
                                        self._handles().two_replicas if self.mode == "replicated" else None)
        if made is None:
            return None
        out = DataFrame(made[0], self.spark)
        out._sf_made = made  # (its RDDs are read from it when first asked for: `checkpoint_rdd`, `rows_rdd`)
        return out

    def _handles(self) -> SimpleNamespace:
        """The JVM handles `detach_statistics` and `direct` use, looked up once."""
        if self._jvm is None:
            jvm = self.spark._jvm
            self._jvm = SimpleNamespace(
                none=getattr(getattr(jvm.scala, "None$"), "MODULE$"),
                dataset=getattr(getattr(jvm.org.apache.spark.sql.classic, "Dataset$"), "MODULE$"),
                single=getattr(getattr(jvm.org.apache.spark.sql.catalyst.plans.physical, "SinglePartition$"),
                               "MODULE$"),
                two_replicas=jvm.org.apache.spark.storage.StorageLevel.MEMORY_AND_DISK_2())
        return self._jvm

    def waves(self, checkpoints: list) -> list[list]:
        """The round's checkpoints grouped into the Spark jobs that store them, in order.

        In local mode (`local`, `local[N]`; not `local-cluster`) one job stores them all: every task runs
        in one process, and a task that needs a block another task is writing waits for it. On a cluster a
        checkpoint whose plan reads another checkpoint of the same round (a loop body reads a `reduce`'s
        new state) would compute that one's partitions a second time on another executor, in the same job:
        twice the work, counters that count twice, and two copies of a block that Spark keeps only one of,
        so a lost executor could lose it (CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND).
        There a checkpoint is stored by a job after those it reads; one JVM call per checkpoint finds them
        (its RDD's lineage)."""
        if len(checkpoints) < 2 or not self.counted_by_job or local_slots(master(self.spark) or "") is not None:
            return [checkpoints]
        rdds = [checkpoint_rdd(ck) for ck in checkpoints]
        level = wave_levels([rdd.id() for rdd in rdds], [rdd.toDebugString() for rdd in rdds])
        out: list[list] = [[] for _ in range(max(level) + 1)]
        for ck, d in zip(checkpoints, level, strict=True):
            out[d].append(ck)
        return out

    def release(self, frames: list) -> None:
        """Drop the stored blocks of round checkpoints nothing refers to any more. Over Connect the server
        releases a checkpoint when the client lets go of its frame; a frame that is no checkpoint (an empty
        variable built on the driver) holds no blocks."""
        if self.mode == "connect":
            return
        for df in frames:
            if is_checkpoint(df):
                checkpoint_rdd(df).unpersist(False)

    def detach_statistics(self, ck: DataFrame) -> DataFrame:
        """The checkpoint without the statistics and constraints inherited from the plan it came from.

        Spark estimates a join's size as the product of its inputs' sizes and a
        checkpoint keeps its origin plan's estimate, so state that is joined and
        re-checkpointed every round would carry an estimate whose digits double
        each round (a `BigInt` that exhausts the heap after a few hundred rounds).
        A checkpoint is a fresh leaf: it starts from Spark's default estimate.

        A checkpoint in one partition says `SinglePartition`, whatever placement its plan had: a loop
        in one partition (runtime/parallelism.py) then folds its state with the round's records and
        joins them with its imports (`repartition(1, ...)`: single-partition too) without a shuffle.
        Mixed with a one-partition hash partitioning, Spark cannot match a union's sides and shuffles
        the state every round (measured: benchmarks/RESULTS.md); two single-partition sides of a join
        need `context.ONE_PARTITION_CONF`.
        """
        plan = ck._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() != "LogicalRDD":
            return ck
        jvm = self._handles()
        none, dataset, single = jvm.none, jvm.dataset, jvm.single
        session = self.spark._jsparkSession
        partitioning = plan.outputPartitioning()
        if partitioning.numPartitions() == 1:
            partitioning = single
        rdd = plan.rdd()
        fresh = plan.copy(plan.output(), rdd, partitioning, plan.outputOrdering(),
                          plan.isStreaming(), plan.stream(), session, none, none, plan.isCheckpointedInput())
        out = DataFrame(dataset.ofRows(session, fresh), self.spark)
        out._sf_checkpoint_rdd = rdd  # (`checkpoint_rdd`, `is_checkpoint`: known here, not asked of the JVM again)
        return out

    def _reliable_dir(self) -> None:
        sc = self.spark.sparkContext
        if sc._jsc.sc().getCheckpointDir().isDefined():
            return
        base = sc.getConf().get(CHECKPOINT_DIR, None) or os.path.abspath(os.path.join(".scopeflow", "rdd-checkpoints"))
        sc.setCheckpointDir(base)  # Spark adds a per-application subfolder

    def _connect_reset(self, df: DataFrame) -> DataFrame:
        """Over Spark Connect: write the frame to Parquet and read it back (an eager Spark job).

        A checkpoint keeps the size estimate of the plan it came from, and Spark
        estimates a join as the product of its inputs, so state joined and
        re-checkpointed every round carries an estimate whose digits double each
        round: after ~20 rounds planning one round takes minutes (BigInteger
        products), then the heap. Classic sessions detach the estimate through py4j
        (`detach_statistics`); Connect has no such access, but a Parquet scan is
        estimated from its file sizes. The scratch folder must be writable by the
        server; it is removed when this process exits if the client can see it (the
        same machine), otherwise it stays on the server.
        """
        if self._scratch is None:
            root = self.spark.conf.get(CONNECT_SCRATCH, None) or os.path.join(tempfile.gettempdir(),
                                                                               "scopeflow-connect")
            self._scratch = os.path.join(root, f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            atexit.register(shutil.rmtree, self._scratch, True)
        path = os.path.join(self._scratch, uuid.uuid4().hex[:12])
        df.write.mode("overwrite").parquet(path)
        return self.spark.read.parquet(path)


def wave_levels(ids: list[int], lineages: list[str]) -> list[int]:
    """The job (0, 1, ...) that stores each of a round's checkpoints (`Checkpoints.waves`): 0 for one that
    reads no other checkpoint of the round, else one more than the last job of those it reads.

    `ids[i]` is checkpoint i's RDD id and `lineages[i]` its RDD's `toDebugString`, which names every RDD
    it reads as `[id] at ` (its own id among them). The checkpoints are created in order, so a plan reads
    only earlier ones: a later id in a lineage is no read (nor is an id that is no checkpoint's). The ids are
    distinct (every checkpoint is an RDD of its own)."""
    level: list[int] = []
    for i, text in enumerate(lineages):
        earlier = ids[:i]
        reads = {earlier.index(n) for n in map(int, _RDD_ID.findall(text)) if n in earlier}
        level.append(1 + max((level[j] for j in reads), default=-1))
    return level


def is_checkpoint(df: DataFrame) -> bool:
    """A classic checkpoint frame: its logical plan is the checkpointed RDD itself."""
    if "_sf_made" in vars(df) or _kept_rdd(df) is not None:
        return True
    return df._jdf.queryExecution().logical().getClass().getSimpleName() == "LogicalRDD"


def checkpoint_rdd(ck: DataFrame):
    """The JVM RDD a checkpoint frame's blocks are stored under (its `LogicalRDD`'s, or the packed rows under
    that: `Checkpoints.direct`). A round's checkpoint keeps it (`Checkpoints.detach_statistics`; `direct`'s reads it
    from the JVM when first asked for, then keeps it): three py4j calls less here and four in `is_checkpoint`,
    several times a round."""
    rdd = _kept_rdd(ck)
    return rdd if rdd is not None else ck._jdf.queryExecution().logical().rdd()


def rows_rdd(ck: DataFrame):
    """The JVM RDD of a checkpoint frame's rows (its `LogicalRDD`'s): computing it stores the blocks. (A packed
    checkpoint's rows are one row object pointed at each stored row in turn, as a plan's rows are reused: a reader
    that keeps rows copies them, as Spark's own operators do.)"""
    rdd = _kept(ck, "_sf_rows_rdd", 2)
    return rdd if rdd is not None else checkpoint_rdd(ck)


def _kept_rdd(df: DataFrame):
    """The RDD its blocks are stored under, if the frame keeps it (`detach_statistics`, `direct`)."""
    return _kept(df, "_sf_checkpoint_rdd", 1)


def _kept(df: DataFrame, name: str, index: int):
    """The JVM object a checkpoint frame keeps as `name`; `Checkpoints.direct`'s are read from its result (at
    `index`) when first asked for, one py4j call, then kept. (Not `getattr`: a frame's `__getattr__` reads its
    schema from the JVM, and a Connect frame's makes a column of any name.)"""
    kept = vars(df)
    if kept.get(name) is None and "_sf_made" in kept:
        kept[name] = kept["_sf_made"][index]
    return kept.get(name)


def unknown_partitioning(df: DataFrame) -> bool:
    """A classic checkpoint, or frame, whose rows Spark knows no placement of (no hash or range
    partitioning). For a frame that is not a checkpoint this plans it (once per loop activation)."""
    qe = df._jdf.queryExecution()
    plan = qe.logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        plan = qe.executedPlan()
    return plan.outputPartitioning().getClass().getSimpleName() == "UnknownPartitioning"
