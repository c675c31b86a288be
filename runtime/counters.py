"""Record counters: filled by the same job that computes a round, read back from the round's executed plans (one
JVM call per plan), so counting costs no Spark job.

Where scopeflow's JVM functions are on (runtime/jvmfunctions.py) and without `--report`, a round's counter is a
condition that is always true (`RowCounters`): a filter on a Java function that counts the records it sees into
an accumulator of its own. Spark generates its code with the operators around it, in one stage. An `observe`
node (`CollectMetrics`) is not generated code: each one splits the round's generated stage in two, and each
stage is code to generate and a closure for Spark to clean, every round (a chain's PageRank ran in 0.83 of the
time without its two counters: benchmarks/RESULTS.md, twenty-fifth session). `--report` keeps the `observe`
nodes: they also mark where each operator's Spark time goes (`operator_times`), and so do runs without the
functions (Spark Connect). Both count alike: every successful task that computed the records (`context.py`
says why loops sum every task). But where a round computes some records twice, each `observe` node counts one
computation, and a condition both: such rounds keep `observe` (`round.Round.fused`)."""
from __future__ import annotations

import re
from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import columns, jvmfunctions
from scopeflow.runtime.deployment import is_connect

FED_COUNTER = "_sf_fed:"  # observe name of the counter of the records fed back to a combined variable (+ it)
NEW_KEYS_COUNTER = "_sf_nk:"  # observe name of a state overlay's count of keys not in main (+ the state's key)
LATE = "@"  # `op@round`: a counter in a deferred feedback's plan, which the next round's job fills (runtime/loop.py)
INTERNAL = "_sf_"  # the start of every counter name above: none names an operator


class Counters:
    """The record counters of one run's session."""

    def __init__(self, spark, marked: bool = False):
        self.spark = spark
        self.column = F.count(F.lit(1)).alias("n")  # built once: each Column call is a JVM round trip
        self.marked = marked  # round counters are `observe` nodes (`--report`: they mark the operators' times)
        self._collector = None
        self._fused = None  # `RowCounters` (runtime/jvmfunctions.py), False without them; looked up at first use
        self._count_if: dict = {}  # id(condition) -> (condition, its `count_if` aggregate)
        self._empty = columns.seq(spark, [])  # (runtime/columns.py; None over Spark Connect)

    def observe(self, df, name: str, where=None, fused: bool = True):
        """A counter `name` of `df`'s records (those for which `where`, a boolean column, is true): a condition in
        the generated code (the module's docstring) if `fused` (the records are computed once in the job that
        counts them: `round.Round.fused`), else `df.observe(name, ...)`."""
        fused = fused and self.fused()
        if fused:
            counted = self._every if where is None else where
            return DataFrame(df._jdf.filter(fused.counter(self._context, name, counted._jc)), df.sparkSession)
        if where is None:
            return columns.observe(df, name, self.column, self._empty)
        known = self._count_if.get(id(where))
        if known is None:
            known = self._count_if[id(where)] = (where, F.count_if(where).alias("n"))
        return columns.observe(df, name, known[1], self._empty)

    def fused(self):
        """`RowCounters`, or False: with `--report`, over Spark Connect or without scopeflow's JVM functions."""
        if self._fused is None:
            fns = None if self.marked or is_connect(self.spark) else jvmfunctions.functions(self.spark)
            self._fused = fns.row_counters if fns is not None and fns.row_counters is not None else False
            if self._fused:
                self._context, self._every = self.spark.sparkContext._jsc.sc(), F.lit(True)
        return self._fused

    def observed(self, frames: list) -> dict:
        """The counters in the executed plans of `frames`, by name ({} over Spark Connect: no JVM here)."""
        if is_connect(self.spark):
            return {}
        pairs = self._fused_pairs if self._fused else self._observe_pairs
        out: dict = {}
        for df in frames:
            for name, value in pairs(df._jdf.queryExecution().executedPlan()):
                out[name] = max(out.get(name, 0), value)
        return out

    def _fused_pairs(self, plan) -> list[tuple[str, int]]:
        """(name, count) of a plan's conditions and of its `observe` nodes: one text, a line each."""
        lines = self._fused.collect(plan).splitlines()
        return [(name, int(value)) for name, value in (line.rsplit("\t", 1) for line in lines)]

    def _observe_pairs(self, plan) -> list[tuple[str, int]]:
        """(name, count) of a plan's `observe` nodes."""
        if self._collector is None:
            self._collector = getattr(getattr(self.spark._jvm.org.apache.spark.sql.execution, "CollectMetricsExec$"),
                                      "MODULE$")
        return metric_pairs(self._collector.collect(plan))


_METRIC = re.compile(r"(?:\(|, )([^\s,()]+) -> \[(-?\d+)\](?=[,)])")


def metric_pairs(metrics) -> list[tuple[str, int]]:
    """(name, count) of a `CollectMetricsExec.collect` map (name -> single-count Row).

    One JVM call reads the whole map as text (`Map(n009 -> [12], ...)`): every entry read
    through the JVM would cost four round trips, every round. Names are scopeflow's own
    (operator ids, `_sf_fed:` + variable); if the text is ever not exactly its `size()`
    entries, they are read one by one."""
    text = metrics.toString()
    pairs = [(m.group(1), int(m.group(2))) for m in _METRIC.finditer(text)]
    head = text[:text.find("(") + 1]
    if head + ", ".join(f"{name} -> [{n}]" for name, n in pairs) + ")" == text and len(pairs) == metrics.size():
        return pairs  # the text is exactly these entries
    pairs, it = [], metrics.iterator()
    while it.hasNext():
        kv = it.next()
        pairs.append((kv._1(), int(kv._2().get(0))))
    return pairs


def operator_times(frames: list) -> dict:
    """Milliseconds of Spark task time per operator in the executed plans of a round's frames.

    `frames` are (checkpoint key, frame) pairs. Each counted operator's output is marked by a
    `CollectMetrics` node named after it; the timing metrics of the plan nodes below that marker
    and above the next markers (the operator's inputs) are its time. A frame checkpointed for an
    operator (`n009/state`: a reduce's fold, `n011/shared`) belongs to it from the root down; the
    projections the executor adds above markers (feedback, emits) belong to no operator. A
    whole-stage-codegen node's pipeline time covers the nodes fused into it, so their own timings
    are not added again. Summed over tasks: on several cores this is more than the wall time.

    The walk is scopeflow's JVM function where it compiled (`OperatorTimes`, runtime/jvmfunctions.py: a few JVM
    calls a plan), else (or where it fails) here: a few JVM calls a plan node."""
    out: dict = {}
    fns = jvmfunctions.functions(frames[0][1].sparkSession) if frames else None
    walker = fns.operator_times if fns is not None else None
    for key, df in frames:
        owner = key.split("/", 1)[0]
        owner = owner if re.fullmatch(r"n\d+", owner) else None
        plan = df._jdf.queryExecution().executedPlan()
        if walker is not None:
            try:
                text = walker.times(plan, owner, INTERNAL, LATE)
            except Exception:  # noqa: BLE001 - a plan node another Spark gives otherwise: walked from Python
                walker = None
            else:
                for line in text.splitlines():
                    op, ms = line.rsplit("\t", 1)
                    out[op] = out.get(op, 0.0) + float(ms)
                continue
        walked_times(plan, owner, out)
    return out


def walked_times(plan, owner: Optional[str], out: dict) -> dict:
    """`operator_times` of one executed plan walked from Python, added to `out` (returned)."""
    stack = [(plan, owner, False)]
    while stack:
        node, op, fused = stack.pop()
        name = node.nodeName()
        if name == "CollectMetrics" and not node.name().startswith(INTERNAL):
            op = node.name().split(LATE, 1)[0]  # (a deferred plan's `op@round`: the operator's time all the same)
        if name.startswith("WholeStageCodegen"):
            fused = True
            ms = _timing_ms(node, only="pipelineTime")
        elif name == "InputAdapter":
            fused, ms = False, 0.0
        else:
            ms = 0.0 if fused else _timing_ms(node)
        if op is not None and ms:
            out[op] = out.get(op, 0.0) + ms
        children = node.children().iterator()
        while children.hasNext():
            stack.append((children.next(), op, fused))
    return out


def _timing_ms(node, only: Optional[str] = None) -> float:
    total = 0.0
    it = node.metrics().iterator()
    while it.hasNext():
        kv = it.next()
        if only is not None and kv._1() != only:
            continue
        metric = kv._2()
        kind = metric.metricType()
        if kind == "timing":
            total += metric.value()
        elif kind == "nsTiming":
            total += metric.value() / 1e6
    return total
