"""SSSP and PageRank: scopeflow's stdlib kernels vs the best hand-written PySpark, side by side.

Both contenders run in ONE SparkSession (bench_cc's settings: scopeflow's `build_session`,
`spark.sql.shuffle.partitions` = `--partitions`), read the same weighted CSV (`src,dst,w`) and write
the same CSV output (a header, then one row per vertex), interleaved (A, B, A, B, ...):

- ``scopeflow``: a four-line pipeline calling `stdlib:graph`'s `sssp` or `pagerank` (20 rounds);
- ``hand``: the best hand-written PySpark loop we could write for the same algorithm (see
  `sssp_hand` and `pagerank_hand` for the tricks: bench_cc's `cc_delta`'s, applied to each).

Graphs (gen_graphs.py, generated on first use, not committed): ``random`` (1M arcs, random
orientation), ``rmat`` (1M R-MAT arcs, power law) and ``chain`` (128 cliques of 13 in a row; SSSP
from one end needs 255+ rounds). SSSP starts from vertex 1 on the chain and from the vertex with
the most arcs out elsewhere. Every output is checked against an independent reference
(networkx's Dijkstra; a plain-Python PageRank of the same formula, tests/reference.py) and so
against the other contender. The table goes to stdout and into benchmarks/RESULTS.md (its own
section, between the markers below; bench_cc.py keeps it).

    .venv/bin/python benchmarks/bench_kernels.py [--repeats 3] [--partitions 4]
            [--graphs random,rmat,chain] [--kernels sssp,pagerank] [--no-write] [--json FILE]
"""
from __future__ import annotations

import argparse
import collections
import csv
import datetime
import glob
import json
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
import gen_graphs  # noqa: E402

KERNELS = ("sssp", "pagerank")
CONTENDERS = ("scopeflow", "hand")
ITERATIONS = 20
SECTION_BEGIN = "<!-- bench_kernels.py: begin (rewritten by each run) -->"
SECTION_END = "<!-- bench_kernels.py: end -->"

FLOWS = {
    "sssp": """pipeline bench_sssp
from "stdlib:graph" import sssp
param edges_path: string = "data/graph.csv"
param source: long = 1
source edges = read csv(edges_path, header = true) schema (src: long, dst: long, w: double)
sink edges | sssp(source) -> csv("out/result", header = true)
""",
    "pagerank": """pipeline bench_pagerank
from "stdlib:graph" import pagerank
param edges_path: string = "data/graph.csv"
param iterations: long = 20
source edges = read csv(edges_path, header = true) schema (src: long, dst: long, w: double)
links    = edges | select(src, dst)
vertices = links | select(id = src) | union(links | select(id = dst)) | group(by id)
sink vertices | pagerank(links, iterations) -> csv("out/result", header = true)
""",
}


# ---- the contenders ---------------------------------------------------------------------------------
# Each takes (spark, kernel, csv_path, out_dir, partitions, params) and returns the number of rounds; it
# reads the CSV, runs the kernel and writes out_dir as CSV (header id,<value>). Time is measured outside.


def run_scopeflow(spark, kernel: str, csv_path: str, out_dir: str, partitions: int, params: dict) -> int:
    from scopeflow.api import run_file

    work = os.path.dirname(os.path.dirname(out_dir))
    flow = os.path.join(work, "pipeline.flow")
    with open(flow, "w", encoding="utf-8") as fh:
        fh.write(FLOWS[kernel])
    job = run_file(flow, spark=spark, params={"edges_path": csv_path, **{k: str(v) for k, v in params.items()}})
    produced = os.path.join(work, "out", "result")
    if os.path.abspath(produced) != os.path.abspath(out_dir):
        shutil.move(produced, out_dir)
    return len(job.report["rounds"])


def _read_arcs(spark, csv_path: str):
    return spark.read.schema("src long, dst long, w double").option("header", True).csv(csv_path)


def sssp_hand(spark, csv_path: str, out_dir: str, partitions: int, source: int) -> int:
    """Bellman-Ford that only relaxes the arcs out of vertices whose distance fell last round.

    bench_cc's `cc_delta`, with distances for labels: the arcs are hash-partitioned by `src` into P
    partitions, sorted and cached once; the state (id, dist, changed) holds every vertex (distance
    +inf until reached), hash-partitioned by id into the same P partitions and sorted by id, so the
    join "changed vertices x arcs" neither shuffles nor sorts. Messages are pre-aggregated (min)
    before the round's one shuffle; the new state is `state LEFT JOIN candidates` (no shuffle, keeps
    the order); `localCheckpoint(eager=True)` runs the round as one Spark job and cuts the lineage;
    the number of changed vertices comes from an `Observation` on that same job. AQE and broadcast
    joins are off (they would re-plan or break the co-partitioning). The arcs are cached with
    `persist()`'s default level, MEMORY_AND_DISK_DESER, as scopeflow caches a loop's imports
    (`cc_delta` asks for StorageLevel.MEMORY_AND_DISK, which PySpark stores serialized).
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    P = partitions
    with bench_cc.loop_settings(spark):
        arcs = _read_arcs(spark, csv_path)
        A = arcs.repartition(P, "src").sortWithinPartitions("src").persist()  # (deserialized, as scopeflow's)
        ids = A.select(F.col("src").alias("id")).unionByName(A.select(F.col("dst").alias("id"))).distinct()
        is_source = F.col("id") == F.lit(source)
        state = (ids.select("id", F.when(is_source, F.lit(0.0)).otherwise(F.lit(math.inf)).alias("dist"),
                            is_source.alias("changed"))
                 .sortWithinPartitions("id").localCheckpoint(eager=True))
        rounds = 0
        while True:
            frontier = state.where(F.col("changed")).select("id", "dist")
            msgs = frontier.join(A, frontier["id"] == A["src"]).select(
                A["dst"].alias("id"), (frontier["dist"] + A["w"]).alias("d"))
            cand = msgs.groupBy("id").agg(F.min("d").alias("cand"))
            new = state.join(cand, "id", "left").select(
                "id",
                F.least(F.col("dist"), F.coalesce(F.col("cand"), F.col("dist"))).alias("dist"),
                F.coalesce(F.col("cand") < F.col("dist"), F.lit(False)).alias("changed"))
            obs = Observation(f"sssp_hand_{rounds}")
            state = new.observe(obs, F.sum(F.col("changed").cast("long")).alias("n")).localCheckpoint(eager=True)
            rounds += 1
            if not obs.get["n"]:
                break
        (state.where(F.col("dist") < F.lit(math.inf)).select("id", "dist")
         .write.mode("overwrite").option("header", True).csv(out_dir))
        A.unpersist()
        return rounds


def pagerank_hand(spark, csv_path: str, out_dir: str, partitions: int, iterations: int) -> int:
    """stdlib's PageRank formula (rank 1.0 to start, then `0.15 + 0.85 * sum(rank(u) / outdeg(u))`
    over the links u -> v, `iterations` times; a vertex no link reaches drops out), hand-written.

    The links with their source's out-degree are hash-partitioned by `src`, sorted and cached once;
    the ranks are hash-partitioned by id into the same P partitions (the `groupBy` of each round puts
    them there) and sorted, so "ranks x links" joins without a shuffle; the round's one shuffle is
    the partially aggregated sum by destination. One Spark job per round (`localCheckpoint(eager)`:
    constant plan size); `bench_cc.LOOP_SETTINGS` and the links cached deserialized, as in `sssp_hand`.
    (Spark drops the `repartition` and the sort: the join with the degrees leaves the links partitioned
    and sorted by `src` already.)
    """
    from pyspark.sql import functions as F

    P = partitions
    with bench_cc.loop_settings(spark):
        links = _read_arcs(spark, csv_path).select("src", "dst")
        deg = links.groupBy("src").agg(F.count(F.lit(1)).alias("out_degree"))
        E = links.join(deg, "src").repartition(P, "src").sortWithinPartitions("src").persist()
        ids = links.select(F.col("src").alias("id")).unionByName(links.select(F.col("dst").alias("id"))).distinct()
        ranks = ids.select("id", F.lit(1.0).alias("rank")).sortWithinPartitions("id").localCheckpoint(eager=True)
        for _ in range(iterations):
            contrib = ranks.join(E, ranks["id"] == E["src"]).select(
                E["dst"].alias("id"), (ranks["rank"] / E["out_degree"]).alias("c"))
            ranks = (contrib.groupBy("id").agg(F.sum("c").alias("s"))
                     .select("id", (F.lit(0.15) + F.lit(0.85) * F.col("s")).alias("rank"))
                     .sortWithinPartitions("id").localCheckpoint(eager=True))
        ranks.write.mode("overwrite").option("header", True).csv(out_dir)
        E.unpersist()
        return iterations


def run_hand(spark, kernel: str, csv_path: str, out_dir: str, partitions: int, params: dict) -> int:
    if kernel == "sssp":
        return sssp_hand(spark, csv_path, out_dir, partitions, params["source"])
    return pagerank_hand(spark, csv_path, out_dir, partitions, params["iterations"])


RUNNERS = {"scopeflow": run_scopeflow, "hand": run_hand}


# ---- inputs, references, checking -------------------------------------------------------------------


def read_arcs(path: str) -> list[tuple[int, int, float]]:
    with open(path, newline="") as fh:
        r = csv.reader(fh)
        next(r)
        return [(int(a), int(b), float(w)) for a, b, w in r]


def sssp_source(name: str, arcs) -> int:
    """Vertex 1 on the chain (one end); elsewhere the vertex with the most arcs out (the smallest id of
    those), so the search reaches most of the graph."""
    if name == "chain":
        return 1
    out = collections.Counter(a for a, _, _ in arcs)
    top = max(out.values())
    return min(v for v, n in out.items() if n == top)


def reference(kernel: str, arcs, params: dict) -> dict:
    import reference as ref  # tests/reference.py: networkx and plain Python, independent of scopeflow

    if kernel == "sssp":
        return ref.sssp(arcs, params["source"])
    links = [(a, b) for a, b, _ in arcs]
    vertices = {v for e in links for v in e}
    return ref.pagerank_fixed(vertices, links, params["iterations"])


def read_output(out_dir: str) -> dict:
    rows: dict = {}
    for part in sorted(glob.glob(os.path.join(out_dir, "part-*"))):
        with open(part, newline="") as fh:
            r = csv.reader(fh)
            if next(r, None) is None:
                continue
            for a, b in r:
                if int(a) in rows:
                    raise AssertionError(f"{out_dir}: vertex {a} twice")
                rows[int(a)] = float(b)
    return rows


def check(got: dict, want: dict, what: str, rel: float = 1e-9) -> None:
    """Same vertices, values equal up to `rel` (the contenders and the reference add in other orders)."""
    if got.keys() != want.keys():
        extra, missing = sorted(got.keys() - want.keys())[:5], sorted(want.keys() - got.keys())[:5]
        raise AssertionError(f"{what}: {len(got)} vertices, want {len(want)} (extra {extra}, missing {missing})")
    bad = [v for v, x in want.items() if not math.isclose(got[v], x, rel_tol=rel, abs_tol=1e-12)]
    if bad:
        v = bad[0]
        raise AssertionError(f"{what}: {len(bad)} values differ, e.g. vertex {v}: {got[v]} != {want[v]}")


def run_one(spark, contender: str, kernel: str, csv_path: str, partitions: int, params: dict) -> dict:
    work = tempfile.mkdtemp(prefix=f"sf-bench-{kernel}-{contender}-")
    out_dir = os.path.join(work, "out", "result")
    first = bench_cc.next_job_id(spark)
    t = time.perf_counter()
    rounds = RUNNERS[contender](spark, kernel, csv_path, out_dir, partitions, params)
    seconds = time.perf_counter() - t
    jobs = bench_cc.spark_jobs_between(spark, first, bench_cc.next_job_id(spark) - 1)
    got = read_output(out_dir)
    shutil.rmtree(work, ignore_errors=True)
    return {"seconds": seconds, "rounds": rounds, "jobs": len(jobs), "tasks": sum(j["tasks"] for j in jobs),
            "got": got}


# ---- summary ----------------------------------------------------------------------------------------


def summarise(results: dict, graphs: list, kernels: list) -> tuple[str, dict]:
    """results[(graph, kernel, contender)] = [run, ...] -> a Markdown table and
    {(graph, kernel): (best ratio, median ratio)} of scopeflow over hand."""
    lines = ["| graph | kernel | contender | rounds | best s | median s | runs (s) | s/round (median) | "
             "Spark jobs | tasks |", "|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict = {}
    for g in graphs:
        for k in kernels:
            for c in CONTENDERS:
                runs = results.get((g, k, c))
                if not runs:
                    continue
                secs = [r["seconds"] for r in runs]
                rounds = sorted({r["rounds"] for r in runs})
                med = statistics.median(secs)
                lines.append(f"| {g} | {k} | {c} | {'/'.join(map(str, rounds))} | {bench_cc.fmt_s(min(secs))} | "
                             f"{bench_cc.fmt_s(med)} | {', '.join(bench_cc.fmt_s(s) for s in secs)} | "
                             f"{med / max(1, rounds[-1]):.3f} | {runs[-1]['jobs']} | {runs[-1]['tasks']} |")
            ours, theirs = results.get((g, k, "scopeflow")), results.get((g, k, "hand"))
            if ours and theirs:
                a = [r["seconds"] for r in ours]
                b = [r["seconds"] for r in theirs]
                ratios[(g, k)] = (min(a) / min(b), statistics.median(a) / statistics.median(b))
    out = ["", "| graph | kernel | scopeflow / hand (best) | scopeflow / hand (median) |", "|---|---|---|---|"]
    out += [f"| {g} | {k} | {b:.2f}x | {m:.2f}x |" for (g, k), (b, m) in ratios.items()]
    return "\n".join(lines + out), ratios


def provenance(partitions: int, repeats: int) -> str:
    """How a one-session benchmark ran, for its RESULTS.md section: date, commit, machine, load."""
    m = bench_cc.machine()
    dirty = " (dirty)" if m["dirty"] else ""
    return (f"{datetime.date.today()}, commit {m['commit']}{dirty}, {m['cores']} cores, local mode, {partitions} "
            f"shuffle partitions, one session, interleaved, warm-up then median of {repeats}; load average at the "
            f"end {m['load'][0]:.1f}.")


def publish(table: str, title: str, note: str, args, partitions: int, begin: str, end: str) -> None:
    """The end of a one-session benchmark: print its table and, unless `--no-write`, put it in RESULTS.md as
    section `title` (between `begin` and `end`), after its provenance and `note`."""
    print(table)
    if not args.no_write:
        write_section(f"### {title}\n\n{provenance(partitions, args.repeats)} {note}\n\n{table}\n", begin, end)


def write_section(text: str, begin: str = SECTION_BEGIN, end: str = SECTION_END) -> None:
    """Put `text` between the markers `begin` and `end` in RESULTS.md (appended, after bench_cc's notes
    mark, the first time), leaving the rest of the file as it is."""
    with open(bench_cc.RESULTS, encoding="utf-8") as fh:
        old = fh.read()
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        if bench_cc.NOTES_MARK not in old:
            old += f"\n{bench_cc.NOTES_MARK}\n"
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    with open(bench_cc.RESULTS, "w", encoding="utf-8") as fh:
        fh.write(new)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--graphs", default=",".join(gen_graphs.KERNEL_GRAPHS))
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--iterations", type=int, default=ITERATIONS, help="PageRank's rounds")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    ap.add_argument("--json", help="also dump raw timings to this JSON file")
    args = ap.parse_args()
    graphs, kernels = args.graphs.split(","), args.kernels.split(",")

    m = bench_cc.machine()
    m["load_start"] = os.getloadavg()
    inputs, params, refs, info = {}, {}, {}, {}
    for g in graphs:
        inputs[g] = gen_graphs.ensure_weighted(g)
        arcs = read_arcs(inputs[g])
        n = len({v for a, b, _ in arcs for v in (a, b)})
        params[g] = {"sssp": {"source": sssp_source(g, arcs)}, "pagerank": {"iterations": args.iterations}}
        for k in kernels:
            t = time.perf_counter()
            refs[(g, k)] = reference(k, arcs, params[g][k])
            print(f"reference {k} on {g}: {time.perf_counter() - t:.1f}s", flush=True)
        info[g] = (f"{len(arcs):,} arcs, {n:,} vertices; SSSP from {params[g]['sssp']['source']} reaches "
                   f"{len(refs.get((g, 'sssp'), {})):,}" if "sssp" in kernels else f"{len(arcs):,} arcs, {n:,} vertices")
        print(f"graph {g}: {info[g]}", flush=True)

    from scopeflow.runtime.session import build_session

    conf = {"spark.sql.shuffle.partitions": str(args.partitions), "spark.default.parallelism": str(args.partitions),
            "spark.driver.memory": args.driver_memory, "spark.sql.ui.retainedExecutions": "20"}
    spark = build_session("scopeflow-bench-kernels", conf=conf)

    def measured(c, g, k, label):
        res = run_one(spark, c, k, inputs[g], args.partitions, params[g][k])
        check(res.pop("got"), refs[(g, k)], f"{c} {k} on {g}")
        print(f"{label} {g:6s} {k:8s} {c:9s} {res['seconds']:8.2f}s {res['rounds']:4d} rounds "
              f"{res['jobs']:5d} jobs {res['tasks']:6d} tasks  load {os.getloadavg()[0]:.1f}", flush=True)
        return res

    for g in graphs:  # warm-up: the first run on a graph is slower for everyone (heap, JIT): untimed
        for k in kernels:
            for c in CONTENDERS:
                measured(c, g, k, "warm-up")
    results: dict = {}
    for rep in range(args.repeats):
        for g in graphs:
            for k in kernels:
                for c in CONTENDERS:
                    results.setdefault((g, k, c), []).append(measured(c, g, k, f"run {rep + 1}/{args.repeats}"))
    spark.stop()
    m["load_end"] = os.getloadavg()

    table, _ = summarise(results, graphs, kernels)
    print("\n" + table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"/".join(key): runs for key, runs in results.items()}, fh, indent=1)
    if not args.no_write:
        graphs_md = "\n".join(f"- `{g}`: {v} ({os.path.relpath(inputs[g], ROOT)})" for g, v in info.items())
        write_section(f"""## SSSP and PageRank against hand-written PySpark (bench_kernels.py)

Generated by `benchmarks/bench_kernels.py` on {datetime.date.today().isoformat()}, scopeflow at commit
{m['commit']}{' (uncommitted changes in runtime/ or compiler/)' if m['dirty'] else ''}; {m['cores']} cores, local mode,
{args.partitions} shuffle partitions, one session for both contenders, interleaved; load average
{', '.join(f'{x:.1f}' for x in m['load_start'])} at the start, {', '.join(f'{x:.1f}' for x in m['load_end'])} at the end.
One untimed warm-up run of each, then {args.repeats} measured runs; wall time of the whole run (read the CSV,
iterate, write the CSV). Every output equals the reference (networkx's Dijkstra; plain-Python PageRank,
relative 1e-9). `hand` is `sssp_hand` / `pagerank_hand` in the script. PageRank: {args.iterations} rounds.

Graphs (gen_graphs.py, weighted arcs `src,dst,w`):

{graphs_md}

{table}
""")
        print(f"wrote the section in {bench_cc.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
