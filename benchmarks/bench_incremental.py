"""Incremental loops across epochs (docs/language.md#incremental-loops): what an epoch of 1,000 new edges costs
when the loop starts from the previous epoch's fixpoint, against the same epoch recomputed and one batch run.

Kernels (each over the input of bench_stream.py: the ``random`` graph of gen_graphs.py, ~10^6 edges, as the
base, then 10 waves of 1,000 new edges, 11 CSV files with increasing modification times, one an epoch):

- ``cc``: connected components, examples/connected_components.flow over a stream;
- ``sssp``: shortest paths from the first base edge's source over the base and waves with both directions of
  every edge and a weight from 1 to 10 drawn from the edge (deterministic).

Contenders, in one SparkSession (bench_stream.py's settings), run one after the other per repeat:

- ``incremental``: the streaming pipeline, `--trigger available-now`, default settings (`spark.scopeflow.
  incremental=auto`: every wave adds 0.1 % to the input so far, far under the threshold, so every epoch after the
  first runs its loop incrementally);
- ``recompute``: the same with `spark.scopeflow.incremental=off` (every epoch recomputes its loop);
- ``batch``: the same program with `read csv` over all 11 files: one run;
- ``hand``: the best hand-written incremental loop we know in plain PySpark (`hand`), in Structured Streaming's
  `foreachBatch` over the same files: what a user would write instead of scopeflow (without its snapshots,
  exactly-once sink and checks).

Every output is checked against an independent reference (union-find for cc, Dijkstra in plain Python for sssp)
over all the input. Per epoch: Spark's `triggerExecution` (the whole micro-batch), the loop's rounds, the records
its operators output (the report's count) and its seconds, and the rest of the epoch (read, state, sink, commit,
Spark's micro-batch work): the floor an epoch pays whatever its loop does.

`--calibrate` also measures where the incremental strategy stops paying: after the base, one epoch that adds
0.1 %, 1 %, 5 %, 20 % or 50 % new edges, run incrementally (`always`) and recomputed (`off`); the ratio of the two
epochs sets `spark.scopeflow.incremental.maxChange`'s default.

The section "Incremental loops (bench_incremental.py)" of benchmarks/RESULTS.md is replaced (between its
markers).

    .venv/bin/python benchmarks/bench_incremental.py [--kernels cc,sssp] [--repeats 1] [--calibrate] [--no-write]
"""
from __future__ import annotations

import argparse
import datetime
import heapq
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_stream as BS  # noqa: E402
import gen_graphs  # noqa: E402
from bench_cc import machine, read_edges, reference_union_find  # noqa: E402

BEGIN = "<!-- bench_incremental.py: begin (this section is rewritten by benchmarks/bench_incremental.py) -->"
END = "<!-- bench_incremental.py: end -->"
TITLE = "## Incremental loops (bench_incremental.py)"
DATA = os.path.join(gen_graphs.DEFAULT_DIR, "stream_incremental")
CALIBRATION = (0.001, 0.01, 0.05, 0.2, 0.5)
CALIBRATION_TITLE = "### Where incremental stops paying (connected components)"

CC_BODY = BS.BODY
SSSP_BODY = """
start = edges | where(src == {source}) | group(by id = src) | select(id, dist = 0.0)
dists = loop sssp(d = start) with (e = edges) {{
    best  = d | reduce(by id, dist = min(dist))
    relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist + e.w)
    feedback d <- relax
    emit state best
}}
sink dists -> csv("out/components", header = true)
"""


def flow(kernel: str, stream: bool, source: int = 0) -> str:
    schema = "(src: long, dst: long)" if kernel == "cc" else "(src: long, dst: long, w: double)"
    if stream:
        src = f'source edges = stream files("stream_in", format = "csv", header = true, max_files_per_epoch = 1) ' \
              f'schema {schema}\n'
    else:
        src = f'source edges = read csv("stream_in", header = true) schema {schema}\n'
    body = CC_BODY if kernel == "cc" else SSSP_BODY.format(source=source)
    return f"pipeline bench_inc_{kernel}\n{src}{body}"


# ---- input and references ----------------------------------------------------------------------------------


def weighted(edges: list) -> list:
    """Both directions of every edge, each with a weight from 1 to 10 drawn from the (unordered) edge."""
    out = []
    for a, b in edges:
        w = float(1 + (a * 2654435761 + b * 40503 + min(a, b)) % 10)
        out += [(a, b, w), (b, a, w)]
    return out


def dijkstra(edges: list, source: int) -> set:
    adj: dict = {}
    for a, b, w in edges:
        adj.setdefault(a, []).append((b, w))
    dist = {source: 0.0}
    heap = [(0.0, source)]
    while heap:
        d, v = heapq.heappop(heap)
        if d > dist.get(v, float("inf")):
            continue
        for u, w in adj.get(v, ()):
            nd = d + w
            if nd < dist.get(u, float("inf")):
                dist[u] = nd
                heapq.heappush(heap, (nd, u))
    return {(v, d) for v, d in dist.items()}


def write_files(folder: str, files: list) -> list:
    """Each file's rows (2 or 3 columns) as a CSV, modification times increasing file by file."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    t0 = time.time() - 3600
    paths = []
    for i, rows in enumerate(files):
        path = os.path.join(folder, f"f{i:03d}.csv")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("src,dst,w\n" if len(rows[0]) == 3 else "src,dst\n")
            fh.writelines(",".join(str(x) for x in r) + "\n" for r in rows)
        os.utime(path, (t0 + 10 * i, t0 + 10 * i))
        paths.append(path)
    return paths


# ---- runs ----------------------------------------------------------------------------------------------------


def run(spark, paths: list, text: str, mode=None, stream=True) -> dict:
    """One run of `text` over the files `paths` (a streaming one: available-now, every file an epoch);
    its report, wall seconds and output rows."""
    from scopeflow.api import compile_to_module
    from scopeflow.runtime.arguments import SnapshotOptions
    from scopeflow.runtime.launcher import execute
    from scopeflow.runtime.streaming import StreamOptions

    work = tempfile.mkdtemp(prefix="sf-bench-inc-")
    try:
        BS.link_input(paths, os.path.join(work, "stream_in"))
        path = os.path.join(work, "p.flow")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        report = os.path.join(work, "report.json")
        options = {"snapshots": SnapshotOptions(checkpoint=os.path.join(work, "ckpt")),
                   "stream": StreamOptions("available-now")} if stream else {}
        if mode is not None:
            spark.conf.set("spark.scopeflow.incremental", mode)
        t = time.perf_counter()
        code, _ = execute(compile_to_module(path), spark=spark, quiet=True, report=report, **options)
        seconds = time.perf_counter() - t
        spark.conf.unset("spark.scopeflow.incremental")
        if code != 0:
            raise RuntimeError(f"run failed (exit {int(code)})")
        with open(report, encoding="utf-8") as fh:
            doc = json.load(fh)
        rows = read_rows(os.path.join(work, "out", "components"))
        return {"seconds": seconds, "report": doc, "rows": rows, "load": os.getloadavg()[0]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def hand(spark, paths: list, kernel: str, partitions: int, source: int = 0) -> dict:
    """The best hand-written incremental loop we know in PySpark, over the same stream, as a user would write it
    in `foreachBatch` (no snapshots, no exactly-once sink: it writes the whole result every epoch).

    It keeps, across micro-batches, the arcs in two cached pieces (the base, and every wave so far re-prepared each
    epoch: a few thousand arcs), each hash-partitioned by `src` into P partitions and sorted, and the state
    (id, value, changed) of every vertex seen, hash-partitioned by `id` and sorted, in a `localCheckpoint`.
    Epoch 0 runs `bench_cc.cc_delta`'s loop (cc: every vertex labelled with itself; sssp: the source at 0, every
    other vertex at +inf) over the base. A later epoch adds the new vertices to the state, sends one message across
    every new arc from its source's current value (the seeds), and runs the same delta loop over both pieces
    until no value falls. Time per epoch: Spark's `triggerExecution`, as for scopeflow's epochs."""
    import math

    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from bench_cc import loop_settings

    P = partitions
    inf = F.lit(math.inf) if kernel == "sssp" else None
    held: dict = {"state": None, "base": None, "waves": None, "newer": None, "rounds": []}

    def initial(ids):  # (id) -> (id, v, changed) of vertices seen for the first time
        if kernel == "cc":
            return ids.select("id", F.col("id").alias("v"), F.lit(True).alias("changed"))
        start = F.col("id") == F.lit(source)
        return ids.select("id", F.when(start, F.lit(0.0)).otherwise(inf).alias("v"), start.alias("changed"))

    def message(v, arcs):  # the value an arc carries from its source
        return v if kernel == "cc" else v + arcs["w"]

    def prepare(arcs):
        return arcs.repartition(P, "src").sortWithinPartitions("src").persist()

    def update(state, cand):  # one pass: the new value and whether it fell
        return state.join(cand, "id", "left").select(
            "id", F.least(F.col("v"), F.coalesce(F.col("cand"), F.col("v"))).alias("v"),
            F.coalesce(F.col("cand") < F.col("v"), F.lit(False)).alias("changed"))

    def settle(state, pieces, rounds=0):
        while True:
            obs = Observation(f"hand_inc_{len(held['rounds'])}_{rounds}")
            state = state.observe(obs, F.sum(F.col("changed").cast("long")).alias("n")).localCheckpoint(eager=True)
            if not obs.get["n"]:
                return state, rounds
            rounds += 1
            frontier = state.where(F.col("changed")).select("id", "v")
            msgs = [frontier.join(A, frontier["id"] == A["src"]).select(A["dst"].alias("id"), message(frontier["v"], A).alias("m"))
                    for A in pieces]
            cand = msgs[0] if len(msgs) == 1 else msgs[0].unionByName(msgs[1])
            state = update(state, cand.groupBy("id").agg(F.min("m").alias("cand")))

    def batch(df, epoch_id):
        arcs = df.select("src", "dst", "w") if kernel == "sssp" else \
            df.unionByName(df.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
        state = held["state"]
        if state is None:
            base = held["base"] = prepare(arcs)
            ids = base.select(F.col("src").alias("id")).unionByName(base.select(F.col("dst").alias("id"))).distinct()
            state, rounds = settle(initial(ids).sortWithinPartitions("id"), [base])
        else:
            new = arcs.localCheckpoint(eager=True)
            # every wave so far, in one checkpoint (no growing chain of unions), prepared from it
            waves = new if held["waves"] is None else held["waves"].unionByName(new).localCheckpoint(eager=True)
            if held["newer"] is not None:
                held["newer"].unpersist()
            newer = prepare(waves)
            held["waves"], held["newer"] = waves, newer
            ends = new.select(F.col("src").alias("id")).unionByName(new.select(F.col("dst").alias("id"))).distinct()
            fresh = initial(ends.join(state, "id", "left_anti")).select("id", "v", F.lit(False).alias("changed"))
            seen = state.unionByName(fresh).sortWithinPartitions("id")
            msgs = new.join(seen, new["src"] == seen["id"]).select(new["dst"].alias("id"), message(seen["v"], new).alias("m"))
            state, rounds = settle(update(seen, msgs.groupBy("id").agg(F.min("m").alias("cand"))),
                                   [held["base"], newer], 1)
        held["state"] = state
        held["rounds"].append(rounds)
        out = state.select("id", "v") if kernel == "cc" else state.where(F.col("v") < inf).select("id", "v")
        out.write.mode("overwrite").option("header", True).csv(held["out"])

    work = tempfile.mkdtemp(prefix="sf-bench-inc-hand-")
    try:
        BS.link_input(paths, os.path.join(work, "stream_in"))
        held["out"] = os.path.join(work, "out")
        schema = "src long, dst long" if kernel == "cc" else "src long, dst long, w double"
        with loop_settings(spark):
            t = time.perf_counter()
            stream = (spark.readStream.schema(schema).option("header", True).option("maxFilesPerTrigger", 1)
                      .csv(os.path.join(work, "stream_in")))
            query = (stream.writeStream.foreachBatch(batch).trigger(availableNow=True)
                     .option("checkpointLocation", os.path.join(work, "ckpt")).start())
            query.awaitTermination()
            seconds = time.perf_counter() - t
            progress = [p for p in query.recentProgress if p["numInputRows"]]
        for name in ("base", "newer"):
            if held[name] is not None:
                held[name].unpersist()
        eps = [{"epoch": i, "seconds": p["durationMs"]["triggerExecution"] / 1000, "rounds": r}
               for i, (p, r) in enumerate(zip(progress, held["rounds"]))]
        assert len(eps) == len(paths), f"hand: {len(eps)} epochs for {len(paths)} files"
        return {"seconds": seconds, "epochs": eps, "rows": read_rows(held["out"]), "load": os.getloadavg()[0]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_rows(folder: str) -> list:
    """The rows of a CSV sink folder (every part file, its header skipped), as strings."""
    import csv
    import glob

    rows = []
    for part in sorted(glob.glob(os.path.join(folder, "part-*"))):
        with open(part, newline="", encoding="utf-8") as fh:
            rows += list(csv.reader(fh))[1:]
    return rows


def as_rows(rows: list, kernel: str) -> set:
    return {(int(a), int(b)) for a, b in rows} if kernel == "cc" else {(int(a), float(b)) for a, b in rows}


def epochs(result: dict) -> list:
    """Per epoch: Spark's whole micro-batch, the loop's strategy, rounds, records and seconds, and the rest (the
    hand-written loop: its micro-batch and rounds)."""
    if "epochs" in result:
        return result["epochs"]
    out = []
    for e in sorted(result["report"]["epochs"], key=lambda e: e["epoch"]):
        f = BS.epoch_figures(e)
        lp = e["loops"][0]
        out.append({"epoch": e["epoch"], "seconds": f["epoch"], "strategy": lp["strategy"], "rounds": lp["rounds"],
                    "records": lp["records"], "loop": lp.get("seconds", 0.0), "rest": f["epoch"] - lp.get("seconds", 0.0),
                    "read": f["read"], "sink": f["sink"], "state": e.get("loops_state_seconds", 0.0),
                    "overhead": f["overhead"], "new_rows": e["input_rows"], "partitions": lp.get("partitions")})
    return out


def med(xs):
    return statistics.median(xs)


def fmt(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


# ---- the kernels ------------------------------------------------------------------------------------------------


def measure(spark, kernel: str, base: list, waves: list, repeats: int, partitions: int) -> dict:
    if kernel == "cc":
        files, every = [base] + waves, base + [e for w in waves for e in w]
        reference, source = reference_union_find(every), 0
    else:
        files = [weighted(base)] + [weighted(w) for w in waves]
        every = [e for f in files for e in f]
        source = base[0][0]
        reference = dijkstra(every, source)
    paths = write_files(os.path.join(DATA, kernel), files)
    text_stream, text_batch = flow(kernel, True, source), flow(kernel, False, source)
    runs = {"incremental": [], "recompute": [], "batch": [], "hand": []}
    for rep in range(repeats):
        for name, mode, stream in (("incremental", "auto", True), ("recompute", "off", True), ("batch", None, False),
                                   ("hand", None, True)):
            if name == "hand":
                r = hand(spark, paths, kernel, partitions, source)
            else:
                r = run(spark, paths, text_stream if stream else text_batch, mode, stream)
            got = as_rows(r.pop("rows"), kernel)
            assert got == reference, f"{kernel} {name}: wrong output ({len(got ^ reference):,} rows differ)"
            runs[name].append(r)
            what = " ".join(f"{e['seconds']:.1f}({e['rounds']}{'i' if e.get('strategy') == 'incremental' else ''})"
                            for e in epochs(r)) if stream else f"{r['seconds']:.1f}s"
            print(f"{kernel} {name} {rep + 1}/{repeats}: {what}  load {r['load']:.1f}", flush=True)
    return {"runs": runs, "edges": len(every), "files": len(files), "source": source}


def calibrate(spark, base: list) -> list:
    out = []
    for share in CALIBRATION:
        (wave,) = BS.make_waves(base, 1, int(len(base) * share), max(1, int(len(base) * share / 10)), BS.SEED + 7)
        paths = write_files(os.path.join(DATA, "calibration"), [base, wave])
        reference = reference_union_find(base + wave)
        row = {"share": share, "edges": len(wave)}
        for mode in ("always", "off"):
            r = run(spark, paths, flow("cc", True), mode)
            assert as_rows(r.pop("rows"), "cc") == reference, f"calibration {share} {mode}: wrong output"
            e = epochs(r)[1]
            row[mode] = e
        row["ratio"] = row["always"]["seconds"] / row["off"]["seconds"]
        print(f"calibration {share:.1%}: incremental {row['always']['seconds']:.1f}s ({row['always']['rounds']} rounds) "
              f"recompute {row['off']['seconds']:.1f}s ({row['off']['rounds']} rounds): {row['ratio']:.2f}", flush=True)
        out.append(row)
    return out


# ---- the report ------------------------------------------------------------------------------------------------


def kernel_section(kernel: str, res: dict) -> str:
    inc = [epochs(r) for r in res["runs"]["incremental"]]
    rec = [epochs(r) for r in res["runs"]["recompute"]]
    hands = [epochs(r) for r in res["runs"]["hand"]]
    batch = [r["seconds"] for r in res["runs"]["batch"]]
    n = len(inc[0])
    rows = []
    for i in range(n):
        a = {k: med([r[i][k] for r in inc]) for k in ("seconds", "rounds", "records", "loop", "rest")}
        b = {k: med([r[i][k] for r in rec]) for k in ("seconds", "rounds", "records", "loop", "rest")}
        h = {k: med([r[i][k] for r in hands]) for k in ("seconds", "rounds")}
        rows.append(f"| {i} | {inc[0][i]['strategy']} | {fmt(a['seconds'])} | {int(a['rounds'])} | {int(a['records']):,} | "
                    f"{fmt(a['loop'])} | {fmt(a['rest'])} | {fmt(b['seconds'])} | {int(b['rounds'])} | {int(b['records']):,} | "
                    f"{a['seconds'] / b['seconds']:.2f} | {fmt(h['seconds'])} | {int(h['rounds'])} | "
                    f"{a['seconds'] / h['seconds']:.2f} |")
    waves_inc = med([med([e["seconds"] for e in r[1:]]) for r in inc])
    waves_rec = med([med([e["seconds"] for e in r[1:]]) for r in rec])
    waves_hand = med([med([e["seconds"] for e in r[1:]]) for r in hands])
    whole_inc = med([sum(e["seconds"] for e in r) for r in inc])
    whole_hand = med([sum(e["seconds"] for e in r) for r in hands])
    floor = med([med([e["rest"] for e in r[1:]]) for r in inc])
    parts = {k: med([med([e[k] for e in r[1:]]) for r in inc]) for k in ("read", "sink", "state", "overhead")}
    records = (med([med([e["records"] for e in r[1:]]) for r in inc]), med([med([e["records"] for e in r[1:]]) for r in rec]))
    title = "Connected components" if kernel == "cc" else f"SSSP (from vertex {res['source']})"
    return f"""### {title}

{res['files']} files, {res['edges']:,} edges after the last; {len(inc)} run(s) of each contender (medians below).

| epoch | incremental run: strategy | epoch s | rounds | records | loop s | rest s | recomputed: epoch s | rounds | records | incremental / recomputed | hand-written incremental: epoch s | rounds | incremental / hand |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

- **A wave's epoch, incremental / recomputed: {waves_inc / waves_rec:.2f}** (medians of waves 1–{n - 1}: {fmt(waves_inc)} s
  against {fmt(waves_rec)} s; target at most 0.10). The loop's records: {int(records[0]):,} against {int(records[1]):,}
  per wave epoch ({records[0] / records[1]:.4f}).
- **The whole incremental run (base and {n - 1} waves) / one batch run over everything: {whole_inc / med(batch):.2f}**
  ({fmt(whole_inc)} s, the sum of its epochs, against {fmt(med(batch))} s; target at most 1.5).
- **Against the hand-written incremental loop (`hand` in the script), same stream, same session: a wave's epoch
  {waves_inc / waves_hand:.2f}x** ({fmt(waves_inc)} s against {fmt(waves_hand)} s, medians of waves 1–{n - 1}; the hand-written
  wave epoch is {waves_hand / waves_rec:.2f} of scopeflow's recomputed one); **the whole run {whole_inc / whole_hand:.2f}x**
  ({fmt(whole_inc)} s against {fmt(whole_hand)} s; the hand-written whole run is {whole_hand / med(batch):.2f}x the batch run).
- The floor of an epoch, what it pays whatever its loop does (median over the waves): {fmt(floor)} s, of which
  reading the new file and writing it to the state {fmt(parts['read'])} s, the loop's states {fmt(parts['state'])} s, the
  sink {fmt(parts['sink'])} s and Spark's micro-batch work {fmt(parts['overhead'])} s.
"""


def render(results: dict, cal: list, m: dict, started: str) -> str:
    load = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    out = [BEGIN, TITLE, "", f"""Generated by `benchmarks/bench_incremental.py` on {started}: {m['cores']} cores ({m['cpu']}), Python \
{m['python']}, PySpark {m['pyspark']}, scopeflow at commit {m['commit']}\
{' (with uncommitted changes in runtime/ or compiler/)' if m['dirty'] else ''}; load average at the start: \
{load(m['load_start'])}, at the end: {load(m['load_end'])} (2 cores, shared: compare ratios).

Input: bench_stream.py's base ({BS.WAVE_EDGES:,}-edge waves, {BS.WAVES} of them, over the ``random`` graph of
gen_graphs.py); the contenders and columns are described in the script's docstring. *records* is what the loop's
operators output, summed over its rounds (the report's count); *rest* is the epoch minus its loop.
"""]
    out += [kernel_section(k, r) for k, r in results.items()]
    if cal:
        rows = "\n".join(f"| {c['share']:.1%} | {c['edges']:,} | {fmt(c['always']['seconds'])} | {c['always']['rounds']} | "
                         f"{c['always']['records']:,} | {fmt(c['off']['seconds'])} | {c['off']['rounds']} | {c['ratio']:.2f} |"
                         for c in cal)
        out.append(f"""{CALIBRATION_TITLE}

After the base, one epoch adding a share of new edges (a tenth of them to new vertices), run incrementally
(`always`) and recomputed (`off`):

| share of the input | new edges | incremental epoch s | rounds | records | recomputed epoch s | rounds | incremental / recomputed |
|---|---|---|---|---|---|---|---|
{rows}
""")
    out.append(END)
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="cc,sssp")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--base-edges", type=int, help="only the first N edges of the base (a quick try; implies --no-write)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    started = datetime.date.today().isoformat()
    import scopeflow.api  # noqa: F401 - the code measured is the code on disk now
    import scopeflow.runtime.launcher  # noqa: F401

    m = machine()
    m["load_start"] = os.getloadavg()
    base = read_edges(gen_graphs.ensure("random"))
    if args.base_edges:
        base, args.no_write = base[:args.base_edges], True
    waves = BS.make_waves(base, BS.WAVES, BS.WAVE_EDGES, BS.WAVE_NEW_VERTICES, BS.SEED)
    from scopeflow.runtime.session import build_session

    spark = build_session("scopeflow-bench-incremental", conf={
        "spark.sql.shuffle.partitions": str(args.partitions), "spark.default.parallelism": str(args.partitions),
        "spark.driver.memory": "4g", "spark.sql.ui.retainedExecutions": "20"})
    warm = base[:BS.WARMUP_BASE]
    warm_paths = write_files(os.path.join(DATA, "warmup"), [warm] + BS.make_waves(warm, 2, 500, 50, BS.SEED + 1))
    run(spark, warm_paths, flow("cc", True), "auto")  # untimed: JIT and caches
    results = {k: measure(spark, k, base, waves, args.repeats, args.partitions) for k in args.kernels.split(",")}
    cal = calibrate(spark, base) if args.calibrate else []
    m["load_end"] = os.getloadavg()
    section = render(results, cal, m, started)
    print(section)
    if not args.no_write:
        old = open(BS.RESULTS, encoding="utf-8").read()
        if BEGIN in old:
            head, rest = old.split(BEGIN, 1)
            previous, tail = rest.split(END, 1)
            if not cal and CALIBRATION_TITLE in previous:  # keep the last calibration: this run did not measure one
                kept = CALIBRATION_TITLE + previous.split(CALIBRATION_TITLE, 1)[1].rstrip("\n")
                if "the run above did not repeat it" not in kept:
                    kept = kept.replace(CALIBRATION_TITLE, f"{CALIBRATION_TITLE}\n\n(Measured by an earlier run with "
                                        f"`--calibrate`; the run above did not repeat it.)", 1)
                section = section.replace(END, f"{kept}\n\n{END}")
            text = head + section.rstrip("\n") + tail
        else:
            text = old.rstrip("\n") + "\n\n" + section
        with open(BS.RESULTS + ".tmp", "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(BS.RESULTS + ".tmp", BS.RESULTS)
        print(f"wrote {BS.RESULTS}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
