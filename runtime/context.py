"""One run of a pipeline (`RunContext`): the session and the run's settings, what the generated
`pipeline(run)` calls (sources, pipeline-level operators, loops, sinks), and what the loops, the
snapshots and the report share. Loops run in `loop.py`, their rounds in `round.py`.
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import time
import uuid
from contextlib import contextmanager
from typing import Callable, Optional

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import columns, failures, jobs, parallelism
from scopeflow.runtime import sinks as sink_io
from scopeflow.runtime import targets
from scopeflow.runtime.arguments import read_setting
from scopeflow.runtime.checkpoints import Checkpoints
from scopeflow.runtime.counters import Counters
from scopeflow.runtime.deployment import is_connect, is_stopped, task_slots
from scopeflow.runtime.errors import Position, RuntimeFailure, put_back_after, shown_path
from scopeflow.runtime.interrupts import Interrupts
from scopeflow.runtime.loop import Activation, run_activation
from scopeflow.runtime.parallelism import Parallelism
from scopeflow.runtime.preflight import flow_dir
from scopeflow.runtime.progress import Progress
from scopeflow.runtime.report import RunReport
from scopeflow.runtime.round import Pieces
from scopeflow.runtime.session import jvm_log_path
from scopeflow.runtime.shipping import prepare
from scopeflow.runtime.spec import LoopSpec, Param, ddl_columns, split_top_level, value_of
from scopeflow.runtime.state import OVERLAY_MIN_KEYS, OVERLAY_SHARE
from scopeflow.stdlib import inputs
from scopeflow.stdlib.functions import AGGREGATES
from scopeflow.stdlib.paths import local_path, resolve
from scopeflow.stdlib.settings import COMBINE_ABOVE, DEFER_FEEDBACK, PLAN_AHEAD, STATE_OVERLAY, STATE_OVERLAY_MIN_KEYS
from scopeflow.stdlib.sinks import FILE_SINKS

# Inside loops: one Spark job per round needs no adaptive re-planning (it submits
# each shuffle stage as its own job) and no broadcast exchange (a job of its own).
#
# The record counters (`observe`) must add up every task that fed them. From Spark 4.3 an
# `observe` counter keeps only the tasks of one stage (the one with the highest RDD id). A round
# checkpoint read by two shuffle stages has some of its partitions computed by each stage (when the
# round has more tasks than task slots); a counter in its plan then misses the other stage's
# partitions. So loops sum all tasks, as Spark did before 4.3 (older Sparks ignore the setting).
# Within a round most partitions are computed once: a stream read twice is a checkpoint (where some are
# not, each `observe` node counts one computation: `round.Round.fused`). A stage re-run (a lost executor)
# counts some records twice; counters (the report's, the records fed back to a combined variable) can only
# read high, never zero where records were. Whether a loop goes on is
# decided from its checkpoints' records, and those are exact whatever happens: the sizes of their
# partitions, the results of the round job's tasks (`round.compute_checkpoints`; local and replicated
# checkpoints).
#
# Every checkpoint of a round is an SQL execution of its own, and Spark describes each one for its UI as it
# starts, in the UI's explain mode: `formatted` (the default) walks the plan to number and list every operator,
# 1-50 ms a checkpoint in the rounds of an incremental epoch (0.47 s over 50 checkpoints, against 0.05 s for
# `simple`, timed directly; benchmarks/RESULTS.md). End to end, within the noise of a shared 2-core machine.
#
# Spark's optimizer propagates every operator's constraints up a plan and infers filters from them (`isnotnull`
# on a join's keys, which an inner join applies anyway). Over a round's plans that is planning time every round:
# without it the optimizer took 10 ms a round of a chain's PageRank instead of 16, and the whole run 0.89x
# (benchmarks/RESULTS.md). No record of a result changes: an inferred filter only drops records a join or filter
# of the plan drops anyway. But it drops them earlier, so without it an expression below a join (a UDF among
# them) also sees the records with a null key, and a filter on one side's join key is no longer copied to the
# other side.
#
# Spark compiles a generated stage's code once and keeps the class by its source (`CodeGenerator`'s cache). By
# default the source names the class after the stage's number in its plan (`GeneratedIteratorForCodegenStage3`),
# so the same stage numbered otherwise in another plan is compiled again. A loop's rounds are new plans whose
# stages number differently as the plan's shape changes (an incremental epoch's first rounds, the import's
# pieces), and the cache holds a limited number of classes (`session.local_defaults`): connected components
# over a stream compiled 21 classes every epoch, codes it had compiled before under other numbers and evicted
# since. Without the number, a second run of that stream in the same process compiled none, and its wave epochs
# took 0.82x the time (benchmarks/RESULTS.md, twenty-seventh session; SSSP's, no different). The number only
# names the class in a stack trace.
#
# Spark builds a generated stage's RDD from a Scala closure (`mapPartitionsWithIndex`), and its closure cleaner
# reads the class that declares it from its jar with ASM and test-serialises it, for every stage of every plan:
# no cache, no switch. With `usePartitionEvaluator` the stage's RDD is built from an evaluator factory instead
# (`mapPartitionsWithEvaluator`), which is not cleaned: building a round's RDDs took 4.8 ms a round of a chain's
# PageRank instead of 9.3, and chain SSSP's runs 0.88x the time (benchmarks/RESULTS.md, twenty-ninth session). The
# same generated code runs in the tasks (`WholeStageCodegenEvaluatorFactory` either way). The setting is Spark's
# internal one (off by default, SPARK-43061): the other operators' evaluator paths are less used than their closures.
OBSERVE_ALL_ATTEMPTS = "spark.sql.legacy.observeMetricsAggregateAllAttempts"
CODEGEN_ID_IN_CLASS_NAME = "spark.sql.codegen.useIdInClassName"
LOOP_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.autoBroadcastJoinThreshold": "-1",
             OBSERVE_ALL_ATTEMPTS: "true", "spark.sql.ui.explainMode": "simple",
             "spark.sql.constraintPropagation.enabled": "false", CODEGEN_ID_IN_CLASS_NAME: "false",
             "spark.sql.execution.usePartitionEvaluator": "true"}
# A loop in one partition: its round checkpoints say they are single-partition (`Checkpoints.detach_statistics`), and
# Spark shuffles both sides of a join of two single-partition streams again when one is estimated above
# `spark.sql.maxSinglePartitionBytes`, which a checkpoint always is (its statistics are detached): into one
# partition, the same place. Measured on the path graph: see benchmarks/RESULTS.md.
ONE_PARTITION_CONF = {"spark.sql.maxSinglePartitionBytes": str((1 << 63) - 1)}
COMBINE_ABOVE_DEFAULT = 100_000
# pyspark logs a failure with a query context as a line of JSON on stderr when it converts it; scopeflow
# tells the failure itself (and keeps it in the JVM log), so these are quiet while a run acts
PYSPARK_FAILURE_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


@contextmanager
def settings(spark, values: dict, on_fixed: Optional[Callable] = None):
    """Session settings for the duration of a block, put back as they were after it, also when it fails.
    `on_fixed(key)`: see `set_conf`."""
    saved = set_conf(spark, values, on_fixed)
    with put_back_after(lambda: restore_conf(spark, saved), "the session's settings"):
        yield


def set_conf(spark, values: dict, on_fixed: Optional[Callable] = None) -> dict:
    """Set session settings; return what they were (None: not set), for `restore_conf`. With `on_fixed`, a
    setting Spark refuses because it is fixed when a session starts is left as the session has it, and
    `on_fixed(key)` is called; without it, Spark's refusal is raised."""
    saved = {}
    for k, v in values.items():
        before = spark.conf.get(k, None)
        try:
            spark.conf.set(k, v)
        except AnalysisException as exc:
            if on_fixed is None or exc.getCondition() not in ("CANNOT_MODIFY_CONFIG", "CANNOT_MODIFY_STATIC_CONFIG"):
                raise
            on_fixed(k)
            continue
        saved[k] = before
    return saved


def restore_conf(spark, saved: dict) -> None:
    """Put session settings back as they were (None: it was not set). A stopped session has nothing to put
    back."""
    if not saved or is_stopped(spark):
        return
    for k, v in saved.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


class RunContext:
    def __init__(self, spark, module, params: dict, progress: Optional[Progress] = None, trace: bool = False,
                 detailed: bool = False, diagnostics: bool = False, base_dir: Optional[str] = None):
        self.spark = spark
        self.pipeline = module.PIPELINE
        self.flow_file = module.FLOW_FILE
        self.base_dir = base_dir or flow_dir(module)  # relative paths resolve against it
        self.fingerprint = module.FINGERPRINT
        self.operators = dict(module.OPERATORS)  # operator id -> spec.Operator
        self.params = params  # name -> value (already typed)
        self.progress = progress or Progress(enabled=False)
        self.trace = trace
        self.detailed = detailed  # `--report`: also per-operator Spark time and pipeline-level record counts
        self.diagnostics = diagnostics  # record the size of every round's plans (tests)
        self.run_id = uuid.uuid4().hex[:8]
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        self.loop_partitions = self.partitions  # while a loop runs: its activation's (runtime/parallelism.py)
        self._group: Optional[str] = None  # the job group this thread's jobs are tagged with (`round_group`)
        self.jvm_metrics = not is_connect(spark)
        # `--report` with a JVM to read: pipeline operators are counted by `observe` nodes (`count`), which Spark's
        # size estimates must not see (runtime/parallelism.py)
        self.observed = detailed and self.jvm_metrics
        self.checkpoints = Checkpoints(spark)
        self.counters = Counters(spark, marked=detailed)
        self.report = RunReport(self.pipeline, self.fingerprint, self.operators)
        if self.jvm_metrics:
            self.report.listener_bus = lambda: spark.sparkContext._jsc.sc().listenerBus()
        self.attempt_ids = itertools.count(1)
        self.activations: dict[str, int] = {}  # loop scope -> activations so far
        self.stack: list[Activation] = []  # the loop activations running, outermost first
        self.snapshots = None  # snapshots.SnapshotStore, when snapshots are on
        self.recovery = None  # snapshots.Recovery, when resuming
        self.interrupts = Interrupts(spark)  # `execute` gives the run the ones its Ctrl-C handler sets
        self._combine_above: Optional[int] = None
        self._overlay: Optional[tuple] = None
        self._plan_ahead: Optional[str] = None  # the setting, once read ("false": never)
        self._defer: Optional[bool] = None  # spark.scopeflow.deferFeedback, once read
        self.job_seconds: dict = {}  # loop scope -> the seconds its last round's Spark job took (planAhead=auto)
        self._handles: dict = {}
        self._notes: set = set()
        self.inputs: dict[str, failures.Input] = {}  # the file sources read so far, for telling failures
        self.epoch = None  # streaming.Epoch: the epoch this run is (a streaming pipeline runs once per epoch)
        self._cached: list = []  # DataFrames this run persisted (`share`, `prepare_import`): freed by `close`
        prepare(spark)  # user functions by value; the runtime zip to cluster and Connect workers

    # ---- settings and small shared things ------------------------------------------------------------

    def param(self, name: str):
        return self.params[name]

    def resolve(self, value) -> int:
        """A number of rounds: a constant, or a `param`'s value (at least 1)."""
        return self.positive(value.name) if isinstance(value, Param) else int(value)

    def positive(self, name: str) -> int:
        """The value of a `param` that counts rounds or records: at least 1."""
        value = int(self.params[name])
        if value < 1:
            raise RuntimeFailure(f"--param {name}={value}: `{name}` counts rounds or records and must be at least 1",
                                 hint=f"give a positive number, e.g. --param {name}=3")
        return value

    def path(self, p: str) -> str:
        """A path relative to the .flow file's folder (a URI or an absolute path stays as it is)."""
        return resolve(self.base_dir, p)

    def combine_above(self) -> int:
        """How many records a round must feed back (at least) for the next round to combine a reduce's feedback."""
        if self._combine_above is None:
            self._combine_above = read_setting(self.spark, COMBINE_ABOVE, COMBINE_ABOVE_DEFAULT, int)
        return self._combine_above

    def plan_ahead(self) -> Optional[str]:
        """`spark.scopeflow.planAhead`: may a loop plan a round while the previous round's Spark job runs
        (`loop.LoopExecutor.may_plan_ahead`)? "auto" (when that pays), "true" (wherever it may) or None (never).
        Only where the round's job is an RDD-level one (`Checkpoints.counted_by_job`), the session has a JVM here
        and PySpark pins each Python thread to a JVM thread."""
        if self._plan_ahead is None:
            mode = read_setting(self.spark, PLAN_AHEAD, "auto").strip().lower()
            able = self.checkpoints.counted_by_job and not is_connect(self.spark) and jobs.pinned_threads(self.spark)
            self._plan_ahead = mode if mode in ("auto", "true") and able else "false"
        return None if self._plan_ahead == "false" else self._plan_ahead

    def defer_feedback(self) -> bool:
        """`spark.scopeflow.deferFeedback`: may a loop leave what a round feeds back to the next round's job
        (`loop.LoopExecutor.defers`)? Only where the round's job fills the counters in its plans (they tell
        whether anything is in flight)."""
        if self._defer is None:
            on = read_setting(self.spark, DEFER_FEEDBACK, "true").strip().lower() == "true"
            self._defer = on and self.checkpoints.counted_by_job and not is_connect(self.spark)
        return self._defer

    def overlay(self) -> tuple[float, int]:
        """`spark.scopeflow.stateOverlay` and `spark.scopeflow.stateOverlayMinKeys`: up to what share of a state's
        keys a round folds into its overlay, and from how many keys a state has one (runtime/state.py; a share
        of 0: every round rewrites the whole state). Only where the round's job fills the counters in its plans
        (the overlay's size comes from its counters)."""
        if self._overlay is None:
            share = read_setting(self.spark, STATE_OVERLAY, OVERLAY_SHARE, float)
            min_keys = read_setting(self.spark, STATE_OVERLAY_MIN_KEYS, OVERLAY_MIN_KEYS, int)
            self._overlay = (share if self.checkpoints.counted_by_job else 0.0, min_keys)
        return self._overlay

    def aggregate(self, fn: str, column: Optional[Column]) -> Column:
        return AGGREGATES[fn].spark_column(F, column)

    def handle(self, key, build: Callable):
        """`build()` once per run: JVM handles and constant Columns a round would otherwise rebuild every round."""
        if key not in self._handles:
            self._handles[key] = build()
        return self._handles[key]

    @contextmanager
    def acting(self, action: failures.Action):
        """Run an action of the pipeline (a source's read, a sink's write, a loop's rounds): a failure of
        Spark, py4j or the file system inside it is told in the user's terms (`failures.explain`), naming it.
        The innermost action tells; the ones around it let its `RuntimeFailure` through."""
        import logging

        quiet = [logging.getLogger(name) for name in PYSPARK_FAILURE_LOGGERS]
        before = [lg.disabled for lg in quiet]
        for lg in quiet:
            lg.disabled = True
        try:
            yield
        except failures.explained_types() as exc:
            raise self.explain(exc, action) from exc
        finally:
            for lg, was in zip(quiet, before):
                lg.disabled = was

    def explain(self, exc: BaseException, action: Optional[failures.Action] = None) -> RuntimeFailure:
        """A failure of Spark, py4j or the file system during this run, in the user's terms."""
        return failures.explain(exc, failures.Scene(action, tuple(self.inputs.values()), jvm_log_path(),
                                                    self.flow_file))

    def note(self, key: str, message: str) -> None:
        """A limitation that does not stop the run, said once per run on stderr."""
        if key not in self._notes:
            self._notes.add(key)
            print(f"note: {message}", file=sys.stderr)

    # ---- sources ----------------------------------------------------------------------------------------

    def where(self, op: str, at: tuple = ()) -> Optional[Position]:
        """Where operator `op` (or a sink at `at`) is in the .flow file."""
        return Position.of(self.flow_file, at or (self.operators[op].at if op in self.operators else ()))

    def describe(self, op: str) -> str:
        """An operator as the user wrote it: `source edges`, `reduce best`, `join`."""
        return self.operators[op].described() if op in self.operators else op

    def reading(self, op: str) -> failures.Action:
        """Source `op`'s read, as the action a failure names."""
        return failures.Action(self.describe(op), self.where(op), doing="reading")

    def read(self, op: str, fmt: str, path: str, schema: Optional[str], options: dict) -> DataFrame:
        """A source. Its files were checked before Spark started when they are on this machine (preflight:
        they exist, can be read, name the declared fields); those on other file systems are checked here
        (`_checked_header`). A CSV file with a header is read by name (`_reader`)."""
        action = self.reading(op)
        if fmt == "table":
            with self.acting(action):
                df = self.spark.read.table(path)
                return df.select(*ddl_columns(schema)) if schema else df
        full = self.path(path)
        opts = inputs.reader_options(fmt, options)
        with self.acting(action):
            header = self._checked_header(op, fmt, full, schema, opts) if schema else ()
            fields = tuple((n, failures.flow_type(t)) for n, t in _ddl_fields(schema)) if schema else ()
            self.inputs[op] = failures.Input(self.describe(op), self.where(op), full, fmt, fields, opts, header)
            return self._reader(fmt, full, schema, opts, header)

    def _checked_header(self, op: str, fmt: str, full: str, schema: str, opts: dict) -> tuple:
        """The columns of a CSV source's header, in its files' order (() for other sources and CSV files
        without a header), its files checked against its schema (E0503) first. Files this process can read
        were checked before Spark started (preflight), so a mismatch among them means they changed since;
        the others (on another file system, or compressed in a way Python cannot read) are asked of Spark."""
        if fmt not in inputs.FIELD_CHECKED:
            return ()
        local = local_path(full)
        found = self._fields_here(fmt, local, opts) if local is not None else []
        checked_before = bool(found)
        if not found and (local is None or inputs.data_files(local)):
            found = self._fields_from_spark(fmt, full, opts)
        problem = inputs.check_fields(fmt, ddl_columns(schema), found, shown_path)
        if problem is not None:
            changed = ("the files changed since the run checked them, before Spark started",) if checked_before else ()
            raise RuntimeFailure(f"{self.describe(op)}: {problem.message}", code="E0503", at=self.where(op),
                                 label="read here", notes=problem.notes + changed, hint=problem.hint)
        return found[0].names if found and inputs.has_header(fmt, opts) else ()

    @staticmethod
    def _fields_here(fmt: str, local: str, opts: dict) -> list:
        """What a local source's files say about their fields, read without Spark; [] when they cannot say."""
        try:
            return inputs.file_fields(fmt, local, opts)
        except Exception:  # noqa: BLE001 - a file Python cannot read: Spark's read says what is wrong with it
            return []

    def _fields_from_spark(self, fmt: str, full: str, opts: dict) -> list:
        """What Spark says of a source's fields: the first file's header or footer; [] when it cannot say (the
        read then fails, and says why)."""
        try:
            if inputs.has_header(fmt, opts):
                return [inputs.Fields(full, tuple(self.spark.read.options(**opts).csv(full).columns))]
            if fmt == "parquet":
                return [inputs.Fields(full, tuple(self.spark.read.parquet(full).columns))]
        except Exception:  # noqa: BLE001 - Spark's read says what is wrong with it, with the source's position
            return []
        return []

    def _reader(self, fmt: str, full: str, schema: Optional[str], opts: dict, header: tuple) -> DataFrame:
        """A file source read with its schema and options, its declared fields selected by name. A CSV file
        with a header is read with the schema put in the header's order, and Spark checks every file's header
        against that order as it reads it (`enforceSchema` off)."""
        read_schema = schema
        if header:
            read_schema = ", ".join(f"`{n.replace('`', '``')}` {t}"
                                    for n, t in inputs.in_header_order(_ddl_fields(schema), header))
            opts = {**opts, "enforceschema": "false"}
        reader = self.spark.read.options(**opts)
        if read_schema:
            reader = reader.schema(read_schema)
        df = reader.format(fmt).load(full) if isinstance(full, list) else getattr(reader, fmt)(full)
        return df.select(*ddl_columns(schema)) if schema else df

    def stream(self, op: str) -> DataFrame:
        """A `stream` source: its input so far, as of this epoch (runtime/streaming.py)."""
        if self.epoch is None:
            raise RuntimeFailure(f"{self.describe(op)} is a `stream` source, run outside an epoch",
                                 hint="this is a scopeflow bug: please report it")
        return self.epoch.inputs[op]

    def read_files(self, op: str, fmt: str, files: list, schema: str, options: dict) -> DataFrame:
        """The files of a `stream files(...)` source that appeared in an epoch, read as a `read` source reads
        its files: a CSV file with a header by name (files whose headers differ in order are read apart),
        `on_error`, a failure naming the file."""
        opts = inputs.reader_options(fmt, options)
        fields = tuple((n, failures.flow_type(t)) for n, t in _ddl_fields(schema))
        with self.acting(self.reading(op)):
            groups: dict = {}
            for f in files:
                groups.setdefault(self._checked_header(op, fmt, _literal_path(f), schema, opts), []).append(f)
            frames = []
            for header, group in groups.items():
                folder = os.path.dirname(group[0]) if len(group) > 1 else group[0]
                self.inputs[op] = failures.Input(self.describe(op), self.where(op), folder, fmt, fields, opts, header)
                frames.append(self._reader(fmt, [_literal_path(f) for f in group], schema, opts, header))
            return functools.reduce(DataFrame.unionByName, frames)

    def values(self, op: str, schema: str, rows: list) -> DataFrame:
        return self.spark.createDataFrame(rows, schema)

    # ---- pipeline-level operators (the pipeline is one round) -------------------------------------------

    def count(self, df: DataFrame, op: str, same_as: Optional[str] = None) -> DataFrame:
        """Operator `op`'s record counter, read for the report (`--report`; the pipeline runs once, so
        `same_as` changes nothing here)."""
        if not self.observed:
            return df
        from pyspark.sql import Observation

        obs = Observation(op)
        self.report.observations.append((op, obs))
        return df.observe(obs, self.counters.column)

    def reduce(self, df: DataFrame, op: str, keys: list, aggs: list) -> DataFrame:
        """Pipeline-level `reduce`: one round, so it is a `group`."""
        return self.count(df.groupBy(*keys).agg(*[self.aggregate(fn, c).alias(n) for n, fn, c in aggs]), op)

    def distinct(self, df: DataFrame, op: str) -> DataFrame:
        return self.count(df.distinct(), op)

    def share(self, df: DataFrame, op: str, sorts: bool = False) -> DataFrame:
        """A pipeline stream read by several operators: cache it so it is computed once.

        Its plan's counters (`--report`) sum every task, as loops' do. Two stages that read it at once (a loop's
        entry and its import, in one job) compute some of its partitions each, and Spark (from 4.3) keeps one
        stage's tasks: a counter read half the records in a CI run (tests/test_runtime.py forces it). The setting
        is set around `persist`: Spark plans a cached query then, in a copy of the session's settings
        (`CacheManager`, while `spark.sql.sources.bucketing.autoBucketedScan.enabled` is on, its default).

        Not when its plan `sorts` (compiler/codegen.py): a `sort` first reads its input in a job of its own to
        sample it, and summing every task would count the records below it twice. One stage's tasks count them
        once; the counters above the sort may then read low if two stages fill the cache at once.

        With `--report` the cache is given the size estimate of its plan without its counters, as without
        `--report` (runtime/parallelism.py says why)."""
        summed = self.observed and not sorts
        with settings(self.spark, {OBSERVE_ALL_ATTEMPTS: "true"} if summed else {}):
            df = df.persist()
        if self.observed:
            parallelism.unmark_cached(df)
        self._cached.append(df)
        return df

    def prepare_import(self, df: DataFrame, keys: list, own: bool = True) -> DataFrame:
        """A loop import: replayed every round, so cache it once per activation, partitioned by
        the columns the body joins it on (the join then needs no shuffle of the import). `own`: this run
        frees it when it closes (an incremental loop's import pieces outlive the epoch's run)."""
        if keys:  # sorted too: the body's sort-merge joins then need no per-round sort of the import
            df = df.repartition(self.loop_partitions, *keys).sortWithinPartitions(*keys)
        df = df.persist()
        if own:
            self._cached.append(df)
        return df

    # ---- loops ------------------------------------------------------------------------------------------

    def loop(self, spec: LoopSpec, body: Callable, entries: dict, imports: dict):
        """Run one activation of a loop; its single output, or {emit name: output}."""
        outputs = self._restored_outputs(spec) if self.recovery is not None and not self.stack else None
        start = self.epoch.loops.get(spec.scope) if self.epoch is not None and not self.stack else None
        if outputs is None and start is not None and start.unchanged:
            outputs = start.outputs(spec)  # an incremental loop no new input reaches: its fixpoint carries over
        if outputs is None:
            # (chosen first: a snapshot's states are restored in the activation's partitions)
            chosen = self._parallelism(entries, imports, start) if not self.stack else None
            given = (entries, imports)
            with self._loop_conf(chosen):
                act = self.recovery.take(spec.scope, len(self.stack)) if self.recovery is not None else None
                if act is None:
                    act = Activation(spec.scope, self.activations.get(spec.scope, 0) + 1,
                                     recompute=spec.snapshot_recompute)
                elif act.resumed:
                    self.progress.trace(f"loop {spec.scope}: resuming activation {act.number} at round {act.round}")
                if start is not None:  # an incremental loop's growing imports, kept across epochs
                    start.partitioned(self, chosen.partitions)
                    imports = {**imports, **start.owner.imports(self, spec, start, imports)}
                if start is not None and start.incremental and not act.resumed:  # (runtime/incremental.py)
                    act.preloaded = dict(start.states)
                    act.seeds = start.seeds(spec, entries)
                    act.estimate = start.decision.new_rows
                    # (a bounded entry: nothing new)
                    entries = {v: start.entries.get(v) for v in spec.strategy.growing}
                act.recompute = spec.snapshot_recompute
                self.activations[spec.scope] = act.number
                if not self.jvm_metrics:
                    self.note("connect-counters", "per-operator record counts are not available over Spark Connect; "
                              "loop termination uses the feedback and `until` counts, which are")
                with self.acting(self._loop_action(spec, act)):
                    outputs = run_activation(self, spec, body, entries, imports, act)
                if start is not None and spec.strategy.guards:
                    act, outputs = self._guarded(spec, body, given, start, act, outputs)
            self.report.loop_done(spec.scope, act.number, chosen, self.checkpoints.describe())
            if self.epoch is not None and spec.incremental and not self.stack:
                self.epoch.finished[spec.scope] = act  # its states start the next epoch
        if self.snapshots is not None and not self.stack:
            self.snapshots.completed[spec.scope] = {k: v for k, v in outputs.items() if v is not None}
        return outputs[None] if spec.single_output else outputs

    def _guarded(self, spec: LoopSpec, body: Callable, given: tuple, start, act: Activation, outputs: dict):
        """A streaming loop whose `double`s an infinity can make NaN (`Strategy.guards`): after an epoch that ran
        it incrementally and left -Infinity in a guarded state, run it again from nothing over all input so far
        (`given`: its entries and imports), in a new activation. The epoch's manifest notes the -Infinity either
        way: the state keeps it, and the next epochs recompute (runtime/incremental.py)."""
        from scopeflow.runtime.incremental import negative_infinity  # (it imports this module)

        with self.acting(self._loop_action(spec, act)):
            start.holds = negative_infinity(self, spec, act, start.clean if start.incremental else set())
        start.checked = True
        if start.holds is None or not start.incremental:
            return act, outputs
        if act.resumed and act.number > 1:  # (resumed from a snapshot of the run from nothing: an epoch's first is 1)
            start.redone(start.holds, resumed=True)
            return act, outputs
        self.progress.trace(f"loop {spec.scope}: {start.holds} holds -Infinity after the incremental epoch: "
                            "running it again from nothing")
        carried = start.carried_frames()
        self.release([df for st in act.states.values() for df in st.parts() if id(df) not in carried]
                     + [df for cks in act.emitted.values() for df in cks])
        start.redone(start.holds)
        sink_io.fault("stream-loop-redo")
        entries, imports = given
        imports = {**imports, **start.owner.imports(self, spec, start, imports)}
        act = Activation(spec.scope, act.number + 1, recompute=spec.snapshot_recompute)
        self.activations[spec.scope] = act.number
        with self.acting(self._loop_action(spec, act)):
            outputs = run_activation(self, spec, body, entries, imports, act)
        sink_io.fault("stream-loop-redone")
        with self.acting(self._loop_action(spec, act)):
            start.holds = negative_infinity(self, spec, act)
        return act, outputs

    def _loop_action(self, spec: LoopSpec, act: Activation) -> failures.Action:
        """A loop's rounds as the action a failure names: the loop by name and line, and the round."""
        op = next((op for op, o in self.operators.items()
                   if o.kind == "loop" and o.detail.split(" ")[:2] == ["scope", spec.scope]), None)  # Loop.describe
        name = self.operators[op].name if op is not None else spec.scope
        return failures.Action(f"{spec.kind} `{name}`", self.where(op) if op else None, doing="running",
                               step=lambda: f"activation {act.number}, round {act.round}")

    def _restored_outputs(self, spec: LoopSpec) -> Optional[dict]:
        """A pipeline-level loop that finished before the snapshot: its outputs are in the snapshot."""
        done = self.recovery.completed_outputs(spec.scope)
        if done is not None:
            self.progress.trace(f"loop {spec.scope}: restored its outputs from the snapshot")
        return done

    def _parallelism(self, entries: dict, imports: dict, start) -> Parallelism:
        """The partitions an outermost loop's activation runs in (runtime/parallelism.py), chosen from its inputs
        (all input so far, in a streaming epoch). A streaming loop whose fixpoint can carry across epochs
        (`start`) is sized with `parallelism.CARRIED_PARTITION_BYTES` a partition, and keeps the count its states
        and its imports' pieces are in while its input fits it (`incremental.Start.parallelism`)."""
        frames = [f for df in [*entries.values(), *imports.values()] if df is not None for f in Pieces.of(df)]
        chosen = parallelism.choose(self.spark, self.partitions, frames, carried=start is not None,
                                    marked=self.observed)
        return start.parallelism(chosen, task_slots(self.spark), self.partitions) if start is not None else chosen

    @contextmanager
    def _loop_conf(self, chosen: Optional[Parallelism]):
        """The settings loops run with (`LOOP_CONF`, and the activation's shuffle partitions), set by the
        outermost loop and restored after it."""
        if chosen is None:  # a nested loop: its outermost loop's settings hold
            yield
            return
        values = {**LOOP_CONF, "spark.sql.shuffle.partitions": str(chosen.partitions),
                  **(ONE_PARTITION_CONF if chosen.partitions == 1 else {})}
        self.loop_partitions = chosen.partitions
        try:
            with settings(self.spark, values), jobs.tagged(self.spark), columns.cached_lookups(self.spark):
                yield
        finally:
            self.loop_partitions, self._group = self.partitions, None

    def round_group(self, scope: str, activation: int, round_no: int) -> str:
        """Tag the Spark jobs of a round so the status tracker can count them, and name their call site after it."""
        group = f"scopeflow:{self.run_id}:{scope}#{activation}/r{round_no}"
        if group != self._group:  # (a round sets it again after its body, in case a nested loop set another)
            jobs.set_job_group(self.spark, group, f"loop {scope} activation {activation} round {round_no}",
                               site=f"loop {scope} round {round_no}")
            self._group = group
        return group

    def job_ids(self, group: str, at_least: int = 1) -> Optional[list[int]]:
        return jobs.job_ids_in_group(self.spark, group, at_least)  # None over Spark Connect

    def tasks_of_jobs(self, group: str, job_ids: Optional[list[int]]) -> int:
        return jobs.tasks_of_jobs(self.spark, group, job_ids)  # -1 over Spark Connect

    def explain_jobs(self, group: str) -> list[str]:
        """Each Spark job of a round's group."""
        return jobs.describe_jobs(self.spark, group)

    def release(self, frames: list) -> None:
        """Free the blocks of round checkpoints nothing refers to (but one an asynchronous snapshot still writes)."""
        if self.snapshots is not None:
            frames = [df for df in frames if not self.snapshots.is_pinned(df)]
        self.checkpoints.release(frames)

    def round_done(self, spec: LoopSpec, number: int, record) -> tuple:
        """Report a round; return its report entries (`RunReport.round_done`)."""
        self.interrupts.check()  # Ctrl-C: no next round (a snapshot due after this one is not taken either)
        entries = self.report.round_done(spec, number, record)
        self.progress.round_finished(spec, number, record)
        if self.trace:
            self.progress.trace(record.attempt.describe())
        return entries

    # ---- snapshots ----------------------------------------------------------------------------------------

    def configure_snapshots(self, opts, sources: dict, inputs: Optional[dict] = None) -> None:
        """Snapshots of this run's loops. `inputs`: fingerprints of inputs other than the file sources (a
        streaming epoch's input so far), checked with theirs before a snapshot is resumed."""
        from scopeflow.runtime.snapshots import Recovery, SnapshotStore, fingerprint_path

        root = opts.root(self.pipeline)
        fingerprints = dict(inputs or {})
        for op, source in sources.items():
            p = value_of(source.path, self.params)
            local = local_path(self.path(p))
            fingerprints[op] = fingerprint_path(local) if local is not None else {"path": p}
        signatures = {op: str(record) for op, record in self.operators.items()}
        store = self.snapshots = SnapshotStore(self, root, opts.every or 10, opts.mode or "persist", opts.keep,
                                               opts.async_writes, signatures, fingerprints)
        if not opts.resume:
            store.start_fresh()
            return
        found = store.latest(self.progress.trace)
        if found is None:
            kept = store.resume_sinks()  # a run killed once its loops were done, or one without loops
            self.progress.trace(f"no snapshot in {store.root}: starting from the beginning" +
                                (f" (skipping the {len(store.sinks_done)} sink(s) committed before)" if kept else ""))
            if not kept:
                store.start_fresh()
            return
        snap, manifest = found
        self.recovery = Recovery(self, snap, manifest)
        self.activations.update(manifest.get("activations", {}))
        store.sinks_done = store.load_sink_log()
        where = " > ".join(f"{lv['scope']} round {lv['round']}" for lv in manifest["stack"])
        self.progress.trace(f"resuming from {os.path.basename(snap)}: {where or 'pipeline level'}")
        self.report.resumed_from(os.path.basename(snap), manifest["stack"])

    def maybe_snapshot(self, spec: LoopSpec, round_no: int) -> None:
        """After round `round_no` of the innermost activation (which the stack holds at its next round)."""
        if self.snapshots is not None and self.snapshots.due(spec, round_no):
            self.snapshots.take(self.stack)

    def snapshot_written(self, seq: int, stack: list, size: int, seconds: float) -> None:
        where = [{"scope": lv["scope"], "activation": lv["activation"], "round": lv["round"]} for lv in stack]
        self.report.snapshot_written(seq, where, size, seconds)
        self.progress.snapshot(seq, where, size, seconds)

    def finish(self) -> None:
        if self.snapshots is not None:
            self.snapshots.finished()

    def close(self) -> None:
        """Free what this run cached (a streaming pipeline runs once per epoch in one session)."""
        for df in self._cached:
            try:
                df.unpersist()
            except Exception:  # noqa: BLE001 - a session going away frees them anyway
                pass
        self._cached.clear()

    # ---- sinks ------------------------------------------------------------------------------------------

    def sink(self, op: str, df: DataFrame, fmt: str, path: Optional[str], options: dict, at: tuple = ()) -> None:
        self.interrupts.check()
        name = self.operators[op].name if op in self.operators else None
        written = f'{fmt}("{path}")' if path else f"{fmt}()"
        what = f"sink `{name or '…'} -> {written}`"
        target = self.path(path) if fmt in FILE_SINKS else None
        with self.acting(failures.Action(what, self.where(op, at), doing="writing", target=target)):
            self._sink(op, df, fmt, path, options, at)

    def _sink(self, op: str, df: DataFrame, fmt: str, path: Optional[str], options: dict, at: tuple) -> None:
        started = time.perf_counter()
        if fmt == "console":
            df.show(int(options.get("rows", 20)), truncate=False)
            return
        target = path if fmt == "table" else self.path(path)
        key = targets.sink_key(op, fmt, target)
        if self.snapshots is not None and key in self.snapshots.sinks_done:
            self.progress.trace(f"sink {target}: already committed before the restart, skipped")
            return
        obs = None
        if self.jvm_metrics:  # (the end-of-run summary says how many records each sink got)
            from pyspark.sql import Observation

            obs = Observation(f"sink:{op}")  # the records written, counted by the write itself
            df = df.observe(obs, self.counters.column)
        # an append's commit id: the same when this run is resumed, so a commit made before a crash is seen;
        # in a streaming pipeline, (query, epoch): a replayed epoch finds its commit and writes nothing
        token = self.snapshots.token if self.snapshots is not None else self.run_id
        extra = {}
        if self.epoch is not None:
            token, extra = self.epoch.token, {"query": self.epoch.query, "epoch": self.epoch.number}
            if options.get("mode") == "error_if_exists":  # checked when the query started; the target is its own
                options = {k: v for k, v in options.items() if k != "mode"}
        commit = targets.commit_id(token, key)
        written = sink_io.write_atomically(self.spark, df, fmt, target, options, commit=commit,
                                           pipeline=self.pipeline, at=self.where(op, at), extra=extra)
        if not written:
            self.progress.trace(f"sink {target}: committed before the restart (commit {commit}), skipped")
        elif self.epoch is not None:
            self.epoch.wrote(key, commit)
        if self.snapshots is not None:
            self.snapshots.sink_committed(key)
            sink_io.fault("sink-logged")
        records = int(obs.get.get("n") or 0) if obs is not None and written else None
        self.report.sink_written(op, fmt, target, time.perf_counter() - started, records)
        self.progress.sink_written(fmt, target, records)


def _literal_path(path: str) -> str:
    """A file's path as Spark's reader takes it literally: Spark reads a path with glob characters as a
    pattern (`w[1].csv` would read `w1.csv`), so they are escaped (Hadoop's glob syntax)."""
    return "".join("\\" + c if c in "\\[]{}*?" else c for c in path)


def _ddl_fields(ddl: str) -> list[tuple[str, str]]:
    """(name, Spark type) of each field of a DDL schema."""
    out = []
    for f in split_top_level(ddl):
        name, _, kind = f.partition(" ")
        out.append((name.strip("`"), kind.strip()))
    return out
