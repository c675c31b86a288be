"""Snapshot overhead (issue 5): connected components on the path-like benchmark graph.

Contenders, in one SparkSession, interleaved so machine noise hits them alike:
  none      no snapshots
  sync      a snapshot every 10 rounds, written before the next round starts
  async     a snapshot every 10 rounds, written while the next round computes
  recompute positions only every 10 rounds (FLINK-4120: state is recomputed on recovery)

Run:  .venv/bin/python benchmarks/bench_snapshots.py [--graph PATH] [--repeat 2]
(generate the graph first: .venv/bin/python benchmarks/gen_graphs.py)
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from scopeflow.api import run_file
from scopeflow.runtime.arguments import SnapshotOptions
from scopeflow.runtime.session import build_session

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOW = os.path.join(ROOT, "examples", "connected_components.flow")

MODES = {
    "none": None,
    "sync": dict(every=10),
    "async": dict(every=10, async_writes=True),
    "recompute": dict(every=10, mode="recompute"),
}


def run(spark, graph: str, mode: str, work: str) -> tuple[float, int, int]:
    ck = os.path.join(work, f"ck-{mode}")
    shutil.rmtree(ck, ignore_errors=True)
    opts = MODES[mode]
    snapshots = SnapshotOptions(checkpoint=ck, **opts) if opts else None
    flow = os.path.join(work, "cc.flow")
    started = time.perf_counter()
    job = run_file(flow, spark=spark, params={"edges_path": graph}, snapshots=snapshots)
    seconds = time.perf_counter() - started
    rounds = len([r for r in job.report["rounds"] if r["scope"] == "cc"])
    return seconds, rounds, len(job.report["snapshots"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default=os.path.join(ROOT, "benchmarks", "data", "cc_path.csv"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--partitions", default="4")
    args = ap.parse_args()
    spark = build_session("bench-snapshots", conf={"spark.sql.shuffle.partitions": args.partitions})
    work = tempfile.mkdtemp(prefix="sf-bench-snap-")
    shutil.copy(FLOW, os.path.join(work, "cc.flow"))
    graph = os.path.abspath(args.graph)
    run(spark, os.path.join(ROOT, "examples", "data", "graph.csv"), "none", work)  # JVM warm-up
    times: dict[str, list] = {m: [] for m in MODES}
    info = {}
    for _ in range(args.repeat):
        for mode in MODES:
            seconds, rounds, snaps = run(spark, graph, mode, work)
            times[mode].append(seconds)
            info[mode] = (rounds, snaps)
    base = min(times["none"])
    lines = ["| mode | best s | median s | rounds | snapshots | overhead vs none (best) |", "|---|---|---|---|---|---|"]
    for mode, ts in times.items():
        over = (min(ts) / base - 1) * 100
        lines.append(f"| {mode} | {min(ts):.1f} | {statistics.median(ts):.1f} | {info[mode][0]} | {info[mode][1]} | "
                     f"{over:+.1f}% |")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
