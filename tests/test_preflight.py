"""What `run` can know about a file source without Spark, it says before Spark starts (issue 22, item 5): the
input exists (a glob matches something), this user can read every file of it (E0502), the files name the
declared fields (E0503) and `on_error` is one scopeflow knows (E0114). Each refusal is exit 2 with the source
and its line, here in an environment where Spark cannot start (had the run started it, the exit would be 4:
Java not found). A glob path is matched as Spark matches it, and `file:` URIs are local paths, at check time
too. Real files, real CLI subprocesses; where Spark runs, the result is compared with Python's csv module
reading the same files.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap

from conftest import read_output, without_java, without_permission_override, write_csv
from scopeflow.api import run_file
from scopeflow.compiler import check_file


def write(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return str(path)


def run_without_java(flow: str, *args, prefix=()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "scopeflow.cli", "run", flow, "--quiet", *args],
                          capture_output=True, text=True, env=without_java(), timeout=300)


def refused(proc, code: str, flow: str, line: int) -> str:
    """The run was refused before Spark starts with `code`, at the source on `line`; its message."""
    err = proc.stderr
    assert proc.returncode == 2, err  # (4 had it tried to start Spark: there is no Java)
    err = err[err.index("error["):]  # (after the check's warnings)
    assert err.startswith(f"error[{code}]: source `edges`: "), err
    assert f"{flow}:{line}:1" in err and "read here" in err and "= help: " in err
    assert "Traceback" not in err
    return err


def by_name(files, names) -> list[tuple]:
    """The rows of CSV files with headers, the columns `names` taken by name, as ints."""
    out = []
    for f in files:
        with open(f, newline="") as fh:
            out += [tuple(int(r[n]) for n in names) for r in csv.DictReader(fh)]
    return sorted(out)


def test_an_on_error_param_that_is_not_a_mode_is_refused_before_spark(tmp_path):
    write_csv(tmp_path / "edges.csv", ["src", "dst"], [(1, 2)])
    flow = write(tmp_path / "t.flow", """
        param bad: string = "fail"
        source edges = read csv("edges.csv", header = true, on_error = bad) schema (src: long, dst: long)
        sink edges -> csv("out/e", header = true)
    """)
    err = refused(run_without_java(flow, "--param", "bad=ignore"), "E0114", flow, 2)
    assert 'on_error = "ignore"' in err and '"fail", "skip" or "null"' in err and "--param bad" in err
    assert not (tmp_path / "out").exists()


def test_a_glob_that_matches_no_file_is_refused_before_spark(tmp_path):
    write_csv(tmp_path / "data/other.csv", ["src", "dst"], [(1, 2)])
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("data/part-*.csv", header = true) schema (src: long, dst: long)
        sink edges -> csv("out/e", header = true)
    """)
    assert [d.code for d in check_file(flow).diagnostics] == ["W0001"]
    err = refused(run_without_java(flow), "E0501", flow, 1)
    assert f"input {tmp_path / 'data/part-*.csv'} matches no file" in err and "glob" in err


def test_a_glob_is_read_as_spark_reads_it(spark, tmp_path):
    """`*` and Hadoop's `{a,b}` pick the files; each file's header is matched by name."""
    write_csv(tmp_path / "data/part-1.csv", ["dst", "src"], [(2, 1), (3, 2)])
    write_csv(tmp_path / "data/part-2.csv", ["dst", "src"], [(4, 3)])
    write_csv(tmp_path / "data/extra-3.csv", ["dst", "src"], [(9, 9)])
    for pattern, files in (("data/part-*.csv", ["part-1.csv", "part-2.csv"]),
                           ("data/{part-2,extra-3}.csv", ["part-2.csv", "extra-3.csv"])):
        flow = write(tmp_path / "t.flow", f"""
            source edges = read csv("{pattern}", header = true) schema (src: long, dst: long)
            sink edges -> csv("out/e", header = true, mode = "overwrite")
        """)
        assert not check_file(flow).diagnostics, pattern  # no W0001: the glob matches files
        run_file(flow, spark=spark)
        want = by_name([tmp_path / "data" / f for f in files], ["src", "dst"])
        assert sorted(read_output(str(tmp_path / "out/e"), (int, int))) == want, pattern


def test_an_unreadable_file_in_an_input_folder_is_refused_before_spark(tmp_path):
    prefix = without_permission_override()
    write_csv(tmp_path / "data/part-0.csv", ["src", "dst"], [(1, 2)])
    write_csv(tmp_path / "data/part-1.csv", ["src", "dst"], [(2, 3)])
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("data", header = true) schema (src: long, dst: long)
        sink edges -> csv("out/e", header = true)
    """)
    locked = tmp_path / "data/part-1.csv"
    locked.chmod(0)
    try:
        proc = run_without_java(flow, prefix=prefix)
    finally:
        locked.chmod(0o644)
    err = refused(proc, "E0502", flow, 1)
    assert f"permission denied for {locked}" in err and "chmod" in err


def test_file_uris_are_local_inputs_at_check_time_and_at_run_time(spark, tmp_path):
    write_csv(tmp_path / "e.csv", ["dst", "src"], [(2, 1), (3, 2)])
    write_csv(tmp_path / "bad.csv", ["from", "to"], [(1, 2)])
    flow = write(tmp_path / "t.flow", f"""
        param input: string = "file://{tmp_path}/e.csv"
        source edges = read csv(input, header = true) schema (src: long, dst: long)
        source more = read csv("file:{tmp_path}/bad.csv", header = true) schema (src: long, dst: long)
        source gone = read csv("file://{tmp_path}/nope.csv", header = true) schema (src: long, dst: long)
        sink edges | union(more) | union(gone) -> csv("out/e", header = true)
    """)
    assert [(d.code, d.span.line) for d in check_file(flow).diagnostics] == [("E0503", 3), ("W0001", 4)]
    only = write(tmp_path / "only.flow", f"""
        source edges = read csv("file:{tmp_path}/e.csv", header = true) schema (src: long, dst: long)
        sink edges -> csv("out/e", header = true)
    """)
    assert not check_file(only).diagnostics
    run_file(only, spark=spark)
    assert sorted(read_output(str(tmp_path / "out/e"), (int, int))) == by_name([tmp_path / "e.csv"], ["src", "dst"])
    os.remove(tmp_path / "e.csv")
    err = refused(run_without_java(only), "E0501", only, 1)
    assert f"input {tmp_path / 'e.csv'} does not exist" in err
