"""A compiled job runs with the runtime alone: in a fresh virtual environment that has pyspark and
scopeflow's runtime (the zip executors get) but neither lark nor the compiler, `python job.py` computes
the connected components of the example graph, checked against networkx."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import reference
from conftest import EXAMPLES, read_output
from venvs import linked_venv

pytestmark = pytest.mark.spark

# What the runtime needs on a driver besides the standard library: pyspark (and py4j), the Arrow stack
# for Python functions, attrs, and rich for progress (with what rich imports).
RUNTIME_PACKAGES = ("pyspark", "py4j", "pyarrow", "numpy", "numpy.libs", "pandas", "dateutil", "pytz", "tzdata",
                    "six.py", "attr", "attrs", "rich", "markdown_it", "mdurl", "pygments", "typing_extensions.py")


def test_a_compiled_job_runs_without_lark_and_the_compiler(tmp_path):
    from scopeflow.api import compile_file
    from scopeflow.runtime.shipping import runtime_zip

    work = tmp_path / "work"
    shutil.copytree(os.path.join(EXAMPLES, "data"), work / "data")
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), work)
    (work / "job.py").write_text(compile_file(str(work / "connected_components.flow")))
    python = linked_venv(tmp_path / "venv", RUNTIME_PACKAGES)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = runtime_zip()

    probe = subprocess.run([python, "-c", "import scopeflow.runtime, scopeflow.stdlib.functions\n"
                            "for m in ('lark', 'scopeflow.compiler', 'scopeflow.dsl'):\n"
                            "    try:\n        __import__(m)\n    except ImportError:\n        print('no', m)\n"
                            # a user function's failure is told without the compiler's folders to hide
                            "from scopeflow.runtime.failures import internal_roots\n"
                            "print('roots', len(internal_roots()))"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split("\n")[:4] == ["no lark", "no scopeflow.compiler", "no scopeflow.dsl", "roots 4"]

    proc = subprocess.run([python, "job.py", "--quiet", "--param", "edges_path=data/kcore.csv"], cwd=str(work),
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(read_output(str(work / "out" / "components"), (int, int)))
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "kcore.csv"), (int, int))
    assert got == reference.connected_components(edges)
