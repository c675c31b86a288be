"""Independent reference implementations (plain Python / networkx, no Spark).

Each function takes plain Python data (lists of tuples, e.g. from
`read_csv_rows`) and returns sets / dicts to compare against what the
compiled .flow programs produce.
"""
from __future__ import annotations

import csv
import math
from collections import defaultdict, deque
from pathlib import Path

import networkx as nx

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"


def read_csv_rows(path, types):
    """Rows of a CSV file with a header as tuples, column i parsed by types[i]."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        if len(header) != len(types):
            raise ValueError(f"{path}: header {header} has {len(header)} columns, "
                             f"expected {len(types)}")
        return [tuple(t(v) for t, v in zip(types, row)) for row in reader if row]


def connected_components(edges):
    """{vertex: smallest vertex id of its component}, edges taken as undirected."""
    g = nx.Graph()
    g.add_edges_from(edges)
    labels = {}
    for comp in nx.connected_components(g):
        low = min(comp)
        labels.update((v, low) for v in comp)
    return labels


def sssp(wedges, source):
    """{vertex: shortest distance from source} over directed weighted edges
    (src, dst, w), reachable vertices only; parallel edges use the cheapest."""
    g = nx.DiGraph()
    g.add_node(source)
    for u, v, w in wedges:
        if not g.has_edge(u, v) or w < g[u][v]["w"]:
            g.add_edge(u, v, w=float(w))
    return {v: float(d) for v, d in nx.single_source_dijkstra_path_length(g, source, weight="w").items()}


def _out_degree(edges):
    deg = defaultdict(int)
    for u, _ in edges:
        deg[u] += 1
    return deg


def pagerank_fixed(vertices, edges, rounds=20):
    """The join-based PageRank of examples/pagerank.flow, `rounds` updates from
    rank 1.0. Vertices receiving no contribution drop out of the next round."""
    deg = _out_degree(edges)
    rank = {v: 1.0 for v in vertices}
    for _ in range(rounds):
        acc = defaultdict(float)
        for u, v in edges:
            if u in rank:
                acc[v] += rank[u] / deg[u]
        rank = {v: 0.15 + 0.85 * s for v, s in acc.items()}
    return rank


def hits_fixed(vertices, edges, rounds=10):
    """Unnormalised Jacobi HITS (the coloop of examples/hits.flow): each round
    a2(v) = sum h(u) over u->v and h2(u) = sum a(v) over u->v, both from the
    previous round; returns (hubs, auths) of the last round."""
    hub = {v: 1.0 for v in vertices}
    auth = {v: 1.0 for v in vertices}
    for _ in range(rounds):
        a2, h2 = defaultdict(float), defaultdict(float)
        for u, v in edges:
            if u in hub:
                a2[v] += hub[u]
            if v in auth:
                h2[u] += auth[v]
        hub, auth = dict(h2), dict(a2)
    return hub, auth


def _successors(edges):
    succ = defaultdict(set)
    for u, v in edges:
        succ[u].add(v)
    return succ


def _reach(succ, seeds):
    seen = set(seeds)
    todo = deque(seen)
    while todo:
        for w in succ[todo.popleft()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def reachable(edges, seeds):
    """Vertices reachable from any seed along directed edges (seeds included)."""
    return _reach(_successors(edges), seeds)


def transitive_closure(edges):
    """{(a, b)}: there is a directed path of length >= 1 from a to b."""
    succ = _successors(edges)
    return {(a, b) for a in list(succ) for b in _reach(succ, succ[a])}


def core_numbers(undirected_edges):
    """{vertex: core number} of the undirected graph (self-loops ignored)."""
    g = nx.Graph()
    g.add_edges_from((u, v) for u, v in undirected_edges if u != v)
    return nx.core_number(g)


def kmeans(points, centroids, rounds):
    """Lloyd's k-means for a fixed number of rounds.

    points: [(id, x, y)], centroids: [(cid, x, y)]. Each point goes to the
    nearest centroid (squared Euclidean distance, ties -> smallest cid); each
    centroid becomes the mean of its points; a centroid with no points drops
    out. Returns {cid: (x, y)}.
    """
    cents = {cid: (float(x), float(y)) for cid, x, y in centroids}
    for _ in range(rounds):
        members = defaultdict(list)
        for _, px, py in points:
            best = min(cents, key=lambda c: ((px - cents[c][0]) ** 2 + (py - cents[c][1]) ** 2, c))
            members[best].append((px, py))
        cents = {c: (sum(x for x, _ in ps) / len(ps), sum(y for _, y in ps) / len(ps))
                 for c, ps in members.items()}
    return cents


def triangles(edges):
    """{vertex: number of triangles through it} of the undirected graph; every
    vertex of an edge is listed (0 when in no triangle); direction, duplicate
    edges and self-loops are ignored (networkx.triangles)."""
    g = nx.Graph()
    g.add_nodes_from(v for e in edges for v in e)
    g.add_edges_from((u, v) for u, v in edges if u != v)
    return dict(nx.triangles(g))


# ---- LDBC Graphalytics (stdlib/graphalytics.flow) ------------------------------------------------
# Plain Python, written from the pseudo-code of the LDBC Graphalytics specification (arXiv 2011.15028,
# appendix "Pseudo-code for Algorithms"), on the simple graph it defines: E is a set of pairs of
# distinct vertices, and an undirected edge {u, v} is the two arcs (u, v) and (v, u). So self-loops are
# dropped and parallel edges count once (in SSSP the cheapest). `vertices` lists every vertex.

GA_INFINITY = 9223372036854775807


def _ga_arcs(edges, directed):
    arcs = set()
    for u, v, *_ in edges:
        if u != v:
            arcs.add((u, v))
            if not directed:
                arcs.add((v, u))
    return arcs


def _ga_adjacency(vertices, arcs):
    out = {v: set() for v in vertices}
    inn = {v: set() for v in vertices}
    for u, v in arcs:
        out[u].add(v)
        inn[v].add(u)
    return out, inn


def ga_bfs(vertices, edges, source, directed=True):
    """{vertex: depth from source}, GA_INFINITY when unreachable (a FIFO queue)."""
    out, _ = _ga_adjacency(vertices, _ga_arcs(edges, directed))
    depth = {v: GA_INFINITY for v in vertices}
    if source in depth:
        depth[source] = 0
        queue = deque([source])
        while queue:
            v = queue.popleft()
            for u in sorted(out[v]):
                if depth[u] == GA_INFINITY:
                    depth[u] = depth[v] + 1
                    queue.append(u)
    return depth


def ga_pagerank(vertices, edges, iterations, damping, directed=True):
    """{vertex: PR_iterations}: PR_0 = 1/|V|; each iteration (1-d)/|V| + d * sum of PR(u)/outdeg(u) over
    the in-neighbours u + d/|V| * the rank of the vertices with no out-neighbour."""
    out, inn = _ga_adjacency(vertices, _ga_arcs(edges, directed))
    n = len(vertices)
    rank = {v: 1.0 / n for v in vertices}
    for _ in range(iterations):
        sink_sum = sum(rank[w] for w in vertices if not out[w])
        rank = {v: (1 - damping) / n + damping * sum(rank[u] / len(out[u]) for u in inn[v]) + damping / n * sink_sum
                for v in vertices}
    return rank


def ga_wcc(vertices, edges):
    """{vertex: smallest vertex id of its weakly connected component} (repeated min over in- and
    out-neighbours until nothing changes)."""
    out, inn = _ga_adjacency(vertices, _ga_arcs(edges, True))
    comp = {v: v for v in vertices}
    converged = False
    while not converged:
        converged = True
        for v in vertices:
            for u in inn[v] | out[v]:
                if comp[v] > comp[u]:
                    comp[v] = comp[u]
                    converged = False
    return comp


def ga_cdlp(vertices, edges, iterations, directed=True):
    """{vertex: label after `iterations` synchronous rounds}: the most frequent label over the in-neighbours
    and the out-neighbours (directed: a neighbour over both counts twice), ties to the smallest, no
    neighbour: keep the label."""
    out, inn = _ga_adjacency(vertices, _ga_arcs(edges, directed))
    labels = {v: v for v in vertices}
    for _ in range(iterations):
        new = {}
        for v in vertices:
            hist = defaultdict(int)
            # undirected: N_in(v) = N_out(v) = N(v), so the pseudo-code counts every neighbour twice,
            # which does not change the winner; count it once
            for u in (list(inn[v]) + list(out[v])) if directed else out[v]:
                hist[labels[u]] += 1
            if hist:
                top = max(hist.values())
                new[v] = min(label for label, c in hist.items() if c == top)
            else:
                new[v] = labels[v]
        labels = new
    return labels


def ga_lcc(vertices, edges, directed=True):
    """{vertex: t / (d (d-1))}: N(v) = in- and out-neighbours as a set, d = |N(v)|, t = the arcs (u, w) with u,
    w in N(v); 0.0 when d < 2 (undirected: an edge is two arcs, so this is triangles / (d (d-1) / 2))."""
    arcs = _ga_arcs(edges, directed)
    out, inn = _ga_adjacency(vertices, arcs)
    lcc = {}
    for v in vertices:
        nb = inn[v] | out[v]
        d = len(nb)
        lcc[v] = 0.0 if d < 2 else sum(1 for u in nb for w in nb if (u, w) in arcs) / (d * (d - 1))
    return lcc


def ga_sssp(vertices, wedges, source, directed=True):
    """{vertex: shortest distance from source}, inf when unreachable (Dijkstra with a heap; parallel edges:
    the cheapest)."""
    import heapq

    weight = {}
    for u, v, w in wedges:
        for a, b in ((u, v),) if directed else ((u, v), (v, u)):
            if a != b:
                weight[a, b] = min(float(w), weight.get((a, b), float("inf")))
    out = defaultdict(list)
    for (a, b), w in weight.items():
        out[a].append((b, w))
    dist = {v: float("inf") for v in vertices}
    if source in dist:
        dist[source] = 0.0
        heap = [(0.0, source)]
        while heap:
            d, v = heapq.heappop(heap)
            if d > dist[v]:
                continue
            for u, w in out[v]:
                if dist[u] > d + w:
                    dist[u] = d + w
                    heapq.heappush(heap, (dist[u], u))
    return dist


def spark_order(x: float) -> tuple:
    """Spark's order of doubles: NaN above every number (and equal to itself)."""
    return (math.isnan(x), 0.0 if math.isnan(x) else x)


def wrapping_add(a: int, b: int) -> int:
    """`a + b` of Spark `long`s with `spark.sql.ansi.enabled=false`: an overflow wraps around."""
    return (a + b + 2 ** 63) % 2 ** 64 - 2 ** 63


def sssp_rounds(edges: list, source: int, start=0.0, plus=lambda a, b: a + b) -> dict:
    """{vertex: distance} as the SSSP loop of stdlib:graph's `sssp` (and test_streaming.SSSP) takes its rounds in a
    batch run, in plain Python: round 0 holds the source at `start`, each round folds what arrives into the state with
    `min` in Spark's order of doubles (NaN above every number) and relaxes the edges out of the keys that changed
    (`d + w`, or `plus(d, w)`). Where the order of values breaks, the rounds matter: with infinite weights
    (`-Infinity + Infinity` is NaN) and with `long`s that wrap around (`plus=wrapping_add`)."""
    state: dict = {}
    arriving = [(source, start)]
    while arriving:
        changed = {}
        for k, d in arriving:
            old = changed.get(k, state.get(k))
            if old is None or spark_order(d) < spark_order(old):
                changed[k] = d
        changed = {k: d for k, d in changed.items() if k not in state or spark_order(d) != spark_order(state[k])}
        state.update(changed)
        arriving = [(v, plus(d, w)) for k, d in changed.items() for u, v, w in edges if u == k]
    return state
