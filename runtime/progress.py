"""Progress while a pipeline runs, and the summary at the end (rich, on stderr)."""
from __future__ import annotations

import sys
import time
from typing import Optional

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text


class Progress:
    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled
        # Not a terminal (a log file, a pipe, a test): never break a line, so messages stay greppable.
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())
        self.live: Live | None = None
        self.stack: list[tuple[str, int, float]] = []  # (scope, activation, started)
        self.loops: dict[str, dict] = {}
        self.sinks: list[tuple[str, str, Optional[int]]] = []
        self.started = time.perf_counter()
        self.last_line = 0.0
        self.snapshots = 0

    def _line(self, spec, record) -> Text:
        path = " › ".join(f"{s}#{a}" for s, a, _ in self.stack)
        flight = sum(record.in_flight.values())
        elapsed = time.perf_counter() - self.started
        about = "~" if flight and record.deferred else ""  # (an estimate: the next round counts them)
        return Text(f"⟳ {path}  round {record.round}  in flight {about}{flight:,}  elapsed {elapsed:.1f}s")

    def loop_started(self, spec, activation: int) -> None:
        self.stack.append((spec.scope, activation, time.perf_counter()))
        entry = self.loops.setdefault(spec.scope, {"depth": len(self.stack), "activations": 0, "rounds": 0,
                                                   "emitted": 0, "seconds": 0.0, "kind": spec.kind})
        entry["activations"] += 1
        if self.enabled and self.live is None and self.console.is_terminal:
            self.live = Live(Text(""), console=self.console, transient=True, refresh_per_second=8)
            self.live.start()

    def round_finished(self, spec, activation: int, record) -> None:
        self.loops[spec.scope]["rounds"] += 1
        if not self.enabled:
            return
        if self.live is not None:
            self.live.update(self._line(spec, record))
        elif time.perf_counter() - self.last_line > 5:  # no terminal: a line every few seconds
            self.last_line = time.perf_counter()
            self.console.print(self._line(spec, record))

    def loop_finished(self, spec, activation: int) -> None:
        scope, _, started = self.stack.pop()
        self.loops[scope]["seconds"] += time.perf_counter() - started
        if not self.stack and self.live is not None:
            self.live.stop()
            self.live = None

    def emitted(self, scope: str, records: int) -> None:
        if scope in self.loops:
            self.loops[scope]["emitted"] += records

    def sink_written(self, fmt: str, target: str, records: Optional[int] = None) -> None:
        self.sinks.append((fmt, target, records))

    def snapshot(self, seq: int, stack: list, size: int, seconds: float) -> None:
        self.snapshots += 1
        if self.enabled:
            where = " > ".join(f"{lv['scope']} r{lv['round']}" for lv in stack)
            self.trace(f"snapshot {seq}: {where} ({size / 1024:.1f} KiB, {seconds:.2f}s)")

    def trace(self, message: str) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            self.live.console.print(message, markup=False)
        else:
            self.console.print(message, markup=False)

    def summary(self, pipeline: str) -> None:
        if not self.enabled:
            return
        if self.loops:
            table = Table(title=f"pipeline {pipeline}", title_justify="left")
            for col in ("loop", "kind", "depth", "activations", "rounds", "rounds/activation", "time"):
                table.add_column(col, justify="right" if col not in ("loop", "kind") else "left")
            for scope, e in self.loops.items():
                per = e["rounds"] / max(e["activations"], 1)
                table.add_row(scope, e["kind"], str(e["depth"]), str(e["activations"]), str(e["rounds"]),
                              f"{per:.1f}", f"{e['seconds']:.2f}s")
            self.console.print(table)
        for fmt, target, records in self.sinks:
            counted = "" if records is None else f" ({records:,} record{'s' if records != 1 else ''})"
            self.console.print(f"wrote {fmt} → {target}{counted}")
        self.console.print(f"done in {time.perf_counter() - self.started:.1f}s")
