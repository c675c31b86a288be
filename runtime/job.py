"""The run context of one pipeline execution: what generated scripts call.

`Job` owns the SparkSession, parameters, sources and sinks, record counters,
per-round materialisation and the run report. Loops are delegated to
`runtime.loop.run_activation`.
"""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from contextlib import contextmanager
from typing import Callable, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import compat
from scopeflow.runtime import sinks as sink_io
from scopeflow.runtime.errors import RuntimeFailure
from scopeflow.runtime.loop import (COMBINE_ABOVE, COMBINE_ABOVE_DEFAULT, FED_COUNTER, LoopSpec, compute_checkpoints,
                                    run_activation, split_top_level, tagged_counts, union_all)
from scopeflow.runtime.progress import Progress
from scopeflow.stdlib.functions import AGGREGATES

# Inside loops: one Spark job per round needs no adaptive re-planning (it submits
# each shuffle stage as its own job) and no broadcast exchange (a job of its own).
#
# The record counters (`observe`) must add up every task that fed them. From Spark 4.3 an
# `observe` counter keeps only the tasks of one stage (the one with the highest RDD id). A round
# checkpoint read by two shuffle stages has some of its partitions computed by each stage (when the
# round has more tasks than task slots); its counter then misses the other stage's partitions, and
# the round had to count again, in a second Spark job. So loops sum all tasks, as Spark did before
# 4.3 (older Sparks ignore the setting). Within a round every partition is computed once: a stream
# read twice is a checkpoint. A stage re-run (a lost executor) counts some records twice: the
# checkpoints' counters are checked against the round's own count (`Job.materialise` counts again
# when they disagree); the other counters (the report's, the records fed back) can only read high,
# which never ends a loop early.
OBSERVE_ALL_ATTEMPTS = "spark.sql.legacy.observeMetricsAggregateAllAttempts"
LOOP_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.autoBroadcastJoinThreshold": "-1",
             OBSERVE_ALL_ATTEMPTS: "true"}
CHECKPOINT_COUNTER = "_sf_ck:"  # observe name of a round checkpoint's record counter (+ its key)


def restore_conf(spark, saved: dict) -> None:
    """Put session settings back as they were (None: it was not set). Best effort: this runs in
    `finally` blocks, where an error (a stopped session) must not hide the one being raised."""
    for k, v in saved.items():
        try:
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        except Exception:
            pass


class Job:
    def __init__(self, spark, pipeline: str, flow_file: str, params: dict, fingerprint: str = "",
                 progress: Optional[Progress] = None, trace: bool = False):
        self.spark = spark
        self.pipeline = pipeline
        self.flow_file = flow_file
        self.base_dir = os.path.dirname(os.path.abspath(flow_file))
        self.params = params  # name -> value (already typed)
        self.fingerprint = fingerprint
        self.progress = progress or Progress(enabled=False)
        self.trace = trace
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        self.max_emit_pieces = 256
        self.activations: dict[str, int] = {}
        self.loop_depth = 0
        self.counters = True
        self.report = {"pipeline": pipeline, "fingerprint": fingerprint, "rounds": [], "attempts": [],
                       "loops": {}, "operators": {}, "sinks": [], "snapshots": []}
        self.started = time.perf_counter()
        compat.prepare(spark)  # user functions by value; the runtime zip to cluster/Connect workers
        self.run_id = uuid.uuid4().hex[:8]
        self.diagnostics = False  # record plan sizes per round (tests)
        self.snapshots = None  # SnapshotStore when snapshots are on
        self.recovery = None  # Recovery when resuming
        self.levels: list = []  # the scope stack: active loop activations, outermost first
        self.last_plan_size = None
        self.recounted: Optional[str] = None  # why the last round counted its records again, if it did
        self.detailed = False  # `--report`: also per-operator Spark time and pipeline-level record counts
        self._observations: list = []  # (op, Observation) of pipeline-level operators (detailed only)
        self._op_ms: dict = {}  # op -> Spark task milliseconds in loop rounds (detailed only)
        self.same_columns: dict = {}  # "var<-node" -> does the fed-back stream already have the variable's columns
        self.operator_names: dict = {}  # op -> "select", "union both", ... (the generated OPERATORS)
        self._combine_above: Optional[int] = None  # spark.scopeflow.combineAbove, read once

    # ---- parameters and paths --------------------------------------------------------

    def param(self, name: str):
        return self.params[name]

    def resolve_int(self, value) -> int:
        if isinstance(value, dict):
            return int(self.params[value["param"]])
        return int(value)

    def path(self, p: str) -> str:
        if "://" in p or os.path.isabs(p):
            return p
        return os.path.join(self.base_dir, p)

    # ---- sources ------------------------------------------------------------------------

    def read(self, op: str, fmt: str, path: str, schema: Optional[str], options: dict, line: int) -> DataFrame:
        full = path if fmt == "table" else self.path(path)
        if fmt != "table" and "://" not in full and not os.path.exists(full):
            raise RuntimeFailure(f"source `{op}` ({self.flow_file}:{line}): input {full} does not exist",
                                 hint="check the path; relative paths are relative to the .flow file")
        if fmt == "table":
            df = self.spark.read.table(path)
        else:
            opts = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}
            if fmt in ("csv", "json"):  # a malformed row fails the run instead of becoming nulls
                opts.setdefault("mode", "FAILFAST")
            reader = self.spark.read.options(**opts)
            if schema:
                reader = reader.schema(schema)
            df = getattr(reader, fmt)(full)
        if schema:
            df = df.select(*[c.split()[0] for c in split_top_level(schema)])
        return df

    def values(self, op: str, schema: str, rows: list) -> DataFrame:
        return self.spark.createDataFrame(rows, schema)

    # ---- operators ----------------------------------------------------------------------

    def count(self, op: str, df: DataFrame, same_as: Optional[str] = None) -> DataFrame:
        """Attach operator `op`'s record counter; Spark fills it in the job that computes `df`.

        `same_as` (an operator with the same records) matters only in loops (`Round.count`): the
        pipeline level runs once, and its counters are read one by one for the report."""
        if not self.counters:
            return df
        counter = self.record_counter()
        if self.detailed and not self.levels and not compat.is_connect(self.spark):
            return self._observe(op, df, counter)  # pipeline level: read back for the report
        return df.observe(op, counter)  # in a loop: read from the round's plans (`_observed`)

    def record_counter(self) -> Column:
        return compat.cached(self.spark, "record-counter", lambda: F.count(F.lit(1)).alias("n"))

    def _observe(self, op: str, df: DataFrame, counter) -> DataFrame:
        from pyspark.sql import Observation

        obs = Observation(op)
        self._observations.append((op, obs))
        return df.observe(obs, counter)

    def agg_column(self, fn: str, col: Optional[Column]) -> Column:
        return AGGREGATES[fn].spark_column(F, col)

    def reduce(self, op: str, df: DataFrame, keys: list, aggs: list) -> DataFrame:
        """Pipeline-level `reduce`: one round, so it is a `group`."""
        return self.count(op, df.groupBy(*keys).agg(*[self.agg_column(fn, c).alias(n) for n, fn, c in aggs]))

    def distinct(self, op: str, df: DataFrame) -> DataFrame:
        return self.count(op, df.distinct())

    def share(self, op: str, df: DataFrame) -> DataFrame:
        """A pipeline stream read by several operators: cache it so it is computed once."""
        return df.persist()

    def prepare_import(self, df: DataFrame, keys: list) -> DataFrame:
        """A loop import: replayed every round, so cache it once per activation, partitioned by
        the columns the body joins it on (the join then needs no shuffle of the import)."""
        if keys:  # sorted too: the body's sort-merge joins then need no per-round sort of the import
            df = df.repartition(self.partitions, *keys).sortWithinPartitions(*keys)
        return df.persist()

    # ---- loops --------------------------------------------------------------------------

    def loop(self, spec: LoopSpec, body: Callable, entries: dict, imports: dict) -> dict:
        restore = None
        if self.recovery is not None and not self.levels:
            done = self.recovery.completed_outputs(spec.scope)
            if done is not None:  # finished before the snapshot: its outputs are in the snapshot
                self.progress.trace(f"loop {spec.scope}: restored its outputs from the snapshot")
                self._completed(spec, done)
                return done
        took = self.recovery.take(spec.scope, len(self.levels)) if self.recovery is not None else None
        if took is not None:
            activation, restore = took
            self.activations[spec.scope] = activation
            if restore is not None:
                self.progress.trace(f"loop {spec.scope}: resuming activation {activation} at round {restore.round}")
        else:
            self.activations[spec.scope] = activation = self.activations.get(spec.scope, 0) + 1
        with self._loop_conf():
            outputs = run_activation(self, spec, body, entries, imports, activation, restore)
        loops = self.report["loops"].setdefault(spec.scope, {"scope": spec.scope, "activations": 0, "rounds": [],
                                                            "attempts": 0})
        loops["activations"] = activation
        self._completed(spec, outputs)
        return outputs

    def _completed(self, spec: LoopSpec, outputs: dict) -> None:
        if self.snapshots is not None and not self.levels:
            self.snapshots.completed[spec.scope] = {k: v for k, v in outputs.items() if v is not None}

    # ---- snapshots ------------------------------------------------------------------------

    def configure_snapshots(self, opts, operators: dict, sources: dict) -> None:
        from scopeflow.runtime.snapshots import Recovery, SnapshotStore, fingerprint_path

        root = opts.checkpoint or os.path.join(".scopeflow", self.pipeline)
        fingerprints = {}
        for op, path in sources.items():
            p = self.params[path["param"]] if isinstance(path, dict) else path
            fingerprints[op] = fingerprint_path(self.path(p)) if "://" not in p else {"path": p}
        self.snapshots = SnapshotStore(self, root, opts.every or 10, opts.mode or "persist", opts.keep,
                                       opts.async_writes, operators, fingerprints)
        store = self.snapshots
        if not opts.resume:
            store.start_fresh()
            return
        found = store.latest(self.progress.trace)
        if found is None:
            self.progress.trace(f"no snapshot in {store.root}: starting from the beginning")
            store.start_fresh()
            return
        snap, manifest = found
        self.recovery = Recovery(self, snap, manifest)
        self.activations.update(manifest.get("activations", {}))
        store.sinks_done = store.load_sink_log()
        where = " > ".join(f"{lv['scope']} round {lv['round']}" for lv in manifest["stack"])
        self.progress.trace(f"resuming from {os.path.basename(snap)}: {where or 'pipeline level'}")
        self.report["resumed_from"] = {"snapshot": os.path.basename(snap), "stack": manifest["stack"] and [
            {k: lv[k] for k in ("scope", "activation", "round")} for lv in manifest["stack"]]}

    def push_level(self, level) -> None:
        self.levels.append(level)

    def pop_level(self) -> None:
        self.levels.pop()

    def maybe_snapshot(self, spec: LoopSpec, round_no: int, after) -> None:
        if self.snapshots is not None and self.snapshots.due(spec, round_no):
            self.snapshots.take(self.levels, after)

    def snapshot_written(self, seq: int, stack: list, size: int, seconds: float) -> None:
        where = [{"scope": lv["scope"], "activation": lv["activation"], "round": lv["round"]} for lv in stack]
        self.report["snapshots"].append({"seq": seq, "stack": where, "bytes": size, "seconds": round(seconds, 4)})
        self.progress.snapshot(seq, where, size, seconds)

    def finish(self) -> None:
        if self.snapshots is not None:
            self.snapshots.finished()

    @contextmanager
    def _loop_conf(self):
        self.loop_depth += 1
        saved: dict = {}  # what the outermost loop changed, as it was
        try:
            if self.loop_depth == 1:
                for k, v in LOOP_CONF.items():
                    saved[k] = self.spark.conf.get(k, None)
                    self.spark.conf.set(k, v)
            yield
        finally:
            self.loop_depth -= 1
            restore_conf(self.spark, saved)

    def plan_size(self, pending: list) -> int:
        """Nodes in the logical plans a round materialises: constant when lineage is cut every round."""
        return sum(pre._jdf.queryExecution().logical().treeString().count("\n") for _, pre, _ in pending)

    def checkpoint_counter(self, key: str, df: DataFrame) -> DataFrame:
        """`df` with the record counter of round checkpoint `key` (where `_counts_in_plans`; else the
        round's action counts, see `materialise`)."""
        if not self.counts_in_plans():
            return df
        return df.observe(CHECKPOINT_COUNTER + key, self.record_counter())

    def combine_above(self) -> int:
        """How many records a round must feed back (at least) for the next round to combine a reduce's feedback."""
        if self._combine_above is None:
            text = self.spark.conf.get(COMBINE_ABOVE, None)
            try:
                self._combine_above = COMBINE_ABOVE_DEFAULT if text is None else int(text)
            except ValueError:
                raise RuntimeFailure(f"{COMBINE_ABOVE}={text}: expected a number of records",
                                     hint="e.g. --conf spark.scopeflow.combineAbove=0 (always combine)") from None
        return self._combine_above

    def counts_in_plans(self) -> bool:
        """Do round checkpoints count their records inside their own plans? Not over Connect (no JVM)
        and not for reliable checkpoints (Spark's second write job recomputes them, and their counters)."""
        return compat.checkpoint_mode(self.spark) not in ("connect", "reliable")

    def materialise(self, pending: list, same_count: Optional[dict] = None, also: tuple = ()) -> tuple[dict, dict]:
        """Run the round's single Spark job; return record counts per key and per operator.

        `same_count`: operators and checkpoint keys whose records another operator's counter counts.
        `also`: counters in the round's plans (where `counts_in_plans`) to return with the counts."""
        same_count = same_count or {}
        self.recounted = None
        if self.diagnostics:
            self.last_plan_size = self.plan_size(pending)
        frames = [pre for _, pre, _ in pending]
        if not self.counts_in_plans():
            counts = tagged_counts([(key, ck) for key, _, ck in pending])
            observed = self._observed(frames)
        else:
            total = compute_checkpoints(self.spark, [ck for _, _, ck in pending])
            observed = self._observed(frames, everything=True)
            counts = {key: observed.get(same_count[key]) if key in same_count
                      else observed.pop(CHECKPOINT_COUNTER + key, None) for key, _, _ in pending}
            if None in counts.values() or sum(counts.values()) != total:
                self.recounted = f"counters {counts} against {total} records"
                # never guess: a wrong 0 would end the loop early. Counters can disagree with the
                # job's own count (e.g. a stage re-run after a lost executor), so count again; the
                # checkpoints are stored now, so this job only reads them.
                counts = tagged_counts([(key, ck) for key, _, ck in pending])
            counts.update({name: observed.pop(name, None) if name.startswith(FED_COUNTER) else observed.get(name)
                           for name in also})
        keys = {key for key, _, _ in pending}
        for name, base in same_count.items():
            if name not in keys and base in observed:
                observed[name] = observed[base]
        if self.detailed and not compat.is_connect(self.spark):
            for op, ms in operator_times([(key, pre) for key, pre, _ in pending]).items():
                self._op_ms[op] = self._op_ms.get(op, 0.0) + ms
        return counts, observed if self.counters else {}

    def _observed(self, frames: list, everything: bool = False) -> dict:
        """The record counters in the round's executed plans, by name."""
        if not (self.counters or everything) or compat.is_connect(self.spark):  # no JVM counters over Connect
            return compat.observed(self.spark) or {}
        jvm = self.spark._jvm
        collector = compat.cached(self.spark, "metrics-collector", lambda: getattr(
            getattr(jvm.org.apache.spark.sql.execution, "CollectMetricsExec$"), "MODULE$"))
        out: dict = {}
        for df in frames:
            metrics = collector.collect(df._jdf.queryExecution().executedPlan())
            for name, value in _metric_pairs(metrics):
                out[name] = max(out.get(name, 0), value)
        return out

    def compact(self, pieces: list) -> DataFrame:
        """Fold many per-round emitted pieces into one checkpoint (a long `emit` history)."""
        return union_all(pieces).localCheckpoint(eager=True)

    def release(self, frames: list) -> None:
        """Drop the blocks of round checkpoints nothing refers to any more."""
        for df in frames:
            if self.snapshots is not None and self.snapshots.is_pinned(df):
                continue  # an asynchronous snapshot is still writing it
            try:
                compat.checkpoint_rdd(df).unpersist(False)
            except Exception:  # not a checkpoint (e.g. an empty frame): nothing to free
                pass

    def round_done(self, spec: LoopSpec, activation: int, record, **_state) -> None:
        a = record.attempt
        self.report["rounds"].append({"scope": spec.scope, "activation": activation, "round": record.round,
                                      "seconds": round(record.seconds, 4), "in_flight": record.in_flight,
                                      "stored": record.stored,
                                      "spark_jobs": record.spark_jobs, "plan_size": self.last_plan_size,
                                      "counts": record.counts, **({"jobs": record.jobs} if record.jobs else {})})
        self.report["attempts"].append(a.to_json())
        loops = self.report["loops"].setdefault(spec.scope, {"scope": spec.scope, "activations": 0, "rounds": [],
                                                            "attempts": 0})
        loops["attempts"] += 1
        if a.terminated:
            loops["rounds"].append(record.round + 1)
        for op, n in record.counts.items():
            if op in spec.operators:
                entry = self.report["operators"].setdefault(op, {"records": 0, "name": spec.operators[op][1]})
                entry["records"] += n
            elif "[pipeline]" in self.operator_names.get(op, ""):
                # a pipeline-level input, computed once and cached: its counter is seen again each round
                entry = self.report["operators"].setdefault(op, {"records": 0, "name": self._name(op)})
                entry["records"] = max(entry["records"], n)
            # else: an enclosing loop's operator, which that loop's own rounds count
        self.progress.round_finished(spec, activation, record)
        if self.trace:
            self.progress.trace(a.describe())

    def round_group(self, scope: str, activation: int, round_no: int) -> str:
        """Tag the Spark jobs of a round so the status tracker can count them."""
        group = f"scopeflow:{self.run_id}:{scope}#{activation}/r{round_no}"
        compat.set_job_group(self.spark, group, f"loop {scope} activation {activation} round {round_no}")
        return group

    def jobs_in_group(self, group: str) -> int:
        return compat.jobs_in_group(self.spark, group)  # -1 over Spark Connect

    def explain_jobs(self, group: str) -> list[str]:
        """Each Spark job of a round's group, and whether the round counted its records again."""
        recount = [f"records counted again: {self.recounted}"] if self.recounted else []
        return recount + compat.describe_jobs(self.spark, group)

    # ---- sinks --------------------------------------------------------------------------

    def sink(self, op: str, df: DataFrame, fmt: str, path: Optional[str], options: dict) -> None:
        started = time.perf_counter()
        if fmt == "console":
            df.show(int(options.get("rows", 20)), truncate=False)
            return
        target = path if fmt == "table" else self.path(path)
        key = f"{op}:{fmt}:{target}"
        if self.snapshots is not None and key in self.snapshots.sinks_done:
            self.progress.trace(f"sink {target}: already committed before the restart, skipped")
            return
        obs = None
        if self.detailed and not compat.is_connect(self.spark):
            from pyspark.sql import Observation

            obs = Observation(f"sink:{op}")  # the records written, counted by the write itself
            df = df.observe(obs, self.record_counter())
        sink_io.write_atomically(self.spark, df, fmt, target, options)
        if self.snapshots is not None:
            self.snapshots.sink_committed(key)
        entry = {"node": op, "format": fmt, "path": target, "seconds": round(time.perf_counter() - started, 4)}
        if obs is not None:
            entry["records"] = int(obs.get.get("n") or 0)
            self.report["operators"].setdefault(op, {"records": entry["records"], "name": self._name(op)})
        self.report["sinks"].append(entry)
        self.progress.sink_written(fmt, target)

    def _name(self, op: str) -> str:
        return self.operator_names.get(op, "").split(" [")[0] or op

    def write_report(self, path: str, status: str, error: Optional[str] = None) -> None:
        pending = [(op, obs) for op, obs in self._observations if op not in self.report["operators"]]
        deadline = time.monotonic() + 2.0  # Spark completes observations from its listener bus, asynchronously
        while pending and time.monotonic() < deadline and not all(o._jo.future().isCompleted() for _, o in pending):
            time.sleep(0.05)
        for op, obs in pending:  # pipeline-level operators that ran (never block on the others)
            if obs._jo.future().isCompleted():
                self.report["operators"][op] = {"records": int(obs.get.get("n") or 0), "name": self._name(op)}
        for op, ms in self._op_ms.items():
            self.report["operators"].setdefault(op, {"records": 0, "name": self._name(op)})["seconds"] = \
                round(ms / 1000.0, 4)
        self.report["status"] = status
        self.report["seconds"] = round(time.perf_counter() - self.started, 4)
        if error:
            self.report["error"] = error
        report = dict(self.report)
        report["loops"] = list(self.report["loops"].values())
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, default=str)
        os.replace(tmp, path)


_METRIC = re.compile(r"(?:\(|, )([^\s,()]+) -> \[(-?\d+)\](?=[,)])")


def _metric_pairs(metrics) -> list[tuple[str, int]]:
    """(name, count) of a `CollectMetricsExec.collect` map (name -> single-count Row).

    One JVM call reads the whole map as text (`Map(n009 -> [12], ...)`): every entry read
    through the JVM would cost four round trips, every round. Names are scopeflow's own
    (operator ids, `_sf_ck:` + checkpoint key); if the text is ever not exactly its `size()`
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
    are not added again. Summed over tasks: on several cores this is more than the wall time."""
    out: dict = {}
    for key, df in frames:
        owner = key.split("/", 1)[0]
        owner = owner if re.fullmatch(r"n\d+", owner) else None
        stack = [(df._jdf.queryExecution().executedPlan(), owner, False)]
        while stack:
            node, op, fused = stack.pop()
            name = node.nodeName()
            if name == "CollectMetrics" and not node.name().startswith(CHECKPOINT_COUNTER):
                op = node.name()
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
