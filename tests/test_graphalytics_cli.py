"""`scopeflow graphalytics`: LDBC's data-set layout in, LDBC's output format out, LDBC's validation rules
(scopeflow/graphalytics.py). Real runs of the CLI on LDBC's example data sets (tests/data/graphalytics/);
the outputs are checked against LDBC's expected files by this test's own reading of them."""
from __future__ import annotations

import math
import os
import shutil

import pytest

from conftest import HERE
from scopeflow.cli import main
from scopeflow.compiler import check_flow
from scopeflow.graphalytics import ALGORITHMS, Dataset, compare, find_properties, pipeline_text, read_properties

EXAMPLE = os.path.join(HERE, "data", "graphalytics", "example")


def copy_dataset(tmp_path, name):
    folder = tmp_path / "graphs"
    folder.mkdir(exist_ok=True)
    for suffix in (".properties", ".v", ".e"):
        shutil.copy(os.path.join(EXAMPLE, name + suffix), folder / (name + suffix))
    return folder


def values(path, kind):
    with open(path) as fh:
        return {int(v): kind(x) for v, x in (line.split() for line in fh if line.strip())}


@pytest.mark.spark
def test_a_run_writes_ldbc_output_and_validates_it(tmp_path, run_cli):
    """SSSP on LDBC's directed example: `vertex value` lines equal to LDBC's expected output (relative 1e-4,
    Infinity where unreachable), the pipeline kept next to it, Spark's part folder gone, exit 0."""
    folder = copy_dataset(tmp_path, "example-directed")
    expected = os.path.join(EXAMPLE, "example-directed-SSSP")
    out = tmp_path / "results" / "sssp.txt"
    proc = run_cli("graphalytics", str(folder / "example-directed"), "-a", "sssp", "-o", str(out),
                   "--validate", expected, "--quiet", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "validation: ok, 10 vertices" in proc.stdout
    got, want = values(out, float), values(expected, float)
    assert got.keys() == want.keys() and any(math.isinf(x) for x in want.values())
    for v, x in want.items():
        assert got[v] == x if math.isinf(x) else abs(got[v] - x) <= 1e-4 * abs(x), v
    assert (tmp_path / "results" / "sssp.txt.flow").exists() and not (tmp_path / "results" / "sssp.txt.parts").exists()


@pytest.mark.spark
def test_a_wrong_expected_output_exits_6_and_names_the_vertex(tmp_path, spark, capsys, monkeypatch):
    """LCC on LDBC's undirected example against an expected file with one value changed by 1 %: exit 6, the
    vertex named; the output is kept and is LDBC's (default name NAME-LCC in the current folder). Run in this
    process, on the tests' session (the command itself is run as a process above)."""
    from scopeflow.cli import parser
    from scopeflow.graphalytics import cmd_graphalytics

    folder = copy_dataset(tmp_path, "example-undirected")
    right = values(os.path.join(EXAMPLE, "example-undirected-LCC"), float)
    vertex = next(v for v, x in sorted(right.items()) if x > 0)
    wrong = {**right, vertex: right[vertex] * 1.01}
    bad = tmp_path / "bad-LCC"
    bad.write_text("".join(f"{v} {x!r}\n" for v, x in wrong.items()))
    monkeypatch.chdir(tmp_path)
    args = parser().parse_args(["graphalytics", str(folder), "-a", "lcc", "--validate", str(bad), "--quiet"])
    assert cmd_graphalytics(args, spark=spark) == 6
    err = capsys.readouterr().err
    assert "validation failed" in err and f"vertex {vertex}:" in err
    assert f"1 of {len(right)} values differ" in err
    got = values(tmp_path / "example-undirected-LCC", float)
    assert got.keys() == right.keys() and all(abs(got[v] - x) <= 1e-4 * abs(x) for v, x in right.items())


def test_bad_data_sets_exit_2_before_spark_starts(tmp_path, capsys):
    folder = copy_dataset(tmp_path, "example-directed")
    props = folder / "example-directed.properties"
    text = props.read_text()
    props.write_text(text.replace("graph.example-directed.bfs.source-vertex = 1", ""))
    assert main(["graphalytics", str(folder), "-a", "bfs", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no `graph.example-directed.bfs.source-vertex`" in err and "= help:" in err
    props.write_text(text.replace("pr.num-iterations = 2", "pr.num-iterations = two"))
    assert main(["graphalytics", str(folder), "-a", "pr", "-o", str(tmp_path / "o")]) == 2
    assert "`graph.example-directed.pr.num-iterations = two` is not a int" in capsys.readouterr().err
    props.write_text(text)
    os.remove(folder / "example-directed.e")
    assert main(["graphalytics", str(folder / "example-directed.properties"), "-a", "wcc"]) == 2
    assert "edge-file" in capsys.readouterr().err
    assert main(["graphalytics", str(tmp_path / "nothing"), "-a", "wcc"]) == 2
    assert "no such data set" in capsys.readouterr().err
    (tmp_path / "bad-expected").write_text("1 0\n2\n")
    shutil.copy(os.path.join(EXAMPLE, "example-directed.e"), folder)
    assert main(["graphalytics", str(folder), "-a", "wcc", "--validate", str(tmp_path / "bad-expected")]) == 2
    assert "bad-expected:2: `2` is not `vertex value`" in capsys.readouterr().err


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("name", ["example-directed", "example-undirected"])
def test_the_generated_pipelines_check_clean(algorithm, name, tmp_path):
    ds = Dataset(find_properties(os.path.join(EXAMPLE, name)))
    text = pipeline_text(ds, algorithm, str(tmp_path / "parts"))
    result = check_flow(text, str(tmp_path / "p.flow"), str(tmp_path))
    assert not result.errors, [d.render() for d in result.errors]
    assert f"directed: boolean = {str(name.endswith('-directed')).lower()}" in text
    # each algorithm's parameters, from its own keys (LDBC's example: PR 2 iterations at 0.85, CDLP 2, sources)
    props = read_properties(os.path.join(EXAMPLE, name + ".properties"))
    key = f"graph.{name}."
    wanted = {"bfs": [f"param source: long = {props[key + 'bfs.source-vertex']}"],
              "sssp": [f"param source: long = {props[key + 'sssp.source-vertex']}", "w = cast(weight as double)"],
              "cdlp": [f"param iterations: long = {props[key + 'cdlp.max-iterations']}"],
              "pr": [f"param iterations: long = {props[key + 'pr.num-iterations']}",
                     f"param damping: double = {float(props[key + 'pr.damping-factor'])!r}"],
              "lcc": [], "wcc": []}[algorithm]
    for line in wanted:
        assert line in text, (line, text)
    assert ("param source" in text) == (algorithm in ("bfs", "sssp"))
    assert ("param iterations" in text) == (algorithm in ("cdlp", "pr"))


def test_properties_and_ldbc_rules():
    props = read_properties(os.path.join(EXAMPLE, "example-directed.properties"))
    assert props["graph.example-directed.pr.damping-factor"] == "0.85"
    assert props["graph.example-directed.algorithms"] == "bfs, cdlp, lcc, pr, sssp, wcc"
    # WCC: the same partition under other labels is right; two components merged is not
    assert compare("wcc", {1: 7, 2: 7, 3: 9}, {1: 1, 2: 1, 3: 3}) == []
    assert compare("wcc", {1: 7, 2: 7, 3: 7}, {1: 1, 2: 1, 3: 3})
    assert compare("wcc", {1: 7, 2: 8, 3: 9}, {1: 1, 2: 1, 3: 3})
    # epsilon 1e-4, relative; infinity only where expected; exact for longs; every vertex on both sides
    assert compare("pr", {1: 1.00009}, {1: 1.0}) == [] and compare("pr", {1: 1.0002}, {1: 1.0})
    assert compare("sssp", {1: math.inf}, {1: math.inf}) == [] and compare("sssp", {1: 1e300}, {1: math.inf})
    assert compare("bfs", {1: 3}, {1: 4}) and compare("cdlp", {1: 3, 2: 3}, {1: 3})
    assert "missing" in compare("lcc", {}, {1: 0.0})[0]
    # LDBC's EpsilonValidationRule: zero-like values match, infinity-like ones match by sign
    assert compare("lcc", {1: 0.0}, {1: 1e-323}) == [] and compare("pr", {1: 1.797e308}, {1: math.inf}) == []
    assert compare("sssp", {1: -math.inf}, {1: math.inf}) and compare("lcc", {1: 0.0}, {1: 1e-300})


def test_a_missing_expected_file_is_named(tmp_path, capsys):
    folder = copy_dataset(tmp_path, "example-directed")
    missing = str(tmp_path / "no-such-expected")
    assert main(["graphalytics", str(folder), "-a", "wcc", "-o", str(tmp_path / "o"), "--validate", missing]) == 2
    assert f"{missing}: cannot read it" in capsys.readouterr().err
    assert main(["graphalytics", str(tmp_path / "x.properties"), "-a", "wcc"]) == 2
    err = capsys.readouterr().err
    assert "no such data set" in err and ".properties.properties" not in err
