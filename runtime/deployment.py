"""What kind of Spark session a run is on, and the settings each kind needs.

- **local** (`local[*]`): classic PySpark; the runtime reaches into the JVM
  through py4j (operator counters, checkpoint statistics, block release, Hadoop
  FileSystem renames). Python workers use the driver's interpreter.
- **cluster** (`spark://…`, `yarn`, `k8s://…`, also under `spark-submit`):
  classic PySpark, but executors are other processes, possibly other hosts;
  the runtime ships itself to them (`shipping.py`).
- **Spark Connect** (`sc://…`): no JVM on the client. What cannot work says so
  (`not_supported`).
"""
from __future__ import annotations

import os
import sys
from typing import Optional
from urllib.parse import urlparse

from scopeflow.runtime.errors import RuntimeFailure

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


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


def is_stopped(spark) -> bool:
    """Whether the session was stopped (its settings can no longer be read or set)."""
    if is_connect(spark):
        return bool(getattr(spark, "is_stopped", False))
    return spark.sparkContext._jsc is None


def not_supported(what: str, hint: Optional[str] = None) -> RuntimeFailure:
    """The error for a feature that cannot work over Spark Connect."""
    return RuntimeFailure(f"{what} is not supported over Spark Connect",
                          hint=hint or "run with --master (classic Spark) for this feature")


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


# the size of Spark's cache of compiled classes, which session.local_defaults sets
CODEGEN_CACHE_ENTRIES = "spark.sql.codegen.cache.maxEntries"
# scopeflow's local defaults (session.local_defaults) that Spark reads once, when its JVM first needs them
STATIC_SQL_DEFAULTS = frozenset({CODEGEN_CACHE_ENTRIES})


def connect_defaults(local_settings: dict, conf: Optional[dict]) -> dict:
    """Session settings to send to a Connect server: the SQL defaults scopeflow uses locally.

    Only runtime SQL settings can be set per Connect session; without them a
    server's defaults (e.g. 200 shuffle partitions) would make every round slow.
    The static ones (`STATIC_SQL_DEFAULTS`) are the server's to choose: a session
    cannot change them, and the server would answer each with a warning.
    """
    out = {k: v for k, v in local_settings.items() if k.startswith("spark.sql.") and k not in STATIC_SQL_DEFAULTS}
    out.update(conf or {})
    return out
