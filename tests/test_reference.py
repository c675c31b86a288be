"""Hand-checked tests of the reference implementations, and of the shape of
the example data sets they are used on."""
import importlib.util
import sys
from pathlib import Path

import networkx as nx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference as ref  # noqa: E402
from reference import DATA, read_csv_rows  # noqa: E402


# --- references on tiny hand-checked graphs ---------------------------------

def test_read_csv_rows(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("src,dst,w\n1,2,0.5\n3,4,2\n")
    assert read_csv_rows(p, (int, int, float)) == [(1, 2, 0.5), (3, 4, 2.0)]
    with pytest.raises(ValueError):
        read_csv_rows(p, (int, int))


def test_connected_components():
    assert ref.connected_components([(5, 3), (3, 9), (20, 21)]) == {
        3: 3, 5: 3, 9: 3, 20: 20, 21: 20}


def test_sssp():
    edges = [(1, 2, 1.0), (2, 3, 1.0), (1, 3, 5.0), (3, 1, 1.0), (4, 1, 1.0), (1, 2, 0.5)]
    # parallel 1->2 edges: the cheaper one counts; 4 is unreachable
    assert ref.sssp(edges, 1) == {1: 0.0, 2: 0.5, 3: 1.5}
    assert ref.sssp([], 7) == {7: 0.0}


def test_sssp_rounds_agrees_with_dijkstra_and_takes_rounds_with_infinities():
    import math
    import random
    rng = random.Random(4)
    edges = [(rng.randrange(30), rng.randrange(30), float(rng.randint(0, 9))) for _ in range(90)]
    assert ref.sssp_rounds(edges, 1) == ref.sssp(edges, 1)
    inf = float("inf")  # round 1 reaches 3 at -inf before 5.0 arrives: 4 gets -inf + inf = NaN, then 5 NaN + 1
    got = ref.sssp_rounds([(1, 2, 1.0), (2, 3, 4.0), (3, 4, inf), (1, 3, -inf), (4, 5, 1.0)], 1)
    assert {k: v for k, v in got.items() if not math.isnan(v)} == {1: 0.0, 2: 1.0, 3: -inf}
    assert sorted(k for k, v in got.items() if math.isnan(v)) == [4, 5]
    # without the -inf edge, 3 is at 5.0 and 4 at inf (NaN only where -inf meets inf)
    assert ref.sssp_rounds([(1, 2, 1.0), (2, 3, 4.0), (3, 4, inf)], 1) == {1: 0.0, 2: 1.0, 3: 5.0, 4: inf}
    assert ref.spark_order(float("nan")) > ref.spark_order(inf) > ref.spark_order(-inf)
    top = 2 ** 63 - 1  # wrapping: 2 + top is the lowest long but one; 0 + top stays top
    assert ref.wrapping_add(2, top) == -2 ** 63 + 1 and ref.wrapping_add(-2 ** 63, -1) == top
    assert ref.sssp_rounds([(0, 1, 1), (1, 2, 1), (2, 3, top), (0, 2, 0)], 0, 0, ref.wrapping_add) == \
        {0: 0, 1: 1, 2: 0, 3: top}


def test_pagerank_two_cycle_is_fixed_point():
    assert ref.pagerank_fixed([1, 2], [(1, 2), (2, 1)], rounds=20) == {1: 1.0, 2: 1.0}


def test_pagerank_by_hand():
    edges = [(1, 2), (2, 3), (3, 2)]
    # round 1: 2 <- 1 + 1, 3 <- 1; vertex 1 receives nothing and drops out
    assert ref.pagerank_fixed([1, 2, 3], edges, rounds=1) == pytest.approx({2: 1.85, 3: 1.0})
    # round 2: 2 <- rank(3) = 1.0, 3 <- rank(2) = 1.85
    assert ref.pagerank_fixed([1, 2, 3], edges, rounds=2) == pytest.approx(
        {2: 1.0, 3: 0.15 + 0.85 * 1.85})
    star = [(1, 2), (1, 3), (2, 1), (3, 1)]
    assert ref.pagerank_fixed([1, 2, 3], star, rounds=1) == pytest.approx(
        {1: 1.85, 2: 0.575, 3: 0.575})


def test_hits_by_hand():
    edges = [(1, 2), (1, 3), (2, 3)]
    hubs, auths = ref.hits_fixed([1, 2, 3], edges, rounds=1)
    assert hubs == {1: 2.0, 2: 1.0} and auths == {2: 1.0, 3: 2.0}
    hubs, auths = ref.hits_fixed([1, 2, 3], edges, rounds=2)
    assert hubs == {1: 3.0, 2: 2.0} and auths == {2: 2.0, 3: 3.0}


def test_reachable():
    edges = [("a", "b"), ("b", "c"), ("d", "a")]
    assert ref.reachable(edges, ["a"]) == {"a", "b", "c"}
    assert ref.reachable(edges, ["z"]) == {"z"}


def test_transitive_closure():
    assert ref.transitive_closure([(1, 2), (2, 3)]) == {(1, 2), (2, 3), (1, 3)}
    assert ref.transitive_closure([(1, 2), (2, 1)]) == {(1, 2), (2, 1), (1, 1), (2, 2)}


def test_core_numbers():
    edges = [(1, 2), (2, 3), (3, 1), (3, 4), (5, 5), (5, 1)]
    assert ref.core_numbers(edges) == {1: 2, 2: 2, 3: 2, 4: 1, 5: 1}


def test_kmeans():
    points = [(1, 0.0, 0.0), (2, 0.0, 2.0), (3, 10.0, 0.0), (4, 10.0, 2.0)]
    cents = [(1, 0.0, 1.0), (2, 1.0, 1.0), (3, 50.0, 50.0)]
    # centroid 3 gets no point and drops out
    assert ref.kmeans(points, cents, rounds=1) == {1: (0.0, 1.0), 2: (10.0, 1.0)}
    # equidistant point -> smallest cid
    assert ref.kmeans([(1, 0.0, 0.0)], [(2, 1.0, 0.0), (1, -1.0, 0.0)], rounds=1) == {1: (0.0, 0.0)}


# --- shape of the example data ----------------------------------------------

def test_graph_csv():
    edges = read_csv_rows(DATA / "graph.csv", (int, int))
    cc = ref.connected_components(edges)
    sizes = sorted(list(cc.values()).count(c) for c in set(cc.values()))
    assert len(cc) == 30 and sizes == [2, 6, 9, 13]
    assert max(cc) > 2**31  # ids need `long`
    path = nx.Graph(e for e in edges if cc[e[0]] == 301)
    assert nx.diameter(path) == 12 and path.number_of_edges() == 12


def test_wgraph_csv():
    wedges = read_csv_rows(DATA / "wgraph.csv", (int, int, float))
    assert all(w > 0 for _, _, w in wedges)
    dist = ref.sssp(wedges, 1)
    allv = {u for u, _, _ in wedges} | {v for _, v, _ in wedges}
    assert len(allv) == 21 and set(allv) - set(dist) == {18, 19, 20, 21}
    assert dist[17] == 16.25
    hops = nx.single_source_shortest_path_length(nx.DiGraph([(u, v) for u, v, _ in wedges]), 1)
    cheapest = nx.single_source_dijkstra_path(
        nx.DiGraph([(u, v, {"w": w}) for u, v, w in sorted(wedges, key=lambda e: -e[2])]), 1,
        weight="w")
    assert sum(len(cheapest[v]) - 1 > hops[v] for v in dist) >= 5


def test_pagerank_data():
    vertices = [v for (v,) in read_csv_rows(DATA / "vertices.csv", (int,))]
    edges = read_csv_rows(DATA / "edges.csv", (int, int))
    assert len(vertices) == 15
    assert {u for u, _ in edges} == set(vertices) >= {v for _, v in edges}
    seeds = [v for (v,) in read_csv_rows(DATA / "seeds.csv", (int,))]
    assert ref.reachable(edges, seeds) == set(range(1, 13))
    assert len(ref.pagerank_fixed(vertices, edges)) == 14  # 15 has no in-edge


def test_kcore_csv():
    edges = read_csv_rows(DATA / "kcore.csv", (int, int))
    assert len({frozenset(e) for e in edges}) == len(edges)  # each edge once
    assert set(ref.core_numbers(edges).values()) == {1, 2, 3}


def test_kmeans_data():
    points = read_csv_rows(DATA / "points.csv", (int, float, float))
    cents = read_csv_rows(DATA / "centroids.csv", (int, float, float))
    assert len(points) == 30 and len(cents) == 3
    final = ref.kmeans(points, cents, rounds=10)
    assert final == ref.kmeans(points, cents, rounds=2)  # converged
    assert final[3] == pytest.approx((5.03, 9.102), abs=1e-3)
    # three clusters of 10 points: each final centroid is nearest to 10 points
    nearest = [min(final, key=lambda c: (x - final[c][0]) ** 2 + (y - final[c][1]) ** 2)
               for _, x, y in points]
    assert sorted(nearest.count(c) for c in final) == [10, 10, 10]


def test_long_path_csv_matches_generator():
    spec = importlib.util.spec_from_file_location("make_long_path", DATA / "make_long_path.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    edges = read_csv_rows(DATA / "long_path.csv", (int, int))
    assert edges == gen.long_path_edges(400)
    assert set(ref.connected_components(edges).values()) == {1}


def test_triangles():
    # a triangle 1-2-3 (given with a duplicate, a reversed edge and a self-loop) and a pendant 4
    edges = [(1, 2), (2, 1), (2, 3), (3, 1), (3, 3), (3, 4), (1, 2)]
    assert ref.triangles(edges) == {1: 1, 2: 1, 3: 1, 4: 0}
    k4 = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    assert ref.triangles(k4) == {v: 3 for v in range(4)}
