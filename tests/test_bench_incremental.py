"""benchmarks/bench_incremental.py: its hand-written incremental contender (`hand`, plain PySpark in
`foreachBatch`) ends with networkx's answer over a small stream of waves, for both kernels, so the benchmark
cannot time a wrong hand-written loop. (The benchmark also checks every output before it counts a time.)"""
from __future__ import annotations

import os
import random
import sys

import networkx as nx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import bench_incremental as BI  # noqa: E402
import bench_stream as BS  # noqa: E402


def small_stream():
    rng = random.Random(7)
    base = sorted({(a, b) for a, b in ((rng.randrange(1, 300), rng.randrange(1, 300)) for _ in range(350)) if a != b})
    # waves: new vertices tied to old ones, and edges between old vertices that merge components
    return base, BS.make_waves(base, 3, 40, 6, 11)


def test_hand_written_incremental_cc_equals_networkx(tmp_path, spark):
    base, waves = small_stream()
    # a last wave whose new vertex has the smallest id of all: its label must spread through a whole old component
    waves.append([(0, base[0][0])])
    paths = BI.write_files(str(tmp_path / "cc"), [base] + waves)
    res = BI.hand(spark, paths, "cc", 2)
    graph = nx.Graph(base + [e for w in waves for e in w])
    want = {(v, min(comp)) for comp in nx.connected_components(graph) for v in comp}
    assert BI.as_rows(res["rows"], "cc") == want
    assert sum(1 for _, label in want if label == 0) > 50
    rounds = [e["rounds"] for e in BI.epochs(res)]
    assert len(rounds) == 5
    # the waves start from the previous labels (fewer rounds than the base's); the last one relabels a component
    assert all(1 <= r < rounds[0] for r in rounds[1:]) and rounds[4] > 2


def test_hand_written_incremental_sssp_equals_networkx(tmp_path, spark):
    base, waves = small_stream()
    files = [BI.weighted(base)] + [BI.weighted(w) for w in waves]
    paths = BI.write_files(str(tmp_path / "sssp"), files)
    source = base[0][0]
    res = BI.hand(spark, paths, "sssp", 2, source)
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(a for f in files for a in f)
    want = {(v, float(d)) for v, d in nx.single_source_dijkstra_path_length(graph, source).items()}
    assert len(want) > 100 and BI.as_rows(res["rows"], "sssp") == want
