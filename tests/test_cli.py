"""The command line behaves like the tools data engineers already use (issue #22, items 6-11):
help and version, several files, created folders, Ctrl-C, foreign run reports, `show`, portable scripts."""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

import reference
from conftest import EXAMPLES, read_output, without_java, without_permission_override

DATA = os.path.join(EXAMPLES, "data")


def copy_examples(tmp_path, *names):
    shutil.copytree(DATA, tmp_path / "data", dirs_exist_ok=True)
    for name in names:
        shutil.copy(os.path.join(EXAMPLES, name), tmp_path / name)
    for extra in ("udfs.py",):
        shutil.copy(os.path.join(EXAMPLES, extra), tmp_path / extra)
    return [str(tmp_path / n) for n in names]


# ---- help, version, usage (no Spark) -------------------------------------------------------------------

def test_bare_scopeflow_prints_help_and_version_works(run_cli):
    bare = run_cli()
    assert bare.returncode == 0
    for command in ("check", "explain", "compile", "run", "show", "graph", "cluster", "graphalytics", "docs"):
        assert re.search(rf"^\s+{command}\s+\S", bare.stdout, re.M), f"no one-line description of {command}"
    assert "exit codes:" in bare.stdout and "130" in bare.stdout
    assert run_cli("-h").returncode == 0
    version = run_cli("--version")
    assert version.returncode == 0 and re.fullmatch(r"scopeflow \d+\.\d+\.\d+\S*\n", version.stdout)
    bad = run_cli("frobnicate")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


@pytest.mark.parametrize("command", ["check", "explain", "compile", "run", "show", "graph", "cluster", "graphalytics", "docs"])
def test_every_argument_has_a_help_text(run_cli, command):
    out = run_cli(command, "--help")
    assert out.returncode == 0
    assert "exit codes:" in out.stdout
    # argparse prints an argument without help alone on its line; every one here has a text beside or below it
    lines = out.stdout.splitlines()
    section = False
    for i, line in enumerate(lines):
        if line.endswith(":") and not line.startswith(" "):
            section = line in ("positional arguments:", "options:")
            continue
        if section and re.match(r"^  \S", line) and len(line.split("  ")) < 3 and "{" not in line:
            following = lines[i + 1] if i + 1 < len(lines) else ""
            assert following.startswith(" " * 8), f"`{command}`: no help for {line.strip()!r}"
    if command == "run":
        options = out.stdout.split("\noptions:", 1)[1]
        for repeated in ("--param", "--conf"):
            text = options.split(f"\n  {repeated}", 1)[1].split("\n  -", 1)[0]
            assert "repeat for several" in " ".join(text.split()), text


def test_check_takes_several_files_and_folders(run_cli, tmp_path):
    bad = tmp_path / "lib" / "bad.flow"
    bad.parent.mkdir()
    bad.write_text("x = nowhere | distinct\nsink x -> console()\n")
    good = os.path.join(EXAMPLES, "connected_components.flow")
    both = run_cli("check", good, str(bad))
    assert both.returncode == 1
    assert f"{good}: ok" in both.stdout and "E0101" in both.stderr
    folder = run_cli("check", EXAMPLES)
    assert folder.returncode == 0
    checked = sorted(line.split(":")[0] for line in folder.stdout.splitlines())
    assert checked == sorted(os.path.join(EXAMPLES, f) for f in os.listdir(EXAMPLES) if f.endswith(".flow"))
    assert run_cli("check", str(tmp_path / "empty_dir_that_is_missing")).returncode == 2


def test_a_flow_file_that_is_not_utf8_or_cannot_be_read_is_a_usage_error(run_cli, tmp_path):
    """Named with the reason, exit 2, no traceback: a Latin-1 file (the byte's offset, line and column, with a
    caret), one this user may not read; an imported Latin-1 file is E0105 on the import."""
    latin = tmp_path / "latin.flow"
    latin.write_bytes('source e = values (café: long) [(1)]\nsink e -> console()\n'.encode("latin-1"))
    for command in ("check", "compile", "run"):
        out = run_cli(command, str(latin))
        assert out.returncode == 2, (command, out.stderr)
        assert out.stderr.startswith(f"error: cannot read {latin}: it is not UTF-8 text: byte 0xe9 at offset 22 "
                                     "(line 1, column 23)"), out.stderr
        assert f"--> {latin}:1:23" in out.stderr and "= help: save the file as UTF-8" in out.stderr
        assert "Traceback" not in out.stderr
    locked = tmp_path / "locked.flow"
    locked.write_text("source e = values (a: long) [(1)]\nsink e -> console()\n")
    locked.chmod(0)
    try:
        out = subprocess.run([*without_permission_override(), sys.executable, "-m", "scopeflow.cli", "check",
                              str(locked)], capture_output=True, text=True, timeout=300)
    finally:
        locked.chmod(0o644)
    assert out.returncode == 2 and out.stderr.startswith(f"error: cannot read {locked}: permission denied"), out.stderr
    assert "Traceback" not in out.stderr
    main = tmp_path / "main.flow"
    main.write_text('from "latin.flow" import f\nsource e = values (a: long) [(1)]\nsink e -> console()\n')
    out = run_cli("check", str(main))
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith("error[E0105]: cannot import `latin.flow`: it is not UTF-8 text: byte 0xe9"), out.stderr
    assert f"{main}:1:1" in out.stderr and "Traceback" not in out.stderr


def test_compile_creates_missing_folders_and_writes_one_script_per_file(run_cli, tmp_path):
    cc = os.path.join(EXAMPLES, "connected_components.flow")
    one = run_cli("compile", cc, "-o", str(tmp_path / "missing" / "dir" / "job.py"))
    assert one.returncode == 0, one.stderr
    assert (tmp_path / "missing" / "dir" / "job.py").exists()
    several = run_cli("compile", EXAMPLES, "-o", str(tmp_path / "jobs"))
    assert several.returncode == 0, several.stderr
    flows = sorted(f[:-5] for f in os.listdir(EXAMPLES) if f.endswith(".flow"))
    assert sorted(f[:-3] for f in os.listdir(tmp_path / "jobs")) == flows
    assert run_cli("compile", cc, cc).returncode == 2  # several files need -o DIR
    over = run_cli("compile", cc, "-o", cc)
    assert over.returncode == 2 and "would overwrite the input" in over.stderr
    assert "source edges" in open(cc).read()  # (still the .flow file)
    twin = tmp_path / "other" / "connected_components.flow"
    twin.parent.mkdir()
    shutil.copy(cc, twin)
    clash = run_cli("compile", cc, str(twin), "-o", str(tmp_path / "twins"))
    assert clash.returncode == 2 and "would both be compiled to" in clash.stderr
    assert not (tmp_path / "twins").exists()
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    refused = run_cli("compile", cc, "-o", str(blocked / "job.py"))
    assert refused.returncode == 2 and "cannot create the folder" in refused.stderr and "Traceback" not in refused.stderr


def test_generated_script_holds_no_absolute_path_and_lists_its_params(run_cli, tmp_path):
    udf, cc = copy_examples(tmp_path, "udf_scores.flow", "connected_components.flow")
    for flow in (udf, cc):
        out = run_cli("compile", flow, "-o", str(tmp_path / "jobs" / "job.py"))
        assert out.returncode == 0, out.stderr
        code = (tmp_path / "jobs" / "job.py").read_text()
        assert str(tmp_path) not in code and os.path.abspath(EXAMPLES) not in code
        assert not re.search(r"'/(tmp|home|work|root|usr)/", code)
    helped = subprocess.run([sys.executable, str(tmp_path / "jobs" / "job.py"), "--help"], capture_output=True,
                            text=True, cwd="/")
    assert helped.returncode == 0, helped.stderr
    assert re.search(r"--param edges_path=STRING\s+\(default: 'data/graph.csv'\)", helped.stdout)
    assert "--base-dir" in helped.stdout and "exit codes:" in helped.stdout


@pytest.mark.spark
def test_a_moved_project_runs_its_script_from_anywhere(tmp_path, run_cli):
    """Compile, move the whole project elsewhere, run the script from another folder: paths resolve
    against the .flow file's new place (and the Python module is found beside it)."""
    project = tmp_path / "before"
    project.mkdir()
    (udf,) = copy_examples(project, "udf_scores.flow")
    assert run_cli("compile", udf, "-o", str(project / "jobs" / "scores.py")).returncode == 0
    moved = tmp_path / "after"
    shutil.move(str(project), str(moved))
    run = subprocess.run([sys.executable, str(moved / "jobs" / "scores.py"), "--quiet", "--report",
                          "reports/today/run.json"], capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert run.returncode == 0, run.stderr
    assert os.listdir(moved / "out") and not (tmp_path / "out").exists()
    assert json.loads((tmp_path / "reports" / "today" / "run.json").read_text())["status"] == "ok"  # folders made
    # --base-dir: the data elsewhere, the .flow file where it was
    other = tmp_path / "elsewhere"
    shutil.copytree(moved / "data", other / "data")
    run = subprocess.run([sys.executable, str(moved / "jobs" / "scores.py"), "--quiet", "--base-dir", str(other)],
                         capture_output=True, text=True, cwd="/", timeout=600)
    assert run.returncode == 0, run.stderr
    assert sorted(os.listdir(other / "out")) == sorted(os.listdir(moved / "out"))


def test_graph_refuses_a_report_of_another_pipeline_or_version(run_cli, tmp_path):
    cc, pr = copy_examples(tmp_path, "connected_components.flow", "pagerank.flow")
    from scopeflow.compiler import check_file

    plan = check_file(cc).plan
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"pipeline": "pagerank", "fingerprint": "0", "rounds": []}))
    other = run_cli("graph", cc, "-o", str(tmp_path / "g.dot"), "--stats", str(report))
    assert other.returncode == 2 and "pipeline `pagerank`, not `connected_components`" in other.stderr
    report.write_text(json.dumps({"pipeline": plan.pipeline, "fingerprint": "0123456789abcdef", "rounds": []}))
    changed = run_cli("graph", cc, "-o", str(tmp_path / "g.dot"), "--stats", str(report))
    assert changed.returncode == 2 and "another version" in changed.stderr
    report.write_text(json.dumps({"pipeline": plan.pipeline, "fingerprint": plan.fingerprint(), "rounds": [],
                                  "loops": {}, "operators": {}}))
    unknown = run_cli("graph", cc, "-o", str(tmp_path / "never" / "made" / "g.xyz"))
    assert unknown.returncode == 2 and "cannot tell the graph format" in unknown.stderr
    assert not (tmp_path / "never").exists()  # said before anything is made
    ok = run_cli("graph", cc, "-o", str(tmp_path / "new" / "folder" / "g.dot"), "--stats", str(report))
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "new" / "folder" / "g.dot").exists()


# ---- show, summary, Ctrl-C (real Spark) ----------------------------------------------------------------

@pytest.mark.spark
def test_show_prints_schema_and_rows_of_a_loop_output_and_writes_nothing(run_cli, tmp_path):
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    out = run_cli("show", cc, "components", "--rows", "100", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "components: (id: long, label: long)"
    rows = [tuple(int(x) for x in line.strip("|").split("|")) for line in out.stdout.splitlines()
            if re.fullmatch(r"\|\s*\d+\s*\|\s*\d+\s*\|", line)]
    edges = reference.read_csv_rows(os.path.join(DATA, "graph.csv"), (int, int))
    assert Counter(rows) == Counter(reference.connected_components(edges).items())
    assert not (tmp_path / "out").exists() and not (tmp_path / ".scopeflow").exists()
    loop = run_cli("show", cc, "cc")
    assert loop.returncode == 2 and "`cc` is a loop, not a stream" in loop.stderr and "`components`" in loop.stderr
    assert run_cli("show", cc, "components", "--report", "r.json").returncode == 2  # show writes nothing
    inner = run_cli("show", cc, "spread")
    assert inner.returncode == 2 and "inside loop `cc`" in inner.stderr and "`components`" in inner.stderr
    typo = run_cli("show", cc, "componets")
    assert typo.returncode == 2 and "did you mean `components`" in typo.stderr


@pytest.mark.spark
def test_the_summary_counts_the_records_of_every_sink(run_cli, tmp_path):
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    out = run_cli("run", cc)
    assert out.returncode == 0, out.stderr
    written = len(read_output(str(tmp_path / "out" / "components")))
    assert re.search(rf"wrote csv → \S*components \({written:,} records\)", out.stderr), out.stderr


def _committed(ck) -> bool:
    return os.path.isdir(ck) and any(os.path.exists(os.path.join(ck, d, "manifest.json"))
                                     for d in os.listdir(ck) if d.startswith("snap-"))


@pytest.mark.soak
@pytest.mark.spark
def test_ctrl_c_says_one_line_exits_130_and_the_run_resumes_exactly(run_cli, tmp_path):
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    order = list(range(1, 60))  # a path: ~60 rounds, a snapshot every 2
    random.Random(7).shuffle(order)
    (tmp_path / "path.csv").write_text("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in order))
    ck = str(tmp_path / "ck")
    args = ["run", cc, "--param", "edges_path=path.csv", "--checkpoint", ck, "--snapshot-every", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "scopeflow.cli", *args, "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not _committed(ck) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before its first snapshot"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [
        "interrupted (Ctrl-C): the snapshots taken so far are kept; `--resume` continues from the latest"], err
    assert not (tmp_path / "out").exists()
    resumed = run_cli(*args, "--resume", "--trace")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from snap-" in resumed.stderr
    edges = [(i, i + 1) for i in order]
    assert Counter(read_output(str(tmp_path / "out" / "components"), (int, int))) == \
        Counter(reference.connected_components(edges).items())


def test_a_missing_input_is_refused_before_spark_starts(run_cli, tmp_path):
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    out = run_cli("run", cc, "--param", "edges_path=data/nope.csv", env=without_java())
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error[E0501]: source `edges`: input ") and "nope.csv does not exist" in out.stderr
    assert "connected_components.flow:4:1" in out.stderr and "= help:" in out.stderr
    assert not (tmp_path / "out").exists()
    java = run_cli("run", cc, env=without_java())
    assert java.returncode == 4 and "Java was not found" in java.stderr  # the environment does stop Spark


def test_the_connected_components_example_over_a_stream_runs_as_a_new_user_tries_it(run_cli, tmp_path):
    """examples/connected_components.flow with `read csv` replaced by `stream files(...)` (issue #23: this
    failed with an internal error): `--trigger available-now` reads the folder's files and ends by itself;
    its sink equals connected components of that file (a plain-Python reference)."""
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    text = open(cc).read().replace('read csv(edges_path, header = true)',
                                   'stream files("incoming", format = "csv", header = true, max_files_per_epoch = 1)')
    flow = tmp_path / "streaming.flow"
    flow.write_text(text.replace('"out/components"', '"out/streamed"'))
    assert run_cli("check", str(flow)).returncode == 0
    missing = run_cli("run", str(flow), "--trigger", "available-now", env=without_java())
    assert missing.returncode == 2, missing.stderr
    assert "error[E0501]: source `edges`: stream folder incoming does not exist" in missing.stderr
    assert "streaming.flow:4:1" in missing.stderr and "mkdir -p" in missing.stderr
    (tmp_path / "incoming").mkdir()
    shutil.copy(tmp_path / "data" / "graph.csv", tmp_path / "incoming" / "graph.csv")
    out = run_cli("run", str(flow), "--trigger", "available-now", cwd=str(tmp_path))  # (its checkpoint: there)
    assert out.returncode == 0, out.stderr
    assert "epoch 0: 1 file" in out.stderr + out.stdout
    assert (tmp_path / ".scopeflow" / "connected_components" / "stream.json").exists()
    edges = reference.read_csv_rows(str(tmp_path / "data" / "graph.csv"), (int, int))
    assert Counter(read_output(str(tmp_path / "out" / "streamed"), (int, int))) == \
        Counter(reference.connected_components(edges).items())


def test_streaming_options_are_checked_before_spark_starts(run_cli, tmp_path):
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    bad = run_cli("run", cc, "--trigger", "sometimes", env=without_java())
    assert bad.returncode == 2 and "--trigger" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert "stream" in bad.stderr  # a batch pipeline takes no trigger
    text = open(cc).read().replace('read csv(edges_path, header = true)',
                                   'stream files("data", format = "csv", header = true)')
    flow = tmp_path / "streaming.flow"
    flow.write_text(text)
    for trigger, said in (("sometimes", "not a trigger"), ("processing-time=ten", "a number and a unit")):
        out = run_cli("run", str(flow), "--trigger", trigger, env=without_java())
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr
    remote = run_cli("run", str(flow), "--checkpoint", "hdfs://127.0.0.1:1/ck", env=without_java())
    assert remote.returncode == 2 and remote.stderr.startswith("error[E0409]: --checkpoint hdfs://"), remote.stderr
    flow.write_text("param how: string = \"fail\"\n" + text.replace('format = "csv", header = true)',
                                                                  'format = "csv", header = true, on_error = how)'))
    bad_mode = run_cli("run", str(flow), "--param", "how=skipp", env=without_java())
    assert bad_mode.returncode == 2 and bad_mode.stderr.startswith("error[E0114]: source `edges`: on_error = \"skipp\""), \
        bad_mode.stderr
    (tmp_path / "afile").write_text("x")
    a_file = run_cli("run", str(flow), "--checkpoint", str(tmp_path / "afile"), env=without_java())
    assert a_file.returncode == 2 and "is a file, not a folder" in a_file.stderr, a_file.stderr


def test_show_and_graph_stats_on_a_streaming_pipeline(run_cli, tmp_path):
    """`show` previews a streaming pipeline over the files its folder holds now, writing nothing (no
    checkpoint); `graph --stats` draws a streaming run's report (its last epoch's loops)."""
    (cc,) = copy_examples(tmp_path, "connected_components.flow")
    flow = tmp_path / "streaming.flow"
    flow.write_text(open(cc).read().replace('read csv(edges_path, header = true)',
                                            'stream files("incoming", format = "csv", header = true)'))
    (tmp_path / "incoming").mkdir()
    (tmp_path / "incoming" / "a.csv").write_text("src,dst\n1,2\n2,3\n7,8\n")
    shown = run_cli("show", str(flow), "components", cwd=str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "is read as the files in its folder are now" in shown.stderr
    assert re.search(r"\|\s*3\s*\|\s*1\s*\|", shown.stdout), shown.stdout
    assert not (tmp_path / ".scopeflow").exists() and not (tmp_path / "out").exists()
    run = run_cli("run", str(flow), "--trigger", "available-now", "--report", str(tmp_path / "r.json"),
                  cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr
    graph = run_cli("graph", str(flow), "--stats", str(tmp_path / "r.json"), "-o", str(tmp_path / "g.dot"))
    assert graph.returncode == 0, graph.stderr
    assert re.search(r"rounds · \d+ attempts", (tmp_path / "g.dot").read_text())
