"""Every example runs on real local Spark; results equal an independent reference."""
from __future__ import annotations

import os
from collections import Counter

import pytest

import reference
from conftest import EXAMPLES, read_output
from scopeflow.api import run_file

pytestmark = pytest.mark.spark
DATA = os.path.join(EXAMPLES, "data")


def rows(path, *types):
    return read_output(path, types)


def approx_dict(got: dict, want: dict, tol=1e-9):
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=tol, abs=tol), k


def test_connected_components(spark, example_copy):
    flow = example_copy("connected_components.flow")
    job = run_file(flow, spark=spark)
    got = rows(os.path.join(os.path.dirname(flow), "out/components"), int, int)
    assert len(got) == len(set(got)), "duplicate rows"
    edges = reference.read_csv_rows(os.path.join(DATA, "graph.csv"), (int, int))
    assert dict(got) == reference.connected_components(edges)
    assert job.report["loops"]["cc"]["activations"] == 1


def test_sssp(spark, example_copy):
    flow = example_copy("sssp.flow")
    run_file(flow, spark=spark)
    got = dict(rows(os.path.join(os.path.dirname(flow), "out/distances"), int, float))
    wedges = reference.read_csv_rows(os.path.join(DATA, "wgraph.csv"), (int, int, float))
    approx_dict(got, reference.sssp(wedges, 1))


def test_pagerank(spark, example_copy):
    flow = example_copy("pagerank.flow")
    job = run_file(flow, spark=spark)
    got = dict(rows(os.path.join(os.path.dirname(flow), "out/ranks"), int, float))
    vertices = [v for (v,) in reference.read_csv_rows(os.path.join(DATA, "vertices.csv"), (int,))]
    edges = reference.read_csv_rows(os.path.join(DATA, "edges.csv"), (int, int))
    approx_dict(got, reference.pagerank_fixed(vertices, edges, 20))
    assert len([r for r in job.report["rounds"] if r["scope"] == "pr"]) == 20
    assert job.report["attempts"][-1]["decision"] == "rounds"


def test_hits_coloop(spark, example_copy):
    flow = example_copy("hits.flow")
    run_file(flow, spark=spark)
    out = os.path.dirname(flow)
    hubs = dict(rows(os.path.join(out, "out/hubs"), int, float))
    auths = dict(rows(os.path.join(out, "out/auths"), int, float))
    vertices = [v for (v,) in reference.read_csv_rows(os.path.join(DATA, "vertices.csv"), (int,))]
    edges = reference.read_csv_rows(os.path.join(DATA, "edges.csv"), (int, int))
    want_h, want_a = reference.hits_fixed(vertices, edges, 10)
    approx_dict(hubs, want_h)
    approx_dict(auths, want_a)


def test_reachability_distinct(spark, example_copy):
    flow = example_copy("reachability.flow")
    run_file(flow, spark=spark)
    got = [v for (v,) in rows(os.path.join(os.path.dirname(flow), "out/reached"), int)]
    edges = reference.read_csv_rows(os.path.join(DATA, "edges.csv"), (int, int))
    seeds = [v for (v,) in reference.read_csv_rows(os.path.join(DATA, "seeds.csv"), (int,))]
    assert Counter(got) == Counter(reference.reachable(edges, seeds))  # each vertex exactly once


def test_transitive_closure(spark, example_copy):
    flow = example_copy("transitive_closure.flow")
    run_file(flow, spark=spark)
    got = rows(os.path.join(os.path.dirname(flow), "out/closure"), int, int)
    edges = reference.read_csv_rows(os.path.join(DATA, "edges.csv"), (int, int))
    assert Counter(got) == Counter(reference.transitive_closure(edges))


def test_kcore_nested_loops(spark, example_copy):
    flow = example_copy("kcore.flow")
    job = run_file(flow, spark=spark)
    got = rows(os.path.join(os.path.dirname(flow), "out/cores"), int, int)
    assert len(got) == len(set(got))
    edges = reference.read_csv_rows(os.path.join(DATA, "kcore.csv"), (int, int))
    assert dict(got) == reference.core_numbers(edges)
    outer = job.report["loops"]["kcore"]
    inner = job.report["loops"]["kcore.peel"]
    assert inner["activations"] == sum(outer["rounds"])  # one inner activation per outer round
    assert len(inner["rounds"]) == inner["activations"]


def test_kmeans(spark, example_copy):
    flow = example_copy("kmeans.flow")
    run_file(flow, spark=spark)
    got = {cid: (x, y) for cid, x, y in rows(os.path.join(os.path.dirname(flow), "out/centers"), int, float, float)}
    points = reference.read_csv_rows(os.path.join(DATA, "points.csv"), (int, float, float))
    cents = reference.read_csv_rows(os.path.join(DATA, "centroids.csv"), (int, float, float))
    want = reference.kmeans(points, cents, 10)
    assert set(got) == set(want)
    for cid in want:
        assert got[cid] == pytest.approx(want[cid], rel=1e-9)


def test_undirected_def_and_sort(spark, example_copy):
    flow = example_copy("undirected.flow")
    run_file(flow, spark=spark)
    got = rows(os.path.join(os.path.dirname(flow), "out/degrees"), int, int)
    edges = reference.read_csv_rows(os.path.join(DATA, "graph.csv"), (int, int))
    undirected = {(a, b) for a, b in edges} | {(b, a) for a, b in edges}
    want = Counter(a for a, _ in undirected)
    assert dict(got) == dict(want)


def test_streaming_cc_in_waves_as_the_tutorial_runs_it(spark, example_copy):
    """docs/tutorial.md "Streaming": the files of data/stream_waves/ moved into data/stream/ one by one, a run
    with `--trigger available-now` after each: the sink equals networkx over the waves so far."""
    from scopeflow.api import compile_to_module
    from scopeflow.runtime.arguments import SnapshotOptions
    from scopeflow.runtime.launcher import execute
    from scopeflow.runtime.streaming import StreamOptions

    flow = example_copy("streaming_cc.flow")
    folder = os.path.dirname(flow)
    waves = sorted(os.listdir(os.path.join(folder, "data", "stream_waves")))
    assert len(waves) >= 4
    edges: list = []
    for wave in waves:
        os.replace(os.path.join(folder, "data", "stream_waves", wave), os.path.join(folder, "data", "stream", wave))
        edges += reference.read_csv_rows(os.path.join(folder, "data", "stream", wave), (int, int))
        code, _ = execute(compile_to_module(flow), spark=spark, quiet=True,
                          snapshots=SnapshotOptions(checkpoint=os.path.join(folder, "ck")),
                          stream=StreamOptions("available-now"))
        assert code == 0
        got = rows(os.path.join(folder, "out", "streaming_components"), int, int)
        assert got == sorted(got) and dict(got) == reference.connected_components(edges), wave
