"""A file source's fields are matched by name, never by position (issue 22, item 1).

A CSV whose header lists the columns in another order is read by name (extra columns left out); a
file that lacks a declared field (CSV header, Parquet footer, JSON records) is an error naming the file
and the fields, at check time when the file is there and at run time in any case (E0503). Real files,
real Spark, the real CLI; results compared with plain Python reading the same files with `csv`.
"""
from __future__ import annotations

import csv
import json
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import reference
from conftest import read_output, without_java, write_csv
from scopeflow.api import run_file
from scopeflow.compiler import check_file
from scopeflow.runtime.errors import RunRefused, RuntimeFailure

pytestmark = pytest.mark.spark

# a directed graph: 1 -> 2 -> 3 -> 4 and 5 -> 1; from 1 the edges reach {1, 2, 3, 4}, read the other way
# round (dst -> src) they reach {1, 5}
EDGES = [(1, 2, 0.5), (2, 3, 1.5), (3, 4, 2.5), (5, 1, 3.5)]


def write(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def by_name(path, types: dict) -> list[tuple]:
    """The rows of a CSV file with a header, by column name: the independent reading of it."""
    with open(path, newline="") as fh:
        return [tuple(t(r[name]) for name, t in types.items()) for r in csv.DictReader(fh)]


REACH = """
    param edges_path: string = "edges.csv"
    source edges = read csv(edges_path, header = true) schema (src: long, dst: long, w: double)
    source seeds = values (v: long) [(1)]
    reached = loop reach(r = seeds) with (e = edges) {
        next = r | join(e, on r.v == e.src) | select(v = e.dst) | union(r) | distinct
        feedback r <- next
        emit next
    }
    sink reached -> csv("out/reached", header = true)
    sink edges | group(by src, n = count(), total = sum(w)) -> csv("out/out_degree", header = true)
"""


def test_csv_header_in_another_order_is_read_by_name(tmp_path, run_cli):
    # columns in another order than the schema, and one the schema does not declare (left out)
    rows = [(d, note, w, s) for s, d, w in EDGES for note in ["a b"]]
    write_csv(tmp_path / "edges.csv", ["dst", "note", "w", "src"], rows)
    flow = write(tmp_path / "reach.flow", REACH)
    proc = run_cli("run", flow, "--quiet")
    assert proc.returncode == 0, proc.stderr
    edges = by_name(tmp_path / "edges.csv", {"src": int, "dst": int})
    assert sorted(edges) == sorted((s, d) for s, d, _ in EDGES)
    assert {v for (v,) in read_output(str(tmp_path / "out/reached"), (int,))} == reference.reachable(edges, [1])
    assert reference.reachable(edges, [1]) == {1, 2, 3, 4}  # (read by position it is {1, 5})
    want = {}
    for s, _, w in by_name(tmp_path / "edges.csv", {"src": int, "dst": int, "w": float}):
        n, total = want.get(s, (0, 0.0))
        want[s] = (n + 1, total + w)
    got = read_output(str(tmp_path / "out/out_degree"), (int, int, float))
    assert {s: (n, t) for s, n, t in got} == want


def test_every_part_file_has_its_header_and_is_read_by_name(spark, tmp_path):
    """A folder of part files (as Spark writes them): each has a header; all are read by name."""
    write_csv(tmp_path / "parts/part-00000.csv", ["dst", "src", "w"], [(d, s, w) for s, d, w in EDGES[:2]])
    write_csv(tmp_path / "parts/part-00001.csv", ["dst", "src", "w"], [(d, s, w) for s, d, w in EDGES[2:]])
    (tmp_path / "parts/_SUCCESS").write_text("")
    flow = write(tmp_path / "reach.flow", REACH)
    run_file(flow, params={"edges_path": "parts"}, spark=spark)
    edges = [e for p in ("part-00000.csv", "part-00001.csv")
             for e in by_name(tmp_path / "parts" / p, {"src": int, "dst": int})]
    assert {v for (v,) in read_output(str(tmp_path / "out/reached"), (int,))} == reference.reachable(edges, [1])


def test_part_files_whose_headers_differ_are_refused(spark, tmp_path):
    write_csv(tmp_path / "parts/part-00000.csv", ["src", "dst", "w"], [EDGES[0]])
    write_csv(tmp_path / "parts/part-00001.csv", ["dst", "src", "w"], [(2, 3, 1.5)])
    flow = write(tmp_path / "reach.flow", REACH)
    with pytest.raises(RunRefused) as info:  # before Spark starts
        run_file(flow, params={"edges_path": "parts"}, spark=spark)
    failure = info.value
    assert failure.code == "E0503"
    text = failure.render()
    assert "part-00000.csv" in text and "part-00001.csv" in text
    assert "src, dst, w" in text and "dst, src, w" in text
    assert not (tmp_path / "out").exists()


MISSING = """
    param edges_path: string = "edges.csv"
    source edges = read csv(edges_path, header = true) schema (src: long, dst: long, w: double)
    sink edges -> csv("out/e", header = true)
"""


def test_csv_header_without_a_declared_field_at_check_time(tmp_path, run_cli):
    """A file present at check time is checked then, with the source's position."""
    write_csv(tmp_path / "edges.csv", ["source", "dst", "weight"], [(1, 2, 0.5)])
    flow = write(tmp_path / "t.flow", MISSING.replace("edges_path, header", '"edges.csv", header'))
    proc = run_cli("check", flow)
    assert proc.returncode == 1, proc.stderr + proc.stdout
    out = proc.stdout + proc.stderr
    assert "error[E0503]" in out and f"{flow}:3:" in out
    assert "edges.csv" in out and "`src`" in out and "`w`" in out
    assert "source, dst, weight" in out  # what the header has


def test_csv_header_without_a_declared_field_at_run_time(tmp_path, run_cli):
    """A path given at run time: the run is refused before Spark starts (exit 2, no JVM), naming the file and
    fields."""
    write_csv(tmp_path / "in/edges.csv", ["source", "dst", "weight"], [(1, 2, 0.5)])
    flow = write(tmp_path / "t.flow", MISSING)
    write_csv(tmp_path / "edges.csv", ["src", "dst", "w"], [(1, 2, 0.5)])  # the default: checks
    assert not check_file(flow).errors
    proc = run_cli("run", flow, "--quiet", "--param", f"edges_path={tmp_path / 'in/edges.csv'}", env=without_java())
    assert proc.returncode == 2, proc.stderr  # (had Spark been started, this would be exit 4: no Java)
    err = proc.stderr
    assert "error[E0503]" in err and "source `edges`" in err and f"{flow}:3:" in err
    assert "in/edges.csv" in err and "`src`" in err and "`w`" in err
    assert "source, dst, weight" in err
    assert "Traceback" not in err and "py4j" not in err.lower()
    assert not (tmp_path / "out").exists()


def test_parquet_fields_differ_from_the_schema(spark, tmp_path, run_cli):
    pq.write_table(pa.table({"a": [1, 2], "c": ["x", "y"]}), tmp_path / "t.parquet")
    pq.write_table(pa.table({"a": [1, 2], "b": [3, 4]}), tmp_path / "good.parquet")
    flow = write(tmp_path / "t.flow", """
        param input: string = "good.parquet"
        source t = read parquet(input) schema (a: long, b: long)
        sink t -> csv("out/t", header = true)
    """)
    with pytest.raises(RunRefused) as info:  # before Spark starts
        run_file(flow, params={"input": "t.parquet"}, spark=spark)
    assert info.value.code == "E0503"
    text = info.value.render()
    assert "t.parquet" in text and "`b`" in text and "a, c" in text
    # a param's default path is checked at check time
    default = write(tmp_path / "default.flow", open(flow).read().replace('"good.parquet"', '"t.parquet"'))
    errors = check_file(default).errors
    assert [(d.code, d.span.line) for d in errors] == [("E0503", 3)]
    assert "checked with the default of param `input`" in errors[0].render()
    # a literal path is checked at check time
    literal = write(tmp_path / "lit.flow", 'source t = read parquet("t.parquet") schema (a: long, b: long)\n'
                                          'sink t -> console()\n')
    errors = check_file(literal).errors
    assert [(d.code, d.span.line) for d in errors] == [("E0503", 1)]
    assert "`b`" in errors[0].message and "t.parquet" in errors[0].message


def test_parquet_field_of_another_type_names_file_and_field(spark, tmp_path):
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), tmp_path / "t.parquet")
    flow = write(tmp_path / "t.flow", """
        source t = read parquet("t.parquet") schema (a: long, b: long)
        sink t -> csv("out/t", header = true)
    """)
    with pytest.raises(RuntimeFailure) as info:
        run_file(flow, spark=spark)
    failure = info.value
    assert failure.code == "E0503"
    text = failure.render()
    assert "source `t`" in text and "t.parquet" in text and "`b`" in text
    assert "long" in text and "string" in text.lower()


def test_json_records_without_the_declared_fields(spark, tmp_path):
    (tmp_path / "e.json").write_text("".join(json.dumps({"source": s, "target": d}) + "\n" for s, d, _ in EDGES))
    flow = write(tmp_path / "t.flow", """
        param input: string = "later.json"
        source e = read json(input) schema (src: long, dst: long)
        sink e -> csv("out/e", header = true)
    """)
    with pytest.raises(RunRefused) as info:  # before Spark starts
        run_file(flow, params={"input": "e.json"}, spark=spark)
    assert info.value.code == "E0503"
    text = info.value.render()
    assert "e.json" in text and "`src`" in text and "`dst`" in text and "source, target" in text


def test_json_records_that_omit_a_null_field_are_fine(spark, tmp_path):
    """Spark's own JSON writer leaves null fields out: a declared field absent from the records is null."""
    (tmp_path / "e.json").write_text('{"src": 1, "dst": 2}\n{"src": 2, "dst": 3, "extra": true}\n')
    flow = write(tmp_path / "t.flow", """
        source e = read json("e.json") schema (src: long, dst: long, label: string)
        sink e | select(src, dst, known = label is null) -> csv("out/e", header = true)
    """)
    assert not check_file(flow).errors
    run_file(flow, spark=spark)
    assert sorted(read_output(str(tmp_path / "out/e"))) == [("1", "2", "true"), ("2", "3", "true")]


def test_option_names_are_matched_ignoring_case_as_spark_does(spark, tmp_path):
    """`Header = true` is `header = true` to Spark, so to scopeflow too: the header is matched by name (read by
    position, the columns would be swapped, silently)."""
    write_csv(tmp_path / "e.csv", ["dst", "src", "w"], [(d, s, w) for s, d, w in EDGES])
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("e.csv", Header = true) schema (src: long, dst: long, w: double)
        sink edges -> csv("out/e", header = true)
    """)
    assert not check_file(flow).diagnostics
    run_file(flow, spark=spark)
    want = by_name(tmp_path / "e.csv", {"src": int, "dst": int, "w": float})
    assert sorted(read_output(str(tmp_path / "out/e"), (int, int, float))) == sorted(want)
    assert sorted(want) == sorted(EDGES)


def test_on_error_is_matched_ignoring_case_too(spark, tmp_path):
    """`On_Error = "skip"` is scopeflow's `on_error`, not an option Spark would ignore (failing at the row)."""
    write_csv(tmp_path / "e.csv", ["src", "dst", "w"], EDGES + [(6, 7, "x")])
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("e.csv", header = true, On_Error = "skip") schema (src: long, dst: long, w: double)
        sink edges -> csv("out/e", header = true)
    """)
    assert not check_file(flow).diagnostics
    run_file(flow, spark=spark)
    want = [r for r in by_name(tmp_path / "e.csv", {"src": int, "dst": int, "w": str}) if r[2] != "x"]
    assert sorted(read_output(str(tmp_path / "out/e"), (int, int, float))) == sorted((s, d, float(w)) for s, d, w in want)
    bad = write(tmp_path / "bad.flow", open(flow).read().replace('"skip"', '"ignore"'))
    assert [d.code for d in check_file(bad).errors] == ["E0114"]


def test_csv_files_python_cannot_decompress_are_still_read_by_name(spark, tmp_path):
    """Part files compressed with a codec Python cannot open (`.deflate`, as Hadoop writes it): their header is
    asked of Spark, and they are read by name all the same."""
    rows = [(d, s, w) for s, d, w in EDGES]  # written in the order (dst, src, w)
    spark.createDataFrame(rows, "dst long, src long, w double").coalesce(1).write.option("header", True) \
        .option("compression", "deflate").csv(str(tmp_path / "parts"))
    assert [p.suffix for p in (tmp_path / "parts").glob("part-*")] == [".deflate"]
    flow = write(tmp_path / "t.flow", """
        source edges = read csv("parts", header = true) schema (src: long, dst: long, w: double)
        sink edges -> csv("out/e", header = true)
    """)
    run_file(flow, spark=spark)
    assert sorted(read_output(str(tmp_path / "out/e"), (int, int, float))) == sorted(EDGES)
