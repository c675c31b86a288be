"""Faster JVM start-ups for the test suite (test support only).

The suite starts some fifty Spark drivers: the shared test session, and every `scopeflow run`,
generated script and spark-submit under test, many of them killed and resumed on purpose.  Each spends
~10 s of CPU loading and JIT-compiling Spark's classes before its first task, on a 2-core CI machine.
Two standard JVM features cut that by about 40 % (measured: a `scopeflow run` of the connected
components example, 19.8 s -> 11.7 s wall):

- Application Class-Data Sharing: a training run dumps the classes it loaded into an archive
  (`-XX:ArchiveClassesAtExit`), later JVMs map it instead of parsing and verifying ~15,000 classes from
  jars (`-XX:SharedArchiveFile`).  A JVM that cannot use the archive (another class path, another JDK)
  loads classes as usual and says so on its stderr (scopeflow's JVM log), never on stdout.
- `-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`: the quick JIT tier and the single-threaded collector suit
  short runs on small data on two cores.  They change speed, never results.  The shared in-process
  session, which lives for the whole suite, keeps the full JIT (see `long_running`).

The options reach every Spark driver through SPARK_SUBMIT_OPTS, Spark's own variable for the JVM that
spark-submit starts (pyspark starts its driver through spark-submit too); the cluster tests give the quick
options to their executors with `executor_conf`.  SCOPEFLOW_TEST_JVM=plain turns
all of it off.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

_settings = {}  # "original": SPARK_SUBMIT_OPTS as the suite found it, "archive": the options that map the archive
_STATE = "SCOPEFLOW_TEST_JVM_SETTINGS"  # `_settings` as JSON, for the pytest-xdist workers
QUICK_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
# the JVM prints its own warnings (e.g. "Unable to use shared archive") on stdout, which is the user's
# output (console sinks, the CLI's): send them to stderr, which scopeflow keeps in its JVM log
WARNINGS_TO_STDERR = ["-Xlog:disable", "-Xlog:all=warning:stderr"]
STALE_DAYS = 14  # archives of other checkouts or earlier Sparks are removed when unused this long

# the training run: a session, a small loop program with a shuffle, csv in and out, as the tests do
_TRAINING = textwrap.dedent("""
    import os, shutil, sys
    from scopeflow.api import run_file
    from scopeflow.runtime.session import build_session
    work, examples = sys.argv[1], sys.argv[2]
    shutil.copytree(os.path.join(examples, "data"), os.path.join(work, "data"))
    shutil.copy(os.path.join(examples, "connected_components.flow"), work)
    spark = build_session("scopeflow-cds-training", conf={"spark.sql.shuffle.partitions": "2"})
    run_file(os.path.join(work, "connected_components.flow"), spark=spark)
    gateway = spark.sparkContext._gateway
    spark.stop()
    gateway.proc.stdin.close()  # the JVM exits on end of input, and writes the archive as it exits
    gateway.proc.wait(timeout=300)
""")


def _archive_path(examples: str) -> str:
    """One archive per JDK, Spark installation and Python: the class path must be the same to use it."""
    import pyspark

    from scopeflow.runtime.session import java_executable

    java = java_executable()
    if java is None:
        raise FileNotFoundError("no java")
    version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    # the JVM checks each jar's size and time: a reinstalled pyspark needs a new archive
    stamps = [f"{n} {st.st_size} {st.st_mtime_ns}" for n in sorted(os.listdir(jars))
              for st in [os.stat(os.path.join(jars, n))]]
    key = hashlib.sha256("\n".join([version, jars, *stamps, sys.executable,
                                    _settings.get("original") or ""]).encode())
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "scopeflow", "test-jvm", key.hexdigest()[:16] + ".jsa")


def _train(archive: str, examples: str) -> bool:
    folder = os.path.dirname(archive)
    os.makedirs(folder, exist_ok=True)
    partial = f"{archive}.{os.getpid()}.tmp"
    options = [*QUICK_OPTIONS, *WARNINGS_TO_STDERR, f"-XX:ArchiveClassesAtExit={partial}"]
    env = dict(os.environ, SPARK_SUBMIT_OPTS=_join(*options))
    try:
        with tempfile.TemporaryDirectory() as work:
            proc = subprocess.run([sys.executable, "-c", _TRAINING, work, examples], env=env,
                                  capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not os.path.exists(partial):
            print(f"[tests] no class-data archive (training run exit {proc.returncode}); "
                  "JVMs start the usual way", file=sys.stderr)
            return False
        os.replace(partial, archive)  # complete or absent: a half-written archive is never used
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    now = time.time()
    for name in os.listdir(folder):  # another checkout's or an earlier Spark's archive, ~170 MB each
        path = os.path.join(folder, name)
        try:
            if path != archive and now - os.stat(path).st_atime > STALE_DAYS * 86400:
                os.remove(path)
        except OSError:  # pruned by another suite first, or not ours to remove: the new archive is still good
            pass
    return True


def configure(examples: str) -> None:
    """Set SPARK_SUBMIT_OPTS for the processes the tests start (see `long_running` for the shared session).

    pytest-xdist workers inherit the environment of the process that configured it: they take its
    settings as they are, instead of reading its options as their own and training archives again."""
    # scopeflow's own archive (runtime/jvmarchive.py) stays out of the suite's runs, whatever becomes of the
    # suite's: tests/test_jvm_archive.py turns it on for its own
    os.environ.setdefault("SCOPEFLOW_JVM_ARCHIVE", "off")
    inherited = os.environ.get(_STATE)
    if inherited:
        _settings.update(json.loads(inherited))
        return
    _settings["original"] = os.environ.get("SPARK_SUBMIT_OPTS")
    if _plain():
        return
    archive = []
    try:
        path = _archive_path(examples)
        if os.path.exists(path) or _train(path, examples):
            archive = [f"-XX:SharedArchiveFile={path}", *WARNINGS_TO_STDERR]
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"[tests] no class-data archive ({exc}); JVMs start the usual way", file=sys.stderr)
    _settings["archive"] = archive
    os.environ["SPARK_SUBMIT_OPTS"] = _join(*QUICK_OPTIONS, *archive)
    os.environ[_STATE] = json.dumps(_settings)


def executor_conf() -> list[str]:
    """`--conf` options that give a cluster's executors the quick JIT tier and collector too.

    Executors are JVMs the standalone workers start per application, with a class path of their own (so
    they cannot map the drivers' archive). On the suite's tiny data a cluster run of connected components
    took 55 CPU-s with them instead of 77, its first round 9.7 s instead of 16.6. (The option replaces any
    `spark.executor.extraJavaOptions` from a spark-defaults.conf; the suite sets none.)"""
    if _plain():
        return []
    return ["--conf", f"spark.executor.extraJavaOptions={' '.join(QUICK_OPTIONS)}"]


def _plain() -> bool:
    """SCOPEFLOW_TEST_JVM=plain: every JVM starts the usual way."""
    return os.environ.get("SCOPEFLOW_TEST_JVM") == "plain"


def _join(*options) -> str:
    return " ".join(filter(None, [_settings.get("original"), *options]))


@contextlib.contextmanager
def long_running():
    """For the JVM of the shared test session, which runs for the whole suite (long loops, 1,500 rounds):
    the class archive, but the full JIT and the default collector (the quick tier made those tests slower)."""
    saved = os.environ.get("SPARK_SUBMIT_OPTS")
    if saved is not None:
        os.environ["SPARK_SUBMIT_OPTS"] = _join(*_settings.get("archive", []))
    try:
        yield
    finally:
        if saved is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = saved
