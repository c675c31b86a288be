"""The SparkSession scopeflow runs on: local by default, quiet, bound to 127.0.0.1."""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile

from scopeflow.runtime import deployment, jvmarchive
from scopeflow.runtime.errors import RuntimeFailure

_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# a failed task (e.g. a Python function that raised) is reported once, by scopeflow, with the
# .flow line and the user's traceback -- not as executor stack traces (--verbose shows them)
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
"""


def java_executable() -> str | None:
    """The `java` Spark will start: $JAVA_HOME/bin/java when that exists, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return os.path.join(java_home, "bin", "java")
    return shutil.which("java")


def check_java() -> None:
    if java_executable() is None:
        raise RuntimeFailure("Java was not found: Spark needs a Java 17 runtime",
                             hint="install it: sudo apt-get install openjdk-17-jre-headless (or set JAVA_HOME)")


def jvm_log_path() -> str:
    """Where the JVM this process starts writes its own output (unless --verbose)."""
    return os.path.join(tempfile.gettempdir(), f"scopeflow-jvm-{os.getpid()}.log")


_jvm_log = {"keep": False}


def keep_jvm_log() -> None:
    """A run in this process failed: its JVM log stays when the process exits."""
    _jvm_log["keep"] = True


def _discard_jvm_log(path: str) -> None:
    """At exit of a process whose runs all succeeded: the JVM log is of no use, remove it (so runs do not
    pile files up in the temp folder). A killed process keeps it, as does one where a run failed."""
    if not _jvm_log["keep"]:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


@contextlib.contextmanager
def _jvm_stderr_to(path):
    """The JVM inherits file descriptor 2 when it starts: point it at a log file meanwhile.

    Spark's own log4j banner and the JVM's warnings then stay out of the user's
    terminal (unless --verbose); Python's stderr is restored right after.
    """
    if path is None or os.environ.get("SCOPEFLOW_JVM_STDERR") == "inherit":
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _quiet_log4j() -> str:
    path = os.path.join(tempfile.gettempdir(), "scopeflow-log4j2.properties")
    try:
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    except OSError:
        current = None
    if current != _LOG4J:  # missing, or written by another scopeflow version
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(_LOG4J)
        os.replace(tmp, path)
    return path


@contextlib.contextmanager
def _jvm_options(archive):
    """SPARK_SUBMIT_OPTS, the options of the driver JVM spark-submit starts, with the archive's (if any) while
    the JVM starts; as it was afterwards (the processes a run starts get them their own way)."""
    if archive is None:
        yield
        return
    saved = os.environ.get("SPARK_SUBMIT_OPTS")
    # (first: the user's own -Xlog options come after the archive's `-Xlog:disable`)
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [*archive.options(), saved]))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = saved


def local_defaults() -> dict:
    cores = os.cpu_count() or 2
    return {
        "spark.master": "local[*]",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(max(2, min(8, cores * 2))),
        "spark.default.parallelism": str(max(2, min(8, cores * 2))),
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        # PySpark's DataFrame call-site capture costs ~5 JVM round trips per Column function call, which
        # dominated a loop round's driver time; scopeflow maps failures to .flow lines itself.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Spark keeps the classes it compiles for generated code by their source, 100 of them by default, and
        # compiles an evicted one again when a later plan needs it. A stream's epochs can go through more: a loop's
        # rounds, the epoch's reads, writes and merges. Connected components over a stream, with stage numbers in
        # the class names, compiled 21 classes every epoch, none with 1,000 kept (benchmarks/RESULTS.md,
        # twenty-seventh session; loops now leave the numbers out, `context.LOOP_CONF`). A class is a few KB of
        # bytecode, kept with its source (5 KB on average over the examples).
        deployment.CODEGEN_CACHE_ENTRIES: "1000",
    }


def build_session(app: str, master: str | None = None, remote: str | None = None, conf: dict | None = None,
                  verbose: bool = False):
    """Create (or reuse) the SparkSession. Raises RuntimeFailure when Spark cannot start."""
    deployment.loopback_env(master)  # SPARK_LOCAL_IP=127.0.0.1 unless the master is on another host
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    if remote:
        builder = SparkSession.builder.remote(remote).appName(app)
        for k, v in deployment.connect_defaults(local_defaults(), conf).items():
            builder = builder.config(k, v)
        return builder.getOrCreate()
    check_java()
    settings = local_defaults()
    if master:
        settings["spark.master"] = master
        if not master.startswith("local"):
            settings.pop("spark.driver.bindAddress")
    if not verbose:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j.configurationFile=file:{_quiet_log4j()}"
    settings = deployment.adapt_settings(settings, master, conf)  # spark-submit, remote hosts, worker Python
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app)
    for k, v in settings.items():
        builder = builder.config(k, v)
    from pyspark import SparkContext

    # only a JVM this call starts gets a log (under spark-submit the JVM is already running, and it is
    # spark-submit's output)
    starts_jvm = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    log = jvm_log_path() if starts_jvm and not verbose else None
    archive = jvmarchive.plan(java_executable(), settings.get("spark.driver.extraJavaOptions", "")) \
        if starts_jvm else None
    try:
        with _jvm_stderr_to(log):
            try:
                with _jvm_options(archive):
                    spark = builder.getOrCreate()
            except Exception:
                if archive is None or SparkContext._gateway is not None:
                    raise
                # once more without the archive's options: a start that fails again fails for its own reasons
                # (and leaves the archive be); one that succeeds tells the options were the trouble
                spark = builder.getOrCreate()
                archive.refused()
                archive = None
    except Exception as exc:  # the JVM did not come up: say so plainly
        keep_jvm_log()
        raise RuntimeFailure(f"Spark could not start: {exc}".splitlines()[0],
                             hint="check that Java 17 is installed (java -version) and JAVA_HOME is right"
                                  + (f"; the JVM's output is in {log}" if log else "")) from exc
    if log is not None:
        atexit.register(_discard_jvm_log, log)
    if archive is not None and deployment.is_connect(spark):  # (SPARK_REMOTE: no JVM of ours after all)
        archive = None
    if archive is not None and not archive.record:
        archive.check_mapped(spark.sparkContext._jvm)
    elif archive is not None:
        gateway = spark.sparkContext._gateway
        class_path = spark.sparkContext._jvm.System.getProperty("java.class.path")
        atexit.register(jvmarchive.finish_recording, archive, getattr(gateway, "proc", None), class_path)
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark
