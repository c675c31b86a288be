"""Deterministic input graphs for the connected-components benchmark (CSV `src,dst`).

- ``random``: ~10^6 undirected edges over ~200k vertices, Erdos-Renyi-ish inside
  five blocks of different sizes (100k, 50k, 30k, 14k, 5k vertices; average
  degree 10, so each block is one big component) plus 1,000 tiny components
  (pairs, paths and triangles of 2-3 vertices). Vertex ids are a random
  permutation, so a component's minimum label starts anywhere in it. Min-label
  propagation needs about ten rounds (a few hops of diameter).
- ``path``: a path of 400 vertices whose smallest id sits at one end (the label
  walks the whole path: 400+ rounds), with a small random tree (~50 vertices)
  hanging off every path vertex, plus ~2,700 separate random trees (~12 vertices
  each): ~50k edges in total, so every round has some volume, yet only the few
  vertices reached by the walking label change per round late in the run.

Both are written shuffled, without self-loops or duplicate edges, as `cc_<name>.csv`.

For the SSSP and PageRank benchmark (bench_kernels.py), weighted directed graphs
(`kernels_<name>.csv`: `src,dst,w`; w in [1.00, 10.99], a function of the edge):

- ``random``: the edges of ``random`` above, each read as one arc as written
  (random orientation).
- ``rmat``: R-MAT (Chakrabarti et al. 2004; Graph500's probabilities a, b, c =
  0.57, 0.19, 0.19) on 2^18 vertex ids, 1,000,000 distinct arcs without
  self-loops: a power law, a few hubs of thousands of arcs, many isolated ids.
  Ids are a random permutation of 1..2^18.
- ``chain``: 128 cliques of 13 vertices in a row, clique k's last vertex
  linked to clique k+1's first (10,111 edges, each as two arcs): SSSP from
  vertex 1 needs 255+ rounds.

    python benchmarks/gen_graphs.py [--out benchmarks/data] [--only random|path|rmat|chain]
"""
from __future__ import annotations

import argparse
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "data")
SEED = 20240601

RANDOM_BLOCKS = (100_000, 50_000, 30_000, 14_000, 5_000)
RANDOM_AVG_DEGREE = 10
RANDOM_TINY = 1_000

PATH_LENGTH = 400
PATH_TREE = 50  # vertices of the tree hanging off each path vertex
PATH_FOREST = 2_700  # separate trees
PATH_FOREST_TREE = 12

RMAT_SCALE = 18
RMAT_ARCS = 1_000_000
RMAT_PROBS = (0.57, 0.19, 0.19)  # a, b, c; d = 1 - a - b - c

CHAIN_CLIQUES = 128
CHAIN_CLIQUE = 13


def random_graph(seed: int = SEED) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    n_tiny_vertices = RANDOM_TINY * 3
    n = sum(RANDOM_BLOCKS) + n_tiny_vertices
    ids = list(range(1, n + 1))
    rng.shuffle(ids)  # vertex k of the generator is id ids[k]
    edges: set[tuple[int, int]] = set()
    base = 0
    for size in RANDOM_BLOCKS:
        m = size * RANDOM_AVG_DEGREE // 2
        block: set[tuple[int, int]] = set()
        while len(block) < m:
            a, b = rng.randrange(size), rng.randrange(size)
            if a != b:
                block.add((min(a, b), max(a, b)))
        edges.update((ids[base + a], ids[base + b]) for a, b in block)
        base += size
    for t in range(RANDOM_TINY):  # tiny components: a pair, a 3-path or a triangle
        a, b, c = (ids[base + 3 * t + i] for i in range(3))
        kind = t % 3
        edges.add((a, b))
        if kind >= 1:
            edges.add((b, c))
        if kind == 2:
            edges.add((a, c))
    out = [(a, b) if rng.random() < 0.5 else (b, a) for a, b in edges]
    out.sort()
    rng.shuffle(out)
    return out


def _random_tree(rng: random.Random, root: int, size: int, next_id) -> list[tuple[int, int]]:
    """A random recursive tree of `size` vertices under `root` (depth ~ log size)."""
    nodes = [root]
    edges = []
    for _ in range(size - 1):
        v = next_id()
        edges.append((rng.choice(nodes), v))
        nodes.append(v)
    return edges


def path_graph(seed: int = SEED) -> list[tuple[int, int]]:
    rng = random.Random(seed + 1)
    total = PATH_LENGTH * PATH_TREE + PATH_FOREST * PATH_FOREST_TREE + 10
    pool = list(range(2, total + 2))
    rng.shuffle(pool)
    it = iter(pool)
    next_id = lambda: next(it)  # noqa: E731
    path = [1] + [next_id() for _ in range(PATH_LENGTH - 1)]  # id 1 (the minimum) at one end
    edges = list(zip(path, path[1:]))
    for v in path:
        edges += _random_tree(rng, v, PATH_TREE, next_id)
    for _ in range(PATH_FOREST):
        edges += _random_tree(rng, next_id(), PATH_FOREST_TREE, next_id)
    edges = [(a, b) if rng.random() < 0.5 else (b, a) for a, b in edges]
    rng.shuffle(edges)
    return edges


def rmat_graph(seed: int = SEED, scale: int = RMAT_SCALE, arcs: int = RMAT_ARCS,
               probs: tuple = RMAT_PROBS) -> list[tuple[int, int]]:
    """`arcs` distinct R-MAT arcs (no self-loops) over ids 1..2^scale, in random order."""
    import numpy as np

    rng = np.random.default_rng(seed + 2)
    a, b, c = probs
    n = 1 << scale
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < arcs:
        batch = int((arcs - len(keys)) * 1.3) + 1000
        src = np.zeros(batch, dtype=np.int64)
        dst = np.zeros(batch, dtype=np.int64)
        for _ in range(scale):  # one quadrant per level: a = (0,0), b = (0,1), c = (1,0), d = (1,1)
            u = rng.random(batch)
            src = (src << 1) | (u >= a + b)
            dst = (dst << 1) | (((u >= a) & (u < a + b)) | (u >= a + b + c))
        new = src * n + dst
        keys = np.unique(np.concatenate([keys, new[src != dst]]))
    keys = rng.permutation(keys)[:arcs]
    ids = rng.permutation(n) + 1  # id of generator vertex k
    src, dst = ids[keys // n], ids[keys % n]
    return list(zip(src.tolist(), dst.tolist()))


def chain_graph(cliques: int = CHAIN_CLIQUES, size: int = CHAIN_CLIQUE, seed: int = SEED) -> list[tuple[int, int]]:
    """`cliques` cliques of `size` vertices in a row (clique k: ids k*size+1 .. k*size+size), clique k's
    last vertex linked to clique k+1's first; every edge as two arcs, in random order."""
    edges = []
    for k in range(cliques):
        first = k * size + 1
        members = range(first, first + size)
        edges += [(u, v) for u in members for v in members if u < v]
        if k + 1 < cliques:
            edges.append((first + size - 1, first + size))
    arcs = edges + [(v, u) for u, v in edges]
    random.Random(seed + 3).shuffle(arcs)
    return arcs


def weight(src: int, dst: int) -> float:
    """The weight of arc src -> dst: 1.00 .. 10.99, a function of the arc (deterministic)."""
    return 1 + ((src * 7919 + dst * 104729) % 1000) / 100


def _write(path: str, header: str, lines) -> str:
    """Write `header` and `lines` to `path` (aside first, then renamed: a killed run leaves no half file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(header)
        fh.writelines(lines)
    os.replace(tmp, path)
    return path


def write_csv(path: str, edges: list[tuple[int, int]]) -> str:
    return _write(path, "src,dst\n", (f"{a},{b}\n" for a, b in edges))


def write_weighted_csv(path: str, arcs: list[tuple[int, int]]) -> str:
    return _write(path, "src,dst,w\n", (f"{a},{b},{weight(a, b)!r}\n" for a, b in arcs))


GRAPHS = {"random": random_graph, "rmat": rmat_graph, "path": path_graph}  # (connected components)
KERNEL_GRAPHS = {"random": random_graph, "rmat": rmat_graph, "chain": chain_graph}


# the two sets of files: (file prefix, graphs, writer, what a line is)
SETS = {"cc": ("cc", GRAPHS, write_csv, "edges"), "kernels": ("kernels", KERNEL_GRAPHS, write_weighted_csv, "arcs")}


def _ensure(kind: str, name: str, folder: str) -> str:
    prefix, graphs, write, _ = SETS[kind]
    path = os.path.join(folder, f"{prefix}_{name}.csv")
    if not os.path.exists(path):
        write(path, graphs[name]())
    return path


def ensure(name: str, folder: str = DEFAULT_DIR) -> str:
    """The CSV of graph `name`, generated if missing (deterministic, so a stale file is still right)."""
    return _ensure("cc", name, folder)


def ensure_weighted(name: str, folder: str = DEFAULT_DIR) -> str:
    """The weighted CSV (src,dst,w) of kernel graph `name`, generated if missing."""
    return _ensure("kernels", name, folder)


def random_prefix(n: int, folder: str) -> str:
    """The first `n` edges of the random graph (a graph of its own: a sparser random graph), as
    FOLDER/random_N.csv."""
    path = os.path.join(folder, f"random_{n}.csv")
    with open(ensure("random")) as src, open(path, "w") as out:
        out.write(next(src))
        for i, line in enumerate(src):
            if i >= n:
                break
            out.write(line)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_DIR, help="output folder")
    ap.add_argument("--only", choices=sorted(set(GRAPHS) | set(KERNEL_GRAPHS)))
    args = ap.parse_args()
    made: dict = {}  # `random` is in both sets: generated once
    for prefix, graphs, write, noun in SETS.values():
        for name in [args.only] if args.only else graphs:
            if name not in graphs:
                continue
            edges = made[graphs[name]] = made.get(graphs[name]) or graphs[name]()
            path = write(os.path.join(args.out, f"{prefix}_{name}.csv"), edges)
            vertices = len({v for e in edges for v in e})
            print(f"wrote {path}: {len(edges):,} {noun}, {vertices:,} vertices")


if __name__ == "__main__":
    main()
