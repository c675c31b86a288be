"""The six LDBC Graphalytics kernels of `stdlib:graphalytics` on a ~1M-edge graph: time and rounds per kernel,
with the best hand-written PySpark next to PageRank (LDBC's formula) and WCC.

One SparkSession (bench_cc's settings), the `random` kernel graph of gen_graphs.py read as an UNDIRECTED
graph (~1M edges, ~200k vertices, average degree ~10): every kernel runs through a small pipeline that
reads the CSV, calls the kernel and writes `id,value` CSV. Hand-written contenders, interleaved with the
kernels they match: `pagerank_ldbc_hand` (below) and bench_cc's `cc_delta` for WCC. Every output is
checked against tests/reference.py's plain-Python implementation of LDBC's spec (exact for BFS, CDLP, WCC;
relative 1e-4 for PR, LCC, SSSP), skipped with --no-check. The table goes to stdout and into
benchmarks/RESULTS.md (its own section between markers; bench_cc.py keeps it).

    .venv/bin/python benchmarks/bench_graphalytics.py [--repeats 3] [--kernels bfs,pr,wcc,cdlp,lcc,sssp]
                                                      [--no-check] [--no-write]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import bench_cc  # noqa: E402
import bench_kernels  # noqa: E402
import gen_graphs  # noqa: E402

KERNELS = ("bfs", "pr", "wcc", "cdlp", "lcc", "sssp")
CALLS = {"bfs": "bfs(vertices, links, source, false)", "pr": "pagerank(vertices, links, 20, 0.85, false)",
         "wcc": "wcc(vertices, links)", "cdlp": "cdlp(vertices, links, 10, false)", "lcc": "lcc(vertices, links, false)",
         "sssp": "sssp(vertices, weighted, source, false)"}
HAND = {"pr": "pr-hand", "wcc": "wcc-hand (cc_delta)"}
SECTION_BEGIN = "<!-- bench_graphalytics.py: begin (rewritten by each run) -->"
SECTION_END = "<!-- bench_graphalytics.py: end -->"


def flow(kernel: str) -> str:
    name = CALLS[kernel].split("(")[0]
    return f"""pipeline bench_ga_{kernel}
from "stdlib:graphalytics" import {name}
param edges_path: string = "data/graph.csv"
param source: long = 1
source edges = read csv(edges_path, header = true) schema (src: long, dst: long, w: double)
links    = edges | select(src, dst)
weighted = edges | select(src, dst, w)
vertices = links | select(id = src) | union(links | select(id = dst)) | group(by id)
sink {CALLS[kernel]} -> csv("out/result", header = true)
"""


def run_kernel(spark, kernel: str, csv_path: str, out_dir: str, source: int) -> int:
    from scopeflow.api import run_file

    work = os.path.dirname(os.path.dirname(out_dir))
    path = os.path.join(work, "pipeline.flow")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(flow(kernel))
    job = run_file(path, spark=spark, params={"edges_path": csv_path, "source": str(source)})
    return len(job.report["rounds"])


def pagerank_ldbc_hand(spark, csv_path: str, out_dir: str, partitions: int, iterations: int = 20,
                       damping: float = 0.85) -> int:
    """LDBC's PageRank on the undirected graph, hand-written: PR_0 = 1/|V|, then (1-d)/|V| + d * sum of
    PR(u)/outdeg(u) over the neighbours + d/|V| * the dangling vertices' rank.

    `bench_kernels.pagerank_hand`'s tricks (links with their degree partitioned by `src`, sorted and
    cached; ranks co-partitioned by id; one Spark job per round with `localCheckpoint(eager)`; AQE and
    broadcast off); the state keeps each vertex's out-degree (`state LEFT JOIN sums`, no shuffle of
    the state), and the dangling vertices' rank for the next round is an `Observation` of the same job
    (no extra job per round)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    P = partitions
    with bench_cc.loop_settings(spark):
        raw = bench_kernels._read_arcs(spark, csv_path).where(F.col("src") != F.col("dst"))
        links = raw.select("src", "dst").unionByName(raw.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
        links = links.distinct()
        deg = links.groupBy("src").agg(F.count(F.lit(1)).alias("out_degree"))
        E = links.join(deg, "src").repartition(P, "src").sortWithinPartitions("src").persist()
        ids = links.select(F.col("src").alias("id")).distinct()
        n = ids.count()
        state = (ids.join(deg.select(F.col("src").alias("id"), "out_degree"), "id", "left")
                 .select("id", F.coalesce("out_degree", F.lit(0)).alias("outdeg"), F.lit(1.0 / n).alias("rank")))
        dangling_of = F.sum(F.when(F.col("outdeg") == 0, F.col("rank")).otherwise(F.lit(0.0))).alias("dangling")
        obs = Observation("pr_hand_0")
        state = state.observe(obs, dangling_of).sortWithinPartitions("id").localCheckpoint(eager=True)
        for i in range(iterations):
            dangling = obs.get["dangling"] or 0.0
            contrib = state.join(E, state["id"] == E["src"]).select(
                E["dst"].alias("id"), (state["rank"] / E["out_degree"]).alias("c"))
            sums = contrib.groupBy("id").agg(F.sum("c").alias("s"))
            new = state.join(sums, "id", "left").select(
                "id", "outdeg", (F.lit((1 - damping) / n) + F.lit(damping) * F.coalesce(F.col("s"), F.lit(0.0))
                                 + F.lit(damping / n * dangling)).alias("rank"))
            obs = Observation(f"pr_hand_{i + 1}")
            state = new.observe(obs, dangling_of).localCheckpoint(eager=True)
        state.select("id", F.col("rank").alias("value")).write.mode("overwrite").option("header", True).csv(out_dir)
        E.unpersist()
        return iterations


def run_one(spark, what: str, csv_path: str, partitions: int, source: int) -> dict:
    work = tempfile.mkdtemp(prefix=f"sf-bench-ga-{what.split()[0]}-")
    out_dir = os.path.join(work, "out", "result")
    t = time.perf_counter()
    if what == "pr-hand":
        rounds = pagerank_ldbc_hand(spark, csv_path, out_dir, partitions)
    elif what.startswith("wcc-hand"):
        rounds, _ = bench_cc.cc_delta(spark, csv_path, out_dir, partitions, 1e9, {})
    else:
        rounds = run_kernel(spark, what, csv_path, out_dir, source)
    seconds = time.perf_counter() - t
    got = bench_kernels.read_output(out_dir)
    shutil.rmtree(work, ignore_errors=True)
    return {"seconds": seconds, "rounds": rounds, "got": got}


def references(kernels, arcs, source: int) -> dict:
    import reference as ref

    vertices = sorted({v for a, b, _ in arcs for v in (a, b)})
    edges = [(a, b) for a, b, _ in arcs]
    make = {"bfs": lambda: ref.ga_bfs(vertices, edges, source, False),
            "pr": lambda: ref.ga_pagerank(vertices, edges, 20, 0.85, False),
            "wcc": lambda: ref.ga_wcc(vertices, edges),
            "cdlp": lambda: ref.ga_cdlp(vertices, edges, 10, False),
            "lcc": lambda: ref.ga_lcc(vertices, edges, False),
            "sssp": lambda: ref.ga_sssp(vertices, arcs, source, False)}
    out = {}
    for k in kernels:
        t = time.perf_counter()
        out[k] = {v: float(x) for v, x in make[k]().items()}
        print(f"reference {k}: {time.perf_counter() - t:.1f}s", flush=True)
    return out


def check(kernel: str, got: dict, want: dict, what: str) -> None:
    if kernel in ("pr", "lcc", "sssp"):
        bench_kernels.check(got, want, what, rel=1e-4)
    else:
        bench_kernels.check(got, want, what, rel=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--graph", default="random", choices=sorted(gen_graphs.KERNEL_GRAPHS))
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--no-check", action="store_true", help="skip the plain-Python references (minutes on 1M edges)")
    ap.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    args = ap.parse_args()
    kernels = args.kernels.split(",")
    m = bench_cc.machine()
    m["load_start"] = os.getloadavg()
    csv_path = gen_graphs.ensure_weighted(args.graph)
    arcs = bench_kernels.read_arcs(csv_path)
    degree = collections.Counter(v for a, b, _ in arcs if a != b for v in (a, b))
    top = max(degree.values())
    source = min(v for v, d in degree.items() if d == top)
    n = len({v for a, b, _ in arcs for v in (a, b)})
    refs = {} if args.no_check else references(kernels, arcs, source)

    from scopeflow.runtime.session import build_session

    conf = {"spark.sql.shuffle.partitions": str(args.partitions), "spark.default.parallelism": str(args.partitions),
            "spark.driver.memory": args.driver_memory, "spark.sql.ui.retainedExecutions": "20"}
    spark = build_session("scopeflow-bench-graphalytics", conf=conf)
    order = [w for k in kernels for w in ([k, HAND[k]] if k in HAND else [k])]
    results: dict = {}
    for rep in range(-1, args.repeats):  # -1: the untimed warm-up
        for what in order:
            kernel = what.split("-")[0]
            res = run_one(spark, what, csv_path, args.partitions, source)
            got = res.pop("got")
            if kernel in refs:
                check(kernel, got, refs[kernel], f"{what} on {args.graph}")
            label = "warm-up" if rep < 0 else f"run {rep + 1}/{args.repeats}"
            print(f"{label} {what:20s} {res['seconds']:8.2f}s {res['rounds']:4d} rounds  load {os.getloadavg()[0]:.1f}",
                  flush=True)
            if rep >= 0:
                results.setdefault(what, []).append(res)
    spark.stop()
    m["load_end"] = os.getloadavg()

    lines = ["| kernel | contender | rounds | best s | median s | runs (s) | s/round (median) | / hand-written (median) |",
             "|---|---|---|---|---|---|---|---|"]
    for what in order:
        runs = results[what]
        secs = [r["seconds"] for r in runs]
        rounds = max(r["rounds"] for r in runs)
        kernel = what.split("-")[0]
        ratio = ""
        if what in KERNELS and kernel in HAND and HAND[kernel] in results:
            ratio = f"{statistics.median(secs) / statistics.median(r['seconds'] for r in results[HAND[kernel]]):.2f}x"
        per_round = f"{statistics.median(secs) / rounds:.3f}" if rounds else "(no loop)"
        contender = "stdlib:graphalytics" if what in KERNELS else "hand-written"
        lines.append(f"| {kernel} | {contender} | {rounds} | {bench_cc.fmt_s(min(secs))} | "
                     f"{bench_cc.fmt_s(statistics.median(secs))} | {', '.join(bench_cc.fmt_s(s) for s in secs)} | "
                     f"{per_round} | {ratio} |")
    table = "\n".join(lines)
    print("\n" + table)
    if not args.no_write:
        text = f"""## LDBC Graphalytics kernels (bench_graphalytics.py)

Generated by `benchmarks/bench_graphalytics.py` on {datetime.date.today().isoformat()}, scopeflow at commit
{m['commit']}; {m['cores']} cores, local mode, {args.partitions} shuffle partitions, one session; load average
{', '.join(f'{x:.1f}' for x in m['load_start'])} at the start, {', '.join(f'{x:.1f}' for x in m['load_end'])} at the end.
Graph: `{args.graph}` of gen_graphs.py read as undirected ({len(arcs):,} edges, {n:,} vertices); BFS and SSSP
from vertex {source} (the largest degree). PR: 20 iterations, damping 0.85; CDLP: 10 iterations. One untimed
warm-up, then {args.repeats} runs; wall time of the whole run (read the CSV, compute, write the CSV).
{'Outputs not checked (--no-check).' if args.no_check else "Every output equals tests/reference.py's plain-Python implementation of LDBC's spec (exact; PR, LCC, SSSP relative 1e-4)."}
Hand-written: `pagerank_ldbc_hand` in the script; WCC: bench_cc.py's `cc_delta` (min-label propagation).

{table}
"""
        bench_kernels.write_section(text, SECTION_BEGIN, SECTION_END)
        print(f"wrote the section in {bench_cc.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
