"""The file sinks and their modes (docs/language.md "Sink modes"): one table for the checker, which checks a
sink's options (compiler/sources.py), and the runtime, which writes (runtime/targets.py, runtime/preflight.py).
"""
from __future__ import annotations

FILE_SINKS = ("csv", "json", "parquet")  # the sinks that write a folder of files (a path)
SINK_MODES = ("error_if_exists", "overwrite", "append")  # `mode = ...` (without it: replace scopeflow's files only)
