"""Independent reference implementations (plain Python / networkx, no Spark).

Each function takes plain Python data (lists of tuples, e.g. from
`read_csv_rows`) and returns sets / dicts to compare against what the
compiled .flow programs produce.
"""
from __future__ import annotations

import csv
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
