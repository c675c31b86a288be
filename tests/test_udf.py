"""Python functions (docs/language.md#python-functions): examples/udf_scores.flow runs and matches plain
Python; a user function that raises is reported with the .flow line and the user's traceback."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import pytest

import reference
from conftest import EXAMPLES, read_output
from scopeflow.api import compile_to_module, run_file
from scopeflow.runtime.failures import user_frames as _user_frames
from scopeflow.runtime.launcher import execute

pytestmark = pytest.mark.spark


def test_udf_scores_example(spark, example_copy):
    flow = example_copy("udf_scores.flow")
    run_file(flow, spark=spark)
    out = os.path.dirname(flow)
    points = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "points.csv"), (int, float, float))

    # the same computation in plain Python, written independently of examples/udfs.py
    want_scores, want_corners = [], []
    for pid, x, y in points:
        score = round(math.sqrt(x * x + y * y), 3)
        grade = "near" if score < 5 else "mid" if score < 9 else "far"
        if grade == "far" or score <= 1.0:
            continue
        want_scores.append((pid, score, grade))
        for cx in (math.floor(x), math.floor(x) + 1):
            for cy in (math.floor(y), math.floor(y) + 1):
                want_corners.append((pid, grade, f"{cx}:{cy}", round(abs(x - cx) + abs(y - cy), 6)))

    got = read_output(os.path.join(out, "out/scores"), (int, float, str))
    assert got == want_scores  # sorted by id
    assert {g for _, _, g in got} == {"near", "mid"}, "the where() should have dropped something"
    assert len(want_scores) < len(points)
    got = read_output(os.path.join(out, "out/corners"), (int, str, str, float))
    assert sorted(got) == sorted(want_corners)


BOOM_PY = '''\
def ratio(a: int, b: int) -> float:
    return a / b


def rows_failing(rows):
    for r in rows:
        yield {"a": r["a"], "q": 1 // r["b"]}
'''

BOOM_FLOW = '''\
# a Python function that divides by zero at run time
use python "boom.py" as m
source e = values (a: long, b: long) [(1, 2), (3, 0), (5, 1)]

r = e
    | where(a > 0)
    | derive(q = m.ratio(a, b))
sink r -> console()
'''


def test_scalar_function_error_names_flow_line_and_user_traceback(tmp_path):
    home = tmp_path / "scopeflow" / "examples"  # a user working in a checkout called `scopeflow`
    home.mkdir(parents=True)
    (home / "boom.py").write_text(BOOM_PY)
    flow = home / "boom.flow"
    flow.write_text(BOOM_FLOW)
    proc = subprocess.run([sys.executable, "-m", "scopeflow.cli", "run", str(flow), "--quiet"],
                          capture_output=True, text=True, timeout=600, cwd=home)
    err = proc.stderr
    assert proc.returncode == 4, err
    assert err.startswith(f"error[E0510]: Python function `ratio` failed ({flow}:7)"), err
    assert f"{flow}:7" in err  # the line of `m.ratio(...)`
    assert "ratio" in err and "ZeroDivisionError" in err
    assert "boom.py" in err and "return a / b" in err  # the user's own frame
    assert "py4j" not in err.lower()
    assert "at org.apache" not in err
    assert "runtime/udf.py" not in err  # scopeflow's wrapper frames are dropped


def test_table_function_error_names_flow_line(tmp_path, spark, capsys):
    (tmp_path / "boom.py").write_text(BOOM_PY)
    flow = tmp_path / "boom_apply.flow"
    flow.write_text(textwrap.dedent('''\
        use python "boom.py" as m
        source e = values (a: long, b: long) [(1, 2), (3, 0)]
        sink e | apply(m.rows_failing) schema (a: long, q: long) -> console()
        '''))
    module = compile_to_module(str(flow))
    code, _ = execute(module, spark=spark)
    err = capsys.readouterr().err
    assert code == 4, err
    assert f"Python function `rows_failing` failed ({flow}:3)" in err
    assert "ZeroDivisionError" in err and "py4j" not in err.lower() and "at org.apache" not in err
    assert "boom.py" in err and "1 // r[\"b\"]" in err  # the user's own frame
    assert "runtime/udf.py" not in err and "pyspark" not in err


def test_user_frames_are_told_from_scopeflow_and_pyspark_by_location():
    roots = ("/venv/lib/python3.11/site-packages/pyspark/", "/home/me/scopeflow/runtime/")
    tb = "\n".join([
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 1, in main',
        "    process()",
        '  File "/home/me/scopeflow/runtime/udf.py", line 9, in call',
        "    return fn(*args)",
        '  File "/work/executor/scopeflow-0.1-abc.zip/scopeflow/runtime/udf.py", line 9, in call',
        "    return fn(*args)",
        '  File "/home/me/scopeflow/examples/boom.py", line 2, in ratio',
        "    return a / b",
        "ZeroDivisionError: division by zero",
    ])
    assert _user_frames(tb, roots).splitlines() == [
        "Traceback (most recent call last):",
        '  File "/home/me/scopeflow/examples/boom.py", line 2, in ratio',
        "    return a / b",
        "ZeroDivisionError: division by zero",
    ]
    # an error raised inside pyspark (say, a bad return value) still shows its message
    inner = tb.rsplit("\n", 3)[0] + "\nTypeError: bad value"
    assert _user_frames(inner, roots).splitlines()[-1] == "TypeError: bad value"
