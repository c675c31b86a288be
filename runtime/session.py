"""The SparkSession scopeflow runs on: local by default, quiet, bound to 127.0.0.1."""
from __future__ import annotations

import os
import shutil
import tempfile

from scopeflow.runtime.errors import RuntimeFailure

_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise RuntimeFailure("Java was not found: Spark needs a Java 17 runtime",
                             hint="install it: sudo apt-get install openjdk-17-jre-headless (or set JAVA_HOME)")


def _quiet_log4j() -> str:
    path = os.path.join(tempfile.gettempdir(), "scopeflow-log4j2.properties")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(_LOG4J)
    return path


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
    }


def build_session(app: str, master: str | None = None, remote: str | None = None, conf: dict | None = None,
                  verbose: bool = False):
    """Create (or reuse) the SparkSession. Raises RuntimeFailure when Spark cannot start."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    if remote:
        builder = SparkSession.builder.remote(remote).appName(app)
        for k, v in (conf or {}).items():
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
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app)
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM did not come up: say so plainly
        raise RuntimeFailure(f"Spark could not start: {exc}".splitlines()[0],
                             hint="check that Java 17 is installed (java -version) and JAVA_HOME is right") from exc
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark
