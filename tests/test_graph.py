"""The topology graph (`scopeflow graph`): golden DOT per example, real SVG/PNG/PDF renders checked
structurally, Mermaid, run-statistics annotation, a 200-operator pipeline, and life without `dot`.

Regenerate the golden files with `SCOPEFLOW_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_graph.py`.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from scopeflow.cli import draw, main as cli_main
from scopeflow.compiler import check_file, check_flow
from scopeflow.compiler import graph as G
from scopeflow.compiler.expr import TCall, TCol, TLit, TParam, expr_text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))
GOLDEN = Path(__file__).resolve().parent / "golden" / "graph"
UPDATE_GOLDEN = os.environ.get("SCOPEFLOW_UPDATE_GOLDEN") == "1"
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="graphviz `dot` is not on PATH (apt-get install graphviz)")
SVG_NS = "{http://www.w3.org/2000/svg}"
ids = [p.stem for p in EXAMPLES]


def plan_of(path):
    result = check_file(str(path))
    assert not result.errors, [d.render() for d in result.errors]
    return result.plan


def multi_chains(plan):
    return [c for c in plan.chains if len(c.nodes) > 1]


def feedback_pairs(plan):
    return [(src, var) for s in plan.loop_scopes() for var, src in s.feedback]


# ---- golden DOT ------------------------------------------------------------------------

def test_every_example_is_covered():
    assert len(EXAMPLES) >= 9
    if not UPDATE_GOLDEN:
        stale = {p.stem for p in GOLDEN.glob("*.dot")} - {p.stem for p in EXAMPLES}
        assert not stale, f"golden files without an example: {sorted(stale)}"


@pytest.mark.parametrize("path", EXAMPLES, ids=ids)
def test_golden_dot(path):
    dot = G.plan_to_dot(plan_of(path))
    golden = GOLDEN / f"{path.stem}.dot"
    if UPDATE_GOLDEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(dot, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden}; run with SCOPEFLOW_UPDATE_GOLDEN=1"
    assert dot == golden.read_text(encoding="utf-8"), (
        f"DOT for {path.name} changed; if intended, regenerate with SCOPEFLOW_UPDATE_GOLDEN=1")


@pytest.mark.parametrize("path", EXAMPLES, ids=ids)
def test_dot_is_deterministic(path):
    """The same DOT from another interpreter with another string-hash seed (set order, dict order)."""
    here = G.plan_to_dot(plan_of(path))
    code = ("import sys; from scopeflow.compiler import check_file; from scopeflow.compiler import graph as G; "
            "sys.stdout.write(G.plan_to_dot(check_file(sys.argv[1]).plan))")
    other = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert here == other


# ---- what the DOT says -----------------------------------------------------------------

def node_lines(dot):
    return {m.group(1): line for line in dot.splitlines() if (m := re.match(r"\s*(\w+) \[", line))
            and m.group(1) not in ("graph", "node", "edge")}


def edge_lines(dot):
    return [(m.group(1), m.group(2), line) for line in dot.splitlines()
            if (m := re.match(r"\s*(\w+) -> (\w+) \[", line)) and 'style="invis"' not in line]


@pytest.mark.parametrize("path", EXAMPLES, ids=ids)
def test_dot_structure(path):
    plan = plan_of(path)
    dot = G.plan_to_dot(plan)
    nodes = node_lines(dot)
    # every operator but the `loop` nodes (their cluster stands for them), plus one node per sink
    expected = [n.id for n in plan.nodes.values() if n.kind != "loop"] + [f"sink{i}" for i in
                                                                         range(1, len(plan.sinks) + 1)]
    assert list(nodes) == expected
    for scope in plan.loop_scopes():
        assert f'subgraph "cluster_loop_{scope.id}"' in dot
        assert f"<B>{scope.kind} {scope.name}</B>" in dot
    for chain in multi_chains(plan):
        assert f'subgraph "cluster_chain_{chain.id}"' in dot
    edges = edge_lines(dot)
    assert len(edges) == G.dot_edge_count(dot)
    for src, var in feedback_pairs(plan):
        line = next(line for s, d, line in edges if (s, d) == (src, var))
        assert 'label="feedback' in line and 'style="dashed"' in line and 'constraint="false"' in line
    for scope in plan.loop_scopes():
        for imp in scope.imports:
            outer = plan.nodes[imp].source
            assert any((s, d) == (outer, imp) and "#2563eb" in line for s, d, line in edges)
        for var in scope.vars:
            entry = plan.nodes[var].entry
            if entry:
                assert any((s, d) == (entry, var) for s, d, _ in edges)
        for emit in scope.emits:
            assert any((s, d) == (emit.node, emit.out) and 'label="emit' in line for s, d, line in edges)
    for i, sink in enumerate(plan.sinks, 1):
        assert (sink.node, f"sink{i}") in {(s, d) for s, d, _ in edges}
    loops = {n.id for n in plan.nodes.values() if n.kind == "loop"}
    assert not any(s in loops or d in loops for s, d, _ in edges)


def test_dot_shapes_and_labels():
    cc = G.plan_to_dot(plan_of(ROOT / "examples/connected_components.flow"))
    nodes = node_lines(cc)
    assert 'shape="cylinder"' in nodes["n001"]  # source
    assert 'shape="folder"' in nodes["sink1"]  # sink
    assert 'shape="invhouse"' in nodes["n007"]  # loop variable (head)
    assert 'shape="parallelogram"' in nodes["n008"]  # import
    assert 'shape="house"' in nodes["n012"]  # loop output
    assert 'peripheries="2"' in nodes["n009"]  # stateful reduce in a loop
    assert "<B>join</B> inner on id=src" in nodes["n010"]
    assert "<B>reduce</B> by id: label=min" in nodes["n009"]
    assert "<B>select</B> id=dst, label" in nodes["n011"]
    assert 'tooltip="n009 reduce best' in nodes["n009"] and "\\n  id: long\\n  label: long" in nodes["n009"]
    kcore = G.plan_to_dot(plan_of(ROOT / "examples/kcore.flow"))
    assert "<B>where</B> d &lt; k" in kcore
    assert "until empty(low), max 1000, on max fail" in kcore
    hits = G.plan_to_dot(plan_of(ROOT / "examples/hits.flow"))
    assert "<B>coloop hits</B>" in hits and "rounds 10" in hits
    assert 'label="emit last as hubs"' in hits
    kmeans = G.plan_to_dot(plan_of(ROOT / "examples/kmeans.flow"))
    assert "rounds $iterations" in kmeans


def test_nested_clusters_are_nested():
    dot = G.plan_to_dot(plan_of(ROOT / "examples/kcore.flow"))
    depth, inside = 0, {}
    for line in dot.splitlines():
        if (m := re.match(r'\s*subgraph "(cluster_[\w.]+)"', line)):
            depth += 1
            inside[m.group(1)] = depth
        elif line.strip() == "}":
            depth -= 1
    assert inside["cluster_loop_kcore"] == 1
    assert inside["cluster_loop_kcore.peel"] == 2
    assert inside["cluster_chain_c03"] == 3  # a chain of the inner loop


def test_labels_are_clipped():
    assert G.clip("x" * 100) == "x" * (G.MAX_LABEL - 1) + "…"
    assert G.clip("short") == "short"
    kmeans = G.plan_to_dot(plan_of(ROOT / "examples/kmeans.flow"))
    assert "d=(px - x) * (px - x) + (py - y)…" in kmeans
    assert "d=(px - x) * (px - x) + (py - y) * (py - y)" in kmeans  # whole, in the tooltip


def test_expr_text():
    a, b, c = TCol("a", "long"), TCol("b", "long"), TCol("c", "long")
    assert expr_text(TCall("*", (TCall("+", (a, b), "long"), c), "long")) == "(a + b) * c"
    assert expr_text(TCall("+", (a, TCall("*", (b, c), "long")), "long")) == "a + b * c"
    assert expr_text(TCall("-", (a, TCall("-", (b, c), "long")), "long")) == "a - (b - c)"
    assert expr_text(TCall("and", (TCall("or", (a, b), "boolean"), c), "boolean")) == "(a or b) and c"
    assert expr_text(TCall("func:abs", (TCall("neg", (a,), "long"),), "long")) == "abs(-a)"
    assert expr_text(TCall("in", (a, TLit(1, "long"), TLit("x", "string")), "boolean")) == 'a in (1, "x")'
    assert expr_text(TCall("is_not_null", (a,), "boolean")) == "a is not null"
    assert expr_text(TCall("cast", (a,), "double")) == "cast(a as double)"
    assert expr_text(TCall("udf", (a,), "double", extra=("m", "f"))) == "m.f(a)"
    assert expr_text(TCall("==", (a, TParam("p", "long")), "boolean")) == "a == p"
    assert expr_text(TLit(True, "boolean")) == "true"


# ---- Mermaid ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", EXAMPLES, ids=ids)
def test_mermaid(path, tmp_path):
    plan = plan_of(path)
    out = tmp_path / f"{path.stem}.mmd"
    G.render(plan, str(out))
    text = out.read_text()
    assert text.startswith("flowchart TB\n")
    found = re.findall(r'^\s*subgraph (\w+)\["([^"]*)"\]$', text, re.M)
    subgraphs = [(i, label) for i, label in found if i.startswith("scope")]
    assert len(subgraphs) == len(plan.loop_scopes())
    assert len(re.findall(r"^\s*end$", text, re.M)) == len(found)
    for scope, (_, label) in zip(plan.loop_scopes(), subgraphs):
        assert label.startswith(f"{scope.kind} {scope.name}")
    # every chain of two or more operators is a subgraph holding exactly its operators
    chains = {f"chain_{c.id}": c for c in plan.chains if len(c.nodes) > 1}
    assert {i for i, _ in found if i.startswith("chain_")} == set(chains)
    for cid, chain in chains.items():
        body = text.split(f'subgraph {cid}["', 1)[1].split("\n")
        inside = body[2:body.index(next(ln for ln in body if ln.strip() == "end"))]
        assert [re.match(r"\s*(\w+)", ln).group(1) for ln in inside] == list(chain.nodes)
    for src, var in feedback_pairs(plan):
        assert f"{src} -.->|feedback| {var}" in text
    for nid in (n.id for n in plan.nodes.values() if n.kind != "loop"):
        assert re.search(rf"^\s*{nid}\W", text, re.M)


# ---- real renders ----------------------------------------------------------------------

def svg_parts(svg_path):
    root = ET.parse(svg_path).getroot()
    assert root.tag == f"{SVG_NS}svg"
    groups = list(root.iter(f"{SVG_NS}g"))

    def of_class(cls):
        return [g for g in groups if g.get("class") == cls]

    def title(g):
        t = g.find(f"{SVG_NS}title")
        return t.text if t is not None else ""

    def text(g):
        return " ".join(t.text or "" for t in g.iter(f"{SVG_NS}text"))

    clusters = {title(g): text(g) for g in of_class("cluster")}
    edges = [re.sub(r":\w+", "", title(g)) for g in of_class("edge")]  # "n011:e->n007:e": drop the ports
    nodes = {title(g): g for g in of_class("node")}
    return root, clusters, edges, nodes


@needs_dot
@pytest.mark.parametrize("path", EXAMPLES, ids=ids)
def test_svg(path, tmp_path):
    plan = plan_of(path)
    out = tmp_path / f"{path.stem}.svg"
    assert G.render(plan, str(out)) == str(out)
    assert out.stat().st_size > 0
    _, clusters, edges, nodes = svg_parts(out)
    loops = {f"cluster_loop_{s.id}": s for s in plan.loop_scopes()}
    assert len([c for c in clusters if c.startswith("cluster_loop_")]) == len(loops)
    for cid, scope in loops.items():
        assert cid in clusters and scope.name in clusters[cid]
    assert len(clusters) == len(loops) + len(multi_chains(plan))
    dot = G.plan_to_dot(plan)
    assert len(edges) == G.dot_edge_count(dot)
    for src, var in feedback_pairs(plan):
        assert f"{src}->{var}" in edges
    # the schema is in each node's tooltip
    for nid in (n.id for n in plan.nodes.values() if n.kind != "loop"):
        anchors = [a for a in nodes[nid].iter(f"{SVG_NS}a")]
        tips = [a.get("{http://www.w3.org/1999/xlink}title") or "" for a in anchors]
        fields = plan.nodes[nid].schema.fields
        assert any(all(f"{f.name}: {f.type}" in t for f in fields) for t in tips), (nid, tips)


@needs_dot
@pytest.mark.parametrize("path", EXAMPLES, ids=ids)
def test_png(path, tmp_path):
    out = tmp_path / f"{path.stem}.png"
    G.render(plan_of(path), str(out))
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    svg = tmp_path / f"{path.stem}.svg"
    G.render(plan_of(path), str(svg))
    view = ET.parse(svg).getroot().get("viewBox").split()
    # the PNG is the same drawing as the SVG (graphviz renders PNG at 96 dpi, SVG in points)
    assert width == pytest.approx(float(view[2]) * 96 / 72, rel=0.05)
    assert height == pytest.approx(float(view[3]) * 96 / 72, rel=0.05)


@needs_dot
def test_pdf(tmp_path):
    out = tmp_path / "nested" / "kcore.pdf"  # missing parent directories are created
    G.render(plan_of(ROOT / "examples/kcore.flow"), str(out))
    assert out.read_bytes()[:5] == b"%PDF-"


# ---- a 200-operator pipeline -----------------------------------------------------------

def big_flow() -> str:
    """A long pipe of where/select/derive steps around two loops (one with a nested loop)."""
    lines = ["pipeline big",
             'source edges = read csv("edges.csv", header = true) schema (src: long, dst: long)',
             "hops = edges | select(mid = src, to = dst)",
             "s0 = edges | derive(w = 1)"]

    def pipe(name, src, n, start):
        steps = [(f"where(w > {i % 7})", f"derive(w = w + {i % 5})", "select(src, dst, w)")[i % 3]
                 for i in range(start, start + n)]
        lines.append(f"{name} = {src} | " + " | ".join(steps))

    pipe("a", "s0", 60, 0)
    lines += ["b = loop grow(v = a) with (e = hops) rounds 3 {",
              "    step = v | join(e, on v.dst == e.mid) | select(src, dst = to, w = w + 1)",
              "    inner = loop settle(x = step) until empty(y) {",
              "        y = x | where(w < 3) | derive(w = w + 1)",
              "        feedback x <- y",
              "        emit last x",
              "    }",
              "    feedback v <- inner | where(w < 10)",
              "    emit inner",
              "}"]
    pipe("c", "b", 60, 60)
    lines += ["d = loop again(v = c) with (e = hops) {",
              "    best = v | reduce(by src, dst, w = min(w))",
              "    next = best | join(e, on best.dst == e.mid) | select(src, dst = to, w = w + 1) | where(w < 50)",
              "    feedback v <- next",
              "    emit state best",
              "}"]
    pipe("f", "d", 60, 120)
    lines.append('sink f -> csv("out/f", header = true)')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def big_plan(tmp_path_factory):
    base = tmp_path_factory.mktemp("big")
    (base / "edges.csv").write_text("src,dst\n1,2\n")
    result = check_flow(big_flow(), str(base / "big.flow"), str(base))
    assert not result.errors, [d.render() for d in result.errors]
    assert len(result.plan.nodes) >= 200
    assert len(result.plan.loop_scopes()) == 3
    return result.plan


def test_big_pipeline_dot(big_plan):
    dot = G.plan_to_dot(big_plan)
    assert dot == G.plan_to_dot(big_plan)
    assert len(node_lines(dot)) == len(big_plan.nodes) - 3 + 1  # minus 3 loop nodes, plus the sink
    assert dot.count('subgraph "cluster_loop_') == 3


@needs_dot
def test_big_pipeline_svg(big_plan, tmp_path):
    out = tmp_path / "big.svg"
    started = time.monotonic()
    G.render(big_plan, str(out))
    assert time.monotonic() - started < 60
    root, clusters, edges, nodes = svg_parts(out)
    assert {"cluster_loop_grow", "cluster_loop_grow.settle", "cluster_loop_again"} <= set(clusters)
    assert len(clusters) == 3 + len(multi_chains(big_plan))
    assert len(edges) == G.dot_edge_count(G.plan_to_dot(big_plan))
    assert len(nodes) == len(big_plan.nodes) - 3 + 1
    # readable: a top-to-bottom column, not a sprawl (every operator one step below the previous)
    width = float(root.get("width").removesuffix("pt"))
    height = float(root.get("height").removesuffix("pt"))
    assert width < 1200 and height > width


# ---- run statistics --------------------------------------------------------------------

FAKE_STATS = {
    "pipeline": "connected_components",
    "loops": [{"scope": "cc", "activations": 1, "rounds": [7], "attempts": 8}],
    "operators": {
        "n001": {"records": 1234, "seconds": 0.8},
        "n003": {"records": 2468},
        "n005": {"records": 10, "seconds": 2.25},
        "n009": {"records": 31, "seconds": 0.0004},
        "n011": {"records": 80},
        "n012": {"records": 9},
    },
}


def test_stats_annotations():
    plan = plan_of(ROOT / "examples/connected_components.flow")
    dot = G.plan_to_dot(plan, FAKE_STATS)
    edges = {(s, d): line for s, d, line in edge_lines(dot)}
    assert 'label="1,234 rec"' in edges[("n001", "n002")]
    assert 'label="1,234 rec"' in edges[("n001", "n003")]
    assert 'label="2,468 rec"' in edges[("n003", "n008")]  # the import carries the outer stream
    assert 'label="10 rec"' in edges[("n005", "n007")]  # entry
    assert 'label="feedback\\n80 rec"' in edges[("n011", "n007")]
    assert 'label="emit state\\n9 rec"' in edges[("n009", "n012")]  # what left the loop
    assert 'label="9 rec"' in edges[("n012", "sink1")]
    assert "label=" not in edges[("n002", "n003")]  # no count for n002: no label
    nodes = node_lines(dot)
    assert "n001 · 800 ms" in nodes["n001"]
    assert "init · n005 · 2.2 s" in nodes["n005"]
    assert "best · n009 · &lt;1 ms" in nodes["n009"]
    assert "1 activation · 7 rounds · 8 attempts" in dot


def test_stats_several_activations():
    plan = plan_of(ROOT / "examples/kcore.flow")
    stats = {"loops": [{"scope": "kcore", "activations": 1, "rounds": [4], "attempts": 4},
                       {"scope": "kcore.peel", "activations": 4, "rounds": [3, 2, 2, 1], "attempts": 8}]}
    dot = G.plan_to_dot(plan, stats)
    assert "4 activations · 8 rounds (3+2+2+1) · 8 attempts" in dot
    many = {"loops": [{"scope": "kcore.peel", "activations": 6, "rounds": [3, 9, 2, 2, 1, 1]}]}
    assert "6 activations · 18 rounds (max 9)" in G.plan_to_dot(plan, many)


@pytest.mark.parametrize("stats", [
    None, {}, {"pipeline": "x"}, {"operators": {}}, {"operators": {"n001": {}}},
    {"operators": {"n001": {"records": "many", "seconds": None}, "n002": 5}}, {"operators": []},
    {"loops": [{"scope": "cc"}]}, {"loops": [{"rounds": [1]}, "junk", {"scope": "nope", "activations": 2}]},
    {"loops": {"cc": 1}}, {"loops": [{"scope": "cc", "rounds": "7", "attempts": True}]}, [], "text",
    {"operators": {"n001": {"records": float("nan"), "seconds": float("inf")}}},
])
def test_stats_missing_keys_are_tolerated(stats):
    plan = plan_of(ROOT / "examples/connected_components.flow")
    assert G.plan_to_dot(plan, stats) == G.plan_to_dot(plan)


def test_stats_partial_keys():
    plan = plan_of(ROOT / "examples/connected_components.flow")
    dot = G.plan_to_dot(plan, {"loops": [{"scope": "cc", "rounds": [3]}], "operators": {"n011": {"seconds": 61}}})
    assert "3 rounds" in dot and "activation" not in dot and "attempt" not in dot
    assert "spread · n011 · 1 min 01 s" in dot
    assert " rec" not in dot


def test_stats_through_the_cli(tmp_path, capsys):
    import json

    report = tmp_path / "run.json"
    plan = plan_of(ROOT / "examples/connected_components.flow")
    report.write_text(json.dumps(dict(FAKE_STATS, fingerprint=plan.fingerprint())))  # a report of this plan
    out = tmp_path / "cc.dot"
    code = cli_main(["graph", str(ROOT / "examples/connected_components.flow"), "-o", str(out),
                     "--stats", str(report)])
    assert code == 0
    assert str(out) in capsys.readouterr().out
    assert 'label="1,234 rec"' in out.read_text()
    code = cli_main(["graph", str(ROOT / "examples/connected_components.flow"), "-o", str(out),
                     "--stats", str(tmp_path / "missing.json")])
    assert code == 2
    assert "run report" in capsys.readouterr().err


# ---- the command line, with and without graphviz -----------------------------------------

def graph_cli(plan, out, stats=None) -> int:
    """`scopeflow graph` on an already checked plan (the command's drawing step)."""
    return draw(plan, str(out), stats)


@needs_dot
def test_graph_cli_svg(tmp_path, capsys):
    out = tmp_path / "cc.svg"
    assert graph_cli(plan_of(ROOT / "examples/connected_components.flow"), out) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert out.read_text().lstrip().startswith("<?xml")


def test_graph_cli_unknown_format(tmp_path, capsys):
    code = graph_cli(plan_of(ROOT / "examples/connected_components.flow"), tmp_path / "cc.jpeg")
    assert code == 2
    err = capsys.readouterr().err
    assert ".svg" in err and ".mmd" in err
    assert not (tmp_path / "cc.jpeg").exists()


@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    """PATH without the graphviz binaries (an empty directory)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("dot") is None


@pytest.mark.parametrize("ext", ["svg", "png", "pdf"])
def test_without_dot_images_fail_clearly(no_dot, tmp_path, capsys, ext):
    out = tmp_path / f"cc.{ext}"
    code = graph_cli(plan_of(ROOT / "examples/connected_components.flow"), out)
    assert code == 4
    err = capsys.readouterr().err
    assert "graphviz" in err and "apt-get install graphviz" in err
    assert not out.exists()


@pytest.mark.parametrize("ext", ["dot", "mmd"])
def test_without_dot_text_formats_work(no_dot, tmp_path, capsys, ext):
    plan = plan_of(ROOT / "examples/connected_components.flow")
    out = tmp_path / f"cc.{ext}"
    assert graph_cli(plan, out) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    expected = G.plan_to_dot(plan) if ext == "dot" else G.plan_to_mermaid(plan)
    assert out.read_text() == expected


def test_without_dot_render_raises(no_dot, tmp_path):
    with pytest.raises(G.GraphvizMissing, match="apt-get install graphviz"):
        G.render(plan_of(ROOT / "examples/kcore.flow"), str(tmp_path / "k.svg"))


@needs_dot
def test_without_the_graphviz_package_images_fail_clearly(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # `import graphviz` raises ImportError
    out = tmp_path / "cc.svg"
    code = graph_cli(plan_of(ROOT / "examples/connected_components.flow"), out)
    assert code == 4
    assert "pip install graphviz" in capsys.readouterr().err and not out.exists()


# ---- the committed README artifact -------------------------------------------------------

def test_docs_graph_cc_svg():
    svg = ROOT / "docs" / "graph-cc.svg"
    assert svg.exists(), "regenerate: scopeflow graph examples/connected_components.flow -o docs/graph-cc.svg"
    _, clusters, edges, nodes = svg_parts(svg)
    assert "cluster_loop_cc" in clusters and "cc" in clusters["cluster_loop_cc"]
    assert "n011->n007" in edges
    # not stale: the same nodes, edges and clusters as the example draws today
    dot = G.plan_to_dot(plan_of(ROOT / "examples/connected_components.flow"))
    assert set(nodes) == set(node_lines(dot))
    assert sorted(edges) == sorted(f"{a}->{b}" for a, b, _ in edge_lines(dot))
    assert set(clusters) == set(re.findall(r"subgraph \"?(cluster_\w+)", dot))


def test_every_operator_class_is_drawable_and_generated():
    """A new IR class must be added to the graph's table and get a codegen visit (docs/architecture.md)."""
    from scopeflow.compiler import ops
    from scopeflow.compiler.codegen import Codegen

    assert set(ops.OPERATORS) == set(G.TITLED)
    statement_level = {ops.Source, ops.Values, ops.Loop, ops.LoopVar, ops.LoopImport, ops.LoopOutput}
    for cls in ops.OPERATORS:
        assert cls.chainable == (cls not in statement_level), cls
        if cls.chainable:
            assert hasattr(Codegen, f"visit_{cls.__name__}"), f"codegen has no visit_{cls.__name__}"
