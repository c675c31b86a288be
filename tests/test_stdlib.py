"""The stdlib operators (stdlib/graph.flow, stdlib/ml.flow), each called from a small .flow
program, run on real Spark and compared with networkx / plain Python (tests/reference.py)
on deterministic random graphs and on a long path (many rounds)."""
from __future__ import annotations

import csv
import math
import os
import random
from collections import Counter

import pytest

import reference
from conftest import read_output
from scopeflow.compiler import check_flow
from scopeflow.api import run_file

PATH_LEN = 100  # vertices of the long path: label / distance propagation needs ~100 rounds


# ---- helpers ----------------------------------------------------------------------------

def write_csv(path, header, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def run_program(tmp_path, spark, text, data, params=None):
    """Write `data` ({name: (header, rows)}) to tmp_path/data/NAME.csv and the program to
    tmp_path/prog.flow, run it; return (job, out(name, *types) -> rows of out/NAME)."""
    for name, (header, rows) in data.items():
        write_csv(str(tmp_path / "data" / f"{name}.csv"), header, rows)
    flow = tmp_path / "prog.flow"
    flow.write_text(text)
    job = run_file(str(flow), spark=spark, params=params)

    def out(name, *types):
        return read_output(str(tmp_path / "out" / name), types)

    return job, out


def random_graph(seed, n, m, lo=0):
    """m distinct directed edges (no self-loops) between vertices lo .. lo+n-1."""
    rnd = random.Random(seed)
    edges = set()
    while len(edges) < m:
        a, b = rnd.randrange(lo, lo + n), rnd.randrange(lo, lo + n)
        if a != b:
            edges.add((a, b))
    return sorted(edges)


def messy(edges, seed):
    """The same undirected graph written sloppily: some edges reversed, some in both
    directions, some twice, plus self-loops on existing vertices."""
    rnd = random.Random(seed)
    out = []
    for a, b in edges:
        r = rnd.random()
        if r < 0.25:
            out.append((b, a))
        elif r < 0.45:
            out += [(a, b), (b, a)]
        elif r < 0.55:
            out += [(a, b), (a, b)]
        else:
            out.append((a, b))
    vertices = sorted({v for e in edges for v in e})
    out += [(v, v) for v in rnd.sample(vertices, 5)]
    rnd.shuffle(out)
    return out


def rounds_of(job, suffix):
    return [r for r in job.report["rounds"] if r["scope"].endswith(suffix)]


def approx_dict(got: dict, want: dict, tol=1e-9):
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=tol, abs=tol), k


# ---- graph ------------------------------------------------------------------------------

def graph_shapes() -> dict:
    """Graphs of many shapes, on disjoint vertex ranges (so one graph holds them all, and each
    component's label is checked): name -> edges."""
    rnd = random.Random(7)
    shapes = {
        "random": random_graph(1, 120, 80, lo=0),  # several components and isolated pairs
        "messy": messy(random_graph(2, 60, 90, lo=1000), 3),  # reversed, doubled, repeated, self-loops
        "star": [(2000, 2000 + i) for i in range(1, 40)] + [(2100 + i, 2199) for i in range(0, 40)],
        "pairs": [(3000 + 2 * i + 1, 3000 + 2 * i) for i in range(30)],
        "self_loops_only": [(3500, 3500), (3501, 3501), (3501, 3501)],
        "tiny": [(4000 + 3 * i, 4000 + 3 * i + 1) for i in range(40)] + [(4001 + 3 * i, 4002 + 3 * i) for i in range(20)],
    }
    # a chain of 12 cliques of 5 vertices, ids shuffled: diameter ~24
    ids = list(range(5000, 5060))
    rnd.shuffle(ids)
    chain = [(ids[5 * c + i], ids[5 * c + j]) for c in range(12) for i in range(5) for j in range(i + 1, 5)]
    chain += [(ids[5 * c + 4], ids[5 * c + 5]) for c in range(11)]
    shapes["clique_chain"] = chain
    # a 200-vertex path with shuffled ids, written sloppily: its labels are still apart after phase 1
    ids = list(range(7000, 7200))
    rnd.shuffle(ids)
    shapes["long_messy_path"] = messy([(ids[i], ids[i + 1]) for i in range(199)], 5)
    # many labels still apart after phase 1, for large-star / small-star to rewire: a 300-vertex path with
    # its ids in path order (~285 labels left) and a 20 x 20 grid with shuffled ids (diameter 38)
    shapes["ordered_path"] = [(8000 + i, 8001 + i) for i in range(299)]
    ids = list(range(9000, 9400))
    rnd.shuffle(ids)
    shapes["grid"] = [(ids[20 * r + c], ids[20 * r + c + 1]) for r in range(20) for c in range(19)] + \
                     [(ids[20 * r + c], ids[20 * r + c + 20]) for r in range(19) for c in range(20)]
    # one huge component: a random tree on 400 vertices plus some chords
    tree = [(6000 + i, 6000 + rnd.randrange(0, i)) for i in range(1, 400)]
    shapes["huge"] = tree + [(6000 + rnd.randrange(400), 6000 + rnd.randrange(400)) for _ in range(60)]
    return shapes


@pytest.mark.spark
def test_connected_components_in_logarithmic_rounds_on_many_shapes(tmp_path, spark):
    """stdlib's connected_components (16 rounds of min-label, then large-star / small-star) = networkx on
    graphs of every shape, and its rounds on a 1,000-vertex path stay logarithmic: at most 4 * log2(n) + 4
    (min-label needs ~n)."""
    shapes = graph_shapes()
    everything = [e for edges in shapes.values() for e in edges]
    n = 1000
    ids = list(range(1, n + 1))
    random.Random(11).shuffle(ids)
    path = [(ids[i], ids[i + 1]) for i in range(n - 1)]
    job, out = run_program(tmp_path, spark, """
from "stdlib:graph" import connected_components
source shapes = read csv("data/shapes.csv", header = true) schema (src: long, dst: long)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long)
sink shapes | connected_components() -> csv("out/shapes", header = true)
sink connected_components(path) -> csv("out/path", header = true)
""", {"shapes": (["src", "dst"], everything), "path": (["src", "dst"], path)})
    got = out("shapes", int, int)
    assert len({v for v, _ in got}) == len(got), "a vertex with several rows"
    got = dict(got)
    for name, edges in shapes.items():
        vertices = {v for e in edges for v in e}
        assert {v: got.get(v) for v in vertices} == reference.connected_components(edges), name
    assert set(got) == {v for e in everything for v in e}
    got = out("path", int, int)
    assert sorted(got) == [(v, 1) for v in range(1, n + 1)]
    # each call runs two loops, `near` (min-label, at most 16 rounds) and `lsss` (large-star/small-star);
    # the second call is the path's
    loops = Counter(r["scope"] for r in job.report["rounds"])
    assert set(loops) == {f"connected_components{c}_{loop}" for c in ("", "2") for loop in ("near", "lsss")}, loops
    assert loops["connected_components2_near"] == 16  # stopped by `max 16`: a path of 1,000 is far longer
    assert loops["connected_components2_lsss"] >= 3  # its labels were rewired, not found done
    path_rounds = loops["connected_components2_near"] + loops["connected_components2_lsss"]
    assert path_rounds <= 4 * math.log2(n) + 4, loops


@pytest.mark.spark
def test_min_label_components_random_graph_and_long_path(tmp_path, spark):
    # a sparse random graph (several components, isolated pairs) and a PATH_LEN-vertex path whose
    # edges point towards the smallest id (direction must not matter)
    sparse = random_graph(1, 120, 80) + [(500, 501), (503, 502)]
    path = [(i + 1, i) for i in range(1, PATH_LEN)]
    job, out = run_program(tmp_path, spark, """
from "stdlib:graph" import min_label_components
source sparse = read csv("data/sparse.csv", header = true) schema (src: long, dst: long)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long)
sink sparse | min_label_components() -> csv("out/sparse", header = true)
sink min_label_components(path) -> csv("out/path", header = true)
""", {"sparse": (["src", "dst"], sparse), "path": (["src", "dst"], path)})
    got = out("sparse", int, int)
    assert len({v for v, _ in got}) == len(got), "a vertex with several rows"
    assert dict(got) == reference.connected_components(sparse)
    got = out("path", int, int)
    assert dict(got) == reference.connected_components(path) == {v: 1 for v in range(1, PATH_LEN + 1)}
    assert len(got) == PATH_LEN
    # the two calls expand into two loops; the path's (the second) needs about one round per vertex
    assert len(rounds_of(job, "min_label_components2_cc")) >= PATH_LEN - 1


@pytest.mark.spark
def test_sssp_random_graph_and_long_path(tmp_path, spark):
    rnd = random.Random(2)
    wedges = [(a, b, round(rnd.uniform(0.5, 10.0), 3)) for a, b in random_graph(3, 60, 180)]
    wedges += [(a, b, w + 1.0) for a, b, w in wedges[:10]]  # parallel edges: the cheapest counts
    path = [(i, i + 1, float(rnd.randint(1, 9))) for i in range(1, PATH_LEN)]
    job, out = run_program(tmp_path, spark, """
from "stdlib:graph" import sssp
param start: long = 0
source roads = read csv("data/roads.csv", header = true) schema (src: long, dst: long, w: double)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long, w: double)
sink sssp(roads, start) -> csv("out/roads", header = true)
sink path | sssp(1) -> csv("out/path", header = true)
""", {"roads": (["src", "dst", "w"], wedges), "path": (["src", "dst", "w"], path)}, params={"start": 7})
    got = out("roads", int, float)
    assert len(got) == len(set(got))
    approx_dict(dict(got), reference.sssp(wedges, 7))  # the source came from --param start=7
    got = dict(out("path", int, float))
    approx_dict(got, reference.sssp(path, 1))
    assert len(got) == PATH_LEN
    assert max(len(r) for r in (rounds_of(job, "sssp_sssp"), rounds_of(job, "sssp2_sssp"))) >= PATH_LEN - 1


@pytest.mark.spark
def test_pagerank(tmp_path, spark):
    # the default `iterations = 20` is checked at compile time below (fewer rounds here: speed)
    vertices = list(range(60))
    edges = random_graph(4, 60, 200)
    path = [(i, i + 1) for i in range(1, PATH_LEN)]  # the last vertex has no out-link: its rank leaks
    job, out = run_program(tmp_path, spark, """
from "stdlib:graph" import pagerank
param iterations: long = 20
source vertices = read csv("data/vertices.csv", header = true) schema (id: long)
source links = read csv("data/links.csv", header = true) schema (src: long, dst: long, weight: long)
source pv = read csv("data/pv.csv", header = true) schema (id: long)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long)
sink vertices | pagerank(links, iterations) -> csv("out/ranks", header = true)
sink pv | pagerank(path, iterations) -> csv("out/path", header = true)
""", {"vertices": (["id"], [(v,) for v in vertices]),
      "links": (["src", "dst", "weight"], [(a, b, 1) for a, b in edges]),  # an extra field passes
      "pv": (["id"], [(v,) for v in range(1, PATH_LEN + 1)]), "path": (["src", "dst"], path)},
        params={"iterations": 6})
    approx_dict(dict(out("ranks", int, float)), reference.pagerank_fixed(vertices, edges, 6))
    approx_dict(dict(out("path", int, float)), reference.pagerank_fixed(list(range(1, PATH_LEN + 1)), path, 6))
    assert sorted(loop["rounds"] for loop in job.report["loops"].values()) == [[6], [6]]


@pytest.mark.spark
def test_kcore_accepts_edges_once_or_both_ways(tmp_path, spark):
    base = random_graph(5, 40, 110)
    edges = messy(base, 6)
    # a path closed into a cycle at one end (a triangle): peeling the 2-core eats the path from
    # its open end, one vertex per inner round
    n = 80
    path = [(i, i + 1) for i in range(1, n)] + [(n, n - 2)]
    job, out = run_program(tmp_path, spark, """
from "stdlib:graph" import kcore
source edges = read csv("data/edges.csv", header = true) schema (src: long, dst: long)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long)
sink edges | kcore() -> csv("out/cores", header = true)
sink path | kcore() -> csv("out/path", header = true)
""", {"edges": (["src", "dst"], edges), "path": (["src", "dst"], path)})
    got = out("cores", int, int)
    assert len(got) == len(set(got))
    want = reference.core_numbers(base)
    assert want == reference.core_numbers(edges)
    assert dict(got) == want
    assert max(want.values()) >= 3  # the graph has a non-trivial core
    want = reference.core_numbers(path)
    assert dict(out("path", int, int)) == want and sorted(set(want.values())) == [1, 2]
    peel = {}
    for r in job.report["rounds"]:
        if r["scope"].endswith("peel"):
            peel[r["scope"], r["activation"]] = peel.get((r["scope"], r["activation"]), 0) + 1
    assert max(peel.values()) >= n - 3, "the path's open end is peeled one vertex per round"


@pytest.mark.spark
def test_reachability(tmp_path, spark):
    edges = random_graph(7, 80, 100)
    seeds = [3, 3, 17, 999]  # a duplicate seed, and one that has no edge at all
    path = [(i, i + 1) for i in range(1, PATH_LEN)]  # directed: from vertex 1 everything, one hop per round
    job, out = run_program(tmp_path, spark, """
from "stdlib:graph" import reachability
source edges = read csv("data/edges.csv", header = true) schema (src: long, dst: long)
source seeds = read csv("data/seeds.csv", header = true) schema (v: long)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long)
source start = read csv("data/start.csv", header = true) schema (v: long)
sink reachability(edges, seeds) -> csv("out/reached", header = true)
sink reachability(path, start) -> csv("out/path", header = true)
""", {"edges": (["src", "dst"], edges), "seeds": (["v"], [(s,) for s in seeds]),
      "path": (["src", "dst"], path), "start": (["v"], [(1,)])})
    got = [v for (v,) in out("reached", int)]
    want = reference.reachable(edges, seeds)
    assert len(want) > 10
    assert Counter(got) == Counter(want)  # each vertex exactly once
    got = [v for (v,) in out("path", int)]
    assert Counter(got) == Counter(reference.reachable(path, [1])) == Counter(range(1, PATH_LEN + 1))
    assert max(len(r) for r in (rounds_of(job, "reachability_reach"), rounds_of(job, "reachability2_reach"))) \
        >= PATH_LEN - 1


@pytest.mark.spark
def test_triangle_count(tmp_path, spark):
    base = random_graph(8, 30, 120) + [(100, 101)]  # a vertex pair in no triangle
    edges = messy(base, 9)
    path = [(i, i + 1) for i in range(1, PATH_LEN)] + [(PATH_LEN, PATH_LEN - 2)]  # one triangle at the end
    _, out = run_program(tmp_path, spark, """
from "stdlib:graph" import triangle_count
source edges = read csv("data/edges.csv", header = true) schema (src: long, dst: long)
source path = read csv("data/path.csv", header = true) schema (src: long, dst: long)
sink edges | triangle_count() -> csv("out/triangles", header = true)
sink path | triangle_count() -> csv("out/path", header = true)
""", {"edges": (["src", "dst"], edges), "path": (["src", "dst"], path)})
    want = reference.triangles(path)
    assert dict(out("path", int, int)) == want and sum(want.values()) == 3
    got = out("triangles", int, int)
    assert len(got) == len(set(got))
    want = reference.triangles(edges)
    assert want == reference.triangles(base)
    assert dict(got) == want
    assert sum(want.values()) > 0 and want[100] == 0


# ---- ml ---------------------------------------------------------------------------------

@pytest.mark.spark
def test_kmeans(tmp_path, spark):
    rnd = random.Random(10)
    centers = [(0.0, 0.0), (10.0, 0.0), (5.0, 9.0)]
    points = [(i, round(cx + rnd.gauss(0, 2.0), 4), round(cy + rnd.gauss(0, 2.0), 4))
              for i, (cx, cy) in enumerate(rnd.choice(centers) for _ in range(150))]
    init = [(1, 1.0, 1.0), (2, 2.0, 2.0), (3, 3.0, 1.0)]
    _, out = run_program(tmp_path, spark, """
from "stdlib:ml" import kmeans
source points = read csv("data/points.csv", header = true) schema (id: long, x: double, y: double)
source init = read csv("data/init.csv", header = true) schema (cid: long, x: double, y: double)
sink points | kmeans(init, 6) -> csv("out/centers", header = true)
""", {"points": (["id", "x", "y"], points), "init": (["cid", "x", "y"], init)})
    got = {cid: (x, y) for cid, x, y in out("centers", int, float, float)}
    want = reference.kmeans(points, init, 6)
    assert set(got) == set(want)
    for cid in want:
        assert got[cid] == pytest.approx(want[cid], rel=1e-9)


# ---- compile-time behaviour (no Spark job) -------------------------------------------------

def check(text):
    return check_flow(text, "t.flow", "/nonexistent")


def test_stdlib_defs_take_streams_positionally_or_piped_and_constants_by_literal_or_param():
    result = check("""
from "stdlib:graph" import pagerank, sssp
from "stdlib:ml" import kmeans
param n: long = 3
source v = values (id: long) [(1), (2)]
source e = values (src: long, dst: long, w: double) [(1, 2, 1.0)]
source p = values (id: long, x: long, y: long) [(1, 0, 0)]
source c = values (cid: long, x: double, y: double) [(1, 0.0, 0.0)]
sink pagerank(v, e) -> console()
sink v | pagerank(e, 7) -> console()
sink pagerank(v, e, n) -> console()
sink e | sssp(1) -> console()
sink kmeans(p, c) -> console()
""")
    assert not result.errors, [d.render() for d in result.errors]
    rounds = sorted(str(s.options.rounds) for s in result.plan.scopes.values() if s.options.rounds is not None)
    assert rounds == ["$n", "10", "20", "7"]


def test_stdlib_def_reports_a_missing_field_and_a_missing_constant():
    result = check("""
from "stdlib:graph" import sssp
source e = values (src: long, dst: long) [(1, 2)]
sink e | sssp(1) -> console()
""")
    assert [d.code for d in result.errors] == ["E0109"]
    result = check("""
from "stdlib:graph" import sssp
source e = values (src: long, dst: long, w: double) [(1, 2, 1.0)]
sink e | sssp() -> console()
""")
    assert [d.code for d in result.errors] == ["E0107"]


def test_a_param_passed_as_a_def_constant_is_type_checked_and_stays_a_param():
    result = check("""
from "stdlib:graph" import sssp
param name: string = "x"
source e = values (src: long, dst: long, w: double) [(1, 2, 1.0)]
sink e | sssp(name) -> console()
""")
    assert [d.code for d in result.errors] == ["E0107"]
    assert "is long but the argument is string" in result.errors[0].message
    result = check("""
from "stdlib:graph" import sssp
param start: long = 1
source e = values (src: long, dst: long, w: double) [(1, 2, 1.0)]
sink e | sssp(nope) -> console()
""")
    assert [d.code for d in result.errors] == ["E0101"]  # neither a stream nor a param
    from scopeflow.compiler import expr as X

    result = check("""
from "stdlib:graph" import sssp
param start: long = 1
source e = values (src: long, dst: long, w: double) [(1, 2, 1.0)]
sink e | sssp(start) -> console()
""")
    assert not result.errors
    wheres = [n for n in result.plan.nodes.values() if n.kind == "where"]
    assert [w.cond.args[1] for w in wheres] == [X.TParam("start", "long")]


# ---- scopeflow's settings (stdlib/settings.py) --------------------------------------------------------------


@pytest.mark.parametrize("key, good, bad", [
    ("spark.scopeflow.checkpoint", ["auto", "Reliable", "local", "replicated"], ["files", ""]),
    ("spark.scopeflow.connect.statsResetEvery", ["0", "8"], ["-1", "eight"]),
    ("spark.scopeflow.combineAbove", ["0", "100000"], ["-5", "1e5"]),
    ("spark.scopeflow.incremental", ["auto", "OFF", "always"], ["sometimes"]),
    ("spark.scopeflow.incremental.maxChange", ["0", "0.25", "3"], ["-0.1", "ten"]),
    ("spark.scopeflow.incremental.stateEvery", ["1", "10"], ["0", "-2", "1.5", "often"]),
    ("spark.scopeflow.loopPartitions", ["auto", "1", "64"], ["0", "many"]),
    ("spark.scopeflow.loopPartitionBytes", ["1", "4194304"], ["0", "4M"]),
    ("spark.scopeflow.planAhead", ["Auto", "true", "FALSE"], ["yes", "1"]),
    ("spark.scopeflow.stateOverlay", ["0", "0.25", "1"], ["1.5", "-0.1"]),
    ("spark.scopeflow.stateOverlayMinKeys", ["0", "300000"], ["-1", "lots"]),
    ("spark.scopeflow.ship", ["true", "False"], ["no"]),
    ("spark.scopeflow.checkpointDir", ["hdfs://nn/x", "/tmp/x"], []),
])
def test_scopeflow_settings_accept_what_the_docs_say(key, good, bad):
    from scopeflow.stdlib.settings import SETTINGS, setting_problem

    assert key in SETTINGS
    assert [v for v in good if setting_problem(key, v) is not None] == []
    assert [v for v in bad if setting_problem(key, v) is None] == []


def test_an_unknown_scopeflow_setting_is_refused_with_the_close_match():
    from scopeflow.stdlib.settings import SETTINGS, setting_problem

    assert setting_problem("spark.scopeflow.loopPartiton", "2") == \
        "not a scopeflow setting (did you mean spark.scopeflow.loopPartitions?)"
    assert "scopeflow reads spark.scopeflow.checkpoint," in setting_problem("spark.scopeflow.zzz", "1")
    assert setting_problem("spark.sql.shuffle.partitions", "anything") is None  # Spark's own: Spark checks them
    cli = open(os.path.join(os.path.dirname(__file__), "..", "docs", "cli.md"), encoding="utf-8").read()
    table = cli.split("### scopeflow's settings", 1)[1].split("\n### ", 1)[0]
    assert [k for k in SETTINGS if f"| `{k}` |" not in table] == []
