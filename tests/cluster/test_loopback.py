"""A local run listens on the loopback interface only: the driver JVM, py4j and Python workers."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from cluster.conftest import EXAMPLES

pytestmark = pytest.mark.spark
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def listening(pid: int) -> set[tuple[str, int, int, str]]:
    """(address, port, pid, name) of every TCP socket listening in the process tree of `pid`."""
    out = set()
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN:
                    out.add((c.laddr.ip, c.laddr.port, p.pid, p.name()))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def test_local_run_listens_on_loopback_only(tmp_path):
    import shutil

    shutil.copytree(os.path.join(EXAMPLES, "data"), tmp_path / "data")
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}  # the runtime must set it itself
    proc = subprocess.Popen([sys.executable, "-m", "scopeflow.cli", "run", "connected_components.flow", "--quiet"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set = set()
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= listening(proc.pid)
        time.sleep(0.2)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    jvm = {s for s in seen if s[3] == "java"}
    assert jvm, f"no listening socket of the driver JVM was sampled: {seen}"
    assert {s[0] for s in seen} <= LOOPBACK, sorted(seen)
