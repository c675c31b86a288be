"""Generate long_path.csv: a path 1 - 2 - ... - 400 (edges i -> i+1) in a
shuffled, deterministic order. Min-label connected components needs ~400
rounds on it (label 1 travels one hop per round).

    python3 examples/data/make_long_path.py [N] [OUT]
"""
import random
import sys
from pathlib import Path

SEED = 20240601


def long_path_edges(n=400, seed=SEED):
    edges = [(i, i + 1) for i in range(1, n)]
    random.Random(seed).shuffle(edges)
    return edges


def main(argv):
    n = int(argv[1]) if len(argv) > 1 else 400
    out = Path(argv[2]) if len(argv) > 2 else Path(__file__).with_name("long_path.csv")
    with open(out, "w", newline="") as f:
        f.write("src,dst\n")
        f.writelines(f"{a},{b}\n" for a, b in long_path_edges(n))
    print(f"wrote {n - 1} edges to {out}")


if __name__ == "__main__":
    main(sys.argv)
