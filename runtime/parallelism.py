"""How many partitions a loop's rounds run in: chosen per activation of an outermost loop from the size of
what its rounds read (docs/cli.md#loop-partitions, benchmarks/RESULTS.md).

A round's Spark job scans its imports and its state in every task, whatever the round's delta: Spark
joins and folds have no index, so a round with three records in flight still reads every partition of
the edges it joins them with. What a round can save is tasks: each costs a few milliseconds of
scheduling however little it reads, and a loop over small inputs pays the full shuffle partition count
in every stage of every round. So the count follows the size of the loop's inputs (entries and imports,
Spark's estimate from the optimized plans, no job), `spark.scopeflow.loopPartitionBytes` each, between one
and `spark.sql.shuffle.partitions`. It is decided once per activation, before the imports are
partitioned for it, and holds for every round and nested loop of the activation: state, imports and
the round's delta stay co-partitioned, so no round shuffles its state or imports. (Shrinking only the
rounds whose delta is small would re-partition the state and the imports each time the count
changes; measured and left, see RESULTS.md.)

A streaming loop whose fixpoint can carry across epochs (an incremental-capable one, in every epoch, the
recomputed ones included) is sized with `CARRIED_PARTITION_BYTES` a partition instead (unless
`spark.scopeflow.loopPartitionBytes` is set): after its first epoch, its rounds carry a small delta over
states and imports that only grow, so a round's tasks each scan their share of those whatever the delta,
and a task more than Spark runs at once adds its fixed cost (scheduling, deserialising the task, a stage's
setup) to every stage of every round without adding parallelism. It takes at least the tasks Spark runs at
once, and keeps the count its states were kept in until its input outgrows it (`incremental.Start.
parallelism`). Measured (benchmarks/RESULTS.md, 2026-11-29): connected components and SSSP over a
10^6-edge stream on 2 cores, 2 partitions (the task slots) against 4 (the 4 MiB rule): the wave epochs
0.89 of the time for both, the first epoch 0.93-0.96 (cc) and 0.89 (SSSP).

`spark.scopeflow.loopPartitions=N` pins the count (experiments, or a loop Spark's estimate misjudges).

`--report` must not change the count. Its pipeline-level record counters are `observe` nodes (`CollectMetrics`,
context.RunContext.count), and Spark's estimate of a join whose one side has unique keys (a `group`'s) takes
the other side's size, but it does not see the keys through such a node and multiplies both sides' sizes:
PageRank's inputs on a 20,222-arc chain were estimated at 78 GiB with `--report` against 792 KiB without, and
the loop ran in 4 partitions against 1, at 2.4x the time (benchmarks/RESULTS.md, twenty-eighth session). So
with `--report` the estimate is taken from the plans without those nodes (`unmarked`), and a stream the
pipeline caches (`share`) is given the estimate of its plan without them (`unmark_cached`).
"""
from __future__ import annotations

import math
from typing import Optional

from attrs import frozen

from scopeflow.runtime.arguments import read_setting
from scopeflow.runtime.deployment import is_connect
from scopeflow.stdlib.settings import LOOP_PARTITIONS, PARTITION_BYTES

PARTITION_BYTES_DEFAULT = 4 * 1024 * 1024
CARRIED_PARTITION_BYTES = 128 * 1024 * 1024  # (a loop whose states can carry across epochs)
UNKNOWN = 1 << 62  # Spark's default estimate is Long.MaxValue (8 EiB): an unknown size


@frozen
class Parallelism:
    partitions: int
    why: str
    input_bytes: Optional[int] = None  # the estimate it was chosen from (None: pinned or unknown)

    def to_json(self) -> dict:
        out = {"partitions": self.partitions, "why": self.why}
        if self.input_bytes is not None:
            out["input_bytes"] = self.input_bytes
        return out


def choose(spark, full: int, frames: list, carried: bool = False, marked: bool = False) -> Parallelism:
    """The partitions of an activation whose entries and imports are `frames` (DataFrames), given the
    session's `full` count (`carried`: of a streaming loop whose states can carry across epochs; `marked`:
    the frames' plans hold `--report`'s counters, which the estimate leaves out)."""
    pinned = _setting(spark, LOOP_PARTITIONS, "auto")
    if pinned != "auto":
        return Parallelism(int(pinned), f"pinned by {LOOP_PARTITIONS}")
    if is_connect(spark):
        return Parallelism(full, "Spark Connect gives no size estimates: the session's shuffle partitions")
    per = int(_setting(spark, PARTITION_BYTES, str(CARRIED_PARTITION_BYTES if carried else PARTITION_BYTES_DEFAULT)))
    sizes = [estimated_bytes(df, marked) for df in frames]
    if not sizes or any(s is None or s >= UNKNOWN for s in sizes):
        return Parallelism(full, "its inputs' size is not known: the session's shuffle partitions")
    total = sum(sizes)
    n = max(1, min(full, math.ceil(total / per)))
    return Parallelism(n, f"inputs estimated at {_human(total)}, {_human(per)} a partition "
                          f"(at most {full}, the session's shuffle partitions)", total)


def estimated_bytes(df, marked: bool = False) -> Optional[int]:
    """Spark's size estimate of a frame (its optimized plan's statistics; no job runs), or None. `marked`: of
    its plan without `observe` nodes (the module's docstring; where they cannot be left out, of its plan)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        plan = jdf.queryExecution().optimizedPlan()
        if marked:
            try:
                plan = unmarked(df.sparkSession, plan)
            except Exception:  # noqa: BLE001 - another Spark's plan nodes: the estimate with the counters in
                pass
        size = plan.stats().sizeInBytes()
        return size if isinstance(size, int) else int(size.toString())  # (a Scala BigInt; py4j: an int)
    except Exception:  # noqa: BLE001 - a plan Spark cannot optimize fails again when the loop runs, told there
        return None


def unmarked(spark, plan):
    """A logical `plan` without its `observe` nodes (`CollectMetrics`): a copy where it had some, else `plan`
    itself. A few JVM calls a plan node (`--report` only); walked with a stack of its own (plans can be deep)."""
    done: dict = {}  # id(node) -> the node without markers
    stack = [(plan, None)]
    while stack:
        node, children = stack.pop()
        if children is None:  # first visit: its children first
            children, it = [], node.children().iterator()
            while it.hasNext():
                children.append(it.next())
            stack.append((node, children))
            stack.extend((child, None) for child in children)
            continue
        kept = [done.pop(id(child)) for child in children]
        if node.nodeName() == "CollectMetrics":
            done[id(node)] = kept[0]
        elif all(new is old for new, old in zip(kept, children)):
            done[id(node)] = node
        else:
            done[id(node)] = node.withNewChildren(spark._jvm.PythonUtils.toSeq(kept))
    return done[id(plan)]


def unmark_cached(df) -> None:
    """Give the cache of `df` (just persisted, not filled) the size estimate of its plan without `observe` nodes:
    what the plans that read it estimate until it is filled (Spark's `InMemoryRelation.statsOfPlanToCache`). Its
    plan is the optimized one its cached physical plan was planned from: the logical link of the physical plan's
    root, below the nodes Spark adds in planning (adaptive execution's, whole-stage code generation's). Left as
    it is if Spark's cache cannot be read so (the estimate only)."""
    try:
        cached = df.sparkSession._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf)
        if not cached.isDefined():
            return
        relation = cached.get().cachedRepresentation()
        physical = relation.cacheBuilder().cachedPlan()
        link = physical.logicalLink()
        while not link.isDefined() and physical.nodeName().startswith(_PLANNING_NODES):
            physical = physical.inputPlan() if physical.nodeName() == "AdaptiveSparkPlan" else physical.child()
            link = physical.logicalLink()
        if link.isDefined():
            getattr(relation, "statsOfPlanToCache_$eq")(unmarked(df.sparkSession, link.get()).stats())
    except Exception:  # noqa: BLE001 - another Spark's internals: the estimate keeps the counters' effect
        pass


_PLANNING_NODES = ("AdaptiveSparkPlan", "WholeStageCodegen", "InputAdapter", "ColumnarToRow")  # (one child each)


def _setting(spark, key: str, default: str) -> str:
    return read_setting(spark, key, default).strip().lower()


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
