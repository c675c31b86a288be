"""Streaming pipelines (docs/language.md#streaming): a Spark Structured Streaming query whose epochs
(micro-batches) each run the compiled pipeline, loops included, over all input so far.

The query reads what is new: for `stream files(...)` the names of the files that appeared (Spark's
`binaryFile` source, which lists files and reads no content unless asked), for `stream rate(...)` its rows.
Spark's checkpoint (`<checkpoint>/spark`: offsets and commits) decides which epoch holds what, and replays an
epoch that did not commit with the same files. Each epoch (`foreachBatch`, `StreamRun._epoch`):

1. skips an epoch scopeflow committed already (a replay after a crash between scopeflow's commit and Spark's);
2. reads the epoch's new files as a `read` source reads files (a CSV header by name, `on_error`, failures
   naming the file) and writes them to the stream's state as a Parquet part, `state/<source>/e<epoch>`;
3. runs the pipeline with each `stream` source as its input so far: the parts of the last committed epoch
   and the new one (a bounded source is read as it is now);
4. writes every sink atomically, its commit keyed on (query id, epoch): a replayed epoch finds its commit in
   the target's marker and writes nothing;
5. commits the epoch: `epoch-<n>.json` (the parts with their checksums, the files read with their size and
   time), written by one rename. Then Spark writes `commits/<n>`.

The state is the input so far, compacted into one part when it has more than `COMPACT_PARTS`, and the states
the incremental loops left (runtime/incremental.py: written when due, not every epoch, and when a run stops
cleanly); older manifests and parts are deleted once an epoch commits. A loop is recomputed each epoch or run
from the previous epoch's fixpoint, per loop and epoch (`EpochLoops.decide`).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
import urllib.parse
from typing import Optional

import attrs
from attrs import define, field, frozen
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime.context import RunContext
from scopeflow.runtime.errors import ExitCode, RunRefused, RuntimeFailure, shown_path
from scopeflow.runtime.incremental import EpochLoops, part_folder, parts_since
from scopeflow.runtime.progress import Progress
from scopeflow.runtime.sinks import fault
from scopeflow.runtime.snapshots import SnapshotRefused, atomic_json, sha256_file
from scopeflow.runtime.spec import Stream, streams, value_of
from scopeflow.runtime.spec import sources as file_sources
from scopeflow.stdlib.paths import local_path, resolve

TRIGGERS = ("available-now", "once", "processing-time=DURATION")
DEFAULT_TRIGGER = "processing-time=10s"
COMPACT_PARTS = 16  # a stream's state is rewritten as one part when it has more
REPORTED_EPOCHS = 1000  # the report lists this many epochs, the last ones
STATE_FORMAT = 1
IDENTITY = "stream.json"  # what the checkpoint belongs to: the pipeline, its plan and its streams
# what `binaryFile` lists of each file (its content is never read: Spark reads it only when it is selected)
LISTING = "path string, modificationTime timestamp, length bigint, content binary"
# the one shape of every stream source's new records in the query (a union): which source, a file, or a row
SHAPE = "source string, path string, mtime timestamp, length bigint, ts timestamp, value bigint"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


class CheckpointRefused(SnapshotRefused):
    """A streaming checkpoint that must not be used (exit 5): another pipeline's, a changed plan, damaged state."""


class UsageProblem(RunRefused):
    """A bad `--trigger` (exit 2)."""


@frozen
class Trigger:
    kind: str  # available-now | once | processing-time
    millis: int = 0  # processing-time: the interval

    @staticmethod
    def parse(text: Optional[str]) -> "Trigger":
        text = (text or DEFAULT_TRIGGER).strip()
        if text in ("available-now", "once"):
            return Trigger(text)
        kind, _, value = text.partition("=")
        if kind == "processing-time":
            m = _DURATION.match(value.strip())
            if m and float(m.group(1)) > 0:
                return Trigger(kind, max(1, int(float(m.group(1)) * _UNIT_MS[m.group(2)])))
            raise UsageProblem(f"--trigger {text}: the interval is a number and a unit",
                               hint="e.g. --trigger processing-time=10s (units: ms, s, m, h)")
        raise UsageProblem(f"--trigger {text}: not a trigger",
                           hint="--trigger available-now, --trigger once or --trigger processing-time=10s")

    def spark(self) -> dict:
        """`DataStreamWriter.trigger`'s arguments."""
        if self.kind == "available-now":
            return {"availableNow": True}
        if self.kind == "once":
            return {"once": True}
        return {"processingTime": f"{self.millis} milliseconds"}

    @property
    def bounded(self) -> bool:
        """The query ends by itself once the input there is processed."""
        return self.kind != "processing-time"

    def __str__(self) -> str:
        return self.kind if self.bounded else f"processing-time={self.millis}ms"


@define
class StreamOptions:
    trigger: Optional[str] = None
    full_refresh: bool = False


@define
class Epoch:
    """What one epoch's run of the pipeline (`RunContext.epoch`) needs: its number, the query, the token its
    sinks' commit ids are made of, and every `stream` source's input so far."""

    number: int
    query: str
    inputs: dict = field(factory=dict)
    log: Optional[str] = None  # `<checkpoint>/scopeflow/writes.jsonl`: every sink write, one line each
    loops: dict = field(factory=dict)  # loop scope -> incremental.Start: the loops this epoch runs incrementally
    finished: dict = field(factory=dict)  # loop scope -> its last activation, for its states

    @property
    def token(self) -> str:
        return f"{self.query}:{self.number}"

    def wrote(self, sink: str, commit: str) -> None:
        """A sink committed this epoch's result (a replayed epoch whose sink committed before finds the commit
        in the target and writes nothing, so no line either): the write log shows each epoch written once."""
        if self.log is None:
            return
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"query": self.query, "epoch": self.number, "sink": sink, "commit": commit}) + "\n")


class Stopped(Exception):
    """A stop was asked (Ctrl-C, SIGTERM): the query ends before its next epoch."""


# ---- the state kept across epochs ------------------------------------------------------------------------


def check_checkpoint(root: str) -> None:
    """A streaming pipeline's checkpoint is a folder on this machine that this user can write, or can be made
    (checked before Spark starts)."""
    local = local_path(root)
    if local is None:
        raise RunRefused(f"--checkpoint {root}: a streaming pipeline keeps its checkpoint on this machine's file "
                         "system", hint="give a local folder, e.g. --checkpoint .scopeflow/run1", code="E0409")
    local = os.path.abspath(local)
    if os.path.exists(local) and not os.path.isdir(local):
        raise RunRefused(f"--checkpoint {root}: {shown_path(local)} is a file, not a folder",
                         hint="give a folder for the checkpoint, e.g. --checkpoint .scopeflow/run1", code="E0409")
    existing = local
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunRefused(f"--checkpoint {root}: {shown_path(existing)} is not writable",
                         hint="give a checkpoint folder this user can write", code="E0409")


class EpochStore:
    """`<checkpoint>/`: Spark's checkpoint (`spark/`), what the checkpoint belongs to (`stream.json`), and
    scopeflow's state (`scopeflow/`): the manifest of the last committed epoch and the Parquet parts it
    lists. Local paths only."""

    def __init__(self, root: str, identity: dict):
        check_checkpoint(root)
        self.root = os.path.abspath(local_path(root))
        self.identity = identity
        self.spark_dir = os.path.join(self.root, "spark")
        self.state_dir = os.path.join(self.root, "scopeflow")
        self.refreshed = False  # `open` dropped a checkpoint (--full-refresh)

    # -- opening -----------------------------------------------------------------------------------------

    def open(self, full_refresh: bool) -> Optional[dict]:
        """Check the checkpoint belongs to this pipeline and plan (else exit 5), or start it; the manifest of
        the last committed epoch (None: none yet). `full_refresh`: drop this pipeline's checkpoint first (a
        folder that is not one is refused, and left alone)."""
        held = self._held()
        ident = self._read_identity() if held else None
        if held and (ident is None or ident.get("pipeline") != self.identity["pipeline"]):
            raise self._foreign(held, ident)
        self.refreshed = bool(held and full_refresh)
        if held and full_refresh:
            for name in ("spark", "scopeflow", IDENTITY):  # what scopeflow put there, nothing else
                path = os.path.join(self.root, name)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)
            held = []
        if held:
            self._check_identity(ident)
            if self.latest() is not None and not os.path.isdir(self.spark_dir):
                raise CheckpointRefused(
                    f"Spark's checkpoint {shown_path(self.spark_dir)} is gone while scopeflow's state in "
                    f"{shown_path(self.state_dir)} holds committed epochs: a new query would read again what they "
                    "read\nhint: run with --full-refresh to recompute from all input")
        else:
            os.makedirs(self.root, exist_ok=True)
            for name in os.listdir(self.root):  # an identity a crash left half-written
                if name.startswith(IDENTITY + ".tmp"):
                    os.remove(os.path.join(self.root, name))
            atomic_json(os.path.join(self.root, IDENTITY), self.identity)
        os.makedirs(self.state_dir, exist_ok=True)
        manifest = self.latest()
        if manifest is not None:
            self.verify(manifest)
        return manifest

    def _held(self) -> list:
        """What the folder holds, but an identity a crash left half-written (`stream.json.tmp-PID`)."""
        names = sorted(os.listdir(self.root)) if os.path.isdir(self.root) else []
        return [n for n in names if not n.startswith(IDENTITY + ".tmp")]

    def _read_identity(self) -> Optional[dict]:
        try:
            with open(os.path.join(self.root, IDENTITY), encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) and doc.get("written_by") == "scopeflow" else None

    def _foreign(self, held: list, ident: Optional[dict]) -> SnapshotRefused:
        if ident is not None:
            return CheckpointRefused(f"the checkpoint folder {shown_path(self.root)} belongs to pipeline "
                                     f"`{ident.get('pipeline')}`, not `{self.identity['pipeline']}`; nothing was "
                                     "changed\nhint: give this pipeline a checkpoint folder of its own with "
                                     "--checkpoint DIR")
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        return CheckpointRefused(f"the checkpoint folder {shown_path(self.root)} is not a streaming checkpoint of "
                                 f"pipeline `{self.identity['pipeline']}` (it holds {shown}); nothing was changed\n"
                                 f"hint: give a folder of its own with --checkpoint DIR (or delete this one)")

    def _check_identity(self, ident: dict) -> None:
        mine = self.identity
        changed = [k for k in ("fingerprint", "streams", "params") if ident.get(k) != mine[k]]
        if changed:
            what = {"fingerprint": "the pipeline's plan", "streams": "its stream sources (paths, formats, options)",
                    "params": "its params' values (" + ", ".join(
                        f"{k}={mine['params'].get(k)!r}, was {ident.get('params', {}).get(k)!r}"
                        for k in sorted(set(mine["params"]) | set(ident.get("params") or {}))
                        if mine["params"].get(k) != (ident.get("params") or {}).get(k)) + ")"}
            raise CheckpointRefused(f"{' and '.join(what[k] for k in changed)} changed since the checkpoint in "
                                  f"{shown_path(self.root)} was started: its state and offsets belong to the old "
                                  f"one\nhint: run with --full-refresh to drop the checkpoint and recompute from "
                                  f"all input (the sinks are replaced by the first epoch), or give another "
                                  f"--checkpoint DIR")

    # -- manifests ---------------------------------------------------------------------------------------

    def _manifests(self) -> list[tuple[int, str]]:
        out = []
        for name in os.listdir(self.state_dir) if os.path.isdir(self.state_dir) else ():
            m = re.fullmatch(r"epoch-(\d+)\.json", name)
            if m:
                out.append((int(m.group(1)), os.path.join(self.state_dir, name)))
        return sorted(out)

    def latest(self) -> Optional[dict]:
        found = self._manifests()
        if not found:
            return None
        with open(found[-1][1], encoding="utf-8") as fh:
            return json.load(fh)

    def verify(self, manifest: dict) -> None:
        """Every part the manifest lists is there with its checksums (else exit 5: the state is damaged)."""
        for op, part in listed_parts(manifest):
            folder = self.part_dir(op, part["name"])
            for name, digest in part["files"].items():
                path = os.path.join(folder, name)
                if not os.path.exists(path):
                    problem = "missing"
                elif sha256_file(path) != digest:
                    problem = f"not what epoch {manifest['epoch']} wrote"
                else:
                    continue
                raise CheckpointRefused(
                    f"the streaming state in {shown_path(self.root)} is damaged: {shown_path(path)} is {problem}"
                    "\nhint: run with --full-refresh to recompute from all input")

    def commit(self, manifest: dict) -> None:
        """Commit an epoch (one rename), then drop older manifests and the parts no longer listed."""
        atomic_json(os.path.join(self.state_dir, f"epoch-{manifest['epoch']:010d}.json"), manifest)
        fault("stream-epoch-committed")
        self._clean(manifest)

    def rewrite(self, manifest: dict) -> None:
        """Replace the last committed epoch's manifest by `manifest`, of the same epoch and input (one rename:
        a crash leaves one or the other, both whole), and drop the parts it no longer lists."""
        atomic_json(os.path.join(self.state_dir, f"epoch-{manifest['epoch']:010d}.json"), manifest)
        self._clean(manifest)

    def _clean(self, manifest: dict) -> None:
        """Drop what committed epoch `manifest` made obsolete: older manifests, its loops' snapshots and the parts
        it does not list."""
        for number, path in self._manifests():
            if number < manifest["epoch"]:
                os.remove(path)
        self._trim_log(os.path.join(self.state_dir, "writes.jsonl"))
        loops = os.path.join(self.state_dir, "loops")
        for name in os.listdir(loops) if os.path.isdir(loops) else ():
            if name <= f"e{manifest['epoch']:010d}":
                shutil.rmtree(os.path.join(loops, name), ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(loops)  # (when empty)
        kept = {(op, p["name"]) for op, p in listed_parts(manifest)}
        parts = os.path.join(self.state_dir, "state")
        for op in os.listdir(parts) if os.path.isdir(parts) else ():
            for name in os.listdir(os.path.join(parts, op)):
                if (op, name) not in kept:
                    shutil.rmtree(os.path.join(parts, op, name), ignore_errors=True)

    @staticmethod
    def _trim_log(path: str, keep: int = 1000) -> None:
        """The write log keeps its last `keep` lines (the checkpoint does not grow with the epochs)."""
        try:
            with open(path, encoding="utf-8") as fh:
                lines = fh.readlines()
        except OSError:
            return
        if len(lines) > 2 * keep:
            with open(f"{path}.tmp", "w", encoding="utf-8") as fh:
                fh.writelines(lines[-keep:])
            os.replace(f"{path}.tmp", path)

    # -- parts -------------------------------------------------------------------------------------------

    def loops_dir(self, number: int) -> str:
        """The snapshots of the loops of epoch `number` (deleted when it commits)."""
        return os.path.join(self.state_dir, "loops", f"e{number:010d}")

    def part_dir(self, op: str, name: str) -> str:
        return os.path.join(self.state_dir, "state", op, name)

    def write_part(self, df: DataFrame, op: str, name: str) -> dict:
        """Write `df` as part `name` of stream `op` (replacing one a crashed epoch left); its listing."""
        folder = self.part_dir(op, name)
        staging = f"{folder}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        df.write.mode("overwrite").parquet(staging)
        fault("stream-part-written")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(staging, folder)
        files = sorted(n for n in os.listdir(folder) if not n.startswith((".", "_")))
        return {"name": name, "files": {n: sha256_file(os.path.join(folder, n)) for n in files},
                "bytes": sum(os.path.getsize(os.path.join(folder, n)) for n in files)}

    def frame(self, spark, op: str, ddl: str, parts: list) -> DataFrame:
        if not parts:
            return spark.createDataFrame([], ddl)
        return spark.read.schema(ddl).parquet(*[self.part_dir(op, p["name"]) for p in parts])


# ---- the query --------------------------------------------------------------------------------------------


class StreamRun:
    """One run of a streaming pipeline: its query, its epochs, their report."""

    def __init__(self, spark, module, params: dict, progress: Progress, options: StreamOptions, checkpoint: str,
                 base_dir: str, trace: bool = False, detailed: bool = False, diagnostics: bool = False,
                 report_path: Optional[str] = None, loop_snapshots=None):
        self.spark = spark
        self.loop_snapshots = loop_snapshots  # arguments.SnapshotOptions: snapshots of the loops inside an epoch
        self.module = module
        self.params = params
        self.progress = progress
        self.trigger = Trigger.parse(options.trigger)
        self.options = options
        self.base_dir = base_dir
        self.trace = trace
        self.detailed = detailed
        self.diagnostics = diagnostics
        self.report_path = report_path
        self.streams: dict[str, Stream] = streams(module)
        self.store = EpochStore(checkpoint, self.identity())
        self.loops = EpochLoops(spark, module, params, base_dir, self.store)
        self.manifest: Optional[dict] = None  # the last committed epoch's
        self.lock = threading.Lock()  # held while an epoch runs
        self.stopping = False
        self.stopped_by: Optional[str] = None
        self.failure: Optional[BaseException] = None
        self.query = None
        self.query_id: Optional[str] = None
        self.started_query = threading.Event()
        self.epochs: list[dict] = []  # the report's, one per epoch run (the last REPORTED_EPOCHS)
        self.epochs_run = 0
        self.started = time.perf_counter()
        self.last_run: Optional[RunContext] = None
        self.stats: dict = {}  # loops and operators of the last epoch that ran the pipeline (`write_report`)
        self.flushed: Optional[dict] = None  # the loops' states kept as the run stopped (`_flush`)

    def identity(self) -> dict:
        """What a checkpoint belongs to: the pipeline, its plan, and its streams as this run resolves them."""
        resolved = {}
        for op, s in self.streams.items():
            path = value_of(s.path, self.params)
            resolved[op] = {"format": s.format, "path": resolve(self.base_dir, path) if path else None,
                            "options": {k: v for k, v in sorted(s.options_in(self.params).items())}}
        return {"written_by": "scopeflow", "format": STATE_FORMAT, "pipeline": self.module.PIPELINE,
                "fingerprint": self.module.FINGERPRINT, "streams": json.loads(json.dumps(resolved, default=str)),
                "params": json.loads(json.dumps(self.params, default=str))}

    # -- the query ---------------------------------------------------------------------------------------

    def run(self) -> None:
        """Run the query until its input is exhausted (available-now, once) or it is stopped; a failure of an
        epoch is raised here, as the epoch raised it."""
        from scopeflow.runtime.deployment import is_connect, not_supported

        if is_connect(self.spark):  # foreachBatch would run in a Python process of the server's, not here
            raise not_supported("a streaming pipeline (its epochs run in this process, by foreachBatch)",
                                hint="run it with --master (classic Spark: local or a cluster)")
        self.manifest = self.store.open(self.options.full_refresh)
        if self.store.refreshed:
            self._over_no_input()
        if self.manifest is not None:
            self.progress.trace(f"continuing after epoch {self.manifest['epoch']} "
                                f"(checkpoint {shown_path(self.store.root)})")
        new = functools.reduce(DataFrame.unionByName, [self._new_records(op, s) for op, s in self.streams.items()])
        writer = (new.writeStream.foreachBatch(self._on_batch)
                  .option("checkpointLocation", self.store.spark_dir).trigger(**self.trigger.spark()))
        try:
            with self._signals():
                self.query = writer.start()
                self.query_id = str(self.query.id)
                self.started_query.set()  # (an epoch may have started before `start` returned: it waits for its id)
                self._wait()
            if self.failure is None:
                self._flush()
        finally:
            # (Spark's cache matches frames by plan: a later run over the same checkpoint's parts must not find
            # this run's loop imports and states)
            self.loops.close()
        self._spark_durations()
        if self.failure is not None:
            raise self.failure

    def _flush(self) -> None:
        """The run stops cleanly: the states its incremental loops ended with go to the checkpoint, if their last
        epoch did not write them (`spark.scopeflow.incremental.stateEvery`). Not needed for exactly-once (the next
        run would start from older states, with every record since), so a failure here is only said."""
        if self.manifest is None:
            return
        started = time.perf_counter()
        try:
            loops = self.loops.flush(self.manifest)
            if loops is not None:
                manifest = {**self.manifest, "loops": loops}
                self.store.rewrite(manifest)
                self.manifest = manifest
                self.flushed = {"epoch": manifest["epoch"], "seconds": round(time.perf_counter() - started, 4)}
                if self.trace:  # (--trace; the report has it as `states_kept`)
                    self.progress.trace(f"the loops' states of epoch {manifest['epoch']} kept for the next run "
                                        f"({self.flushed['seconds']:.2f}s)")
        except Exception as exc:  # noqa: BLE001 - the states written before stay valid
            self.progress.trace(f"could not keep the loops' states of epoch {self.manifest['epoch']} for the next "
                                f"run ({type(exc).__name__}: {exc}); it starts from those written before")

    def _over_no_input(self) -> None:
        """After --full-refresh dropped a checkpoint: the sinks get the result over no input (what the old
        query wrote there is gone with its state), until the new query's first epoch replaces them."""
        run = RunContext(self.spark, self.module, self.params, self.progress, self.trace, base_dir=self.base_dir)
        run.epoch = Epoch(-1, f"refresh-{os.urandom(6).hex()}")
        run.epoch.inputs = {op: self.store.frame(self.spark, op, s.schema, []) for op, s in self.streams.items()}
        try:
            self.module.pipeline(run)
            run.finish()
        finally:
            run.close()
        self.progress.trace("full refresh: the checkpoint was dropped; the sinks hold the result over no input until "
                            "the first epoch commits")

    def _new_records(self, op: str, s: Stream) -> DataFrame:
        """What Spark's source gives each epoch of stream `op`, in the query's one shape (`SHAPE`)."""
        opts = s.options_in(self.params)
        null = {c.split()[0]: F.lit(None).cast(c.split()[1]) for c in SHAPE.split(", ")}
        if s.format == "rate":
            every = self.trigger.millis if not self.trigger.bounded else 1000
            rows = int(opts["rows_per_second"]) * every // 1000 or 1
            df = (self.spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
                  .option("advanceMillisPerBatch", every).load())
            cols = {**null, "ts": F.col("timestamp"), "value": F.col("value")}
        else:
            reader = (self.spark.readStream.format("binaryFile").schema(LISTING)
                      .option("latestFirst", "false").option("maxFileAge", "3650000d"))
            if opts.get("max_files_per_epoch"):
                reader = reader.option("maxFilesPerTrigger", int(opts["max_files_per_epoch"]))
            df = reader.load(resolve(self.base_dir, value_of(s.path, self.params)))
            cols = {**null, "path": F.col("path"), "mtime": F.col("modificationTime"), "length": F.col("length")}
        cols["source"] = F.lit(op)
        return df.select(*[cols[c.split()[0]].alias(c.split()[0]) for c in SHAPE.split(", ")])

    def _spark_durations(self) -> None:
        """Spark's own account of each epoch (`durationMs` of its progress: addBatch is the epoch's run of the
        pipeline, the rest Spark's micro-batch work), added to the report's epochs."""
        try:
            progress = {p["batchId"]: p.get("durationMs", {}) for p in self.query.recentProgress}
        except Exception:  # noqa: BLE001 - only the report's detail
            return
        for entry in self.epochs:
            if entry["epoch"] in progress:
                entry["spark_ms"] = progress[entry["epoch"]]

    def _wait(self) -> None:
        q = self.query
        while True:
            try:
                if q.awaitTermination(0.5):
                    return
            except Exception as exc:  # noqa: BLE001 - the query failed: an epoch's failure, or Spark's
                if self.failure is None and not self.stopping:
                    self.failure = exc
                return
            if self.stopping:
                self._stop()
                return

    def _stop(self) -> None:
        """Stop at an epoch boundary: wait for the epoch running to commit, then stop the query. `stopping` is
        set first, so an epoch Spark starts meanwhile raises `Stopped` before it does anything (and is run
        again by a restart); the lock is not held while Spark stops, which waits for that epoch's callback."""
        while not self.lock.acquire(timeout=0.2):
            pass
        self.lock.release()
        self.query.stop()

    @contextlib.contextmanager
    def _signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            if self.stopping:
                print(f"aborted (second {name})", file=sys.stderr, flush=True)
                os._exit(int(ExitCode.INTERRUPTED))
            self.stopping, self.stopped_by = True, name
            print(f"stopping after the epoch in progress ({name}; press Ctrl-C again to abort)", file=sys.stderr,
                  flush=True)

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    # -- an epoch ----------------------------------------------------------------------------------------

    def _on_batch(self, batch: DataFrame, epoch: int) -> None:
        self.started_query.wait()
        if self.stopping:
            raise Stopped()
        with self.lock:
            if self.stopping:
                raise Stopped()
            try:
                self._epoch(batch, int(epoch))
            except BaseException as exc:
                self.failure = exc
                raise

    def _epoch(self, batch: DataFrame, number: int) -> None:
        started = time.perf_counter()
        last = self.manifest
        query = self.query_id
        if last is not None and last.get("query") != query:
            raise CheckpointRefused(
                f"Spark's checkpoint in {shown_path(self.store.spark_dir)} is query {query}, scopeflow's state in "
                f"{shown_path(self.store.state_dir)} was committed by query {last.get('query')}: they do not belong "
                "together (was part of the checkpoint replaced?)\nhint: run with --full-refresh to recompute from "
                "all input")
        if last is not None and last["epoch"] >= number:
            self.progress.trace(f"epoch {number}: committed before the restart, not run again")
            return
        if (last["epoch"] if last is not None else -1) != number - 1:
            raise CheckpointRefused(
                f"Spark's checkpoint in {shown_path(self.store.spark_dir)} is at epoch {number}, scopeflow's state "
                f"in {shown_path(self.store.state_dir)} at " +
                (f"epoch {last['epoch']}" if last is not None else "no epoch") +
                ": the state lacks the input of the epochs between (was part of the checkpoint deleted?)\n"
                "hint: run with --full-refresh to recompute from all input")
        entry: dict = {"epoch": number, "files": 0, "input_rows": 0, "loops": [], "sinks": []}
        run = RunContext(self.spark, self.module, self.params, self.progress, self.trace, detailed=self.detailed,
                         diagnostics=self.diagnostics, base_dir=self.base_dir)
        fault("stream-epoch-start")  # (Spark has written offsets/<number>)
        run.epoch = Epoch(number, query, log=os.path.join(self.store.state_dir, "writes.jsonl"))
        self.last_run = run
        sources: dict = {}
        new_parts: dict = {}  # stream -> the part of this epoch's new records (None: none), compacted or not
        try:
            batch = batch.persist()
            tick = time.perf_counter()
            for op, s in self.streams.items():
                before = last["sources"].get(op) if last is not None else None
                sources[op], new_parts[op] = self._absorb(run, batch, op, s, number, before, entry)
            entry["read_seconds"] = round(time.perf_counter() - tick, 4)
            self._check_unchanged(run, sources, number)
            new_rows = entry["input_rows"]
            tick = time.perf_counter()
            if self.loop_snapshots is not None and (new_rows or last is None):
                self._loop_snapshots(run, number, sources, entry)
            loops = last.get("loops", {}) if last is not None else {}
            if new_rows or last is None:
                for op, s in self.streams.items():
                    run.epoch.inputs[op] = self.store.frame(self.spark, op, s.schema, sources[op]["parts"])
                decisions = self.loops.decisions(last, sources, new_parts)
                started_loops = time.perf_counter()
                run.epoch.loops = self.loops.starts(decisions, last, functools.partial(self._since, last, new_parts))
                entry["loops_start_seconds"] = round(time.perf_counter() - started_loops, 4)
                self.module.pipeline(run)
                run.finish()
                # (after the run: a loop whose incremental run left -Infinity in a guarded state ran again from
                # nothing, `RunContext._guarded`)
                decisions = {**decisions, **{scope: start.decision for scope, start in run.epoch.loops.items()}}
                entry["strategies"] = {scope: {"strategy": d.strategy, "why": d.why} for scope, d in decisions.items()}
                kept = time.perf_counter()
                loops = self.loops.keep(run, number, last, decisions, sources)
                entry["loops_state_seconds"] = round(time.perf_counter() - kept, 4)
            else:
                entry["skipped"] = "no new input: the sinks hold the result already"
                self.loops.carry_over(number)
            entry["pipeline_seconds"] = round(time.perf_counter() - tick, 4)
            tick = time.perf_counter()
            manifest = {"written_by": "scopeflow", "format": STATE_FORMAT, "epoch": number, "query": query,
                        "fingerprint": self.module.FINGERPRINT, "sources": sources,
                        "rows_so_far": sum(s["rows"] for s in sources.values()), "loops": loops}
            fault("stream-before-commit")
            self.store.commit(manifest)
            self.manifest = manifest
            self.loops.committed()
            entry["commit_seconds"] = round(time.perf_counter() - tick, 4)
        finally:
            if self.manifest is last:  # the epoch did not commit
                self.loops.abandoned()
            batch.unpersist()
            run.close()
        self._epoch_done(run, entry, sources, self.manifest.get("loops", {}), started)

    def _since(self, last: Optional[dict], new_parts: dict, since: int) -> dict:
        """Each stream's records after epoch `since` (`new_parts`: this epoch's), as a frame; none for a stream
        whose records after it were compacted with older ones (`EpochLoops.decide` recomputes a loop that starts
        from `since` and reads it)."""
        parts = {op: found or [] for op, found in parts_since(last, new_parts, self.streams, since).items()}
        return {op: self.store.frame(self.spark, op, s.schema, parts[op]) for op, s in self.streams.items()}

    def _loop_snapshots(self, run: RunContext, number: int, sources: dict, entry: dict) -> None:
        """Snapshots of the epoch's loops: a loop killed mid-epoch resumes from its snapshot when the epoch runs
        again, if the epoch's input so far is the same: the parts committed before (their checksums) and the files
        the epoch read (size, time; its own part is written again by the replay, not byte for byte the same)."""
        folder = self.store.loops_dir(number)
        inputs = {}
        for op, state in sources.items():  # the parts committed before, and the files this epoch read
            inputs[f"stream:{op}"] = {"path": f"stream {self.streams[op].format} of {op}",
                                      "parts": [sorted(p["files"].values()) for p in state["parts"]
                                                if p["name"] != f"e{number:010d}"],
                                      "new": [[f["path"], f.get("size"), f.get("mtime_ns")] for f in state["files"]
                                              if f["epoch"] == number],
                                      "rows": state["rows"]}
        opts = attrs.evolve(self.loop_snapshots, checkpoint=folder, resume=os.path.isdir(folder))
        try:
            run.configure_snapshots(opts, file_sources(self.module), inputs)
        except SnapshotRefused as why:  # taken over other input (a file changed before the replay): not used
            self.progress.trace(f"epoch {number}: its loops start from round 0 ({why})")
            shutil.rmtree(folder, ignore_errors=True)
            run.recovery = None
            run.configure_snapshots(attrs.evolve(opts, resume=False), file_sources(self.module), inputs)
        if run.recovery is not None:
            entry["resumed_from"] = run.report.get("resumed_from")

    def _absorb(self, run: RunContext, batch: DataFrame, op: str, s: Stream, number: int, before: Optional[dict],
                entry: dict) -> tuple[dict, Optional[dict]]:
        """Stream `op`'s new records of this epoch, written to its state as a part; its state after the epoch
        and that part (None when the epoch brought no record; the part's folder stays until the epoch commits,
        also when the state was compacted)."""
        state = {"parts": list(before["parts"]) if before else [], "rows": before["rows"] if before else 0,
                 "files": list(before["files"]) if before else []}
        mine = batch.where(F.col("source") == op)
        if s.format == "rate":
            new = mine.select(F.col("ts").alias("timestamp"), F.col("value"))
            files = []
        else:
            listed = sorted({(r["path"], r["mtime"], r["length"]) for r in
                             mine.select("path", "mtime", "length").collect()})  # (a file listed twice: once)
            self._check_no_empty_file(run, op, s)
            files = [{"path": p, "mtime": str(m), "length": int(n), "epoch": number, **(_stat(p) or {})}
                     for p, m, n in listed]
            opts = s.options_in(self.params)
            fmt = opts.pop("format")
            opts.pop("max_files_per_epoch", None)
            new = run.read_files(op, fmt, [_readable(p) for p, _, _ in listed], s.schema, opts) if listed else None
        if new is not None:
            from pyspark.sql import Observation

            obs = Observation(f"stream:{op}")
            with run.acting(run.reading(op)):
                part = self.store.write_part(new.observe(obs, F.count(F.lit(1)).alias("n")), op, f"e{number:010d}")
            part["rows"] = int(obs.get.get("n") or 0)
            if part["rows"]:
                state["parts"].append(part)
                state["rows"] += part["rows"]
            entry["input_rows"] += part["rows"]
        state["files"] += files
        entry["files"] += len(files)
        if len(state["parts"]) > COMPACT_PARTS:
            state["parts"] = [self._compact(run, op, s, state["parts"], number)]
        return state, (part if new is not None and part["rows"] else None)

    def _compact(self, run: RunContext, op: str, s: Stream, parts: list, number: int) -> dict:
        """Rewrite a stream's parts as one (the state's files stay few however many epochs ran)."""
        df = self.store.frame(self.spark, op, s.schema, parts)
        part = self.store.write_part(df, op, f"c{number:010d}")
        part["rows"] = sum(p["rows"] for p in parts)
        return part

    def _check_no_empty_file(self, run: RunContext, op: str, s: Stream) -> None:
        """An empty file in a stream's folder fails the epoch (E0512): Spark's file source marks it as seen but
        gives no row for it, so rows written into it later would never be read."""
        folder = local_path(resolve(self.base_dir, value_of(s.path, self.params)))
        if folder is None or not os.path.isdir(folder):
            return
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not name.startswith((".", "_")) and os.path.isfile(path) and os.path.getsize(path) == 0:
                raise RuntimeFailure(
                    f"{run.describe(op)}: the file {shown_path(path)} is empty", code="E0512", at=run.where(op),
                    label="read here",
                    notes=("a stream reads each file once, when it appears; Spark passes over an empty file, and "
                           "what is written into it later would never be read",),
                    hint="write files elsewhere and move them into the folder complete (one rename); remove the "
                         "empty file, then run again")

    def _check_unchanged(self, run: RunContext, sources: dict, number: int) -> None:
        """Every file read in an earlier epoch is still there as it was read: the input so far is what the
        state holds (a file changed or removed after it was read would make it something else)."""
        for op, state in sources.items():
            for f in state["files"]:
                if f["epoch"] == number:
                    continue
                now = _stat(f["path"])
                if now is None:
                    continue  # on another file system
                if not now:
                    problem = "was removed"
                elif now == {k: f.get(k) for k in now}:
                    continue
                elif now["size"] != f.get("size", f["length"]):
                    problem = f"changed ({f.get('size', f['length']):,} bytes when read, {now['size']:,} now)"
                else:
                    problem = "changed (its modification time is not the one it had when read)"
                shown = shown_path(_readable(f["path"]))
                raise RuntimeFailure(
                    f"{run.describe(op)}: the file {shown} {problem} after epoch {f['epoch']} read it",
                    code="E0511", at=run.where(op), label="read here",
                    notes=("the sinks and the stream's state hold its rows as they were read; a stream's input "
                           "only grows",),
                    hint="add new data as new files; to take the change in, run with --full-refresh (it recomputes "
                         "from the files as they are now)")

    def _epoch_done(self, run: RunContext, entry: dict, sources: dict, fixpoints: dict, started: float) -> None:
        loops: dict = {}
        for r in run.report["rounds"]:
            lp = loops.setdefault(r["scope"], {"scope": r["scope"], "rounds": 0, "records": 0, "fed_back": 0,
                                               "first_round": r["round"]})
            lp["rounds"] += 1
            # the records each operator of the loop output in the round (not the states' sizes, also counted)
            lp["records"] += sum(int(v or 0) for k, v in r["counts"].items()
                                 if k in run.operators and run.operators[k].scope == r["scope"])
            lp["fed_back"] += sum(int(v or 0) for v in r["in_flight"].values())
        for scope, decision in entry.pop("strategies", {}).items():  # (a loop that ran no round is listed too)
            loops.setdefault(scope, {"scope": scope, "rounds": 0, "records": 0, "fed_back": 0}).update(decision)
        for scope, lp in loops.items():
            lp["activations"] = run.report["loops"].get(scope, {}).get("activations", 0)
            if "partitions" in run.report["loops"].get(scope, {}):  # an outermost loop's (runtime/parallelism.py)
                lp["partitions"] = run.report["loops"][scope]["partitions"]["partitions"]
                lp["partitions_why"] = run.report["loops"][scope]["partitions"]["why"]
            lp.setdefault("strategy", "recomputed")
            lp.setdefault("why", "it runs inside another loop's rounds")
            kept = fixpoints.get(scope)
            if kept is not None:  # the states it left for the next epoch, and the epoch the checkpoint's are of
                lp["state_rows"] = self.loops.rows_held(scope, kept)
                lp["state_epoch"] = kept["epoch"]
        for r in run.report["rounds"]:
            loops[r["scope"]]["seconds"] = round(loops[r["scope"]].get("seconds", 0.0) + r["seconds"], 4)
        entry["loops"] = list(loops.values())
        entry["sinks"] = run.report["sinks"]
        entry["state_rows"] = {op: s["rows"] for op, s in sources.items()}
        entry["state_bytes"] = sum(p.get("bytes", 0) for s in sources.values() for p in s["parts"])
        entry["seconds"] = round(time.perf_counter() - started, 4)
        self.epochs.append(entry)
        self.epochs_run += 1
        del self.epochs[:-REPORTED_EPOCHS]  # (a query that runs for months keeps the last ones)
        if "skipped" not in entry:
            self.stats = {"stats_epoch": entry["epoch"], **{k: v for k, v in run.report.document().items()
                                                            if k in ("loops", "operators", "operator_times")}}
        rounds = "; ".join(f"{lp['scope']} {lp['rounds']} round{'s' if lp['rounds'] != 1 else ''}"
                           + (" (incremental)" if lp["strategy"] == "incremental" else "") for lp in entry["loops"])
        files = f"{entry['files']} file{'s' if entry['files'] != 1 else ''}, " if entry["files"] else ""
        rows = entry["input_rows"]
        self.progress.trace(f"epoch {entry['epoch']}: {files}{rows:,} new row{'s' if rows != 1 else ''} "
                            f"({sum(entry['state_rows'].values()):,} so far)" + (f"; {rounds}" if rounds else "") +
                            (" (nothing new)" if "skipped" in entry else "") + f"; {entry['seconds']:.2f}s")
        if self.report_path:
            self._spark_durations()  # (the epochs before this one: Spark reports an epoch once it has committed it)
            self.write_report("running")

    # -- the report ----------------------------------------------------------------------------------------

    def write_report(self, status: str, error: Optional[str] = None) -> None:
        doc = {"pipeline": self.module.PIPELINE, "fingerprint": self.module.FINGERPRINT, "streaming": True,
               "trigger": str(self.trigger), "checkpoint": self.store.root,
               "query": str(self.query.id) if self.query is not None else None, "status": status,
               "seconds": round(time.perf_counter() - self.started, 4), "epochs_run": self.epochs_run,
               "epochs": self.epochs,
               **self.stats}  # the last epoch that ran the pipeline, as a batch report has them (`graph --stats`)
        if self.flushed is not None:
            doc["states_kept"] = self.flushed
        if error:
            doc["error"] = error
        tmp = f"{self.report_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, default=str)
        os.replace(tmp, self.report_path)

    def stop_message(self) -> Optional[str]:
        if not self.stopped_by:
            return None
        last = self.manifest["epoch"] if self.manifest is not None else None
        return (f"stopped ({self.stopped_by})" + (f" after epoch {last}" if last is not None else "") +
                "; a restart with the same --checkpoint continues from there")


def listed_parts(manifest: dict):
    """(part folder, part) of every Parquet part an epoch's manifest lists: the streams' input so far and the
    states of its incremental loops (each of the epoch that wrote them: this one or an earlier one)."""
    for op, source in manifest["sources"].items():
        for part in source["parts"]:
            yield op, part
    for scope, kept in manifest.get("loops", {}).items():
        for op, doc in kept["states"].items():
            yield part_folder(scope, op), doc["part"]


def _stat(path: str) -> Optional[dict]:
    """A local file's size and modification time (ns) as this process sees it (what `_check_unchanged`
    compares); {} when it is missing, None when it is on another file system."""
    local = local_path(_readable(path))
    if local is None:
        return None
    try:
        st = os.stat(local)
    except FileNotFoundError:
        return {}
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _readable(path: str) -> str:
    """A file as Spark's listing names it (a URI, `file:/x/a%20b.csv`), as a reader takes it: a local one as a
    plain path."""
    local = local_path(path)
    return urllib.parse.unquote(local) if local is not None else path


def restarted(checkpoint: str) -> bool:
    """The streaming query of checkpoint `checkpoint` ran before (its identity is there): the targets of its
    sinks may hold its epochs (an `error_if_exists` sink is checked when a query first starts)."""
    return os.path.exists(os.path.join(local_path(checkpoint) or checkpoint, IDENTITY))

