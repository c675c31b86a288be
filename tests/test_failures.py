"""Run-time failures say what failed in the user's terms (issue 22, item 4): the source or sink by name
and `.flow` line, the file and the record or value, the path and the OS reason, a code (E05xx) and a
hint, with the full Java error kept in the JVM log. And `on_error` says what a malformed record does.

Real files, real Spark, real CLI runs; a folder made read-only while the run goes on is read-only for root
too by running without the capability that lets root write anywhere, and a full disk is a real 256 KiB tmpfs
mounted in a private mount namespace. Where neither can be had, those tests skip and say why. OOM and a lost
executor cannot be caused cheaply: their mapping is tested with real Java exceptions thrown in the JVM.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import read_output, without_permission_override
from scopeflow.api import compile_to_module, run_file
from scopeflow.runtime import failures
from scopeflow.runtime.errors import RuntimeFailure
from scopeflow.runtime.launcher import execute

pytestmark = pytest.mark.spark


def write(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return str(path)


def line_of(flow: str, text: str) -> int:
    """The 1-based line of `flow` that contains `text`."""
    return next(i for i, ln in enumerate(open(flow).read().splitlines(), 1) if text in ln)


def cli(*args, tmp_path, prefix=()):
    """`scopeflow ARGS` as a subprocess, its temp folder (where the JVM log goes) in tmp_path/temp."""
    temp = tmp_path / "temp"
    temp.mkdir(exist_ok=True)
    return subprocess.run([*prefix, sys.executable, "-m", "scopeflow.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(temp)), timeout=600)


def jvm_log(tmp_path) -> tuple[str, str]:
    logs = list((tmp_path / "temp").glob("scopeflow-jvm-*.log"))
    assert len(logs) == 1, logs
    return str(logs[0]), logs[0].read_text(errors="replace")


def assert_user_terms(err: str) -> None:
    """No JVM wall, no py4j object ids, no Python traceback of scopeflow's own."""
    assert "Spark failed: An error occurred" not in err
    assert not re.search(r"\bo\d+\.\w+", err), err
    assert "Traceback" not in err and "py4j" not in err.lower() and "\tat org.apache" not in err


FLOW = """
    source edges = read csv("data/edges.csv", header = true) schema (src: long, dst: long, w: double)
    sink edges | where(w > 1.0) -> csv("out/heavy", header = true)
"""


def test_malformed_csv_row_names_source_file_line_and_record(tmp_path):
    write(tmp_path / "data/edges.csv", 'src,dst,w\n1,2,0.5\n2,3,1.5\n3,"4,1.5\n4,5,2.5\n')
    flow = write(tmp_path / "t.flow", FLOW)
    proc = cli("run", flow, "--quiet", tmp_path=tmp_path)
    err = proc.stderr
    assert proc.returncode == 4, err
    assert err.startswith("error[E0504]: source `edges`: malformed record"), err
    assert f"{flow}:{line_of(flow, 'source edges')}:1" in err
    assert "data/edges.csv" in err and "line 4" in err and '3,"4,1.5' in err
    assert "sink" in err and f"{flow}:{line_of(flow, 'sink edges')}" in err  # what was running
    assert 'on_error = "skip"' in err  # the hint
    log, text = jvm_log(tmp_path)
    assert f"= note: the full Java error is in {log}" in err
    assert "MALFORMED_CSV_RECORD" in text and "\tat org.apache.spark" in text
    assert_user_terms(err)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_value_of_the_wrong_type_names_field_value_and_line(tmp_path):
    write(tmp_path / "data/edges.csv", "src,dst,w\n1,2,0.5\n3,4.0,1.5\n")
    flow = write(tmp_path / "t.flow", FLOW)
    proc = cli("run", flow, "--quiet", tmp_path=tmp_path)
    err = proc.stderr
    assert proc.returncode == 4, err
    first = err.splitlines()[0]
    assert first.startswith("error[E0505]: source `edges`: "), err
    assert '"4.0"' in first and "`dst`" in first and "long" in first
    assert "data/edges.csv" in err and "line 3" in err
    assert f"{flow}:{line_of(flow, 'source edges')}:1" in err
    assert_user_terms(err)


def test_cast_of_a_bad_value_names_the_sink(tmp_path):
    flow = write(tmp_path / "t.flow", """
        source xs = values (s: string) [("1"), ("4.0")]
        sink xs | select(n = cast(s as long)) -> csv("out/n", header = true)
    """)
    proc = cli("run", flow, "--quiet", tmp_path=tmp_path)
    err = proc.stderr
    assert proc.returncode == 4, err
    assert err.startswith("error[E0505]: "), err
    assert "'4.0'" in err and "long" in err.splitlines()[0]
    assert f"{flow}:{line_of(flow, 'sink xs')}:1" in err and "sink" in err
    assert '"ts"' not in err and "DataFrameQueryContextLogger" not in err  # pyspark's own JSON log line
    assert_user_terms(err)


ON_ERROR = "src,dst,w\n1,2,0.5\n3,4.0,1.5\n5,6\n7,8,x\n9,10,2.5\n"


@pytest.mark.parametrize("on_error,mode,want", [
    ("skip", "DROPMALFORMED", [("1", "2", "0.5"), ("9", "10", "2.5")]),
    ("null", "PERMISSIVE", [("1", "2", "0.5"), ("3", "", "1.5"), ("5", "6", ""), ("7", "8", ""), ("9", "10", "2.5")]),
])
def test_on_error_skip_and_null_behave_like_sparks_modes(spark, tmp_path, on_error, mode, want):
    write(tmp_path / "data/edges.csv", ON_ERROR)
    flow = write(tmp_path / "t.flow", f"""
        source edges = read csv("data/edges.csv", header = true, on_error = "{on_error}") schema (src: long, dst: long, w: double)
        sink edges -> csv("out/e", header = true)
    """)
    run_file(flow, spark=spark)
    got = sorted(read_output(str(tmp_path / "out/e")), key=lambda r: int(r[0]))
    assert got == want  # by hand, from Spark's documented modes
    plain = spark.read.option("header", True).option("mode", mode).schema("src long, dst long, w double") \
        .csv(str(tmp_path / "data/edges.csv")).collect()
    assert [tuple("" if v is None else str(v) for v in r) for r in sorted(plain)] == want


def test_a_failure_in_a_loop_round_names_the_source_and_the_loop(spark, tmp_path):
    write(tmp_path / "edges.csv", "src,dst\n1,2\n2,x\n")
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("edges.csv", header = true) schema (src: long, dst: long)
        source seeds = values (v: long) [(1)]
        reached = loop reach(r = seeds) with (e = edges) {
            next = r | join(e, on r.v == e.src) | select(v = e.dst) | union(r) | distinct
            feedback r <- next
            emit next
        }
        sink reached -> csv("out/reached", header = true)
    """)
    with pytest.raises(RuntimeFailure) as info:
        run_file(flow, spark=spark)
    failure = info.value
    assert failure.code == "E0505"
    assert failure.at.line == line_of(flow, "source edges")
    text = failure.render()
    assert '"x"' in text and "`dst`" in text and "line 3" in text
    assert "loop `reach`" in text and "round 0" in text and f"{flow}:{line_of(flow, 'loop reach')}" in text


# a run whose sink folder becomes read-only once the run has started, as another process may make it: preflight
# found it writable (a folder read-only before the run is refused then, E0404: tests/test_sinks.py)
TURNS_READ_ONLY = """
import os, sys
from scopeflow.api import compile_to_module
from scopeflow.runtime.launcher import execute

flow, folder = sys.argv[1:]
module = compile_to_module(flow)
pipeline = module.pipeline


def pipeline_while_the_folder_turns_read_only(run):
    os.chmod(folder, 0o555)  # after the checks before Spark, before the sink writes
    pipeline(run)


module.pipeline = pipeline_while_the_folder_turns_read_only
sys.exit(execute(module)[0])
"""


def test_a_sink_folder_made_read_only_during_the_run_is_permission_denied_with_the_path(tmp_path):
    write(tmp_path / "data/edges.csv", "src,dst,w\n1,2,0.5\n3,4,1.5\n")
    flow = write(tmp_path / "t.flow", FLOW.replace('"out/heavy"', '"locked/heavy"'))
    locked = tmp_path / "locked"
    locked.mkdir()
    script = write(tmp_path / "turns_read_only.py", TURNS_READ_ONLY)
    temp = tmp_path / "temp"
    temp.mkdir()
    try:
        proc = subprocess.run([*without_permission_override(), sys.executable, script, flow, str(locked)],
                              capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(temp)), timeout=600)
    finally:
        locked.chmod(0o755)
    err = proc.stderr
    assert proc.returncode == 4, err
    assert err.startswith("error[E0506]: "), err
    assert "permission denied" in err.splitlines()[0].lower()
    assert str(locked) in err
    assert f"{flow}:{line_of(flow, 'sink edges')}:1" in err
    assert "chmod" in err  # the hint
    assert_user_terms(err)
    assert os.listdir(locked) == []


def test_full_disk_says_no_space_left_with_the_path(tmp_path):
    """A real full file system: a 256 KiB tmpfs, mounted in a mount namespace of the run's own."""
    full = tmp_path / "full"
    full.mkdir()
    wrap = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=256k tmpfs "$1" && shift && exec "$@"', "sh",
            str(full)]
    if shutil.which("unshare") is None or subprocess.run([*wrap, "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs unshare and CAP_SYS_ADMIN): no full disk to test on")
    with open(tmp_path / "big.csv", "w") as fh:  # ~1.6 MB out, 256 KiB of room
        fh.write("src,dst,w\n")
        fh.writelines(f"{i},{i + 1},{i * 0.25}\n" for i in range(80_000))
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("big.csv", header = true) schema (src: long, dst: long, w: double)
        sink edges -> csv("full/out", header = true)
    """)
    proc = cli("run", flow, "--quiet", tmp_path=tmp_path, prefix=wrap)
    err = proc.stderr
    assert proc.returncode == 4, err
    assert err.startswith("error[E0507]: "), err
    assert "no space left on device" in err.splitlines()[0].lower()
    assert str(full / "out") in err
    assert f"{flow}:{line_of(flow, 'sink edges')}:1" in err
    assert_user_terms(err)


def test_a_crashed_python_worker_is_a_lost_worker(spark, tmp_path, capsys):
    (tmp_path / "crash.py").write_text("import os\n\n\ndef die(a: int) -> int:\n    os._exit(3)\n")
    flow = write(tmp_path / "t.flow", """
        use python "crash.py" as m
        source e = values (a: long) [(1), (2)]
        sink e | derive(b = m.die(a)) -> csv("out/e", header = true)
    """)
    code, _ = execute(compile_to_module(flow), spark=spark)
    err = capsys.readouterr().err
    assert code == 4
    assert err.startswith("error[E0508]: "), err
    assert "Python worker" in err and f"{flow}:{line_of(flow, 'sink e')}:1" in err
    assert_user_terms(err)


# ---- the mapping of what cannot be caused cheaply, with real Java exceptions ---------------------------

def thrown(spark, java_exception):
    """`java_exception` thrown in the JVM and caught by py4j, as a Spark call's failure is."""
    from py4j.protocol import Py4JJavaError

    try:
        spark._jvm.java.util.concurrent.CompletableFuture.failedFuture(java_exception).get()
    except Py4JJavaError as exc:
        return exc
    raise AssertionError("nothing was thrown")


def test_java_failures_map_to_their_codes(spark, tmp_path):
    jvm = spark._jvm
    scene = failures.Scene(action=failures.Action("sink `x -> csv(\"out/x\")`", None), inputs=())
    cases = [
        (jvm.java.lang.OutOfMemoryError("Java heap space"), "E0509", "out of memory"),
        (jvm.java.io.IOException("No space left on device"), "E0507", "no space left on device"),
        (jvm.java.nio.file.AccessDeniedException("/data/out/part-0"), "E0506", "/data/out/part-0"),
        (jvm.org.apache.spark.SparkException(
            "Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent failure: Lost task "
            "0.3 in stage 3.0 (TID 9) (10.0.0.7 executor 2): ExecutorLostFailure (executor 2 exited caused by one "
            "of the running tasks) Reason: Remote RPC client disassociated."), "E0508", "executor"),
        (jvm.java.lang.IllegalStateException("something else entirely"), "E0599", "something else entirely"),
    ]
    for java_exception, code, says in cases:
        failure = failures.explain(thrown(spark, java_exception), scene)
        assert failure.code == code, (code, failure.render())
        assert says in failure.message.lower() or says in failure.message, failure.render()
        assert "sink `x" in failure.message
    # a real Spark error with a condition: reading a path that is not there
    try:
        spark.read.csv(str(tmp_path / "nope.csv")).collect()
    except Exception as exc:
        failure = failures.explain(exc, scene)
    assert failure.code == "E0501" and str(tmp_path / "nope.csv") in failure.render()


def test_every_rule_has_a_unique_code_and_a_meaning():
    codes = [r.code for r in failures.RULES]
    assert len(codes) == len(set(codes)) and codes[-1] == "E0599"
    for r in failures.RULES:
        assert re.fullmatch(r"E05\d\d", r.code) and r.meaning and r.example and r.hint


def test_a_bug_of_scopeflow_is_an_internal_error_not_a_failure_of_spark(spark, tmp_path, capsys):
    """An exception that is not Spark's, py4j's or the file system's comes from scopeflow itself: it is told as
    an internal error with its traceback in the JVM log, not as E0599 "any other failure of Spark"."""
    flow = write(tmp_path / "t.flow", """
        source xs = values (s: string) [("1")]
        sink xs -> csv("out/n", header = true)
    """)
    module = compile_to_module(flow)

    def broken(run):  # a generated module whose pipeline hits a bug of the runtime's
        run.no_such_method("n001")

    module.pipeline = broken
    code, _ = execute(module, spark=spark)
    err = capsys.readouterr().err
    assert code == 4
    first = err.splitlines()[0]
    assert first == "error: internal error in scopeflow: AttributeError: 'RunContext' object has no attribute " \
                    "'no_such_method'", err
    assert "E05" not in err and "Spark failed" not in err and "please report it" in err
    log = re.search(r"its traceback is in (\S+)", err).group(1)
    text = open(log).read()
    assert "an internal error of scopeflow" in text and "run.no_such_method" in text and "AttributeError" in text
    assert not (tmp_path / "out").exists()
