"""Atomic file sinks: write to a staging folder beside the target, mark it, then commit it by rename.

A finished run never leaves partial output; what a failed or killed one leaves depends on the mode (below, and
docs/language.md "Sinks"). What a sink may replace is decided by `targets.check` (its mode, and the
`_SCOPEFLOW` markers of what scopeflow wrote).

- **Replace** (no `mode`, `overwrite`, `error_if_exists`, and the first `append` into a new folder): the
  staging folder, marker included, is swapped in by two renames (old -> backup, staging -> target); a crash
  between them leaves the backup, which the next write restores before anything else.
- **Append** into an existing folder: the staging folder's data files are moved into the target one by one
  (their names are unique: Spark puts a fresh id in each), then its marker `_SCOPEFLOW-<commit>`: that last
  rename is the commit. A crash before it leaves the staging folder with its marker; the next write into the
  target takes the files already moved back out (`recover`), so a run's rows are in the target entirely or
  not at all once a later run has looked. The commit id is the same when a run is resumed (`--resume`), so a
  resumed run sees a commit that happened before the crash and does not append again.
- **One writer** per target at a time: the write holds `<target>.__lock` throughout (`targets.lock`), so the
  staging folders `recover` deletes are never another live run's.

Paths may be local or any Hadoop URI (file://, hdfs://, s3a://...): `filesystems.files_for`.
"""
from __future__ import annotations

import os
import re
import signal
import uuid
from collections import Counter
from typing import Optional

from pyspark.sql import DataFrame

from scopeflow.runtime import targets
from scopeflow.runtime.errors import Position, RuntimeFailure
from scopeflow.runtime.filesystems import Files, files_for
from scopeflow.runtime.targets import BACKUP, MARKER, STAGING
from scopeflow.stdlib.paths import hidden, is_local, local_path

_SPARK_PART = re.compile(r"^(part-\d+)-.+?-c\d+(\..+)$")  # part-00000-<write id>-c000.snappy.parquet


def recover(fs: Files, target: str) -> None:
    """Put a target back in order after a crash: restore it from its backup (a crash between the two renames
    of a swap), take out the files of an append that did not commit, remove staging folders."""
    backup = f"{target}{BACKUP}"
    if not fs.exists(target) and fs.exists(backup):
        fs.rename(backup, target)
    elif fs.exists(backup):
        fs.delete(backup)
    pending = targets.pending_appends(fs, target)
    for staging, marker in pending:
        listed = targets.listed(fs, fs.join(staging, marker))
        for f in sorted(listed):
            if not hidden(f) and not fs.exists(fs.join(staging, f)) and fs.exists(fs.join(target, f)):
                fs.delete(fs.join(target, f))  # moved in before the crash
    for stale in fs.glob(f"{target}{STAGING}*"):  # interrupted writes
        fs.delete(stale)


def write_atomically(spark, df: DataFrame, fmt: str, target: str, options: dict, commit: str = "",
                     pipeline: str = "", at: Optional[Position] = None, extra: Optional[dict] = None) -> bool:
    """Write `df` to `target` as the sink's options say. False: commit `commit` is already in the target (a
    resumed run whose sink committed before the kill), nothing written."""
    if fmt == "table":
        df.write.mode("overwrite").saveAsTable(target)  # the catalog replaces the table (as atomically as it can)
        return True
    fs = files_for(spark, target)
    # (`out/x/` is `out/x`: the staging folder goes beside the target, never inside it)
    target = os.path.normpath(local_path(target)) if is_local(target) else target.rstrip("/")
    problem = targets.lock(fs, target, commit)  # one writer at a time: `recover` deletes staging folders
    if problem is not None:
        raise RuntimeFailure(problem.message, problem.hint, problem.code, at, "written here", problem.notes)
    try:
        return _write_locked(fs, df, fmt, target, options, commit, pipeline, at, extra or {})
    finally:
        targets.unlock(fs, target)


def _write_locked(fs: Files, df: DataFrame, fmt: str, target: str, options: dict, commit: str, pipeline: str,
                  at: Optional[Position], extra: dict) -> bool:
    recover(fs, target)
    mode = options.get("mode")
    if targets.committed(fs, target, commit):
        return False  # a resumed run: this sink committed before the kill (and the run was not told)
    problem = targets.check(fs, target, mode)
    if problem is not None:
        raise RuntimeFailure(problem.message, problem.hint, problem.code, at, "written here", problem.notes)
    marker = f"{MARKER}-{commit or uuid.uuid4().hex[:16]}" if mode == "append" else MARKER
    staging = f"{target}{STAGING}{uuid.uuid4().hex[:12]}"
    _write(fs, df, fmt, staging, options)
    files = fs.list_files(staging)
    if options.get("single_file"):
        files = _one_file(fs, staging, files)
    fs.write_text(fs.join(staging, marker), targets.marker_doc(pipeline, fmt, mode, commit, files, extra))
    if mode == "append" and fs.exists(target):
        _move_in(fs, staging, target, files, marker)
    else:
        _swap(fs, staging, target)
    fault("sink-committed")
    return True


def _write(fs: Files, df: DataFrame, fmt: str, staging: str, options: dict) -> None:
    if options.get("single_file"):
        df = df.coalesce(1)  # one task writes the file (a sorted stream stays in order)
    writer = df.write.mode("overwrite")
    if fmt == "csv":
        writer = writer.option("header", str(options.get("header", True)).lower())
        if "sep" in options:
            writer = writer.option("sep", options["sep"])
    if options.get("partition_by"):
        writer = writer.partitionBy(*options["partition_by"])
    try:
        getattr(writer, fmt)(staging)
    except Exception:
        fs.delete(staging)
        raise


def _one_file(fs: Files, staging: str, files: list) -> list:
    """`single_file`: the one data file Spark wrote, renamed part-00000.<ext> (none for an empty stream)."""
    data = [f for f in files if not hidden(f)]
    if len(data) > 1:
        raise RuntimeFailure(f"single_file: Spark wrote {len(data)} files to {staging}, expected one",
                             hint="this is a scopeflow bug: please report it")
    for f in data:
        m = _SPARK_PART.match(os.path.basename(f))
        if m:
            fs.rename(fs.join(staging, f), fs.join(staging, f"{m.group(1)}{m.group(2)}"))
    return fs.list_files(staging)


def _swap(fs: Files, staging: str, target: str) -> None:
    parent = fs.parent(target)
    if parent and not fs.exists(parent):
        fs.mkdirs(parent)
    backup = f"{target}{BACKUP}"
    if fs.exists(target):
        fs.rename(target, backup)
    fault("sink-commit")
    if not fs.rename(staging, target):
        raise OSError(f"could not move {staging} to {target}")
    if fs.exists(backup):
        fs.delete(backup)


def _move_in(fs: Files, staging: str, target: str, files: list, marker: str) -> None:
    """Move the data files of `staging` into `target`, then the marker (the commit), then drop `staging`."""
    data = [f for f in files if not hidden(f)]
    for i, f in enumerate(data):
        dst = fs.join(target, f)
        if "/" in f or os.sep in f:
            fs.mkdirs(fs.parent(dst))
        if not fs.rename(fs.join(staging, f), dst):
            raise OSError(f"could not move {fs.join(staging, f)} to {dst} (does it exist already?)")
        if i == 0:
            fault("sink-commit")
    if not fs.rename(fs.join(staging, marker), fs.join(target, marker)):
        raise OSError(f"could not commit the append to {target}")
    fs.delete(staging)


_reached: Counter = Counter()


def fault(point: str) -> None:
    """Fault injection for the recovery tests: SCOPEFLOW_FAULT=<point> kills this process the first time it
    gets there, SCOPEFLOW_FAULT=<point>@<n> the n-th time."""
    wanted, _, nth = os.environ.get("SCOPEFLOW_FAULT", "").partition("@")
    if wanted != point:
        return
    _reached[point] += 1
    if _reached[point] == (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
