"""Loop-aware snapshots and exact recovery (docs/snapshots.md, docs/language.md#execution-and-guarantees;
FLINK-3257, FLIP-76, FLINK-4120).

A snapshot is taken at a round boundary of a loop and records the whole scope
stack: for every enclosing loop activation its state at the start of its
current round, and for the loop that just finished a round its state for the
next round. A level's state is the records in flight on its feedback edges
(the variables of the next round), the state of every `reduce`/`distinct`, and
the loop outputs produced so far. Completed pipeline-level loops contribute
their outputs; committed sinks are logged beside the snapshots.

Layout of `<checkpoint dir>`::

    snap-000012/data/_f=<k>/part-*.parquet   every frame of the snapshot, one Parquet write
    snap-000012/manifest.json                 written last, by atomic rename: the snapshot exists
    sinks.json                                 sinks committed by the current run

In `recompute` mode (FLINK-4120) a snapshot holds positions only; recovery
recomputes the loops from their null-state point and skips committed sinks.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime.jobs import set_job_group
from scopeflow.runtime.loop import Activation
from scopeflow.runtime.state import DistinctState, ReduceState

FORMAT = 1


class SnapshotRefused(Exception):
    """A snapshot exists but must not be used (exit code 5)."""


class Uncommitted(ValueError):
    """A snapshot directory whose manifest was never committed: it does not exist."""


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(root: str) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names if not n.startswith(".") and not n.endswith(".crc")]
    return sorted(out)


def fingerprint_path(path: str) -> dict:
    """Content fingerprint of an input file or directory."""
    if not os.path.exists(path):
        return {"path": path, "missing": True}
    files = [path] if os.path.isfile(path) else _files(path)
    h = hashlib.sha256()
    size = 0
    for f in files:
        size += os.path.getsize(f)
        h.update(os.path.relpath(f, path).encode())
        h.update(sha256_file(f).encode())
    return {"path": path, "size": size, "sha256": h.hexdigest()}


def atomic_json(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def read_sink_log(root: str, fingerprint: str) -> Optional[dict]:
    """The sink log (`sinks.json`) in checkpoint folder `root` of a run of the plan `fingerprint`, or None: the
    interrupted run's token (`token`) and the keys of the sinks it committed (`sinks`)."""
    try:
        with open(os.path.join(_local(root), "sinks.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("fingerprint") == fingerprint else None


class SnapshotStore:
    def __init__(self, run, root: str, every: int, mode: str, keep: int, async_writes: bool, plan: dict,
                 sources: dict, faults: Optional[str] = None):
        self.run = run
        self.root = _local(root)
        self.every = every
        self.mode = mode  # persist | recompute
        self.keep = max(1, keep)
        self.async_writes = async_writes
        self.plan = plan  # node id -> signature
        self.sources = sources  # node id -> fingerprint
        self.faults = faults or os.environ.get("SCOPEFLOW_FAULT", "")
        self.pinned: dict[int, int] = {}
        self.lock = threading.Lock()
        self.writer: Optional[threading.Thread] = None
        self.writer_error: Optional[BaseException] = None
        self.sinks_done: list = []
        self.token = uuid.uuid4().hex  # this run's, kept by a resumed run: it names the sinks' append commits
        self.completed: dict = {}  # pipeline-level loop scope -> {emit name: frame}
        self.seq = 0
        os.makedirs(self.root, exist_ok=True)

    # ---- listing and validation --------------------------------------------------------

    def snapshot_dirs(self) -> list[str]:
        if not os.path.isdir(self.root):
            return []
        return sorted(os.path.join(self.root, d) for d in os.listdir(self.root) if d.startswith("snap-")
                      and not d.endswith(".tmp"))

    def committed(self) -> list[str]:
        """The snapshots whose manifest is committed (a snapshot exists only then)."""
        return [d for d in self.snapshot_dirs() if os.path.exists(os.path.join(d, "manifest.json"))]

    def validate(self, snap: str) -> dict:
        """The manifest of a complete, intact snapshot; ValueError saying what is wrong otherwise."""
        manifest_path = os.path.join(snap, "manifest.json")
        if not os.path.exists(manifest_path):
            raise Uncommitted("no committed manifest (the snapshot was interrupted)")
        try:
            with open(manifest_path, encoding="utf-8") as fh:
                manifest = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ValueError(f"manifest unreadable: {exc}") from None
        if manifest.get("format") != FORMAT:
            raise ValueError(f"unknown snapshot format {manifest.get('format')!r}")
        for rel, meta in manifest.get("files", {}).items():
            path = os.path.join(snap, rel)
            if not os.path.exists(path):
                raise ValueError(f"file missing: {rel}")
            if os.path.getsize(path) != meta["size"] or sha256_file(path) != meta["sha256"]:
                raise ValueError(f"checksum mismatch: {rel} (truncated or corrupt)")
        return manifest

    def latest(self, say) -> Optional[tuple[str, dict]]:
        """The newest usable snapshot. Corrupt ones are skipped with a message; refusals raise."""
        problems = []
        for snap in reversed(self.snapshot_dirs()):
            try:
                manifest = self.validate(snap)
            except ValueError as exc:
                if not isinstance(exc, Uncommitted):  # an uncommitted snapshot simply does not exist
                    problems.append(f"{os.path.basename(snap)}: {exc}")
                say(f"snapshot {os.path.basename(snap)} is not usable ({exc}); trying the previous one")
                continue
            self.check_compatible(manifest, snap)
            return snap, manifest
        if problems:
            raise SnapshotRefused("no usable snapshot in " + self.root + ":\n  " + "\n  ".join(problems))
        return None

    def check_compatible(self, manifest: dict, snap: str) -> None:
        if manifest.get("pipeline") != self.run.pipeline:
            raise SnapshotRefused(f"{snap} was taken by pipeline `{manifest.get('pipeline')}`, "
                                  f"not `{self.run.pipeline}`")
        if manifest.get("fingerprint") != self.run.fingerprint:
            raise SnapshotRefused(f"the plan changed since {os.path.basename(snap)} was taken:\n  "
                                  + "\n  ".join(plan_diff(manifest.get("plan", {}), self.plan) or
                                                ["(loop options or wiring changed)"]))
        changed = [f"`{node}` ({now.get('path')})" for node, now in self.sources.items()
                   if manifest.get("sources", {}).get(node) != now]
        if changed:
            raise SnapshotRefused(f"input changed since {os.path.basename(snap)} was taken: {', '.join(changed)}")

    # ---- writing ---------------------------------------------------------------------------

    def due(self, spec, round_no: int) -> bool:
        every = self.run.resolve(spec.snapshot_every) if spec.snapshot_every else self.every
        return every > 0 and (round_no + 1) % every == 0

    def take(self, stack: list) -> None:
        """Snapshot the scope stack: the activations of the enclosing loops at the start of their current
        round, the innermost one (which just ended a round) at the start of its next."""
        self.wait()
        self.seq = max([self.seq] + [int(os.path.basename(d)[5:]) for d in self.snapshot_dirs()]) + 1
        frames: list[DataFrame] = []
        doc_stack = [self._level_doc(act, frames) for act in stack]
        completed = {scope: {str(name): self._frame(df, frames) for name, df in outs.items()}
                     for scope, outs in self.completed.items()}
        manifest = {
            "format": FORMAT, "pipeline": self.run.pipeline, "fingerprint": self.run.fingerprint,
            "plan": self.plan, "sources": self.sources, "seq": self.seq, "mode": self.mode,
            "created": time.time(), "stack": doc_stack, "completed": completed,
            "activations": dict(self.run.activations), "sinks": list(self.sinks_done),
        }
        pins = [df for df in frames]
        self._pin(pins)
        if self.async_writes:
            self.writer = threading.Thread(target=self._write_guarded, args=(frames, manifest, pins), daemon=True)
            self.writer.start()
        else:
            self._write(frames, manifest, pins)

    def _level_doc(self, lv, frames: list) -> dict:
        doc = {"scope": lv.scope, "activation": lv.number, "round": lv.round, "attempt": lv.attempt,
               "received": lv.received, "recompute": self.mode == "recompute" or lv.recompute}
        if doc["recompute"]:
            return doc
        doc["variables"] = {v: self._frame(df, frames) for v, df in lv.variables.items()}
        doc["combined"] = dict(lv.combined)  # these variables hold their reader's per-round result (loop.combine)
        doc["states"] = {op: self._state_doc(st, frames) for op, st in lv.states.items() if st.main is not None}
        doc["emitted"] = {node: self._frame(_union(pieces), frames) for node, pieces in lv.emitted.items() if pieces}
        doc["last"] = {node: self._frame(df, frames) for node, df in lv.last.items()}
        return doc

    def _state_doc(self, st, frames) -> dict:
        kind = "reduce" if hasattr(st, "aggs") else "distinct"
        return {"kind": kind, "keys": st.keys, "columns": st.columns,
                "aggs": [list(a) for a in getattr(st, "aggs", [])],
                "main": self._frame(st.full(), frames), "main_rows": st.rows}

    @staticmethod
    def _frame(df: DataFrame, frames: list) -> dict:
        frames.append(df)
        return {"frame": len(frames) - 1, "ddl": df.schema.simpleString()}

    def _write_guarded(self, frames, manifest, pins):
        try:
            self._write(frames, manifest, pins)
        except BaseException as exc:  # surfaced by the next wait()
            self.writer_error = exc

    def _write(self, frames: list, manifest: dict, pins: list) -> None:
        started = time.perf_counter()
        snap = os.path.join(self.root, f"snap-{self.seq:06d}")
        try:
            if os.path.exists(snap):
                shutil.rmtree(snap)
            os.makedirs(snap)
            if frames:
                set_job_group(self.run.spark, f"scopeflow:{self.run.run_id}:snapshot", "snapshot")
                tagged = [df.select(F.lit(i).alias("_f"), F.struct(*df.columns).alias(f"s{i}")) for i, df in
                          enumerate(frames)]
                wide = _union_wide(tagged)
                wide.write.mode("overwrite").partitionBy("_f").parquet(os.path.join(snap, "data"))
            self._fault("snapshot-write")
            manifest["files"] = {os.path.relpath(f, snap): {"size": os.path.getsize(f), "sha256": sha256_file(f)}
                                 for f in _files(snap)}
            manifest["seconds"] = round(time.perf_counter() - started, 4)
            atomic_json(os.path.join(snap, "manifest.json"), manifest)
        finally:
            self._unpin(pins)
        size = sum(m["size"] for m in manifest["files"].values())
        self.run.snapshot_written(manifest["seq"], manifest["stack"], size, time.perf_counter() - started)
        self.prune()

    def prune(self) -> None:
        complete = self.committed()
        for old in complete[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for d in self.snapshot_dirs():  # interrupted writes older than the newest complete snapshot
            if complete and d < complete[-1] and not os.path.exists(os.path.join(d, "manifest.json")):
                shutil.rmtree(d, ignore_errors=True)

    def wait(self) -> None:
        if self.writer is not None:
            self.writer.join()
            self.writer = None
        if self.writer_error is not None:
            err, self.writer_error = self.writer_error, None
            raise err

    def _pin(self, frames):
        with self.lock:
            for df in frames:
                self.pinned[id(df)] = self.pinned.get(id(df), 0) + 1

    def _unpin(self, frames):
        with self.lock:
            for df in frames:
                n = self.pinned.get(id(df), 0) - 1
                if n <= 0:
                    self.pinned.pop(id(df), None)
                else:
                    self.pinned[id(df)] = n

    def is_pinned(self, df) -> bool:
        with self.lock:
            return id(df) in self.pinned

    def _fault(self, point: str) -> None:
        """Fault injection for the recovery tests: SCOPEFLOW_FAULT=<point> kills this process there."""
        if self.faults == point:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)

    # ---- sinks -------------------------------------------------------------------------------

    def sink_log_path(self) -> str:
        return os.path.join(self.root, "sinks.json")

    def _sink_log(self) -> Optional[dict]:
        """The sink log of a run of this plan, or None."""
        return read_sink_log(self.root, self.run.fingerprint)

    def load_sink_log(self) -> list:
        """The sinks the interrupted run committed (and its token: a resumed run is the same run)."""
        doc = self._sink_log() or {}
        self.token = doc.get("token", self.token)
        return doc.get("sinks", [])

    def resume_sinks(self) -> bool:
        """Resuming without a snapshot: keep the interrupted run's sink log and token when it ran this plan over
        these inputs (its committed sinks are skipped, its appends not made twice)."""
        doc = self._sink_log()
        if doc is None or doc.get("sources") != self.sources:
            return False
        for d in self.snapshot_dirs():  # uncommitted ones: they do not exist
            shutil.rmtree(d, ignore_errors=True)
        self.token = doc.get("token", self.token)
        self.sinks_done = list(doc.get("sinks", []))
        return True

    def sink_committed(self, key: str) -> None:
        self.sinks_done.append(key)
        self._write_sink_log()

    def _write_sink_log(self) -> None:
        atomic_json(self.sink_log_path(), {"fingerprint": self.run.fingerprint, "sources": self.sources,
                                            "token": self.token, "sinks": self.sinks_done})

    def start_fresh(self) -> None:
        for d in self.snapshot_dirs():
            shutil.rmtree(d, ignore_errors=True)
        self._write_sink_log()  # the run's token, before any sink commits

    def finished(self) -> None:
        """The run completed: a later --resume has nothing to continue."""
        self.wait()
        atomic_json(os.path.join(self.root, "complete.json"), {"fingerprint": self.run.fingerprint,
                                                                "time": time.time()})
        for d in self.snapshot_dirs():
            shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(self.sink_log_path()):
            os.remove(self.sink_log_path())


class Recovery:
    """Hands the activations of a snapshot's scope stack to the loops as they start again."""

    def __init__(self, run, snap: str, manifest: dict):
        self.run = run
        self.snap = snap
        self.manifest = manifest
        self.stack = list(manifest["stack"])
        self.depth = 0  # levels already handed out
        self._data: Optional[DataFrame] = None
        self.completed = manifest.get("completed", {})

    def data(self) -> DataFrame:
        if self._data is None:
            self._data = self.run.spark.read.parquet(os.path.join(self.snap, "data"))
        return self._data

    def frame(self, ref: Optional[dict]) -> Optional[DataFrame]:
        if ref is None:
            return None
        i = ref["frame"]
        return self.data().where(F.col("_f") == i).select(f"s{i}.*")

    def completed_outputs(self, scope: str) -> Optional[dict]:
        if self.manifest.get("mode") == "recompute" or scope not in self.completed:
            return None
        return {(None if name == "None" else name): self.frame(ref) for name, ref in self.completed[scope].items()}

    def take(self, scope: str, active_depth: int) -> Optional[Activation]:
        """The activation to continue when the next level of the stack is this loop, else None. A level
        snapshotted with positions only (`recompute`) gives its activation number and no state: the loop
        runs again from its entry streams, and the deeper levels belong to that rerun."""
        if self.depth >= len(self.stack) or active_depth != self.depth:
            return None
        lv = self.stack[self.depth]
        if lv["scope"] != scope:
            return None
        self.depth += 1
        if lv.get("recompute"):
            self.depth = len(self.stack)
            return Activation(scope, lv["activation"])
        return Activation(
            scope, lv["activation"], round=lv["round"], attempt=lv.get("attempt", 0), resumed=True,
            variables={v: self.frame(r) for v, r in lv["variables"].items()},
            received=lv.get("received", {}),
            combined=lv.get("combined", {}),
            states={op: self.state(op, doc) for op, doc in lv["states"].items()},
            emitted={node: [self.frame(r)] for node, r in lv["emitted"].items()},
            last={node: self.frame(r) for node, r in lv["last"].items()},
        )

    def state(self, op: str, doc: dict):
        """A reduce/distinct state rebuilt from a snapshot, re-partitioned by its keys in the partitions of the
        activation it resumes (runtime/parallelism.py)."""
        if doc["kind"] == "reduce":
            state = ReduceState(op, doc["keys"], [tuple(a) for a in doc["aggs"]])
        else:
            state = DistinctState(op, doc["columns"])
        state.restore(self.frame(doc["main"]).repartition(self.run.loop_partitions, *state.keys), doc["main_rows"])
        return state


def plan_diff(old: dict, new: dict) -> list[str]:
    out = []
    for node in sorted(set(old) | set(new)):
        if node not in new:
            out.append(f"removed: {node} {old[node]}")
        elif node not in old:
            out.append(f"added: {node} {new[node]}")
        elif old[node] != new[node]:
            out.append(f"changed: {node} {old[node]}  ->  {new[node]}")
    return out


def _union(frames: list) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _union_wide(tagged: list) -> DataFrame:
    """Union frames of different schemas: each keeps its struct column, the others are null."""
    cols = [f"s{i}" for i in range(len(tagged))]
    types = {f"s{i}": t.schema[f"s{i}"].dataType for i, t in enumerate(tagged)}
    aligned = []
    for i, t in enumerate(tagged):
        aligned.append(t.select("_f", *[F.col(c) if c == f"s{i}" else F.lit(None).cast(types[c]).alias(c)
                                        for c in cols]))
    return _union(aligned)
