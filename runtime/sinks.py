"""Atomic sinks: write to a staging path, then swap it in by rename.

A failed run leaves the previous output intact, and a finished run never
leaves partial output. Paths may be local or any Hadoop URI (file://, hdfs://,
s3a://...); the rename goes through Hadoop's FileSystem API. The swap is two
renames (old -> backup, staging -> target); a crash between them leaves the
backup, which the next write restores before anything else.
"""
from __future__ import annotations

import os
import signal
import uuid

from pyspark.sql import DataFrame

from scopeflow.runtime.filesystems import filesystem as _fs
from scopeflow.runtime.filesystems import fs_path as _path


def recover(spark, target: str) -> None:
    """Restore a target left without its output by a crash between the two renames."""
    fs, tpath = _fs(spark, target)
    backup = _path(spark, f"{target}.__previous")
    if not fs.exists(tpath) and fs.exists(backup):
        fs.rename(backup, tpath)
    elif fs.exists(backup):
        fs.delete(backup, True)
    for stale in fs.globStatus(_path(spark, f"{target}.__staging-*")) or []:  # an interrupted write
        fs.delete(stale.getPath(), True)


def write_atomically(spark, df: DataFrame, fmt: str, target: str, options: dict) -> None:
    if fmt == "table":
        df.write.mode("overwrite").saveAsTable(target)  # the catalog swaps the table atomically
        return
    recover(spark, target)
    staging = f"{target}.__staging-{uuid.uuid4().hex[:12]}"
    writer = df.write.mode("overwrite")
    if fmt == "csv":
        writer = writer.option("header", str(options.get("header", True)).lower())
        if "sep" in options:
            writer = writer.option("sep", options["sep"])
    try:
        getattr(writer, fmt)(staging)
    except Exception:
        fs, spath = _fs(spark, staging)
        fs.delete(spath, True)
        raise
    fs, tpath = _fs(spark, target)
    parent = tpath.getParent()
    if parent is not None and not fs.exists(parent):
        fs.mkdirs(parent)
    backup = _path(spark, f"{target}.__previous")
    if fs.exists(tpath):
        fs.rename(tpath, backup)
    _fault("sink-commit")
    if not fs.rename(_path(spark, staging), tpath):
        raise OSError(f"could not move {staging} to {target}")
    if fs.exists(backup):
        fs.delete(backup, True)


def _fault(point: str) -> None:
    """Fault injection for the recovery tests: SCOPEFLOW_FAULT=<point> kills this process there."""
    if os.environ.get("SCOPEFLOW_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
