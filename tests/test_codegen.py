"""Generated PySpark: golden files for every example, and the script runs like `scopeflow run`."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

import reference
from conftest import EXAMPLES, check_golden, read_output
from scopeflow.compiler import check_file
from scopeflow.compiler.codegen import plan_to_pyspark

FLOWS = sorted(glob.glob(os.path.join(EXAMPLES, "*.flow")))


def generated(path: str) -> str:
    result = check_file(path)
    assert not result.errors, [d.render() for d in result.errors]
    code = plan_to_pyspark(result.plan, os.path.abspath(path))
    return code.replace(os.path.abspath(EXAMPLES), "<examples>")


@pytest.mark.parametrize("flow", FLOWS, ids=[os.path.basename(f) for f in FLOWS])
def test_generated_code_matches_golden(flow):
    code = generated(flow)
    check_golden("codegen", os.path.basename(flow)[:-5] + ".py", code)
    compile(code, flow, "exec")  # it is valid Python
    assert generated(flow) == code, "generation is deterministic"


def _copy_example(tmp_path, name):
    shutil.copytree(os.path.join(EXAMPLES, "data"), tmp_path / "data")
    shutil.copy(os.path.join(EXAMPLES, name), tmp_path / name)
    return str(tmp_path / name)


@pytest.mark.spark
def test_script_under_python_and_spark_submit_equals_the_reference(tmp_path, run_cli):
    flow = _copy_example(tmp_path, "connected_components.flow")
    params = ["--param", "edges_path=data/kcore.csv"]
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "kcore.csv"), (int, int))
    want = sorted(reference.connected_components(edges).items())
    assert len(want) == 13
    script = tmp_path / "job.py"
    assert run_cli("compile", flow, "-o", str(script)).returncode == 0
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


COMBINER_CASES = {
    # the variable's only reader is a reduce keyed by plain columns: it combines what is fed back
    "reduce": ("best = x | reduce(by k, v = min(v))\nfeedback x <- best | select(k, v = v - 1)\nemit state best",
               ("reduce", "best")),
    "distinct": ("d = x | distinct\nfeedback x <- d | select(k, v = v + 1) | where(v < 4)\nemit d", ("distinct", "d")),
    # the variable is read twice, through another operator, or by a reduce with a computed key: no combiner
    "read twice": ("best = x | reduce(by k, v = min(v))\nfeedback x <- best | select(k, v = v - 1)\n"
                   "emit x as seen\nemit state best as final", None),
    "through a where": ("best = x | where(v > 0) | reduce(by k, v = min(v))\n"
                        "feedback x <- best | select(k, v = v - 1)\nemit state best", None),
    "computed key": ("best = x | reduce(by k = k + 0, v = min(v))\nfeedback x <- best | select(k, v = v - 1)\n"
                     "emit state best", None),
}


def _loop_plan(tmp_path, body: str, imports: bool = False, header: str = ""):
    """The checked plan of loop `l(x = seed)` (`with (e = edges)` if `imports`) around `body`, and its file. An
    output `as final` is the one sunk."""
    flow = tmp_path / "c.flow"
    flow.write_text("source seed = values (k: long, v: long) [(1, 2), (1, 3)]\n"
                    + ("source edges = values (a: long, b: long) [(1, 2), (2, 3)]\n" if imports else "")
                    + "out = loop l(x = seed)" + (" with (e = edges)" if imports else "") + f" max 5 on max stop{header}"
                    + " {\n" + body + "\n}\n"
                    + ("sink out.final -> console()\n" if "as final" in body else "sink out -> console()\n"))
    result = check_file(str(flow))
    assert not result.errors, [d.render() for d in result.errors]
    return result.plan, flow


@pytest.mark.parametrize("case", sorted(COMBINER_CASES))
def test_feedback_combiner_only_for_a_variables_only_reader(tmp_path, case):
    body, reader = COMBINER_CASES[case]
    plan, flow = _loop_plan(tmp_path, body)
    var = next(n for n in plan.nodes.values() if n.kind == "var")
    combiner = plan.feedback_combiner(var.id)
    assert (combiner and (plan.nodes[combiner].kind, plan.nodes[combiner].name)) == reader
    code = plan_to_pyspark(plan, str(flow))
    if reader:
        assert f"combine={{'x': '{combiner}'}}," in code
    else:
        assert "combine=" not in code


def test_a_shared_stream_says_whether_its_cached_plan_sorts(tmp_path):
    """`share(..., sorts=True)` (runtime `RunContext.share`: its counters keep Spark's default) for a stream whose
    own cached plan sorts; not for one that reads a sorted shared stream, nor one that reads a loop's output
    (a checkpoint), whatever sorts before them."""
    flow = tmp_path / "s.flow"
    flow.write_text("source x = values (a: long, b: long) [(2, 1), (1, 2)]\n"
                    "y = x | where(a > 0) | sort(by a)\nsink y -> console()\nsink y -> console()\n"
                    "w = y | select(a, b = b + 1)\nsink w -> console()\nsink w -> console()\n"
                    "z = x | where(b > 0) | sort(by b)\n"
                    "out = loop l(v = z) max 5 on max stop {\nbest = v | reduce(by a, b = min(b))\n"
                    "feedback v <- best | select(a, b = b - 1)\nemit state best\n}\n"
                    "o = out | select(a, b)\nsink o -> console()\nsink o -> console()\n")
    result = check_file(str(flow))
    assert not result.errors, [d.render() for d in result.errors]
    code = plan_to_pyspark(result.plan, str(flow))
    shares = {line.split(" = ")[0].strip(): "sorts=True" in line for line in code.splitlines() if ".share, " in line}
    assert shares == {"x": False, "y": True, "w": False, "o": False}, shares


DEFER_CASES = {
    # what is fed back is computed from a reduce's (or distinct's) output and the import alone: deferred, the
    # operators below the anchors running in the next round's job
    "reduce": ("best = x | reduce(by k, v = min(v))\nnext = best | join(e, on best.k == e.a) | select(k = e.b, v = v + 1)\n"
               "feedback x <- next\nemit state best", (["best"], ["join", "next"])),
    "distinct": ("d = x | distinct\nnext = d | join(e, on d.k == e.a) | select(k = e.b, v) | where(v < 4)\n"
                 "feedback x <- next\nemit d", (["d"], ["join", "select", "next"])),
    "a union of two": ("best = x | reduce(by k, v = min(v))\nup = best | select(k, v = v + 1)\n"
                       "feedback x <- up | union(best | join(e, on best.k == e.a) | select(k = e.b, v))\nemit state best",
                       (["best"], ["up", "join", "select", "union"])),
    "import on the right of a left join": (
        "best = x | reduce(by k, v = min(v))\nnext = best | join(e, on best.k == e.a, kind = left) | select(k, v)\n"
        "feedback x <- next\nemit state best", (["best"], ["join", "next"])),
    # the variable read directly (the plan would grow round after round), or twice
    "no state": ("next = x | join(e, on x.k == e.a) | select(k = e.b, v)\nfeedback x <- next\nemit x", None),
    "read twice": ("best = x | reduce(by k, v = min(v))\nfeedback x <- best | select(k, v = v - 1)\n"
                   "emit x as seen\nemit state best as final", None),
    # an operator of the plan also read by something else of the round (here an emit)
    "fed back and emitted": ("best = x | reduce(by k, v = min(v))\nnext = best | select(k, v = v - 1)\n"
                             "feedback x <- next\nemit next", None),
    # a round with nothing in flight must change nothing: no stream that is not empty then ...
    "union with the import": ("best = x | reduce(by k, v = min(v))\n"
                              "feedback x <- best | select(k, v) | union(e | select(k = a, v = b))\nemit state best",
                              None),
    "import on the left of a left join": (
        "best = x | reduce(by k, v = min(v))\nnext = e | join(best, on e.a == best.k, kind = left) | select(k = b, v)\n"
        "feedback x <- next\nemit state best", None),
    "a global group": ("best = x | reduce(by k, v = min(v))\nn = best | group(v = count())\n"
                       "feedback x <- best | select(k, v = v - 1)\nemit n as counts\nemit state best as final", None),
    "a count of the import": ("best = x | reduce(by k, v = min(v))\nn = e | reduce(by a, n = count())\n"
                              "feedback x <- best | join(e, on best.k == e.a) | select(k = e.b, v)\n"
                              "emit state best as final\nemit state n as counts", None),
    "a count of a global group": ("best = x | reduce(by k, v = min(v))\n"
                                  "t = best | group(n = count()) | select(o = 1) | reduce(by o, n = count())\n"
                                  "feedback x <- best | join(e, on best.k == e.a) | select(k = e.b, v)\n"
                                  "emit state best as final\nemit state t as ticks", None),
    # an operator of the plan read twice (it would be stored for its readers)
    "read twice in the plan": ("best = x | reduce(by k, v = min(v))\nj = best | join(e, on best.k == e.a)\n"
                               "feedback x <- j | where(b > 1) | select(k = b, v) | union(j | where(b <= 1) | select(k = b, v))\n"
                               "emit state best", None),
    # ... and no stream of the last round alone
    "emit last": ("best = x | reduce(by k, v = min(v))\nnext = best | select(k, v = v - 1)\nfeedback x <- next\n"
                  "emit last best", None),
    "until": ("best = x | reduce(by k, v = min(v))\nnext = best | select(k, v = v - 1)\nfeedback x <- next\n"
              "emit state best", None),
}


@pytest.mark.parametrize("case", sorted(DEFER_CASES))
def test_deferred_feedback_only_from_states_and_imports(tmp_path, case):
    body, want = DEFER_CASES[case]
    plan, flow = _loop_plan(tmp_path, body, imports=True, header=" until empty(best)" if case == "until" else "")
    scope = next(s for s in plan.loop_scopes())
    defer, late = plan.deferred_feedback(scope)
    code = plan_to_pyspark(plan, str(flow))
    if want is None:
        assert (defer, late) == ({}, ()) and "defer=" not in code
        return
    names = lambda ids: [plan.nodes[i].name or plan.nodes[i].kind for i in ids]  # noqa: E731
    var = next(n for n in plan.nodes.values() if n.kind == "var")
    assert list(defer) == [var.id] and (names(defer[var.id]), names(late)) == want
    assert f"defer={{'x': {list(defer[var.id])!r}}}," in code and f"late={list(late)!r}," in code
