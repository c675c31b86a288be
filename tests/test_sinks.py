"""Sink targets (docs/language.md "Sink modes", issue 22 items 2, 3 and the sinks half of 5): what a sink may
replace, its modes, `partition_by` and `single_file`, unsafe sink paths refused at check time, and every
refusal that needs no JVM made before Spark starts. Real files, real Spark, real CLI subprocesses; outputs are
compared with what the csv module reads from the inputs, never with scopeflow's own output alone."""
from __future__ import annotations

import csv
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from conftest import write_csv

from scopeflow.api import run_file
from scopeflow.compiler import check_flow
from scopeflow.runtime.errors import RuntimeFailure

pytestmark = pytest.mark.spark


def write_flow(tmp_path, text: str, name: str = "t.flow") -> str:
    """A .flow file of `text`'s lines, each without its indentation."""
    path = tmp_path / name
    path.write_text("".join(line.strip() + "\n" for line in text.splitlines() if line.strip()))
    return str(path)


def reference_rows(*paths) -> Counter:
    """The rows of CSV inputs as (long, long) tuples, read with the csv module (the independent reference)."""
    out = Counter()
    for p in paths:
        with open(p, newline="") as fh:
            reader = csv.reader(fh)
            next(reader)
            out.update(tuple(int(x) for x in row) for row in reader if row)
    return out


def data_files(directory, pattern: str = "*.csv") -> list[str]:
    """The data files under an output directory (at any depth), not Spark's or scopeflow's `_`/`.` files."""
    return sorted(p for p in glob.glob(os.path.join(str(directory), "**", pattern), recursive=True)
                  if not os.path.basename(p).startswith(("_", ".")))


def output_rows(directory) -> Counter:
    """Every row of every CSV part file under `directory`, each file's header skipped, with the csv module."""
    out = Counter()
    for p in data_files(directory):
        with open(p, newline="") as fh:
            reader = csv.reader(fh)
            assert next(reader) == ["k", "v"], p
            out.update(tuple(int(x) for x in row) for row in reader if row)
    return out


def leftovers(directory) -> list[str]:
    """Staging or backup folders, or a lock, a sink left behind."""
    return [p for p in os.listdir(directory) if "__staging" in p or "__previous" in p or "__lock" in p]


def scopeflow_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "scopeflow.cli", *args]


def two_inputs(tmp_path, a=range(0, 12), b=range(12, 20)):
    """Two CSV inputs (k, v): reading both and taking their union gives a stream of two partitions, so a sink
    without `single_file` writes two part files."""
    write_csv(tmp_path / "data" / "a.csv", ["k", "v"], [(i % 3, i) for i in a])
    write_csv(tmp_path / "data" / "b.csv", ["k", "v"], [(i % 3, i) for i in b])
    return tmp_path / "data" / "a.csv", tmp_path / "data" / "b.csv"


SOURCES = """
    source a = read csv("data/a.csv", header = true) schema (k: long, v: long)
    source b = read csv("data/b.csv", header = true) schema (k: long, v: long)
"""


# ---- refused before Spark starts -------------------------------------------------------------------------


def staging_folders(tmp_path) -> set:
    return {p for p in glob.glob(str(tmp_path / "**" / "*"), recursive=True) if "__staging" in p}


def refused_before_spark(tmp_path, proc, temp, staging_before: set) -> None:
    """Exit 2, no JVM was started, and nothing was written. A run that starts Spark leaves its JVM log in
    $TMPDIR when it fails (docs/cli.md `--verbose`), so an empty $TMPDIR after a refusal means the refusal came
    before Spark started: nothing the JVM would cost was spent."""
    assert proc.returncode == 2, proc.stderr
    assert not list(temp.glob("scopeflow-jvm-*.log")), "Spark was started"
    assert "Traceback" not in proc.stderr
    assert staging_folders(tmp_path) == staging_before


def run_refused(tmp_path, flow, *args, cwd=None, prefix=()):
    temp = tmp_path / "tmp-jvm"
    temp.mkdir(exist_ok=True)
    before = staging_folders(tmp_path)
    proc = subprocess.run([*prefix, *scopeflow_cmd("run", flow, *args)], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(temp)), cwd=cwd, timeout=300)
    refused_before_spark(tmp_path, proc, temp, before)
    return proc


def test_foreign_files_in_the_target_refuse_the_run_before_spark(tmp_path):
    two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/x", header = true)
    """)
    target = tmp_path / "out" / "x"
    target.mkdir(parents=True)
    (target / "important.txt").write_text("keep me")
    (target / "notes").mkdir()
    (target / "notes" / "todo.md").write_text("and me")
    proc = run_refused(tmp_path, flow)
    assert "error[E0402]" in proc.stderr
    assert str(target) in proc.stderr and "important.txt" in proc.stderr and "notes/todo.md" in proc.stderr
    assert f"{flow}:3:15" in proc.stderr and "^^^^^^^ written here" in proc.stderr  # the sink's path in the .flow file
    assert 'mode = "overwrite"' in proc.stderr  # the hint says how to replace it anyway
    assert (target / "important.txt").read_text() == "keep me"
    assert (target / "notes" / "todo.md").read_text() == "and me"


def test_error_if_exists_refuses_an_existing_target_before_spark(tmp_path):
    two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/x", header = true, mode = "error_if_exists")
    """)
    (tmp_path / "out" / "x").mkdir(parents=True)
    proc = run_refused(tmp_path, flow)
    assert "error[E0403]" in proc.stderr and str(tmp_path / "out" / "x") in proc.stderr
    assert os.listdir(tmp_path / "out" / "x") == []


def test_a_target_that_cannot_be_written_is_refused_before_spark(tmp_path):
    two_inputs(tmp_path)
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("notes.txt/out", header = true)
    """)
    proc = run_refused(tmp_path, flow)
    assert "error[E0404]" in proc.stderr and "notes.txt" in proc.stderr and "not a folder" in proc.stderr

    # a read-only parent folder (root ignores permission bits: run without the capability that does that)
    prefix = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: a read-only folder is writable")
        prefix = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner")
    ro = tmp_path / "ro"
    ro.mkdir()
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("ro/out/x", header = true)
    """, "ro.flow")
    os.chmod(ro, 0o555)
    try:
        proc = run_refused(tmp_path, flow, prefix=prefix)
    finally:
        os.chmod(ro, 0o755)
    assert "error[E0404]" in proc.stderr and str(ro) in proc.stderr and "permission denied" in proc.stderr
    assert os.listdir(ro) == []


def test_a_param_or_checkpoint_path_that_makes_a_sink_unsafe_is_refused_before_spark(tmp_path):
    two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        param out: string = "out/x"
        sink a -> csv(out, header = true)
    """)
    proc = run_refused(tmp_path, flow, "--param", "out=data")
    assert "error[E0401]" in proc.stderr and "contains input" in proc.stderr and "a.csv" in proc.stderr
    proc = run_refused(tmp_path, flow, "--param", "out=.")
    assert "error[E0401]" in proc.stderr and "folder of the .flow file" in proc.stderr
    proc = run_refused(tmp_path, flow, "--checkpoint", "out/x/ck", cwd=tmp_path)
    assert "error[E0401]" in proc.stderr and "checkpoint" in proc.stderr
    proc = run_refused(tmp_path, flow, "--checkpoint", "out", cwd=tmp_path)
    assert "error[E0401]" in proc.stderr and "checkpoint" in proc.stderr
    assert sorted(os.listdir(tmp_path / "data")) == ["a.csv", "b.csv"]


def test_with_base_dir_both_the_flow_folder_and_the_base_folder_are_protected_and_named(tmp_path):
    """`--base-dir DIR`: relative paths resolve against DIR. A sink may be neither DIR nor the .flow file's
    folder (nor contain them), and the message names the one it is."""
    two_inputs(tmp_path)  # the inputs are in the base folder, tmp_path/data
    project = tmp_path / "project"
    project.mkdir()
    flow = write_flow(project, SOURCES + """
        param out: string = "out/x"
        sink a -> csv(out, header = true, mode = "overwrite")
    """)
    proc = run_refused(tmp_path, flow, "--base-dir", str(tmp_path), "--param", "out=.")
    assert "error[E0401]" in proc.stderr
    assert f"is the base folder of relative paths ({tmp_path}, --base-dir)" in proc.stderr, proc.stderr
    error = next(line for line in proc.stderr.splitlines() if line.startswith("error[E0401]"))
    assert ".flow file" not in error
    proc = run_refused(tmp_path, flow, "--base-dir", str(tmp_path), "--param", "out=project")
    assert "error[E0401]" in proc.stderr
    assert f"is the folder of the .flow file ({project})" in proc.stderr, proc.stderr
    proc = run_refused(tmp_path, flow, "--base-dir", str(tmp_path), "--param", "out=..")
    assert "error[E0401]" in proc.stderr and f"contains the folder of the .flow file ({project})" in proc.stderr
    assert sorted(os.listdir(project)) == ["t.flow"]
    proc = run_refused(tmp_path, flow, "--base-dir", str(project / "sub"))  # (the inputs are not there)
    assert "error[E0501]" in proc.stderr
    assert f"relative to the base folder {project / 'sub'} (--base-dir)" in proc.stderr


# ---- unsafe sink paths at check time ---------------------------------------------------------------------


@pytest.mark.parametrize("sinks, words", [
    (['csv(".")'], "is the folder of the .flow file"),
    (['csv("..")'], "contains the folder of the .flow file"),
    (['csv("data")'], "contains input `data/a.csv` (source `a`)"),
    (['csv("data/a.csv")'], "is input `data/a.csv` (source `a`)"),
    (['csv("data/a.csv/out")'], "is inside input `data/a.csv` (source `a`)"),
    (['csv("out/x")', 'json("out/x")'], "is the path of the sink on line"),
    (['csv("out/x")', 'parquet("out/x/y")'], "is inside the path of the sink on line"),
    (['csv("out/x/y")', 'json("out")'], "contains the path of the sink on line"),
])
def test_unsafe_sink_paths_are_check_errors_on_the_path(tmp_path, sinks, words):
    two_inputs(tmp_path)
    text = textwrap.dedent(SOURCES).lstrip() + "".join(f"sink a -> {s}\n" for s in sinks)
    result = check_flow(text, str(tmp_path / "t.flow"), str(tmp_path))
    assert [d.code for d in result.errors] == ["E0401"], [d.render() for d in result.errors]
    d = result.errors[0]
    assert words in d.message
    line = 2 + len(sinks)
    assert (d.span.line, d.span.col) == (line, len("sink a -> ") + sinks[-1].index("(") + 2)
    rendered = d.render(text)
    assert "^" in rendered and "= help:" in rendered


def test_a_param_default_that_is_unsafe_is_a_check_error(tmp_path):
    two_inputs(tmp_path)
    text = textwrap.dedent(SOURCES).lstrip() + 'param out: string = "."\nsink a -> csv(out)\n'
    result = check_flow(text, str(tmp_path / "t.flow"), str(tmp_path))
    assert [d.code for d in result.errors] == ["E0401"]
    assert "param `out`" in result.errors[0].message


def test_run_refuses_a_sink_to_the_project_folder_without_touching_it(tmp_path, run_cli):
    two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv(".", header = true)
    """)
    before = sorted(os.listdir(tmp_path))
    proc = run_cli("run", flow, cwd=str(tmp_path))
    assert proc.returncode == 1 and "error[E0401]" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == before
    assert not leftovers(tmp_path.parent)


# ---- options at check time ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sink, code, words", [
    ('table("db.t", mode = "append")', "E0114", "of the file sinks (csv, json, parquet)"),
    ('console(single_file = true)', "E0114", "of the file sinks (csv, json, parquet)"),
    ('csv("out/x", mode = "apend")', "E0405", "did you mean `append`"),
    ('csv("out/x", single_file = "yes")', "E0405", "true or false"),
    ('csv("out/x", partition_by = "k")', "E0405", "field names"),
    ('csv("out/x", partition_by = (kk))', "E0301", "did you mean `k`"),
    ('csv("out/x", partition_by = (k, v))', "E0406", "every field"),
    ('csv("out/x", single_file = true, mode = "append")', "E0406", "append"),
    ('csv("out/x", single_file = true, partition_by = (k))', "E0406", "partition_by"),
    # a value without its quotes is a name: the hint writes it as the string it is
    ('csv("out/x", mode = overwrite)', "E0405", 'write it in quotes: mode = "overwrite"'),
    ('csv("out/x", mode = apend)', "E0405", 'write it in quotes: mode = "append"'),
    ('csv("out/x", mode = replace)', "E0405", '"error_if_exists", "overwrite" or "append"'),
    ('csv("out/x", single_file = yes)', "E0405", "single_file = true"),
    ('csv("out/x", sep = tab)', "E0104", 'written in quotes: sep = "tab"'),
])
def test_sink_options_are_checked(tmp_path, sink, code, words):
    two_inputs(tmp_path)
    text = textwrap.dedent(SOURCES).lstrip() + f"sink a -> {sink}\n"
    result = check_flow(text, str(tmp_path / "t.flow"), str(tmp_path))
    assert [d.code for d in result.errors] == [code], [d.render() for d in result.errors]
    d = result.errors[0]
    assert words in d.message + " ".join(d.hints), d.render(text)


def test_the_checker_and_the_runtime_take_the_same_sink_modes(tmp_path):
    """One table (stdlib/sinks.py): every mode the checker accepts is one the runtime knows, and a mode the
    checker refuses (a job.py edited by hand) is refused by the runtime too, not taken for "no mode"."""
    from scopeflow.runtime import targets
    from scopeflow.runtime.filesystems import LOCAL

    two_inputs(tmp_path)
    (tmp_path / "out" / "x").mkdir(parents=True)
    (tmp_path / "out" / "x" / "important.txt").write_text("keep me")
    for mode in ("error_if_exists", "overwrite", "append", "apend"):
        text = textwrap.dedent(SOURCES).lstrip() + f'sink a -> csv("out/x", mode = "{mode}")\n'
        accepted = not check_flow(text, str(tmp_path / "t.flow"), str(tmp_path)).errors
        problem = targets.check(LOCAL, str(tmp_path / "out" / "x"), mode)
        assert accepted == (problem is None or problem.code != "E0405"), mode
    assert targets.check(LOCAL, str(tmp_path / "out" / "y"), "apend").code == "E0405"


# ---- what a sink writes (real Spark) -------------------------------------------------------------------------


def marker(directory, name="_SCOPEFLOW") -> dict:
    with open(os.path.join(str(directory), name), encoding="utf-8") as fh:
        return json.load(fh)


def test_a_rerun_replaces_its_own_output(spark, tmp_path):
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x/", header = true)
    """)  # (a trailing slash: the staging folder still goes beside the target)
    run_file(flow, spark=spark)
    target = tmp_path / "out" / "x"
    assert output_rows(target) == reference_rows(a, b)
    listed = marker(target)["files"]
    assert {os.path.relpath(p, target) for p in data_files(target)} <= set(listed)

    a, b = two_inputs(tmp_path, range(100, 103), range(103, 104))
    run_file(flow, spark=spark)
    assert output_rows(target) == reference_rows(a, b)
    assert not leftovers(tmp_path / "out")


def test_a_foreign_target_is_refused_in_process_too_and_overwrite_replaces_it(spark, tmp_path):
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/x", header = true)
    """)
    target = tmp_path / "out" / "x"
    target.mkdir(parents=True)
    (target / "important.txt").write_text("keep me")
    with pytest.raises(RuntimeFailure) as info:
        run_file(flow, spark=spark)
    assert info.value.code == "E0402"
    assert (target / "important.txt").read_text() == "keep me"

    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/x", header = true, mode = "overwrite")
    """)
    run_file(flow, spark=spark)
    assert not (target / "important.txt").exists()
    assert output_rows(target) == reference_rows(a)


def test_error_if_exists_writes_a_new_target(spark, tmp_path):
    a, _ = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/x", header = true, mode = "error_if_exists")
    """)
    run_file(flow, spark=spark)
    assert output_rows(tmp_path / "out" / "x") == reference_rows(a)
    with pytest.raises(RuntimeFailure) as info:
        run_file(flow, spark=spark)
    assert info.value.code == "E0403"
    assert output_rows(tmp_path / "out" / "x") == reference_rows(a)


def test_append_adds_each_runs_rows_once_and_keeps_the_existing_files(spark, tmp_path):
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x", header = true, mode = "append")
    """)
    target = tmp_path / "out" / "x"
    run_file(flow, spark=spark)
    first = reference_rows(a, b)
    assert output_rows(target) == first
    before = {p: open(p).read() for p in data_files(target)}

    a, b = two_inputs(tmp_path, range(50, 55), range(55, 57))
    run_file(flow, spark=spark)
    assert output_rows(target) == first + reference_rows(a, b)
    assert all(open(p).read() == text for p, text in before.items()), "append changed an existing file"
    assert len([n for n in os.listdir(target) if n.startswith("_SCOPEFLOW")]) == 2
    assert not leftovers(tmp_path / "out")

    # an appended target is scopeflow's: a sink without `mode` replaces it
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x", header = true)
    """)
    run_file(flow, spark=spark)
    assert output_rows(target) == reference_rows(a, b)


def test_partition_by_output_reads_back_in_spark(spark, tmp_path):
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x", header = true, partition_by = (k))
        sink a | union(b) -> parquet("out/p", partition_by = (k))
    """)
    run_file(flow, spark=spark)
    target = tmp_path / "out" / "x"
    assert sorted(n for n in os.listdir(target) if not n.startswith(("_", "."))) == ["k=0", "k=1", "k=2"]
    for k in range(3):  # a partition's files hold the other fields only
        for p in data_files(target / f"k={k}"):
            with open(p, newline="") as fh:
                assert next(csv.reader(fh)) == ["v"]
    expected = reference_rows(a, b)
    back = spark.read.option("header", True).schema("v long, k long").csv(str(target))
    assert Counter((r.k, r.v) for r in back.collect()) == expected
    back = spark.read.parquet(str(tmp_path / "out" / "p"))
    assert Counter((r.k, r.v) for r in back.collect()) == expected


def test_single_file_writes_one_file_with_one_header(spark, tmp_path):
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        both = a | union(b)
        sink both -> csv("out/parts", header = true)
        sink both -> csv("out/one", header = true, single_file = true)
        sink both | sort(by v desc) -> csv("out/sorted", header = true, single_file = true)
        sink both -> parquet("out/p", single_file = true)
    """)
    run_file(flow, spark=spark)
    expected = reference_rows(a, b)
    assert len(data_files(tmp_path / "out" / "parts")) > 1, "the test needs a stream of several partitions"
    files = data_files(tmp_path / "out" / "one")
    assert [os.path.basename(p) for p in files] == ["part-00000.csv"]
    with open(files[0], newline="") as fh:
        lines = list(csv.reader(fh))
    assert lines[0] == ["k", "v"] and ["k", "v"] not in lines[1:]
    assert Counter(tuple(int(x) for x in r) for r in lines[1:]) == expected
    # `cat out/one/*.csv` is the file itself: one header
    cat = subprocess.run(f"cat {tmp_path}/out/one/*.csv", shell=True, capture_output=True, text=True).stdout
    assert cat.count("k,v") == 1
    with open(data_files(tmp_path / "out" / "sorted")[0], newline="") as fh:
        values = [int(r[1]) for r in list(csv.reader(fh))[1:]]
    assert values == sorted((v for _, v in expected.elements()), reverse=True)
    parquet = data_files(tmp_path / "out" / "p", "*.parquet")
    assert [os.path.basename(p) for p in parquet] == ["part-00000.snappy.parquet"]
    assert Counter((r.k, r.v) for r in spark.read.parquet(str(tmp_path / "out" / "p")).collect()) == expected


# ---- append, killed at the commit, resumed ---------------------------------------------------------------------


def test_append_killed_at_the_commit_and_resumed_adds_each_run_once(spark, tmp_path):
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x", header = true, mode = "append")
    """)
    target = tmp_path / "out" / "x"
    once = reference_rows(a, b)
    run_file(flow, spark=spark)  # the first run: nothing to resume
    assert output_rows(target) == once
    ck = str(tmp_path / "ck")

    def run(*args, fault=None):
        return run_with_checkpoint(flow, ck, *args, fault=fault)

    # killed between moving the part files in: the next write takes the moved ones back out
    proc = run(fault="sink-commit")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    partial = output_rows(target)
    assert once < partial < once + once, "the kill should land between the moves"
    proc = run("--resume")
    assert proc.returncode == 0, proc.stderr
    assert output_rows(target) == once + once

    # killed after the commit, before the run logged it: the resumed run sees the commit is there
    proc = run(fault="sink-committed")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert output_rows(target) == once + once + once
    proc = run("--resume")
    assert proc.returncode == 0, proc.stderr
    assert output_rows(target) == once + once + once
    assert not leftovers(tmp_path / "out")


def run_with_checkpoint(flow, ck, *args, fault=None):
    """`scopeflow run flow --checkpoint ck ARGS` as a process, SIGKILLed at fault point `fault` if given."""
    env = {k: v for k, v in os.environ.items() if k != "SCOPEFLOW_FAULT"}
    if fault:
        env["SCOPEFLOW_FAULT"] = fault
    return subprocess.run(scopeflow_cmd("run", flow, "--quiet", "--checkpoint", ck, *args), env=env,
                          capture_output=True, text=True, timeout=600)


def killed_and_resumed(flow, ck, fault):
    """Run `flow` with a checkpoint, killed by SIGKILL at fault point `fault`, then `--resume` it: the resumed
    run's process."""
    def run(*args, fault=None):
        return run_with_checkpoint(flow, ck, *args, fault=fault)

    proc = run(fault=fault)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return run("--resume")


def test_sinks_committed_and_logged_before_a_kill_do_not_refuse_the_resumed_run(tmp_path):
    """Killed once three of four sinks (one of each mode) committed and were logged in the checkpoint's
    sinks.json: the resumed run is not refused by its own outputs (an `error_if_exists` target it wrote
    itself), skips them, writes the last one, and appends nothing twice."""
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/e", header = true, mode = "error_if_exists")
        sink a | union(b) -> csv("out/n", header = true)
        sink b -> csv("out/p", header = true, mode = "append")
        sink a | union(b) -> csv("out/last", header = true, mode = "error_if_exists")
    """)
    proc = killed_and_resumed(flow, str(tmp_path / "ck"), "sink-logged@3")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert output_rows(out / "e") == reference_rows(a)
    assert output_rows(out / "n") == reference_rows(a, b)
    assert output_rows(out / "p") == reference_rows(b)
    assert output_rows(out / "last") == reference_rows(a, b)
    assert not leftovers(out)


def test_an_error_if_exists_sink_committed_but_not_logged_before_a_kill_does_not_refuse_the_resumed_run(tmp_path):
    """Killed just after the first sink's commit, before the run logged it: its target's marker names the
    commit of this run (the same when resumed), so the resumed run knows the target as its own."""
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/e", header = true, mode = "error_if_exists")
        sink b -> csv("out/f", header = true, mode = "error_if_exists")
    """)
    ck = str(tmp_path / "ck")
    proc = killed_and_resumed(flow, ck, "sink-committed")
    assert proc.returncode == 0, proc.stderr
    assert output_rows(tmp_path / "out" / "e") == reference_rows(a)
    assert output_rows(tmp_path / "out" / "f") == reference_rows(b)
    assert not leftovers(tmp_path / "out")

    # a new run (not resumed) is another run: its error_if_exists targets exist, so it is refused
    proc = subprocess.run(scopeflow_cmd("run", flow, "--quiet", "--checkpoint", ck), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 2 and "error[E0403]" in proc.stderr, proc.stderr


# ---- one writer per target at a time ---------------------------------------------------------------------------


def lock_of(target, pid: int, host=None) -> None:
    """The lock a run writing `target` holds: `<target>.__lock`, naming its host and process."""
    import socket

    with open(f"{target}.__lock", "w", encoding="utf-8") as fh:
        json.dump({"host": host or socket.gethostname(), "pid": pid, "commit": "0" * 16, "since": 0}, fh)


def test_a_target_another_live_run_is_writing_is_refused_before_spark_and_left_alone(tmp_path):
    """A second run into a target a live run is writing would delete that run's staging folder (`recover`):
    it is refused, naming the process, and touches nothing."""
    two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a -> csv("out/x", header = true, mode = "append")
    """)
    (tmp_path / "out").mkdir()
    staging = tmp_path / "out" / "x.__staging-0123456789ab"  # the live run's write in progress
    staging.mkdir()
    (staging / "part-00000.csv").write_text("k,v\n1,1\n")
    lock_of(tmp_path / "out" / "x", os.getpid())  # this test's process: alive
    proc = run_refused(tmp_path, flow)
    assert "error[E0408]" in proc.stderr and f"process {os.getpid()}" in proc.stderr, proc.stderr
    assert str(tmp_path / "out" / "x") in proc.stderr and "x.__lock" in proc.stderr
    assert (staging / "part-00000.csv").exists()
    assert sorted(os.listdir(tmp_path / "out")) == ["x.__lock", "x.__staging-0123456789ab"]

    lock_of(tmp_path / "out" / "x", 1, host="another-host")  # a host whose processes this one cannot see
    proc = run_refused(tmp_path, flow)
    assert "error[E0408]" in proc.stderr and "another-host" in proc.stderr and "delete" in proc.stderr


def test_a_lock_whose_process_is_gone_is_taken_over(spark, tmp_path):
    """A run killed while it wrote leaves its lock: the next write (resumed or not) takes it over, puts the
    target in order and writes; the lock goes when the write ends."""
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x", header = true)
    """)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x.__staging-0123456789ab").mkdir()  # the dead run's write
    lock_of(tmp_path / "out" / "x", gone.pid)
    run_file(flow, spark=spark)
    assert output_rows(tmp_path / "out" / "x") == reference_rows(a, b)
    assert not leftovers(tmp_path / "out")


def test_the_write_itself_refuses_a_target_another_live_run_holds(spark, tmp_path):
    """The lock is taken by the write (any file system), not only looked at before Spark starts."""
    from scopeflow.runtime import sinks

    two_inputs(tmp_path)
    target = tmp_path / "out" / "x"
    (tmp_path / "out").mkdir()
    lock_of(target, os.getppid())  # a live process that is not this one
    df = spark.createDataFrame([(1, 2)], "k long, v long")
    with pytest.raises(RuntimeFailure) as info:
        sinks.write_atomically(spark, df, "csv", str(target), {"header": True})
    assert info.value.code == "E0408"
    assert sorted(os.listdir(tmp_path / "out")) == ["x.__lock"]


# ---- the same protocol through Hadoop's FileSystem API (hdfs://, s3a://... take this path) ------------------


def test_sinks_commit_the_same_way_through_hadoops_file_system(spark, tmp_path, monkeypatch):
    from scopeflow.runtime import sinks
    from scopeflow.runtime.filesystems import HadoopFiles

    fs = HadoopFiles(spark)
    root = f"file://{tmp_path}/h"
    fs.mkdirs(fs.join(root, "d"))
    fs.write_text(fs.join(root, "d/_m"), '{"files": ["x"]}')
    assert fs.read_text(fs.join(root, "d/_m")) == '{"files": ["x"]}'
    assert fs.exists(fs.join(root, "d")) and fs.is_dir(fs.join(root, "d")) and not fs.is_dir(fs.join(root, "d/_m"))
    assert fs.list_files(root) == ["d/_m"]  # (Hadoop's checksum files are not listed)
    fs.mkdirs(fs.join(root, "e"))
    assert not fs.rename(fs.join(root, "d"), fs.join(root, "e")), "rename never replaces an existing path"
    assert [p.rsplit("/", 1)[-1] for p in fs.glob(fs.join(root, "*"))] == ["d", "e"]
    fs.delete(fs.join(root, "d"))
    assert not fs.exists(fs.join(root, "d"))

    monkeypatch.setattr(sinks, "files_for", lambda spark, path: HadoopFiles(spark))
    a, b = two_inputs(tmp_path)
    flow = write_flow(tmp_path, SOURCES + """
        sink a | union(b) -> csv("out/x", header = true, mode = "append")
        sink a | union(b) -> csv("out/y", header = true, single_file = true)
    """)
    run_file(flow, spark=spark)
    run_file(flow, spark=spark)
    assert output_rows(tmp_path / "out" / "x") == reference_rows(a, b) + reference_rows(a, b)
    assert output_rows(tmp_path / "out" / "y") == reference_rows(a, b)
    assert [os.path.basename(p) for p in data_files(tmp_path / "out" / "y")] == ["part-00000.csv"]
    (tmp_path / "out" / "y" / "important.txt").write_text("keep me")
    assert sinks.targets.foreign_files(HadoopFiles(spark), str(tmp_path / "out" / "y")) == ["important.txt"]
    assert not leftovers(tmp_path / "out")


def test_a_remote_input_beside_local_sinks_checks_cleanly():
    """An input on another file system (`s3a://`) cannot clash with a local sink: `check` says nothing of it
    (it was an internal ValueError from the sink-path check)."""
    result = check_flow('pipeline p\nsource s = read csv("s3a://bucket/x.csv") schema (a: long)\n'
                        'sink s -> csv("out/x")\n', "p.flow", "/tmp")
    assert result.plan is not None and result.errors == [], result.diagnostics
