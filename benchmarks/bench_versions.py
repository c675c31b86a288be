"""Before and after a change: the connected-components benchmark of two checkouts of scopeflow, run in one
session of this script, alternately (before, after, before, after, ...), so that the machine's noise hits
both alike.

Each checkout runs its own `benchmarks/bench_cc.py` with its own interpreter (`.venv/bin/python` in that
checkout): scopeflow and the hand-written delta loop in one SparkSession, every output checked against a
reference. A checkout cannot share a Python process with the other (both are the package `scopeflow`), so
each run is a process of its own; the delta loop, the same code in both, shows how much the two processes'
conditions differed. The summary gives each checkout's scopeflow/delta ratio and after/before.

    .venv/bin/python benchmarks/bench_versions.py --before ../old-checkout [--after .] [--alternations 2]
                                                  [--repeats 2] [--graphs random,path] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_checkout(checkout: str, graphs: str, repeats: int) -> dict:
    """{(graph, contender): [seconds, ...]} from one process of `checkout`'s bench_cc.py."""
    python = os.path.join(checkout, ".venv", "bin", "python")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "runs.json")
        cmd = [python, os.path.join(checkout, "benchmarks", "bench_cc.py"), "--contenders", "scopeflow,delta",
               "--graphs", graphs, "--repeats", str(repeats), "--no-write", "--json", out]
        subprocess.run(cmd, cwd=checkout, check=True)
        with open(out) as fh:
            raw = json.load(fh)
    return {tuple(key.split("/")): [r["seconds"] for r in runs] for key, runs in raw.items()}


def summarise(times: dict, graphs: list) -> str:
    """times: {("before"|"after", graph, contender): [seconds]}"""
    out = ["| graph | checkout | scopeflow median s | delta median s | scopeflow / delta (median) | "
           "scopeflow / delta (best) | runs (scopeflow; delta) |", "|---|---|---|---|---|---|---|"]
    ratio = {}
    for g in graphs:
        for side in ("before", "after"):
            s, d = times[(side, g, "scopeflow")], times[(side, g, "delta")]
            ratio[(side, g)] = statistics.median(s) / statistics.median(d)
            out.append(f"| {g} | {side} | {statistics.median(s):.1f} | {statistics.median(d):.1f} | "
                       f"{ratio[(side, g)]:.2f}x | {min(s) / min(d):.2f}x | "
                       f"{', '.join(f'{x:.1f}' for x in s)}; {', '.join(f'{x:.1f}' for x in d)} |")
    out += ["", "| graph | after / before: scopeflow/delta ratios | scopeflow medians | delta medians (noise) |",
            "|---|---|---|---|"]
    for g in graphs:
        med = {k: statistics.median(v) for k, v in times.items()}
        out.append(f"| {g} | {ratio[('after', g)] / ratio[('before', g)]:.3f} | "
                   f"{med[('after', g, 'scopeflow')] / med[('before', g, 'scopeflow')]:.3f} | "
                   f"{med[('after', g, 'delta')] / med[('before', g, 'delta')]:.3f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the checkout to compare against (with its own .venv)")
    ap.add_argument("--after", default=ROOT, help="the checkout with the change (default: this one)")
    ap.add_argument("--alternations", type=int, default=2, help="processes per checkout, alternated")
    ap.add_argument("--repeats", type=int, default=2, help="measured runs per contender and graph in each process")
    ap.add_argument("--graphs", default="random,path")
    ap.add_argument("--out", help="also write the summary to this file")
    args = ap.parse_args()
    graphs = args.graphs.split(",")
    for side in (args.before, args.after):  # the same deterministic graphs, generated once
        data = os.path.join(side, "benchmarks", "data")
        if side != args.after and not os.path.exists(data):
            os.symlink(os.path.join(args.after, "benchmarks", "data"), data)
    times: dict = {}
    started = time.time()
    for i in range(args.alternations):
        for side, checkout in (("before", args.before), ("after", args.after)):
            print(f"== {side} ({checkout}), process {i + 1}/{args.alternations}", flush=True)
            for (g, c), secs in run_checkout(checkout, args.graphs, args.repeats).items():
                times.setdefault((side, g, c), []).extend(secs)
    table = summarise(times, graphs)
    print(f"\n{table}\n\n{time.time() - started:.0f} s in all")
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
