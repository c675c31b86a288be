"""Ctrl-C during a run: stop cleanly, say so in one line, exit 130.

PySpark's own SIGINT handler cancels Spark's jobs from inside the signal handler, i.e. on the py4j
connection the interrupted call is still reading from: py4j then logs a reentrant-call traceback and
the KeyboardInterrupt unwinds through py4j (about fifty lines). Instead, for the length of a run:

- the first Ctrl-C marks the run interrupted and cancels its Spark jobs (by the run's job tag, so a
  caller's other jobs on a shared session go on) from another thread (a connection of its own); the action that was running fails, a loop stops before its next round and
  a sink before it writes, and the run ends with exit 130. Snapshots already committed stay
  resumable (`--resume`): a snapshot exists only once its manifest is committed.
- a second Ctrl-C aborts at once (exit 130, nothing more is written).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from scopeflow.runtime.deployment import is_connect
from scopeflow.runtime.errors import ExitCode


class Interrupted(Exception):
    """The user pressed Ctrl-C: the run stops at the next round or sink."""


class Interrupts:
    def __init__(self, spark, tag: str = ""):
        self.spark = spark
        self.tag = tag  # the job tag of the run's Spark jobs ("" before a run has one)
        self.count = 0

    @property
    def requested(self) -> bool:
        return self.count > 0

    def check(self) -> None:
        if self.count:
            raise Interrupted()

    def _handler(self, signum, frame) -> None:
        self.count += 1
        if self.count > 1:
            print("aborted (second Ctrl-C)", file=sys.stderr, flush=True)
            os._exit(int(ExitCode.INTERRUPTED))
        threading.Thread(target=self._cancel, name="scopeflow-interrupt", daemon=True).start()

    def _cancel(self) -> None:
        try:
            if is_connect(self.spark):
                self.spark.interruptTag(self.tag)
            else:
                self.spark.sparkContext.cancelJobsWithTag(self.tag)
        except Exception:  # the JVM may be going away already: the flag alone stops the run
            pass


def _tagging(spark, tag: str, on: bool) -> None:
    """Tag the Spark jobs this thread starts from now on with `tag` (or stop)."""
    if is_connect(spark):
        (spark.addTag if on else spark.removeTag)(tag)
    else:
        sc = spark.sparkContext
        (sc.addJobTag if on else sc.removeJobTag)(tag)


@contextlib.contextmanager
def stop_on_interrupt(spark, tag: str):
    """Within: the run's Spark jobs carry the job tag `tag`, and Ctrl-C cancels them (`Interrupts`);
    outside, the previous handler is back."""
    interrupts = Interrupts(spark, tag)
    _tagging(spark, tag, True)
    try:
        if threading.current_thread() is not threading.main_thread():
            yield interrupts  # signals reach the main thread only
            return
        previous = signal.signal(signal.SIGINT, interrupts._handler)
        try:
            yield interrupts
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        with contextlib.suppress(Exception):  # (a session stopped meanwhile)
            _tagging(spark, tag, False)
