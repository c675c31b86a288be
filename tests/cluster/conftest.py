"""Fixtures for the `cluster` tests: a real Spark standalone cluster on 127.0.0.1.

One master and two workers (1 core each), package-scoped: started for the first
cluster test and stopped by PID after the last one, through
`scopeflow.runtime.cluster`. A Spark Connect server is started only when a Connect test asks for it. The executors' Python is a
separate venv that has the Arrow stack (numpy, pandas, pyarrow) but neither
scopeflow nor pyspark: pyspark comes from the Spark distribution's
`python/lib/pyspark.zip` like on any Spark worker, and scopeflow must be
shipped by the runtime itself.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from scopeflow.runtime import cluster
from venvs import can_import, linked_venv

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
EXAMPLES = os.path.join(ROOT, "examples")
SCOPEFLOW = [sys.executable, "-m", "scopeflow.cli"]

# What Python UDF workers need besides pyspark: the Arrow stack (numpy.libs: numpy's bundled libraries).
EXECUTOR_PACKAGES = ("numpy", "numpy.libs", "pandas", "pyarrow", "dateutil", "pytz", "tzdata", "six.py")


@pytest.fixture(scope="package")
def executor_python(tmp_path_factory) -> str:
    """A Python for Spark's workers with numpy/pandas/pyarrow but without scopeflow (and without pyspark)."""
    python = linked_venv(tmp_path_factory.mktemp("executor-venv"), EXECUTOR_PACKAGES)
    assert can_import(python, "pyarrow, pandas, numpy"), "the executor venv cannot import the Arrow stack"
    assert not can_import(python, "scopeflow"), "the executor venv must not see scopeflow"
    assert not can_import(python, "pyspark"), "the executor venv must not see the driver's pyspark"
    return python


@pytest.fixture(scope="package")
def spark_cluster(tmp_path_factory):
    """A master and two 1-core workers on 127.0.0.1 (free ports); stopped by PID at the end."""
    folder = str(tmp_path_factory.mktemp("cluster"))
    try:
        state = cluster.start(folder, workers=2, cores=1, memory="1g", timeout=240)
    except Exception as exc:  # CI must run these tests: a cluster that cannot start is a failure
        pytest.fail(f"the Spark standalone cluster did not start: {exc}\n{getattr(exc, 'hint', '')}")
    try:
        yield state
    finally:
        cluster.stop(folder)


@pytest.fixture(scope="package")
def connect_server(tmp_path_factory, executor_python):
    """A Spark Connect server (local[2]) whose Python workers lack scopeflow; skipped if it cannot start."""
    try:
        import grpc  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the Spark Connect client is not installed ({exc}): pip install -e '.[connect]'")
    if cluster.connect_jar() is None:
        pytest.skip("this pyspark distribution ships no Spark Connect server jar")
    folder = str(tmp_path_factory.mktemp("connect"))
    try:
        info = cluster.start_connect(folder, "local[2]", env={"PYSPARK_PYTHON": executor_python}, timeout=240)
    except Exception as exc:
        pytest.skip(f"the Spark Connect server could not start here: {exc}")
    try:
        yield info
    finally:
        cluster.terminate([info["pid"]] + cluster.descendants(info["pid"]))


@pytest.fixture
def flow_dir(tmp_path):
    """tmp_path with the examples' data and the given files copied in."""

    def copy(*names: str) -> str:
        shutil.copytree(os.path.join(EXAMPLES, "data"), tmp_path / "data", dirs_exist_ok=True)
        for name in names:
            src = os.path.join(HERE, name) if os.path.exists(os.path.join(HERE, name)) else os.path.join(EXAMPLES, name)
            shutil.copy(src, tmp_path / name)
        return str(tmp_path)

    return copy


def run_scopeflow(*args, cwd: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """`scopeflow ARGS` as a subprocess; fails the test with its output if it exits non-zero."""
    proc = subprocess.run([*SCOPEFLOW, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"scopeflow {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}"
    return proc
