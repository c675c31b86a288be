"""A compiled job runs with the runtime alone: in a fresh virtual environment that has pyspark and
scopeflow's runtime (the zip executors get) but neither lark nor the compiler, `python job.py` computes
the connected components of the example graph, checked against networkx."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

import reference
from conftest import EXAMPLES, read_output

pytestmark = pytest.mark.spark

# What the runtime needs on a driver besides the standard library: pyspark (and py4j), the Arrow stack
# for Python functions, attrs, and rich for progress (with what rich imports).
RUNTIME_PACKAGES = ("pyspark", "py4j", "pyarrow", "numpy", "numpy.libs", "pandas", "dateutil", "pytz", "tzdata",
                    "six.py", "attr", "attrs", "rich", "markdown_it", "mdurl", "pygments", "typing_extensions.py")


def runtime_only_python(folder) -> str:
    """A venv whose site-packages links the runtime's dependencies only (no lark, no scopeflow)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    python = str(folder / "bin" / "python")
    site = subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()
    source = sysconfig.get_paths()["purelib"]
    for name in RUNTIME_PACKAGES:
        if os.path.exists(os.path.join(source, name)):
            os.symlink(os.path.join(source, name), os.path.join(site, name))
    return python


def test_a_compiled_job_runs_without_lark_and_the_compiler(tmp_path):
    from scopeflow.api import compile_file
    from scopeflow.runtime.shipping import runtime_zip

    work = tmp_path / "work"
    shutil.copytree(os.path.join(EXAMPLES, "data"), work / "data")
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), work)
    (work / "job.py").write_text(compile_file(str(work / "connected_components.flow")))
    python = runtime_only_python(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = runtime_zip()

    probe = subprocess.run([python, "-c", "import scopeflow.runtime, scopeflow.stdlib.functions\n"
                            "for m in ('lark', 'scopeflow.compiler', 'scopeflow.dsl'):\n"
                            "    try:\n        __import__(m)\n    except ImportError:\n        print('no', m)"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split("\n")[:3] == ["no lark", "no scopeflow.compiler", "no scopeflow.dsl"]

    proc = subprocess.run([python, "job.py", "--quiet", "--param", "edges_path=data/kcore.csv"], cwd=str(work),
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(read_output(str(work / "out" / "components"), (int, int)))
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "kcore.csv"), (int, int))
    assert got == reference.connected_components(edges)
