"""Connected components: scopeflow vs hand-written PySpark (delta iteration) vs a naive driver loop.

All four contenders run in ONE SparkSession (scopeflow's `build_session`, the
same settings for everyone, `spark.sql.shuffle.partitions` = `--partitions`),
read the same CSV and write the same CSV output (id,label with a header), so
they do the same end-to-end work:

- ``scopeflow``: `run_file("examples/connected_components.flow")` (a copy in a
  temp dir so the sink lands there), `edges_path` pointed at the graph: min-label propagation,
  the textbook program (as stdlib's `min_label_components`);
- ``stdlib``: `stdlib:graph`'s `connected_components` (up to 16 rounds of min-label, then
  large-star / small-star over the labels still apart: O(log n) rounds);
- ``delta``: the best hand-written delta iteration we could write in plain
  PySpark (see `cc_delta` for the tricks);
- ``naive``: a typical driver loop: full recompute of every label each round,
  `cache()` but no lineage truncation, a `count()` of changed labels per round.

The graphs come from gen_graphs.py (``random``: ~1M edges / 200k vertices; ``rmat``: 1M R-MAT arcs, power law,
bench_kernels' graph unweighted; ``path``: a 400-vertex path with trees attached, ~50k edges, 400+ rounds).
Contenders run interleaved (A, B, C, A, B, C, ...) so that the noise of a
shared machine hits all of them alike. Every output is checked against a
reference (networkx for the path graph, a union-find for the others) and
against the other contenders. The results table goes to stdout and to
benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/bench_cc.py [--repeats 2] [--partitions 4] [--graphs random,rmat,path]
                                            [--naive-limit 900] [--profile] [--no-graph-warmup]
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import glob
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_graphs  # noqa: E402

CC_FLOW = os.path.join(ROOT, "examples", "connected_components.flow")
RESULTS = os.path.join(HERE, "RESULTS.md")
NOTES_MARK = "<!-- notes: kept when bench_cc.py rewrites this file -->"
CONTENDERS = ("scopeflow", "stdlib", "delta", "naive")
STDLIB_FLOW = """pipeline stdlib_connected_components
from "stdlib:graph" import connected_components
param edges_path: string = "data/graph.csv"
source edges = read csv(edges_path, header = true) schema (src: long, dst: long)
sink edges | connected_components() -> csv("out/components", header = true)
"""


# ---- the contenders -------------------------------------------------------------------------------
# Each takes (spark, edges_csv, out_dir, partitions, limit_s) and returns (rounds, stopped): it reads the
# CSV, runs connected components and writes `out_dir` as CSV (id,label, header). Time is measured outside.


def _run_flow(spark, text: str, edges_csv: str, out_dir: str):
    """Run the pipeline `text` (its sink: out/components) from WORK (out_dir is WORK/out/components, where the
    sink lands) with `edges_path` pointed at the graph; return its job."""
    from scopeflow.api import run_file

    work = os.path.dirname(os.path.dirname(out_dir))
    flow = os.path.join(work, "pipeline.flow")
    with open(flow, "w") as fh:
        fh.write(text)
    job = run_file(flow, spark=spark, params={"edges_path": edges_csv})
    produced = os.path.join(work, "out", "components")
    if os.path.abspath(produced) != os.path.abspath(out_dir):
        shutil.move(produced, out_dir)
    return job


def cc_scopeflow(spark, edges_csv: str, out_dir: str, partitions: int, limit_s: float, info: dict):
    with open(CC_FLOW, encoding="utf-8") as fh:
        job = _run_flow(spark, fh.read(), edges_csv, out_dir)
    rounds = [r for r in job.report["rounds"] if r["scope"] == "cc"]
    info["report_rounds"] = rounds
    info["loops"] = job.report["loops"]
    info["snapshots"] = len(job.report.get("snapshots") or [])
    return len(rounds), False


def cc_stdlib(spark, edges_csv: str, out_dir: str, partitions: int, limit_s: float, info: dict):
    """`stdlib:graph`'s connected_components: up to 16 rounds of min-label propagation, then
    large-star / small-star over the labels still apart (O(log n) rounds). Its rounds: both loops'."""
    job = _run_flow(spark, STDLIB_FLOW, edges_csv, out_dir)
    info["report_rounds"] = job.report["rounds"]
    return len(job.report["rounds"]), False


# The settings of scopeflow's loops (runtime/context.py's LOOP_CONF, with its values) that a careful hand-written
# loop would set too, less its counter and UI settings: the same planning for both contenders.
LOOP_SETTINGS = ("spark.sql.adaptive.enabled", "spark.sql.autoBroadcastJoinThreshold",
                 "spark.sql.constraintPropagation.enabled")


@contextlib.contextmanager
def loop_settings(spark):
    """AQE, auto-broadcast and constraint propagation off while iterating (scopeflow's own values inside
    loops), then restored."""
    from scopeflow.runtime.context import LOOP_CONF

    saved = {k: spark.conf.get(k, None) for k in LOOP_SETTINGS}
    for k in LOOP_SETTINGS:
        spark.conf.set(k, LOOP_CONF[k])
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _read_edges(spark, edges_csv: str):
    return spark.read.schema("src long, dst long").option("header", True).csv(edges_csv)


def cc_delta(spark, edges_csv: str, out_dir: str, partitions: int, limit_s: float, info: dict):
    """Hand-written delta iteration (min-label propagation that only propagates changed vertices).

    Tricks, all plain PySpark:
    1. The symmetric edge list is hash-partitioned by `src` into P partitions, sorted within each
       partition and cached once. The state (id, label, changed) is kept hash-partitioned by `id`
       into the same P partitions and sorted by `id`; `localCheckpoint` keeps both the partitioning
       and the ordering. So the join "changed vertices x edges" is a sort-merge join that neither
       shuffles nor sorts either side.
    2. Messages (dst, label) are pre-aggregated (min) before the only shuffle of the round (Spark's
       partial aggregation), so at most one record per destination and map partition moves.
    3. The new state is `state LEFT JOIN candidates`: the state side again needs no shuffle and no
       sort (the join output keeps the state's order), so the next round's state is partitioned and
       sorted for free. One pass computes the new label and the `changed` flag together.
    4. One Spark job per round: `localCheckpoint(eager=True)` materialises the new state and cuts the
       lineage (constant plan size and planning time per round); the number of changed vertices, which
       decides termination, is an `Observation` collected by that same job (no extra count job).
    5. AQE and broadcast joins are off: AQE would re-plan each shuffle stage as a separate job and
       could coalesce partitions (breaking the co-partitioning); a broadcast would be another job and
       would not keep the partitioning the next round relies on.
    6. The previous round's state is dropped as soon as the next one exists (the ContextCleaner frees
       its blocks); edges are unpersisted at the end.
    """
    from pyspark import StorageLevel
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    P = partitions
    started = time.perf_counter()
    with loop_settings(spark):
        edges = _read_edges(spark, edges_csv)
        both = edges.unionByName(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
        E = both.repartition(P, "src").sortWithinPartitions("src").persist(StorageLevel.MEMORY_AND_DISK)
        # Initial state: every vertex labelled with itself, all "changed". `src` is already clustered in
        # E, so the distinct needs no shuffle; renaming keeps the partitioning.
        state = (E.select(F.col("src").alias("id")).distinct()
                 .select("id", F.col("id").alias("label"), F.lit(True).alias("changed"))
                 .sortWithinPartitions("id")
                 .localCheckpoint(eager=True))
        rounds, stopped = 0, False
        while True:
            changed = state.where(F.col("changed")).select("id", "label")
            msgs = changed.join(E, changed["id"] == E["src"]).select(E["dst"].alias("id"), changed["label"])
            cand = msgs.groupBy("id").agg(F.min("label").alias("cand"))
            new = state.join(cand, "id", "left").select(
                "id",
                F.least(F.col("label"), F.coalesce(F.col("cand"), F.col("label"))).alias("label"),
                F.coalesce(F.col("cand") < F.col("label"), F.lit(False)).alias("changed"))
            obs = Observation(f"cc_delta_{rounds}")
            state = new.observe(obs, F.sum(F.col("changed").cast("long")).alias("n")).localCheckpoint(eager=True)
            rounds += 1
            n_changed = obs.get["n"] or 0
            if n_changed == 0:
                break
            if time.perf_counter() - started > limit_s:
                stopped = True
                break
        state.select("id", "label").write.mode("overwrite").option("header", True).csv(out_dir)
        E.unpersist()
        return rounds, stopped


def cc_naive(spark, edges_csv: str, out_dir: str, partitions: int, limit_s: float, info: dict):
    """A naive driver loop: every round recomputes every label from all its neighbours' labels.

    Each round's labels are cached (the frame two rounds back is unpersisted), but the lineage is never
    cut: each round's plan contains all earlier rounds, so planning time grows with the round count.
    Termination: a `count()` of the labels that changed (a second job per round).

    Each vertex gets a self-loop, so `min over the neighbours' labels` includes its own label and the
    previous labels appear only ONCE in a round's plan. (The first, more obvious version — join the
    old labels with the neighbours' minimum and count the differences against the old labels —
    references the previous round two or three times, so its plan tree grows exponentially: it ran out
    of driver memory building plan strings after ~14 rounds on the 31-edge example graph.)

    It runs with the same loop settings as the other two (AQE and auto-broadcast off). With Spark's
    defaults (AQE on) the nested cached plans make every round's planning time grow much faster than
    the plan: on the 31-edge example the 12th round's count took 41 s with AQE on, 2.4 s with AQE off.
    """
    with loop_settings(spark):
        return _cc_naive(spark, edges_csv, out_dir, limit_s, info)


def _cc_naive(spark, edges_csv: str, out_dir: str, limit_s: float, info: dict):
    from pyspark.sql import functions as F

    started = time.perf_counter()
    edges = _read_edges(spark, edges_csv)
    both = edges.unionByName(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
    vertices = both.select(F.col("src").alias("id")).distinct()
    adj = both.unionByName(vertices.select(F.col("id").alias("src"), F.col("id").alias("dst"))).cache()
    labels = vertices.select("id", F.col("id").alias("label")).cache()
    older = None
    rounds, stopped = 0, False
    while True:
        new = (labels.alias("l").join(adj.alias("e"), F.col("l.id") == F.col("e.src"))
               .select(F.col("e.dst").alias("id"), F.col("l.label"),
                       F.when(F.col("e.src") == F.col("e.dst"), F.col("l.label")).alias("old"))
               .groupBy("id").agg(F.min("label").alias("label"), F.max("old").alias("old"))
               .cache())
        changes = new.where(F.col("label") != F.col("old")).count()
        rounds += 1
        info["rounds"] = rounds
        if older is not None:
            older.unpersist()
        older, labels = labels, new
        if changes == 0:
            break
        if time.perf_counter() - started > limit_s:
            stopped = True
            break
    labels.select("id", "label").write.mode("overwrite").option("header", True).csv(out_dir)
    for df in (labels, older, adj):
        if df is not None:
            df.unpersist()
    return rounds, stopped


RUNNERS = {"scopeflow": cc_scopeflow, "stdlib": cc_stdlib, "delta": cc_delta, "naive": cc_naive}


# ---- checking -----------------------------------------------------------------------------------------


def read_edges(path: str) -> list[tuple[int, int]]:
    with open(path, newline="") as fh:
        r = csv.reader(fh)
        next(r)
        return [(int(a), int(b)) for a, b in r]


def reference_networkx(edges) -> set:
    import networkx as nx

    g = nx.Graph()
    g.add_edges_from(edges)
    out = set()
    for comp in nx.connected_components(g):
        low = min(comp)
        out.update((v, low) for v in comp)
    return out


def reference_union_find(edges) -> set:
    parent: dict[int, int] = {}

    def find(x):
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb
    return {(v, find(v)) for v in parent}  # the root is the component's minimum (smaller root wins)


def read_output(out_dir: str) -> list[tuple[int, int]]:
    rows = []
    for part in sorted(glob.glob(os.path.join(out_dir, "part-*"))):
        with open(part, newline="") as fh:
            r = csv.reader(fh)
            header = next(r, None)
            if header is None:
                continue
            if header != ["id", "label"]:
                raise AssertionError(f"{part}: header {header}")
            rows += [(int(a), int(b)) for a, b in r]
    return rows


# ---- measurement ----------------------------------------------------------------------------------------


def spark_jobs_between(spark, first_job: int, last_job: int) -> list[dict]:
    """Submission/completion of the Spark jobs with ids in [first_job, last_job] (from the status store)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    it = jobs.iterator()
    out = []
    while it.hasNext():
        j = it.next()
        jid = j.jobId()
        if first_job <= jid <= last_job:
            sub, done = j.submissionTime(), j.completionTime()
            if sub.isDefined() and done.isDefined():
                out.append({"job": jid, "start": sub.get().getTime() / 1000.0, "end": done.get().getTime() / 1000.0,
                            "tasks": j.numTasks(), "stages": j.stageIds().size()})
    return sorted(out, key=lambda x: x["job"])


def next_job_id(spark) -> int:
    """The id the next Spark job will get (job ids are consecutive)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    it = jobs.iterator()
    top = -1
    while it.hasNext():
        top = max(top, it.next().jobId())
    return top + 1


def describe_error(exc: Exception) -> str:
    """The first line of an error, with the Java exception behind a Py4J error (e.g. the naive loop's
    `java.lang.StackOverflowError`: its plans grow with every round)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = f"{(java.toString().splitlines() or [''])[0]} ({text.rstrip(': ')})"
        except Exception:  # noqa: BLE001 - the JVM may be gone: keep Python's first line
            pass
    return text[:200]


def run_one(spark, contender: str, edges_csv: str, partitions: int, limit_s: float, with_jobs: bool = False):
    work = tempfile.mkdtemp(prefix=f"sf-bench-{contender}-")
    out_dir = os.path.join(work, "out", "components")
    info: dict = {}
    first = next_job_id(spark) if with_jobs else None
    t = time.perf_counter()
    error = None
    try:
        rounds, stopped = RUNNERS[contender](spark, edges_csv, out_dir, partitions, limit_s, info)
    except Exception as exc:  # noqa: BLE001 - e.g. the naive loop running out of driver memory: report, go on
        if contender != "naive":
            raise
        error = describe_error(exc)
        rounds, stopped = info.get("rounds", 0), True
    seconds = time.perf_counter() - t
    if with_jobs:
        info["jobs"] = spark_jobs_between(spark, first, next_job_id(spark) - 1)
    rows = read_output(out_dir) if error is None else []
    shutil.rmtree(work, ignore_errors=True)
    return {"seconds": seconds, "rounds": rounds, "stopped": stopped, "rows": rows, "info": info, "error": error}


def machine() -> dict:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as fh:
            kb = int(next(ln.split()[1] for ln in fh if ln.startswith("MemTotal")))
            mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "runtime", "compiler"],
                           capture_output=True, text=True).stdout.strip()
    import pyspark

    return {"cores": os.cpu_count(), "cpu": cpu, "memory": mem, "os": platform.platform(),
            "python": platform.python_version(), "pyspark": pyspark.__version__,
            "java": java[0] if java else "?", "commit": commit.strip(), "dirty": bool(dirty),
            "load": os.getloadavg()}


def fmt_s(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def summarise(results: dict, graphs: list, contenders: list) -> tuple[str, dict]:
    lines = ["| graph | contender | rounds | best s | median s | runs (s) | s/round (best) |",
             "|---|---|---|---|---|---|---|"]
    done: dict = {"best": {}, "median": {}}  # (graph, contender) -> seconds, where every run finished
    # (graph, contender) -> seconds a contender took at least, where runs stopped or failed: each would
    # have taken longer than it ran (the median only when none finished)
    bound: dict = {"best": {}, "median": {}}
    for g in graphs:
        for c in contenders:
            runs = results.get((g, c), [])
            if not runs:
                continue
            secs = [r["seconds"] for r in runs]
            stopped = [r for r in runs if r["stopped"]]
            rounds = runs[0]["rounds"]
            b, m = min(secs), statistics.median(secs)
            if stopped:
                stopped_secs = [r["seconds"] for r in stopped]
                bound["best"][(g, c)] = min(stopped_secs)
                if len(stopped) == len(runs):
                    bound["median"][(g, c)] = statistics.median(stopped_secs)
                n = max(r["rounds"] for r in stopped)
                lo = min(r["rounds"] for r in stopped)
                span = str(n) if lo == n else f"{lo}-{n}"
                failed = [r["error"] for r in stopped if r.get("error")]
                how = f"failed after {span} rounds: {failed[0]}" if failed else f"stopped after {span} rounds"
                best_txt = f"> {fmt_s(min(stopped_secs))} ({how})"
                med_txt = "n/a"
                per = "n/a"
                rounds_txt = f"{span} (failed)" if len(failed) == len(stopped) else f"{span}+ (stopped)"
            else:
                done["best"][(g, c)], done["median"][(g, c)] = b, m
                best_txt, med_txt, per = fmt_s(b), fmt_s(m), f"{b / max(rounds, 1):.3f}"
                rounds_txt = str(rounds)
            lines.append(f"| {g} | {c} | {rounds_txt} | {best_txt} | {med_txt} | "
                         f"{', '.join(fmt_s(s) for s in secs)} | {per} |")
    ratio_lines = ["| graph | scopeflow / delta (best) | scopeflow / delta (median) | naive / scopeflow (best) | "
                   "naive / scopeflow (median) | stdlib / delta (best) | stdlib / delta (median) |",
                   "|---|---|---|---|---|---|---|"]
    ratios: dict = {}
    for g in graphs:
        def r(a, b, which):
            y = done[which].get((g, b))
            if y is None:
                return "n/a", None
            if (g, a) in bound["best"]:  # `a` did not finish: a lower bound, rounded down
                at_least = bound[which].get((g, a))
                if at_least is None:
                    return "n/a", None
                lo = at_least / y
                return f"> {math.floor(lo * 10) / 10:.1f}x", lo
            x = done[which].get((g, a))
            if x is None:
                return "n/a", None
            return f"{x / y:.2f}x", x / y
        sd_b, sd_bv = r("scopeflow", "delta", "best")
        sd_m, sd_mv = r("scopeflow", "delta", "median")
        ns_b, ns_bv = r("naive", "scopeflow", "best")
        ns_m, ns_mv = r("naive", "scopeflow", "median")
        ld_b, ld_bv = r("stdlib", "delta", "best")
        ld_m, ld_mv = r("stdlib", "delta", "median")
        ratios[g] = {"scopeflow/delta": (sd_bv, sd_mv), "naive/scopeflow": (ns_bv, ns_mv),
                     "stdlib/delta": (ld_bv, ld_mv)}
        ratio_lines.append(f"| {g} | {sd_b} | {sd_m} | {ns_b} | {ns_m} | {ld_b} | {ld_m} |")
    text = "\n".join(lines) + "\n\nRatios:\n\n" + "\n".join(ratio_lines)
    return text + equal_rounds(results, graphs), ratios


def scopeflow_seconds_at(run: dict, n: int) -> Optional[float]:
    """Seconds a scopeflow run took to get through its first `n` rounds: the whole run less its later
    rounds (from its report), so reading the input and writing the output are counted in (never less
    than the real figure). None without per-round figures or with fewer rounds than `n`."""
    rounds = (run.get("info") or {}).get("report_rounds")
    if not rounds or n > len(rounds):
        return None
    return run["seconds"] - sum(r["seconds"] for r in rounds[n:])


def equal_rounds(results: dict, graphs: list) -> str:
    """Each naive run that did not finish against scopeflow over the same number of rounds: its time
    divided by the median time the scopeflow runs took to get as far. A run that failed is compared
    over the rounds it completed and the one it failed in."""
    rows = []
    for g in graphs:
        ours = results.get((g, "scopeflow"), [])
        for i, run in enumerate(results.get((g, "naive"), [])):
            if not run["stopped"]:
                continue
            n = run["rounds"] + (1 if run.get("error") else 0)
            at = [t for t in (scopeflow_seconds_at(r, n) for r in ours) if t is not None]
            if not at:
                continue
            mine = statistics.median(at)
            rows.append(f"| {g} | {i + 1} | {n} | {fmt_s(run['seconds'])} | {fmt_s(mine)} | "
                        f"{run['seconds'] / mine:.1f}x |")
    if not rows:
        return ""
    return ("\n\nNaive runs that did not finish, against scopeflow over as many rounds (a failed run: the rounds it "
            "completed and the one it failed in; scopeflow: median of its runs' time to get as far, input read and "
            "output written included):\n\n"
            "| graph | naive run | rounds compared | naive s | scopeflow s | naive / scopeflow |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows))


def write_results(table: str, m: dict, args, graph_info: dict, extra: str) -> None:
    notes = ""
    if os.path.exists(RESULTS):
        with open(RESULTS, encoding="utf-8") as fh:
            old = fh.read()
        if NOTES_MARK in old:
            notes = old.split(NOTES_MARK, 1)[1]
    today = datetime.date.today().isoformat()
    graphs = "\n".join(f"- `{g}`: {v}" for g, v in graph_info.items())
    text = f"""# Benchmark results

Generated by `benchmarks/bench_cc.py` on {today}.

## Machine

- {m['cores']} cores ({m['cpu']}), {m['memory']} RAM, {m['os']}
- Python {m['python']}, PySpark {m['pyspark']}, {m['java']}
- scopeflow at commit {m['commit']}{' (with uncommitted changes in runtime/ or compiler/)' if m['dirty'] else ''}
- load average at the start: {', '.join(f'{x:.1f}' for x in m['load_start'])}; at the end: {', '.join(f'{x:.1f}' for x in m['load_end'])}

The machine is shared: other engineers ran Spark test suites during the measurements, so absolute
times are noisy (the load average above is on 2 cores). The contenders therefore ran interleaved —
scopeflow, delta, naive, scopeflow, delta, naive, ... — so that noise hits them alike; compare the
ratios more than the absolute times.

## Setup

- One SparkSession for everything (`scopeflow.runtime.session.build_session`, `local[*]`),
  `spark.sql.shuffle.partitions` = `spark.default.parallelism` = {args.partitions}, driver memory
  {args.driver_memory}, `spark.sql.ui.retainedExecutions` = 20 (see below); the same session settings for all
  contenders. scopeflow turns AQE and
  auto-broadcast off inside loops itself; the hand-written delta version and the naive loop do the
  same (with AQE on, the naive loop's nested cached plans made planning grow far faster).
- JVM warm-up first: every contender once on examples/data/graph.csv, then{" (not this time)" if args.no_graph_warmup else ""}
  scopeflow and delta once on each measured graph, untimed (the first run on a big graph was 30-70 % slower
  than the next ones for both).
- {args.repeats} measured runs per contender and graph, interleaved; wall time of the whole run
  (read CSV, iterate, write CSV output). "best" = minimum, "median" = median of the runs.
- Every output was checked: equal to the reference (networkx for the path graph, union-find for the
  others) and therefore to the other contenders (same set of (id, label) rows).
- naive runs are stopped after {args.naive_limit:.0f} s (reported as "> X s (stopped after N rounds)"); the limit
  is checked between rounds.
- Why `spark.sql.ui.retainedExecutions` = 20: the SQL status store keeps a plan graph for every query, UI or
  not. The naive loop's plans grow with its lineage; with Spark's default of 1,000 retained queries a first
  attempt of this benchmark drove the 4 GB driver into back-to-back full GCs on the path graph (1,100 s of
  full GC within 30 minutes; 3.4M `SQLPlanMetric` objects and 2.1 GB of byte arrays on the heap) and it
  had to be killed. Keeping 20 bounds that memory for everyone; it changes nothing in how queries run.

Graphs (benchmarks/gen_graphs.py):

{graphs}

## Results (connected components, wall seconds)

{table}
{extra}
{NOTES_MARK}{notes}"""
    with open(RESULTS, "w", encoding="utf-8") as fh:
        fh.write(text)


def profile_scopeflow(spark, edges_csv: str, partitions: int) -> str:
    """Where does scopeflow's time go? One run under cProfile plus Spark job times, compared with delta."""
    import cProfile
    import pstats
    import io

    out = []
    for contender in ("scopeflow", "delta"):
        prof = cProfile.Profile()
        prof.enable()
        res = run_one(spark, contender, edges_csv, partitions, 1e9, with_jobs=True)
        prof.disable()
        jobs = res["info"]["jobs"]
        job_time = sum(j["end"] - j["start"] for j in jobs)
        tasks = sum(j["tasks"] for j in jobs)
        stages = sum(j["stages"] for j in jobs)
        wall = res["seconds"]
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        st.sort_stats("cumulative").print_stats(30)
        # time spent waiting on the JVM (py4j round trips: planning, job execution, status calls)
        py4j = sum(v[3] for k, v in st.stats.items() if "py4j" in k[0] and k[2] == "send_command")
        out.append({"contender": contender, "wall": wall, "rounds": res["rounds"], "jobs": len(jobs),
                    "job_time": job_time, "tasks": tasks, "stages": stages, "py4j": py4j,
                    "profile": buf.getvalue(), "report_rounds": res["info"].get("report_rounds")})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--graphs", default="random,rmat,path")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--naive-limit", type=float, default=900.0, help="stop a naive run after this many seconds")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--profile", action="store_true",
                    help="also profile one scopeflow and one delta run on the path graph (cProfile + Spark job times)")
    ap.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    ap.add_argument("--no-graph-warmup", action="store_true",
                    help="skip the untimed run of scopeflow and delta on each graph before the measured runs")
    ap.add_argument("--json", help="also dump raw timings to this JSON file")
    args = ap.parse_args()
    graphs = args.graphs.split(",")
    contenders = args.contenders.split(",")

    m = machine()
    m["load_start"] = os.getloadavg()
    paths = {g: gen_graphs.ensure(g) for g in graphs}
    graph_info = {}
    references = {}
    for g in graphs:
        edges = read_edges(paths[g])
        references[g] = reference_networkx(edges) if g == "path" else reference_union_find(edges)
        if g == "path":  # the union-find must agree with networkx too
            assert reference_union_find(edges) == references[g]
        n_comp = len({lab for _, lab in references[g]})
        graph_info[g] = (f"{len(edges):,} edges, {len(references[g]):,} vertices, {n_comp:,} components "
                         f"({os.path.relpath(paths[g], ROOT)})")
        print(f"graph {g}: {graph_info[g]}", flush=True)

    from scopeflow.runtime.session import build_session

    # spark.sql.ui.retainedExecutions: the SQL status store keeps a plan graph per query even with the UI
    # off. The naive loop's plans grow with the lineage, and with the default (1000 retained queries)
    # they filled the 4 GB driver heap on the path graph: continuous full GCs (1,100 s of GC in a
    # 30-minute run; 3.4M SQLPlanMetric objects, 2.1 GB of byte arrays), which also slows down whatever
    # runs next in the same JVM. Retaining 20 keeps the comparison about the loops, for everyone alike.
    conf = {"spark.sql.shuffle.partitions": str(args.partitions), "spark.default.parallelism": str(args.partitions),
            "spark.driver.memory": args.driver_memory, "spark.sql.ui.retainedExecutions": "20"}
    spark = build_session("scopeflow-bench-cc", conf=conf)

    small = os.path.join(ROOT, "examples", "data", "graph.csv")
    small_ref = reference_networkx(read_edges(small))
    for c in contenders:  # JVM warm-up, checked too
        t = time.perf_counter()
        res = run_one(spark, c, small, args.partitions, args.naive_limit)
        assert set(res["rows"]) == small_ref and len(res["rows"]) == len(small_ref), f"warm-up {c} is wrong"
        print(f"warm-up {c}: {time.perf_counter() - t:.1f}s, {res['rounds']} rounds", flush=True)
    if not args.no_graph_warmup:
        # The first run on a big graph is 30-70 % slower than the next ones for every contender (the heap
        # grows, the JIT compiles the large-data paths): one untimed run per graph of the contenders that
        # finish (not the naive loop), so the first measured repetition is not the odd one out.
        for g in graphs:
            for c in contenders:
                if c == "naive":
                    continue
                t = time.perf_counter()
                res = run_one(spark, c, paths[g], args.partitions, args.naive_limit)
                ok = not res["stopped"] and set(res["rows"]) == references[g] and len(res["rows"]) == len(references[g])
                assert ok, f"warm-up {c} on {g} is wrong"
                print(f"warm-up {c} on {g}: {time.perf_counter() - t:.1f}s, {res['rounds']} rounds", flush=True)

    results: dict = {}
    outputs: dict = {}
    for rep in range(args.repeats):
        for g in graphs:
            for c in contenders:
                res = run_one(spark, c, paths[g], args.partitions, args.naive_limit)
                rows = res.pop("rows")
                if not res["stopped"]:
                    got = set(rows)
                    assert len(got) == len(rows), f"{c} on {g}: duplicate rows"
                    assert got == references[g], f"{c} on {g}: wrong components ({len(got ^ references[g])} rows differ)"
                    for other, o in outputs.get(g, {}).items():
                        assert o == got, f"{c} and {other} disagree on {g}"
                    outputs.setdefault(g, {})[c] = got
                results.setdefault((g, c), []).append(res)
                state = ("failed: " + res["error"]) if res.get("error") else "stopped" if res["stopped"] else "ok"
                print(f"run {rep + 1}/{args.repeats} {g:6s} {c:9s} {res['seconds']:8.2f}s "
                      f"{res['rounds']:4d} rounds [{state}]  load {os.getloadavg()[0]:.1f}", flush=True)

    table, ratios = summarise(results, graphs, contenders)
    extra = ""
    if args.profile and "path" in graphs:
        prof = profile_scopeflow(spark, paths["path"], args.partitions)
        extra = "\n## Profile of one run on the path graph (cProfile of the driver + Spark job times)\n\n"
        extra += ("| contender | wall s | rounds | Spark jobs | stages | tasks | sum of Spark job durations s | "
                  "driver time outside jobs s | py4j send_command cumulative s |\n|---|---|---|---|---|---|---|---|---|\n")
        for p in prof:
            extra += (f"| {p['contender']} | {p['wall']:.1f} | {p['rounds']} | {p['jobs']} | {p['stages']} | "
                      f"{p['tasks']} | {p['job_time']:.1f} | {p['wall'] - p['job_time']:.1f} | {p['py4j']:.1f} |\n")
        for p in prof:
            print(f"\n==== cProfile {p['contender']} (cumulative) ====\n{p['profile']}")
        if args.json:
            with open(args.json + ".profile.json", "w") as fh:
                json.dump([{k: v for k, v in p.items() if k != "profile"} for p in prof], fh, indent=1, default=str)
    m["load_end"] = os.getloadavg()
    print()
    print(table)
    print(extra)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({f"{g}/{c}": [{k: v for k, v in r.items() if k != "info"} |
                                    {"report_rounds": r["info"].get("report_rounds")} for r in runs]
                       for (g, c), runs in results.items()}, fh, indent=1, default=str)
    if not args.no_write:
        write_results(table, m, args, graph_info, extra)
        print(f"wrote {RESULTS}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
