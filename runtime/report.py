"""The run report (`--report run.json`, and `run.report` for Python callers): per round, per operator,
per sink and per snapshot; the termination attempts; the loops' activations and rounds. docs/cli.md
describes the format; `scopeflow graph --stats` draws it."""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

from attrs import define, field

from scopeflow.runtime.counters import operator_times


@define
class RoundRecord:
    round: int
    seconds: float
    in_flight: dict  # variable -> records fed back
    counts: dict  # operator id -> records output this round
    attempt: object  # termination.Attempt
    spark_jobs: int = -1  # Spark jobs the round ran (status tracker); -1: unknown (Spark Connect)
    stored: dict = field(factory=dict)  # variable -> records kept for the next round (fewer when combined)
    jobs: list = field(factory=list)  # when a round ran more Spark jobs than its waves: each job, and why
    plan_size: Optional[int] = None  # nodes in the round's logical plans (tests: constant when lineage is cut)
    states: dict = field(factory=dict)  # reduce/distinct -> how the round folded its delta in (runtime/state.py)
    # the jobs its checkpoints are planned to be stored by (`Checkpoints.waves`): 1 unless on a cluster with
    # local or replicated checkpoints
    waves: int = 1
    ahead: bool = False  # planned while the previous round's Spark job ran (`loop.LoopExecutor.plan_ahead`)
    # how long planning the round took (during the previous job when `ahead`; with the rounds of the nested loops
    # it ran) and its Spark job; not rounded: `planAhead=auto` compares them as measured (tests check it by them)
    plan_seconds: Optional[float] = None
    job_seconds: Optional[float] = None
    # variables whose records the next round's job computed (runtime/loop.py, deferred feedback): their `in_flight`
    # is an estimate until that round's job counts them (`RunReport.late_counts`)
    deferred: tuple = ()


class RunReport:
    def __init__(self, pipeline: str, fingerprint: str, operators: dict):
        self.operators_known = operators  # operator id -> spec.Operator
        self.doc = {"pipeline": pipeline, "fingerprint": fingerprint, "rounds": [], "attempts": [], "loops": {},
                    "operators": {}, "sinks": [], "snapshots": []}
        self.started = time.perf_counter()
        self.observations: list = []  # (operator, pyspark Observation) of pipeline-level operators (--report)
        self.listener_bus = None  # () -> Spark's listener bus (classic sessions), which completes observations
        self.task_ms: dict = {}  # operator -> Spark task milliseconds in loop rounds (--report)
        self._timer: Optional[ThreadPoolExecutor] = None  # reads rounds' plans (`task_ms`) and task counts
        self._timings: list[Future] = []  # walks not yet added to `task_ms`
        self._counts: list[Future] = []  # rounds' task counts not yet in their entries (`count_tasks`)

    def __getitem__(self, key):  # `run.report["rounds"]`: the report as a document
        return self.doc[key]

    def __contains__(self, key) -> bool:
        return key in self.doc

    def get(self, key, default=None):
        return self.doc.get(key, default)

    def _label(self, op: str) -> str:
        """How the report names a pipeline-level operator: its kind and stream name (`union both`, `select`)."""
        known = self.operators_known.get(op)
        if known is None:
            return op
        return f"{known.kind} {known.name}" if known.name else known.kind

    def _loop(self, scope: str) -> dict:
        return self.doc["loops"].setdefault(scope, {"scope": scope, "activations": 0, "rounds": [], "attempts": 0})

    def round_done(self, spec, number: int, record: RoundRecord) -> tuple[dict, dict]:
        """Add a round; return its entries in "rounds" and "attempts" (which `late_counts` may complete)."""
        a = record.attempt
        entry = {"scope": spec.scope, "activation": number, "round": record.round,
                 "seconds": round(record.seconds, 4), "in_flight": dict(record.in_flight),
                 "stored": record.stored, "spark_jobs": record.spark_jobs, "waves": record.waves,
                 "plan_size": record.plan_size, "planned_ahead": record.ahead,
                 "plan_seconds": record.plan_seconds, "job_seconds": record.job_seconds,
                 "counts": record.counts,
                 **({"states": record.states} if record.states else {}),
                 **({"jobs": record.jobs} if record.jobs else {}),
                 **({"deferred": list(record.deferred)} if record.deferred else {})}
        self.doc["rounds"].append(entry)
        attempt = a.to_json()
        self.doc["attempts"].append(attempt)
        loop = self._loop(spec.scope)
        loop["attempts"] += 1
        if a.terminated:
            loop["rounds"].append(record.round + 1)
        operators = self.doc["operators"]
        for op, n in record.counts.items():
            known = self.operators_known.get(op)
            if op in spec.operators:
                total = operators.setdefault(op, {"records": 0, "name": spec.operators[op][1]})
                total["records"] += n
            elif known is not None and known.scope == "pipeline":
                # a pipeline-level input, computed once and cached: its counter is seen again each round
                total = operators.setdefault(op, {"records": 0, "name": self._label(op)})
                total["records"] = max(total["records"], n)
            # else: an enclosing loop's operator, which that loop's own rounds count
        return entry, attempt

    def late_counts(self, spec, entries: tuple, counts: dict, fed: dict) -> None:
        """Complete a round that deferred its feedback (`RoundRecord.deferred`) with what the next round's job
        counted: the records it fed back (`in_flight`, also its attempt's) and the records of the operators of
        the deferred plans, which ran in that job."""
        entry, attempt = entries
        entry["in_flight"].update(fed)
        attempt["in_flight"].update(fed)
        entry["counts"].update(counts)
        for op, n in counts.items():
            if op in spec.operators:
                self.doc["operators"].setdefault(op, {"records": 0, "name": spec.operators[op][1]})["records"] += n
            if op in attempt["operators"]:
                attempt["operators"][op].update(records=n, status="BUSY" if n > 0 else "IDLE")

    def loop_done(self, scope: str, number: int, parallelism=None, checkpoints: Optional[str] = None) -> None:
        """`parallelism`: the partitions an outermost loop's activation ran in (parallelism.Parallelism);
        the report keeps its last activation's. `checkpoints`: how its rounds' checkpoints were made
        (`Checkpoints.describe`)."""
        loop = self._loop(scope)
        loop["activations"] = number
        if checkpoints is not None:
            loop["checkpoints"] = checkpoints
        if parallelism is not None:
            loop["partitions"] = parallelism.to_json()

    def sink_written(self, op: str, fmt: str, target: str, seconds: float, records: Optional[int]) -> None:
        entry = {"node": op, "format": fmt, "path": target, "seconds": round(seconds, 4)}
        if records is not None:
            entry["records"] = records
            self.doc["operators"].setdefault(op, {"records": records, "name": self._label(op)})
        self.doc["sinks"].append(entry)

    def snapshot_written(self, seq: int, where: list, size: int, seconds: float) -> None:
        self.doc["snapshots"].append({"seq": seq, "stack": where, "bytes": size, "seconds": round(seconds, 4)})

    def resumed_from(self, snapshot: str, stack: list) -> None:
        self.doc["resumed_from"] = {"snapshot": snapshot, "stack": stack and [
            {k: lv[k] for k in ("scope", "activation", "round")} for lv in stack]}

    def time_operators(self, frames: list) -> None:
        """(--report) Add the Spark task time per operator in the executed plans of a round's `frames` ((key,
        frame) pairs, `counters.operator_times`) to `task_ms`, on a thread of its own while the run goes on: a
        walk is a few JVM calls a plan (a few a plan node where scopeflow's JVM function for it is missing, ~0.1 s
        a round on a 2-core machine), and they wait on the JVM while the next round's do. The plans' metrics are
        final once the round's job has run; `document` waits for every walk."""
        self._timings.append(self._thread().submit(operator_times, frames))

    def count_tasks(self, entry: dict, count: Callable[[], int]) -> None:
        """(--report) Put a round's task count, `count()`, into its `entry` on the thread that times operators: it
        waits for Spark's listener bus to deliver the round's task ends, then reads a few figures a stage through
        the JVM (6 ms a round of PageRank on a chain, measured, that the next round waited for). `document` waits
        for it (until then `entry` may have no `tasks`); a count that failed (Spark stopped by a failure) is -1."""
        self._counts.append(self._thread().submit(self._count_tasks, entry, count))

    @staticmethod
    def _count_tasks(entry: dict, count: Callable[[], int]) -> None:
        try:
            entry["tasks"] = count()
        except Exception:  # noqa: BLE001 - e.g. a run that failed and stopped Spark: its report is still written
            entry["tasks"] = -1

    def _thread(self) -> ThreadPoolExecutor:
        if self._timer is None:
            self._timer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scopeflow-report")
        return self._timer

    def _add_timings(self) -> None:
        """Wait for the report thread's work: the rounds' task counts, then the operator times."""
        counts, self._counts = self._counts, []
        for counted in counts:
            counted.result()  # (`_count_tasks` does not raise)
        timings, self._timings = self._timings, []
        for walk in timings:
            try:
                times = walk.result()
            except Exception:  # noqa: BLE001 - e.g. a run that failed and stopped Spark: its report is still written
                self.doc["operator_times"] = "incomplete: a round's plans could not be read"
                continue
            for op, ms in times.items():
                self.task_ms[op] = self.task_ms.get(op, 0.0) + ms
        if self._timer is not None:
            self._timer.shutdown(wait=False)
            self._timer = None

    def document(self) -> dict:
        """The report as `write` writes it (without its status)."""
        self._add_timings()
        self._collect_observations()
        for op, ms in self.task_ms.items():
            self.doc["operators"].setdefault(op, {"records": 0, "name": self._label(op)})["seconds"] = \
                round(ms / 1000.0, 4)
        out = dict(self.doc)
        out["loops"] = list(self.doc["loops"].values())
        return out

    def write(self, path: str, status: str, error: Optional[str] = None) -> None:
        self.doc["status"] = status
        self.doc["seconds"] = round(time.perf_counter() - self.started, 4)
        if error:
            self.doc["error"] = error
        out = self.document()
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2, default=str)
        os.replace(tmp, path)

    def _collect_observations(self) -> None:
        """The record counts of pipeline-level operators that ran (never blocking on the others: in a streaming
        epoch whose loops ran incrementally, the pipeline's streams over all input so far may never be
        computed). Spark completes observations from its listener bus, asynchronously: once the bus has
        delivered what it holds, those of every action that ran are complete."""
        pending = [(op, obs) for op, obs in self.observations if op not in self.doc["operators"]]
        if pending and not all(o._jo.future().isCompleted() for _, o in pending):
            try:
                self.listener_bus().waitUntilEmpty(10_000)
            except Exception:  # noqa: BLE001 - a timeout, or no bus to ask: what completed is reported
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline and not all(o._jo.future().isCompleted() for _, o in pending):
                    time.sleep(0.05)
        for op, obs in pending:
            if obs._jo.future().isCompleted():
                self.doc["operators"][op] = {"records": int(obs.get.get("n") or 0), "name": self._label(op)}
