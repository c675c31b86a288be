"""Generated PySpark: golden files for every example, and the script runs like `scopeflow run`."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT, read_output
from scopeflow.compiler import check_file
from scopeflow.compiler.codegen import plan_to_pyspark

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "codegen")
FLOWS = sorted(glob.glob(os.path.join(EXAMPLES, "*.flow")))


def generated(path: str) -> str:
    result = check_file(path)
    assert not result.errors, [d.render() for d in result.errors]
    code = plan_to_pyspark(result.plan, os.path.abspath(path))
    return code.replace(os.path.abspath(EXAMPLES), "<examples>")


@pytest.mark.parametrize("flow", FLOWS, ids=[os.path.basename(f) for f in FLOWS])
def test_generated_code_matches_golden(flow):
    code = generated(flow)
    golden = os.path.join(GOLDEN, os.path.basename(flow)[:-5] + ".py")
    if os.environ.get("SCOPEFLOW_UPDATE_GOLDEN") or not os.path.exists(golden):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(golden, "w") as fh:
            fh.write(code)
    with open(golden) as fh:
        assert code == fh.read(), f"generated code changed; review and rerun with SCOPEFLOW_UPDATE_GOLDEN=1"
    compile(code, flow, "exec")  # it is valid Python
    assert generated(flow) == code, "generation is deterministic"


def _copy_example(tmp_path, name):
    shutil.copytree(os.path.join(EXAMPLES, "data"), tmp_path / "data")
    shutil.copy(os.path.join(EXAMPLES, name), tmp_path / name)
    return str(tmp_path / name)


@pytest.mark.spark
def test_script_python_and_spark_submit_match_scopeflow_run(tmp_path, run_cli):
    flow = _copy_example(tmp_path, "connected_components.flow")
    params = ["--param", "edges_path=data/kcore.csv"]
    proc = run_cli("run", flow, "--quiet", *params)
    assert proc.returncode == 0, proc.stderr
    want = sorted(read_output(str(tmp_path / "out/components"), (int, int)))
    assert len(want) == 13
    script = tmp_path / "job.py"
    assert run_cli("compile", flow, "-o", str(script)).returncode == 0
    shutil.rmtree(tmp_path / "out")
    proc = subprocess.run([sys.executable, str(script), "--quiet", *params], capture_output=True, text=True,
                          cwd="/", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert sorted(read_output(str(tmp_path / "out/components"), (int, int))) == want
    shutil.rmtree(tmp_path / "out")
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([submit, "--master", "local[2]", "--conf", "spark.driver.host=127.0.0.1",
                           str(script), "--quiet", *params], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(read_output(str(tmp_path / "out/components"), (int, int))) == want


def test_generated_script_help_and_bad_param(tmp_path):
    flow = _copy_example(tmp_path, "connected_components.flow")
    script = tmp_path / "job.py"
    script.write_text(plan_to_pyspark(check_file(flow).plan, flow))
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--param" in proc.stdout
    proc = subprocess.run([sys.executable, str(script), "--param", "nope=1"], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such param" in proc.stderr
