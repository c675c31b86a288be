"""Where the runtime differs between local Spark, a cluster and Spark Connect.

The loop executor, `Job` and the sinks call into this module (one line each)
so the differences stay in one place:

- **local** (`local[*]`): classic PySpark; the runtime reaches into the JVM
  through py4j (operator counters, checkpoint statistics, block release, Hadoop
  FileSystem renames). Python workers use the driver's interpreter.
- **cluster** (`spark://…`, `yarn`, `k8s://…`, also under `spark-submit`):
  classic PySpark, but executors are other processes, possibly other hosts.
  The runtime ships itself as a zip (`addPyFile`), so workers need pyspark and
  Arrow but not scopeflow; user Python functions travel by value inside the
  tasks. Round checkpoints are replicated local checkpoints (two copies, on two
  executors), so losing one executor loses no loop state; with
  `spark.scopeflow.checkpoint=reliable` they are written to the checkpoint
  directory instead (survives any executor loss, costs an extra job per
  checkpointed frame).
- **Spark Connect** (`sc://…`): no JVM on the client. Checkpoints are the
  server's `localCheckpoint`; per-operator counters, statistics detaching and
  Hadoop FileSystem calls are not available. What cannot work says so (see
  `not_supported`).
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import zipfile
from typing import Optional
from urllib.parse import urlparse

from scopeflow.runtime.errors import RuntimeFailure

CHECKPOINT_MODE = "spark.scopeflow.checkpoint"  # auto | local | replicated | reliable
CHECKPOINT_DIR = "spark.scopeflow.checkpointDir"
SHIP = "spark.scopeflow.ship"  # true | false: ship the runtime zip to executors
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
_SHIPPED: dict = {}  # id(SparkContext or session) -> set of shipped zip names
_NOTED: set = set()


# ---- what kind of session -------------------------------------------------------------------


_CACHED: dict = {}  # (id(session), key) -> (session, value)


def cached(spark, key, build):
    """`build()` once per session: JVM handles and constant Columns that a loop round would otherwise
    rebuild every round, each piece a JVM round trip (Columns are immutable and can be reused)."""
    hit = _CACHED.get((id(spark), key))
    if hit is None or hit[0] is not spark:
        hit = _CACHED[(id(spark), key)] = (spark, build())
    return hit[1]


def is_connect(spark) -> bool:
    """A Spark Connect session (no JVM, no py4j on this side)."""
    return not hasattr(spark, "_jsc")


def master(spark) -> Optional[str]:
    """The master URL of a classic session; None over Spark Connect."""
    if is_connect(spark):
        return None
    return spark.sparkContext.master


def is_local(spark) -> bool:
    m = master(spark)
    return m is not None and m.startswith("local")


def task_slots(spark) -> Optional[int]:
    """Tasks the session runs at once: N of `local[N]` (`local[*]`: this machine's cores), else Spark's
    default parallelism (a cluster's executor cores); None over Spark Connect."""
    m = master(spark)
    if m is None:
        return None
    return local_slots(m) or spark.sparkContext.defaultParallelism


def local_slots(master_url: str) -> Optional[int]:
    """Task slots of a local master: `local` 1, `local[N]` and `local[N,F]` N, `local[*]` the cores; None
    for anything else (a cluster, `local-cluster[...]`)."""
    if not master_url.startswith("local") or master_url.startswith("local-cluster"):
        return None
    inner = master_url[master_url.find("[") + 1:master_url.find("]")].split(",")[0].strip() if "[" in master_url else "1"
    return (os.cpu_count() or 1) if inner == "*" else int(inner)


def unknown_partitioning(df) -> bool:
    """A classic checkpoint, or frame, whose rows Spark knows no placement of (no hash or range
    partitioning). For a frame that is not a checkpoint this plans it (once per loop activation)."""
    qe = df._jdf.queryExecution()
    plan = qe.logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        plan = qe.executedPlan()
    return plan.outputPartitioning().getClass().getSimpleName() == "UnknownPartitioning"


def not_supported(what: str, hint: Optional[str] = None) -> RuntimeFailure:
    """The error for a feature that cannot work over Spark Connect."""
    return RuntimeFailure(f"{what} is not supported over Spark Connect",
                          hint=hint or "run with --master (classic Spark) for this feature")


def note(key: str, message: str) -> None:
    """Print a one-time note on stderr (a limitation that does not stop the run)."""
    if key not in _NOTED:
        _NOTED.add(key)
        print(f"note: {message}", file=sys.stderr)


# ---- session settings -----------------------------------------------------------------------


def _loopback_master(m: Optional[str]) -> bool:
    if not m or m.startswith("local"):
        return True
    hosts = [urlparse(part if "://" in part else f"spark://{part}").hostname
             for part in m.split("://", 1)[-1].split(",")]
    return all(h in _LOOPBACK for h in hosts)


def under_spark_submit() -> bool:
    """Is this Python driver running inside `spark-submit` (which already started the JVM)?"""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def adapt_settings(settings: dict, master_arg: Optional[str], conf: Optional[dict]) -> dict:
    """The session settings for where the driver runs; `settings` are scopeflow's local defaults.

    - under `spark-submit` without --master: spark-submit's own settings (its
      --master, --conf, --py-files) win over scopeflow's defaults;
    - a master on another host: the driver must not bind or advertise 127.0.0.1;
    - local: Python workers run the driver's interpreter (not whatever `python3`
      is first on PATH, which may lack pyarrow); `spark.pyspark.python` picks another;
    - a cluster: replicated checkpoints are re-replicated when an executor is lost.
    """
    conf = conf or {}
    out = dict(settings)
    effective = master_arg
    if master_arg is None and under_spark_submit():
        from pyspark import SparkConf, SparkContext

        # connect to spark-submit's JVM first: before that, SparkConf() cannot see its settings (no
        # --master, no --conf) and the driver would quietly run on local[*]
        SparkContext._ensure_initialized()
        given = dict(SparkConf().getAll())
        for k in given:
            out.pop(k, None)
        effective = given.get("spark.master", "local[*]")
        if not effective.startswith("local"):
            out.pop("spark.driver.bindAddress", None)
    if not _loopback_master(effective):
        out.pop("spark.driver.host", None)
        out.pop("spark.driver.bindAddress", None)
    # PySpark takes the workers' interpreter from $PYSPARK_PYTHON only (spark-submit sets it from
    # spark.pyspark.python), so a --conf spark.pyspark.python given to `scopeflow run` goes there too.
    if conf.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    elif (effective or "local").startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if not (effective or "local").startswith("local"):
        out.setdefault("spark.storage.replication.proactive", "true")
        out.setdefault("spark.cleaner.referenceTracking.cleanCheckpoints", "true")
    return out


def loopback_env(master_arg: Optional[str]) -> None:
    """Keep Spark on the loopback interface unless the master is on another host."""
    if _loopback_master(master_arg):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def connect_defaults(local_settings: dict, conf: Optional[dict]) -> dict:
    """Session settings to send to a Connect server: the SQL defaults scopeflow uses locally.

    Only runtime SQL settings can be set per Connect session; without them a
    server's defaults (e.g. 200 shuffle partitions) would make every round slow.
    """
    out = {k: v for k, v in local_settings.items() if k.startswith("spark.sql.")}
    out.update(conf or {})
    return out


# ---- shipping the runtime -------------------------------------------------------------------

# What executors import of scopeflow: the runtime, the stdlib's tables, and the package's two light
# modules (a job never needs the compiler, the parser or the CLI there, nor their dependencies).
SHIPPED = {"scopeflow": ("__init__.py", "version.py"), "scopeflow.runtime": None, "scopeflow.stdlib": None}
_DATA = (".py", ".flow")


def shipped_files() -> list[tuple[str, str]]:
    """(archive name, file path) of the scopeflow files executors need (`SHIPPED`: None = the whole folder)."""
    import importlib.util

    files = []
    for package, names in SHIPPED.items():
        folder = importlib.util.find_spec(package).submodule_search_locations[0]
        prefix = package.replace(".", "/")
        for f in sorted(os.listdir(folder)):
            if (f in names) if names is not None else f.endswith(_DATA):
                files.append((f"{prefix}/{f}", os.path.join(folder, f)))
    return files


def runtime_zip() -> str:
    """A zip of what executors need of scopeflow (`shipped_files`), cached by content, for their PYTHONPATH.

    Nothing else is shipped: on an executor the runtime imports only the standard library, pyspark
    and the Arrow stack (Python functions run in `runtime/udf.py`)."""
    entries = []
    for arc, path in shipped_files():
        with open(path, "rb") as fh:
            entries.append((arc, fh.read()))
    digest = hashlib.sha256()
    for arc, data in entries:
        digest.update(arc.encode() + b"\0" + data)
    folder = os.path.join(tempfile.gettempdir(), f"scopeflow-ship-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"scopeflow-runtime-{digest.hexdigest()[:12]}.zip")
    if not os.path.exists(path):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for arc, data in entries:
                info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(buf.getvalue())
        os.replace(tmp, path)
    return path


def _user_modules() -> list:
    """The user's `use python` modules loaded by this process (`stdlib.python_modules`)."""
    from scopeflow.stdlib.python_modules import is_user_module

    return [m for name, m in list(sys.modules.items()) if is_user_module(name) and m is not None]


def prepare(spark) -> None:
    """Make the session able to run this pipeline's Python code wherever its workers are.

    User modules are pickled by value: their functions travel inside the tasks,
    so no worker needs the user's file. Off the local machine (a cluster or a
    Connect server) the scopeflow runtime itself is shipped as a zip, so workers
    need pyspark and pyarrow but not scopeflow. Idempotent per session.
    """
    from pyspark import cloudpickle

    for module in _user_modules():
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:  # already registered, or not importable by name: pickled by value anyway
            pass
    connect = is_connect(spark)
    if not connect and is_local(spark):
        return
    if not connect and spark.sparkContext.getConf().get(SHIP, "true").lower() == "false":
        return
    key = id(spark) if connect else id(spark.sparkContext)
    shipped = _SHIPPED.setdefault(key, set())
    path = runtime_zip()
    if path in shipped:
        return
    if connect:
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)
    shipped.add(path)


# ---- round checkpoints ----------------------------------------------------------------------


def checkpoint_mode(spark) -> str:
    return cached(spark, "checkpoint-mode", lambda: _checkpoint_mode(spark))


def _checkpoint_mode(spark) -> str:
    if is_connect(spark):
        return "connect"
    mode = spark.sparkContext._conf.get(CHECKPOINT_MODE, "auto")  # not getConf(): it copies every entry over py4j
    if mode == "auto":
        return "local" if is_local(spark) else "replicated"
    if mode not in ("local", "replicated", "reliable"):
        raise RuntimeFailure(f"{CHECKPOINT_MODE}={mode}: expected auto, local, replicated or reliable")
    return mode


def _reliable_dir(spark) -> None:
    sc = spark.sparkContext
    if sc._jsc.sc().getCheckpointDir().isDefined():
        return
    base = sc.getConf().get(CHECKPOINT_DIR, None) or os.path.abspath(os.path.join(".scopeflow", "rdd-checkpoints"))
    sc.setCheckpointDir(base)  # Spark adds a per-application subfolder


def checkpoint_rdd(ck):
    """The JVM RDD under a checkpoint frame (its `LogicalRDD`): the RDD its blocks are stored under."""
    return ck._jdf.queryExecution().logical().rdd()


def checkpoint(spark, df, round_no: Optional[int] = None):
    """The lazy checkpoint of a round's frame (materialised by the round's one Spark job).

    local: `localCheckpoint` (blocks on the local executor), statistics detached;
    replicated (cluster default): `localCheckpoint` stored on two executors, so a
    lost executor loses no loop state; reliable: `checkpoint` files in the
    checkpoint directory (must be a filesystem every node shares); connect: the
    server's `localCheckpoint`, and every `CONNECT_RESET_EVERY` rounds a Parquet
    copy instead (see `_connect_reset`).
    """
    from scopeflow.runtime.loop import detach_statistics

    mode = checkpoint_mode(spark)
    if mode == "connect":
        every = int(spark.conf.get(CONNECT_RESET, str(CONNECT_RESET_EVERY)))
        if round_no is not None and every > 0 and round_no % every == every - 1:
            return _connect_reset(spark, df)
        return df.localCheckpoint(eager=False)
    if mode == "replicated":
        from pyspark import StorageLevel

        return detach_statistics(spark, df.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK_2))
    if mode == "reliable":
        _reliable_dir(spark)
        return detach_statistics(spark, df.checkpoint(eager=False))
    return detach_statistics(spark, df.localCheckpoint(eager=False))


CONNECT_RESET = "spark.scopeflow.connect.statsResetEvery"
CONNECT_RESET_EVERY = 8
CONNECT_SCRATCH = "spark.scopeflow.connect.scratchDir"
_SCRATCH: dict = {}


def _connect_reset(spark, df):
    """Over Spark Connect: write the frame to Parquet and read it back (an eager Spark job).

    A checkpoint keeps the size estimate of the plan it came from, and Spark
    estimates a join as the product of its inputs, so state joined and
    re-checkpointed every round carries an estimate whose digits double each
    round: after ~20 rounds planning one round takes minutes (BigInteger
    products), then the heap. Classic sessions detach the estimate through py4j
    (`loop.detach_statistics`); Connect has no such access, but a Parquet scan is
    estimated from its file sizes. The scratch folder must be writable by the
    server; it is removed when this process exits if the client can see it (the
    same machine), otherwise it stays on the server.
    """
    import atexit
    import shutil
    import uuid

    base = _SCRATCH.get("dir")
    if base is None:
        root = spark.conf.get(CONNECT_SCRATCH, None) or os.path.join(tempfile.gettempdir(), "scopeflow-connect")
        base = _SCRATCH["dir"] = os.path.join(root, f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        atexit.register(shutil.rmtree, base, True)
    path = os.path.join(base, uuid.uuid4().hex[:12])
    df.write.mode("overwrite").parquet(path)
    return spark.read.parquet(path)


def observed(spark) -> Optional[dict]:
    """{} when per-operator counters cannot be read (Spark Connect); None when the JVM path works."""
    if is_connect(spark):
        note("connect-counters", "per-operator record counts are not available over Spark Connect; loop "
                                 "termination uses the feedback and `until` counts, which are")
        return {}
    return None


# ---- filesystem for atomic sinks ------------------------------------------------------------


class _LocalPath:
    def __init__(self, path: str):
        self.path = path

    def getParent(self):  # noqa: N802 - mirrors org.apache.hadoop.fs.Path
        parent = os.path.dirname(self.path.rstrip("/"))
        return _LocalPath(parent) if parent and parent != self.path else None

    def __str__(self):
        return self.path


class _LocalStatus:
    def __init__(self, path: _LocalPath):
        self.path = path

    def getPath(self) -> _LocalPath:  # noqa: N802
        return self.path


class _LocalFS:
    """The subset of Hadoop's FileSystem the sinks use, on the local filesystem (for Spark Connect)."""

    def exists(self, p: _LocalPath) -> bool:
        return os.path.exists(p.path)

    def mkdirs(self, p: _LocalPath) -> bool:
        os.makedirs(p.path, exist_ok=True)
        return True

    def rename(self, src: _LocalPath, dst: _LocalPath) -> bool:
        if os.path.exists(dst.path):
            return False
        os.rename(src.path, dst.path)
        return True

    def globStatus(self, p: _LocalPath) -> list:  # noqa: N802
        import glob

        return [_LocalStatus(_LocalPath(m)) for m in sorted(glob.glob(p.path))]

    def delete(self, p: _LocalPath, recursive: bool) -> bool:
        import shutil

        if os.path.isdir(p.path) and recursive:
            shutil.rmtree(p.path)
        elif os.path.exists(p.path):
            os.remove(p.path)
        else:
            return False
        return True


def local_path(path: str) -> str:
    """The local filesystem path of `path` (plain or file://); RuntimeFailure for other schemes."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme == "file" else path
    raise not_supported(f"committing a sink on `{parsed.scheme}://` (atomic rename through Hadoop's FileSystem)",
                        hint="over Spark Connect sinks commit by a local rename: use a local or file:// path on a "
                             "filesystem the client and the server share, or run with --master")


def connect_fs(path: str):
    """(filesystem, path) for the sinks' commit protocol over Spark Connect."""
    p = _LocalPath(local_path(path))
    return _LocalFS(), p


# ---- job groups (counting a round's Spark jobs) ---------------------------------------------


def set_job_group(spark, group: str, description: str) -> None:
    """Tag the following Spark jobs with `group` (a no-op over Spark Connect, which has no job groups)."""
    if not is_connect(spark):
        spark.sparkContext.setJobGroup(group, description)


def jobs_in_group(spark, group: str) -> int:
    """Spark jobs run in `group`; -1 (unknown) over Spark Connect, which has no status tracker."""
    if is_connect(spark):
        return -1
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _stage_tasks(spark, st) -> str:
    if not st.numCompletedTasks:  # was it ever submitted? (pyspark's stage info has no submission time)
        info = spark.sparkContext._jsc.sc().statusTracker().getStageInfo(st.stageId)
        if info.isDefined() and info.get().submissionTime() <= 0:
            return f"skipped ({st.numTasks} tasks, their output from an earlier job)"
    return f"{st.numCompletedTasks}/{st.numTasks} tasks" + (f", {st.numFailedTasks} failed" if st.numFailedTasks else "")


def describe_jobs(spark, group: str) -> list[str]:
    """The jobs of `group` as text (id, status, stages with their names and tasks): why a round ran
    more Spark jobs than one."""
    tracker = spark.sparkContext.statusTracker()
    out = []
    for job_id in sorted(tracker.getJobIdsForGroup(group)):
        info = tracker.getJobInfo(job_id)
        stages = [tracker.getStageInfo(s) for s in sorted(info.stageIds if info else [])]  # (in no set order)
        parts = [f"{st.stageId} {st.name}: " + _stage_tasks(spark, st) for st in stages if st is not None]
        out.append(f"job {job_id} {info.status if info else 'unknown'}: " + "; ".join(parts))
    return out
