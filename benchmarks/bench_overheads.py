"""What scopeflow's extras cost a loop: one more operator in the body (its record counter and its plan
node), `--report`, and snapshots (every 10 rounds, the default interval; every 10 written asynchronously;
every round). Connected components (min-label, examples/connected_components.flow) on two graphs: the first
200,000 edges of gen_graphs' random graph (few rounds, much data) and a chain of 32 cliques of 13 (~64
rounds of a handful of records; `chainN` for N cliques), one session, interleaved, a warm-up then the
median of `--repeats`.

Every output is checked against a plain-Python union-find. The table goes to stdout and into
benchmarks/RESULTS.md (its own section, between the markers below).

    .venv/bin/python benchmarks/bench_overheads.py [--repeats 3] [--graphs random200k,chain32] [--no-write]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_cc  # noqa: E402
import bench_kernels  # noqa: E402
import gen_graphs  # noqa: E402

SECTION_BEGIN = "<!-- bench_overheads.py: begin (rewritten by each run) -->"
SECTION_END = "<!-- bench_overheads.py: end -->"
PARTITIONS = 4
FLOW = os.path.join(ROOT, "examples", "connected_components.flow")
BODY_LINE = "    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)\n"
# one more operator: a filter that keeps every record, with its own counter (a `where` changes what it counts)
EXTRA_LINE = BODY_LINE.rstrip("\n") + " | where(label >= 0)\n"
VARIANTS = ("plain", "+1 operator", "--report", "snapshots every 10", "snapshots every 10, async",
            "snapshots every round")


def graph(name: str, folder: str) -> str:
    if name == "random200k":
        return gen_graphs.random_prefix(200_000, folder)
    path = os.path.join(folder, f"{name}.csv")
    if name.startswith("chain") and name[5:].isdigit():  # chainN: N cliques of 13 in a row (~2N rounds)
        gen_graphs.write_csv(path, gen_graphs.chain_graph(cliques=int(name[5:])))
    else:
        raise SystemExit(f"unknown graph {name}")
    return path


def run(spark, variant: str, csv_path: str, work: str) -> dict:
    from scopeflow.api import run_file
    from scopeflow.runtime.arguments import SnapshotOptions

    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    text = open(FLOW).read()
    assert BODY_LINE in text, "examples/connected_components.flow changed: update BODY_LINE"
    if variant == "+1 operator":
        text = text.replace(BODY_LINE, EXTRA_LINE)
    flow = os.path.join(work, "cc.flow")
    with open(flow, "w") as fh:
        fh.write(text)
    opts: dict = {}
    if variant == "--report":
        opts["report"] = os.path.join(work, "run.json")
    elif variant.startswith("snapshots"):
        opts["snapshots"] = SnapshotOptions(checkpoint=os.path.join(work, "ck"),
                                            every=1 if variant.endswith("round") else 10,
                                            async_writes=variant.endswith("async"))
    t = time.perf_counter()
    job = run_file(flow, spark=spark, params={"edges_path": csv_path}, **opts)
    seconds = time.perf_counter() - t
    rows = bench_cc.read_output(os.path.join(work, "out", "components"))
    if set(rows) != bench_cc.reference_union_find(bench_cc.read_edges(csv_path)):
        raise SystemExit(f"{variant} on {csv_path}: wrong output")
    return {"seconds": seconds, "rounds": len(job.report["rounds"]),
            "snapshots": len(job.report.get("snapshots") or [])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--graphs", default="random200k,chain32")
    ap.add_argument("--variants", default=";".join(VARIANTS),
                    help="a ';'-separated subset of the variants (plain is always run: the others are compared with "
                         "it); a subset is printed, not written to RESULTS.md")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    variants = ["plain", *(v.strip() for v in args.variants.split(";") if v.strip() != "plain")]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants: {'; '.join(sorted(unknown))} (known: {'; '.join(VARIANTS)})")
    if set(variants) != set(VARIANTS):
        args.no_write = True  # the section holds every variant

    from scopeflow.runtime.session import build_session

    spark = build_session("bench-overheads", conf={"spark.sql.shuffle.partitions": str(PARTITIONS),
                                                   "spark.default.parallelism": str(PARTITIONS),
                                                   "spark.driver.memory": "4g"})
    lines = ["| graph | variant | rounds | snapshots | median s | runs (s) | vs plain | extra ms a round |",
             "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        for name in args.graphs.split(","):
            path = graph(name, folder)
            work = os.path.join(folder, "work")
            results: dict = {v: [] for v in variants}
            for v in variants:  # warm-up
                run(spark, v, path, work)
            for _ in range(args.repeats):
                for v in variants:
                    results[v].append(run(spark, v, path, work))
            plain = statistics.median(r["seconds"] for r in results["plain"])
            for v in variants:
                secs = [r["seconds"] for r in results[v]]
                med, rounds = statistics.median(secs), results[v][0]["rounds"]
                extra = "" if v == "plain" else f"{(med - plain) / rounds * 1000:+.0f}"
                lines.append(f"| {name} | {v} | {rounds} | {results[v][0]['snapshots']} | {med:.2f} | "
                             f"{', '.join(f'{s:.2f}' for s in secs)} | {med / plain:.2f}x | {extra} |")
                print(lines[-1], flush=True)
    spark.stop()
    bench_kernels.publish("\n".join(lines), "What counters, --report and snapshots cost (bench_overheads.py)",
                          "Snapshots go to the local disk.", args, PARTITIONS, SECTION_BEGIN, SECTION_END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
