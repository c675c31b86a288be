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

Both are written shuffled, without self-loops or duplicate edges.

    python benchmarks/gen_graphs.py [--out benchmarks/data] [--only random|path]
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


def write_csv(path: str, edges: list[tuple[int, int]]) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("src,dst\n")
        fh.writelines(f"{a},{b}\n" for a, b in edges)
    os.replace(tmp, path)
    return path


GRAPHS = {"random": random_graph, "path": path_graph}


def ensure(name: str, folder: str = DEFAULT_DIR) -> str:
    """The CSV of graph `name`, generated if missing (deterministic, so a stale file is still right)."""
    path = os.path.join(folder, f"cc_{name}.csv")
    if not os.path.exists(path):
        write_csv(path, GRAPHS[name]())
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_DIR, help="output folder")
    ap.add_argument("--only", choices=sorted(GRAPHS))
    args = ap.parse_args()
    for name in [args.only] if args.only else GRAPHS:
        edges = GRAPHS[name]()
        path = write_csv(os.path.join(args.out, f"cc_{name}.csv"), edges)
        vertices = len({v for e in edges for v in e})
        print(f"wrote {path}: {len(edges):,} edges, {vertices:,} vertices")


if __name__ == "__main__":
    main()
