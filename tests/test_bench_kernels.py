"""benchmarks/bench_kernels.py: both contenders (stdlib's kernel, the hand-written PySpark loop) give the
reference's answer on small generated graphs, so the benchmark cannot drift into timing wrong programs."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import bench_kernels  # noqa: E402
import gen_graphs  # noqa: E402


def test_generators_are_deterministic_and_shaped():
    arcs = gen_graphs.rmat_graph(scale=10, arcs=3000)
    assert arcs == gen_graphs.rmat_graph(scale=10, arcs=3000)
    assert len(set(arcs)) == 3000 and all(a != b and 1 <= a <= 1024 and 1 <= b <= 1024 for a, b in arcs)
    chain = gen_graphs.chain_graph(cliques=5, size=4)
    assert len(chain) == 2 * (5 * 6 + 4) and {(b, a) for a, b in chain} == set(chain)
    assert all(1.0 <= gen_graphs.weight(a, b) < 11.0 for a, b in arcs[:100])


# (SSSP's contenders are not run here: CI time. The benchmark checks every output against networkx before it
# counts a time, so a wrong `sssp_hand` stops the benchmark; it cannot publish a wrong figure.)
@pytest.mark.parametrize("kernel, name", [("pagerank", "rmat")])
def test_contenders_equal_the_reference(tmp_path, spark, kernel, name):
    arcs = {"chain": lambda: gen_graphs.chain_graph(cliques=3, size=4),
            "rmat": lambda: gen_graphs.rmat_graph(scale=7, arcs=500)}[name]()
    path = gen_graphs.write_weighted_csv(str(tmp_path / f"{name}.csv"), arcs)
    wedges = bench_kernels.read_arcs(path)
    params = {"sssp": {"source": bench_kernels.sssp_source(name, wedges)}, "pagerank": {"iterations": 4}}[kernel]
    want = bench_kernels.reference(kernel, wedges, params)
    if kernel == "sssp":  # the chain is connected: every vertex is reached
        assert len(want) == len({v for a, b, _ in wedges for v in (a, b)})
    else:  # ranked: vertices some arc reaches (less those only reached from vertices that dropped out)
        targets = {b for _, b, _ in wedges}
        assert want.keys() <= targets and len(want) > 0.8 * len(targets)
    for contender in bench_kernels.CONTENDERS:
        res = bench_kernels.run_one(spark, contender, kernel, path, int(spark.conf.get("spark.sql.shuffle.partitions")),
                                    params)
        bench_kernels.check(res["got"], want, f"{contender} {kernel} on {name}")
        # sssp: a hop per clique and per bridge at least; pagerank: exactly its iterations
        assert res["rounds"] >= 2 * 3 - 1 if kernel == "sssp" else res["rounds"] == 4


def test_check_catches_a_wrong_value_and_a_missing_vertex():
    with pytest.raises(AssertionError, match="values differ"):
        bench_kernels.check({1: 1.0, 2: 2.0}, {1: 1.0, 2: 2.0001}, "x")
    with pytest.raises(AssertionError, match="missing"):
        bench_kernels.check({1: 1.0}, {1: 1.0, 2: 2.0}, "x")


def test_graphalytics_bench_pipelines_check_clean_and_hand_pagerank_is_ldbcs(tmp_path, spark):
    """bench_graphalytics.py: its six pipelines compile; its hand-written LDBC PageRank equals the reference."""
    import bench_graphalytics
    import reference
    from scopeflow.compiler import check_flow

    for kernel in bench_graphalytics.KERNELS:
        result = check_flow(bench_graphalytics.flow(kernel), str(tmp_path / "p.flow"), str(tmp_path))
        assert not result.errors, [d.render() for d in result.errors]
    arcs = gen_graphs.rmat_graph(scale=6, arcs=150)  # a power law: dangling-free undirected, hubs, isolated ids
    path = gen_graphs.write_weighted_csv(str(tmp_path / "g.csv"), arcs)
    out = str(tmp_path / "out")
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert bench_graphalytics.pagerank_ldbc_hand(spark, path, out, parts, iterations=3) == 3
    vertices = sorted({v for e in arcs for v in e})
    want = reference.ga_pagerank(vertices, arcs, 3, 0.85, False)
    bench_kernels.check(bench_kernels.read_output(out), want, "pagerank_ldbc_hand", rel=1e-9)
