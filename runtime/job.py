"""The run context of one pipeline execution: what generated scripts call.

`Job` owns the SparkSession, parameters, sources and sinks, record counters,
per-round materialisation and the run report. Loops are delegated to
`runtime.loop.run_activation`.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from typing import Callable, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import sinks as sink_io
from scopeflow.runtime.errors import RuntimeFailure
from scopeflow.runtime.loop import LoopSpec, run_activation, tagged_counts, union_all
from scopeflow.runtime.progress import Progress

_AGGS: dict[str, Callable[[Optional[Column]], Column]] = {
    "min": F.min, "max": F.max, "sum": F.sum, "avg": F.avg,
    "count": lambda c: F.count(F.lit(1) if c is None else c),
    "any": F.bool_or, "all": F.bool_and,
    "first": lambda c: F.first(c, ignorenulls=True),
    "collect_set": F.collect_set, "collect_list": F.collect_list,
}

# Inside loops: one Spark job per round needs no adaptive re-planning (it submits
# each shuffle stage as its own job) and no broadcast exchange (a job of its own).
LOOP_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.autoBroadcastJoinThreshold": "-1"}


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
            df = df.select(*[c.split()[0] for c in _split_schema(schema)])
        return df

    def values(self, op: str, schema: str, rows: list) -> DataFrame:
        return self.spark.createDataFrame(rows, schema)

    # ---- operators ----------------------------------------------------------------------

    def count(self, op: str, df: DataFrame) -> DataFrame:
        """Attach operator `op`'s record counter; Spark fills it in the job that computes `df`."""
        if not self.counters:
            return df
        return df.observe(op, F.count(F.lit(1)).alias("n"))

    def agg_column(self, fn: str, col: Optional[Column]) -> Column:
        return _AGGS[fn](col)

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
        if keys:
            df = df.repartition(self.partitions, *keys)
        return df.persist()

    # ---- loops --------------------------------------------------------------------------

    def loop(self, spec: LoopSpec, body: Callable, entries: dict, imports: dict) -> dict:
        self.activations[spec.scope] = activation = self.activations.get(spec.scope, 0) + 1
        with self._loop_conf():
            outputs = run_activation(self, spec, body, entries, imports, activation)
        loops = self.report["loops"].setdefault(spec.scope, {"scope": spec.scope, "activations": 0, "rounds": [],
                                                            "attempts": 0})
        loops["activations"] = activation
        return outputs

    @contextmanager
    def _loop_conf(self):
        self.loop_depth += 1
        saved = {k: self.spark.conf.get(k, None) for k in LOOP_CONF} if self.loop_depth == 1 else {}
        if self.loop_depth == 1:
            for k, v in LOOP_CONF.items():
                self.spark.conf.set(k, v)
        try:
            yield
        finally:
            self.loop_depth -= 1
            for k, v in saved.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)

    def materialise(self, pending: list) -> tuple[dict, dict]:
        """Run the round's single Spark job; return record counts per key and per operator."""
        counts = tagged_counts([(key, ck) for key, _, ck in pending])
        return counts, self._observed([pre for _, pre, _ in pending])

    def _observed(self, frames: list) -> dict:
        if not self.counters:
            return {}
        jvm = self.spark._jvm
        collector = getattr(getattr(jvm.org.apache.spark.sql.execution, "CollectMetricsExec$"), "MODULE$")
        out: dict = {}
        for df in frames:
            metrics = collector.collect(df._jdf.queryExecution().executedPlan())
            it = metrics.iterator()
            while it.hasNext():
                kv = it.next()
                out[kv._1()] = max(out.get(kv._1(), 0), int(kv._2().get(0)))
        return out

    def compact(self, pieces: list) -> DataFrame:
        """Fold many per-round emitted pieces into one checkpoint (a long `emit` history)."""
        return union_all(pieces).localCheckpoint(eager=True)

    def release(self, frames: list) -> None:
        """Drop the blocks of round checkpoints nothing refers to any more."""
        for df in frames:
            try:
                df._jdf.queryExecution().logical().rdd().unpersist(False)
            except Exception:  # not a checkpoint (e.g. an empty frame): nothing to free
                pass

    def round_done(self, spec: LoopSpec, activation: int, record, **_state) -> None:
        a = record.attempt
        self.report["rounds"].append({"scope": spec.scope, "activation": activation, "round": record.round,
                                      "seconds": round(record.seconds, 4), "in_flight": record.in_flight,
                                      "counts": record.counts})
        self.report["attempts"].append(a.to_json())
        loops = self.report["loops"].setdefault(spec.scope, {"scope": spec.scope, "activations": 0, "rounds": [],
                                                            "attempts": 0})
        loops["attempts"] += 1
        if a.terminated:
            loops["rounds"].append(record.round + 1)
        for op, n in record.counts.items():
            entry = self.report["operators"].setdefault(op, {"records": 0, "name": spec.operators.get(op, (0, op))[1]})
            entry["records"] += n
        self.progress.round_finished(spec, activation, record)
        if self.trace:
            self.progress.trace(a.describe())

    # ---- sinks --------------------------------------------------------------------------

    def sink(self, op: str, df: DataFrame, fmt: str, path: Optional[str], options: dict) -> None:
        started = time.perf_counter()
        if fmt == "console":
            df.show(int(options.get("rows", 20)), truncate=False)
            return
        target = path if fmt == "table" else self.path(path)
        sink_io.write_atomically(self.spark, df, fmt, target, options)
        self.report["sinks"].append({"node": op, "format": fmt, "path": target,
                                     "seconds": round(time.perf_counter() - started, 4)})
        self.progress.sink_written(fmt, target)

    def write_report(self, path: str, status: str, error: Optional[str] = None) -> None:
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


def _split_schema(ddl: str) -> list[str]:
    from scopeflow.runtime.loop import _split_ddl

    return _split_ddl(ddl)
