"""Spark's jobs as a run sees them: each round's jobs are tagged with a job group, so the status tracker can
count them (one Spark job per round, or per wave of its checkpoints on a cluster, is the runtime's design)
and say what they were when there are more.

A round also names its call site (`set_job_group(site=...)`): Spark's UI shows its jobs and stages as `loop cc
round 3` rather than a line of py4j, and Spark skips what finding a call site costs otherwise: every RDD a
round's plan creates walks the driver's stack and matches each frame against patterns (`Utils.getCallSite`, ~1-2 %
of the driver's samples while a round checkpoints, profiled with JFR). Loops put the tags back as they found them
when they end (`tagged`), so the jobs after a loop are not named after its last round."""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Optional

from scopeflow.runtime.deployment import is_connect, is_stopped
from scopeflow.runtime.errors import put_back_after

# Spark's local properties of a job's group, description and call site (SparkContext, CallSite)
TAGS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel", "callSite.short",
        "callSite.long")


_AHEAD: Optional[ThreadPoolExecutor] = None  # the threads rounds' jobs run on while the next round is planned
_AHEAD_LOCK = threading.Lock()


def local_properties(spark):
    """A copy of this thread's Spark local properties (job group, call site, job tags, a streaming batch's), for
    `run_aside`: two JVM calls."""
    return spark.sparkContext._jsc.sc().getLocalProperties().clone()


def run_aside(spark, props, fn: Callable) -> Future:
    """Run `fn` (a round's Spark job) on a thread of its own, its jobs tagged with `props` (`local_properties` of
    the thread that planned the round): the calling thread goes on planning the next round.

    The threads are the process's, kept between runs: under PySpark's pinned threads each Python thread has a
    py4j connection (and a JVM thread) of its own. Spark's local properties are per JVM thread, so the planning
    thread's are set for every job (PySpark's `InheritableThread` does the same when a thread starts)."""
    global _AHEAD
    with _AHEAD_LOCK:
        if _AHEAD is None:  # (a thread per loop running at once: runs on several threads do not wait for each other)
            _AHEAD = ThreadPoolExecutor(8, thread_name_prefix="scopeflow-round-job")
    jsc = spark.sparkContext._jsc.sc()

    def job():
        jsc.setLocalProperties(props)
        return fn()

    return _AHEAD.submit(job)


def stop_aside(spark, group: str, job: Future) -> None:
    """Cancel a round's job `run_aside` runs (in job group `group`) and wait for it to end: the loop that started
    it is failing, and no job of it may outlive the run."""
    if not job.done():
        try:
            spark.sparkContext.cancelJobGroup(group)
        except Exception:  # noqa: BLE001 - (a session going away: its jobs end with it)
            pass
    try:
        job.exception(timeout=120)
    except Exception:  # noqa: BLE001 - (the loop's own failure is what the run tells)
        pass


def pinned_threads(spark) -> bool:
    """Does each Python thread call the JVM on a thread of its own (PySpark's pinned threads, the default)? Only
    then can a thread's jobs be tagged by setting its local properties."""
    from py4j.clientserver import ClientServer

    return isinstance(spark.sparkContext._gateway, ClientServer)


def set_job_group(spark, group: str, description: str, site: Optional[str] = None) -> None:
    """Tag the following Spark jobs of this thread with `group`, and with `site` as their call site (without one,
    Spark finds it in the stack); a no-op over Spark Connect, which has no job groups."""
    if is_connect(spark):
        return
    sc = spark.sparkContext
    sc.setJobGroup(group, description)
    sc.setLocalProperty("callSite.short", site)
    sc.setLocalProperty("callSite.long", None if site is None else description)


@contextmanager
def tagged(spark):
    """Put this thread's job group, description and call site back as they were after the block."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    saved = {key: sc.getLocalProperty(key) for key in TAGS}
    with put_back_after(lambda: _put_back(spark, saved), "the job group and call site"):
        yield


def _put_back(spark, saved: dict) -> None:
    if not is_stopped(spark):  # (a run that stopped Spark has nothing to put back)
        for key, value in saved.items():
            spark.sparkContext.setLocalProperty(key, value)


def jobs_in_group(spark, group: str, at_least: int = 1) -> int:
    """Spark jobs run in `group`; -1 (unknown) over Spark Connect, which has no status tracker."""
    ids = job_ids_in_group(spark, group, at_least)
    return -1 if ids is None else len(ids)


def job_ids_in_group(spark, group: str, at_least: int = 1) -> Optional[list[int]]:
    """The ids of the Spark jobs run in `group`; None over Spark Connect, which has no status tracker.

    The status tracker learns of a job from Spark's listener bus, asynchronously: on a loaded machine a
    job can have finished before its start is seen. Every round runs `at_least` jobs (one, or one per
    wave of its checkpoints on a cluster), so fewer seen means not yet: wait for the bus to deliver what
    it holds (milliseconds), then look again."""
    if is_connect(spark):
        return None
    tracker = spark.sparkContext.statusTracker()
    ids = tracker.getJobIdsForGroup(group)
    if len(ids) < at_least:
        _drain_listener_bus(spark)
        ids = tracker.getJobIdsForGroup(group)
    return ids


def tasks_of_jobs(spark, group: str, job_ids: Optional[list[int]]) -> int:
    """The tasks run by the jobs of `group`: `job_ids` (those seen as the round ended) and any the status tracker
    learns of later (a job's start is delivered asynchronously, as its tasks' ends are: the listener bus is
    drained first). Completed or failed tasks; none for a stage an earlier job's output stands in for. -1 for
    None (Spark Connect), and where the tracker no longer holds a job (it keeps `spark.ui.retainedJobs`):
    `--report` only, counted off the round's path (`RunReport.count_tasks`)."""
    if job_ids is None:
        return -1
    _drain_listener_bus(spark)
    tracker = spark.sparkContext.statusTracker()
    infos = [tracker.getJobInfo(job_id) for job_id in sorted({*job_ids, *tracker.getJobIdsForGroup(group)})]
    if not all(infos):
        return -1
    stages = {s for info in infos for s in info.stageIds}  # (a stage shared by two jobs of the round: once)
    return sum(st.numCompletedTasks + st.numFailedTasks for st in map(tracker.getStageInfo, stages) if st is not None)


def _drain_listener_bus(spark) -> None:
    """Wait (up to 10 s) until Spark's listener bus has delivered the events it holds to the status tracker."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    except Exception:  # (a timeout: what the tracker has seen stands)
        pass


def _stage_tasks(spark, st) -> str:
    if not st.numCompletedTasks:  # was it ever submitted? (pyspark's stage info has no submission time)
        info = spark.sparkContext._jsc.sc().statusTracker().getStageInfo(st.stageId)
        if info.isDefined() and info.get().submissionTime() <= 0:
            return f"skipped ({st.numTasks} tasks, their output from an earlier job)"
    return f"{st.numCompletedTasks}/{st.numTasks} tasks" + (f", {st.numFailedTasks} failed" if st.numFailedTasks else "")


def describe_jobs(spark, group: str) -> list[str]:
    """The jobs of `group` as text (id, status, stages with their names and tasks): why a round ran
    more Spark jobs than it should."""
    tracker = spark.sparkContext.statusTracker()
    out = []
    for job_id in sorted(tracker.getJobIdsForGroup(group)):
        info = tracker.getJobInfo(job_id)
        stages = [tracker.getStageInfo(s) for s in sorted(info.stageIds if info else [])]  # (in no set order)
        parts = [f"{st.stageId} {st.name}: " + _stage_tasks(spark, st) for st in stages if st is not None]
        out.append(f"job {job_id} {info.status if info else 'unknown'}: " + "; ".join(parts))
    return out
