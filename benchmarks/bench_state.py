"""What a `reduce` state costs between rounds: a big state and a long tail of rounds that change a few keys.

Connected components (min-label, examples/connected_components.flow) on a graph that has both: `--pairs`
disjoint pairs of vertices (settled after the first rounds: a state of 2 x pairs keys) and one path of
`--path` vertices in id order (the smallest label walks along it, one vertex further a round, so the loop
runs about `--path` rounds, each changing a few keys). Contenders, in one session, interleaved:

- ``default``: scopeflow as it runs by default (a state of at least `spark.scopeflow.stateOverlayMinKeys`
  keys, 300,000, has an overlay; a smaller one is rewritten every round);
- ``overlay``: scopeflow with `spark.scopeflow.stateOverlayMinKeys=0`: a round with few records in flight
  folds them into the state's overlay (runtime/state.py) and reads the rest of the state only where its keys
  meet them, whatever the state's size;
- ``rewrite``: scopeflow with `spark.scopeflow.stateOverlay=0`: every round folds into, and rewrites, the
  whole state (scopeflow before the overlay);
- ``delta``: the hand-written delta loop (bench_cc's `cc_delta`), which rewrites its state every round.

Every output is checked against a plain-Python union-find. The table goes to stdout and into
benchmarks/RESULTS.md (its own section, between the markers below).

    .venv/bin/python benchmarks/bench_state.py [--repeats 2] [--pairs 100000,300000,1000000] [--path 40] [--no-write]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_cc  # noqa: E402
import bench_kernels  # noqa: E402
import gen_graphs  # noqa: E402

SECTION_BEGIN = "<!-- bench_state.py: begin (rewritten by each run) -->"
SECTION_END = "<!-- bench_state.py: end -->"
PARTITIONS = 4
OVERLAY, MIN_KEYS = "spark.scopeflow.stateOverlay", "spark.scopeflow.stateOverlayMinKeys"
CONTENDERS = (("default", "scopeflow", {}), ("overlay", "scopeflow", {MIN_KEYS: "0"}),
              ("rewrite", "scopeflow", {OVERLAY: "0"}), ("delta", "delta", {}))


def tail_graph(pairs: int, path: int, seed: int = 7) -> list[tuple[int, int]]:
    """`pairs` disjoint pairs (ids from `path` on, shuffled) and a path 0 - 1 - ... - path-1."""
    ids = list(range(path, path + 2 * pairs))
    random.Random(seed).shuffle(ids)
    return [(i, i + 1) for i in range(path - 1)] + [(ids[2 * k], ids[2 * k + 1]) for k in range(pairs)]


def run(spark, contender: str, csv_path: str, settings: dict, want: set) -> dict:
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        r = bench_cc.run_one(spark, contender, csv_path, PARTITIONS, 3600.0)
    finally:
        for key in settings:
            spark.conf.unset(key)
    if set(r["rows"]) != want:
        raise SystemExit(f"{contender} ({settings}) on {csv_path}: wrong output")
    return {"seconds": r["seconds"], "rounds": r["rounds"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--pairs", default="100000,300000,1000000")
    ap.add_argument("--path", type=int, default=40)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    from scopeflow.runtime.session import build_session

    spark = build_session("bench-state", conf={"spark.sql.shuffle.partitions": str(PARTITIONS),
                                               "spark.default.parallelism": str(PARTITIONS),
                                               "spark.driver.memory": "4g"})
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for pairs in (int(p) for p in args.pairs.split(",")):
            edges = tail_graph(pairs, args.path)
            path = gen_graphs.write_csv(os.path.join(folder, f"tail-{pairs}.csv"), edges)
            want = bench_cc.reference_union_find(edges)
            results: dict = {name: [] for name, _, _ in CONTENDERS}
            for name, contender, settings in CONTENDERS:  # warm-up
                run(spark, contender, path, settings, want)
            for _ in range(args.repeats):
                for name, contender, settings in CONTENDERS:
                    results[name].append(run(spark, contender, path, settings, want))
            med = {name: statistics.median(r["seconds"] for r in rs) for name, rs in results.items()}
            line = [f"{2 * pairs + args.path:,}", str(results["overlay"][0]["rounds"])]
            line += [f"{med[name]:.2f} ({med[name] / results[name][0]['rounds']:.3f}/round)" for name, _, _ in CONTENDERS]
            line += [f"{med['overlay'] / med['rewrite']:.2f}x", f"{med['default'] / med['rewrite']:.2f}x",
                     f"{med['default'] / med['delta']:.2f}x"]
            rows.append(line)
            print(" | ".join(line), flush=True)
    spark.stop()
    head = ("| state keys | rounds | default s | overlay s | rewrite s | hand delta s | overlay / rewrite | "
            "default / rewrite | default / hand |\n|---|---|---|---|---|---|---|---|---|")
    table = head + "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows)
    bench_kernels.publish(table, "A big state and a long tail of small rounds (bench_state.py)",
                          f"Connected components over disjoint pairs and a {args.path}-vertex path: seconds per run, "
                          "medians (and per round).", args, PARTITIONS, SECTION_BEGIN, SECTION_END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
