"""Connected components over a stream: where an epoch's time goes, against one batch run over the same input.

The input is the ``random`` graph of gen_graphs.py (~10^6 edges, the base) followed by 10 waves of 1,000 new
edges each (deterministic: mostly between existing vertices, some to and between new vertices). They are
11 CSV files in one folder, with increasing modification times (base first, then the waves in order: Spark's
file source takes files of equal modification time in arbitrary order), so that with
`max_files_per_epoch = 1` the base is epoch 0 and each wave one epoch.

Two contenders run the same connected-components program (examples/connected_components.flow) over them,
in one SparkSession (`build_session`, the settings bench_cc.py uses):

- ``stream``: the program with `source edges = stream files("stream_in", format = "csv", header = true,
  max_files_per_epoch = 1)`, run in-process by `scopeflow.runtime.launcher.execute` with trigger
  `available-now` (one run: 11 epochs), a fresh checkpoint and sink each time. Its report gives each epoch's
  read + state write, loop, sinks and commit times; Spark's progress (`durationMs`) gives the micro-batch
  around it (triggerExecution = the whole epoch as Spark runs it, addBatch = the foreachBatch call).
- ``batch``: the same program with `read csv("stream_in", header = true)` over the folder of all 11 files:
  one run over the whole input (wall time), as a non-streaming pipeline does it.

Today every epoch recomputes the whole fixpoint over all input so far, so an epoch of 1,000 new edges costs
about as much as the batch run over everything; issue #24 (incremental loops) is measured against this.

Every output (the stream's sink after its last epoch, the batch run's sink) is checked against a union-find
over all the input, and so against each other. One untimed warm-up first (a 20,000-edge base and 3 small
waves, both contenders), then `--repeats` measured pairs (stream, batch), alternating. The per-epoch table
gives medians over the repeats. The section "Streaming connected components (bench_stream.py)" of
benchmarks/RESULTS.md is replaced (between its own markers, below bench_cc.py's notes marker, so that
bench_cc.py keeps it when it rewrites the file, and re-running this script replaces only it).

    .venv/bin/python benchmarks/bench_stream.py [--repeats 3] [--partitions 4] [--no-write] [--json PATH]
                                                [--base-edges N]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_graphs  # noqa: E402
from bench_cc import machine, read_edges, read_output, reference_union_find  # noqa: E402

RESULTS = os.path.join(HERE, "RESULTS.md")
NOTES_MARK = "<!-- notes: kept when bench_cc.py rewrites this file -->"  # bench_cc.py keeps what is below it
BEGIN = "<!-- bench_stream.py: begin (this section is rewritten by benchmarks/bench_stream.py) -->"
END = "<!-- bench_stream.py: end -->"
TITLE = "## Streaming connected components (bench_stream.py)"
DATA = os.path.join(gen_graphs.DEFAULT_DIR, "stream_cc")
WAVES = 10
WAVE_EDGES = 1_000
WAVE_NEW_VERTICES = 100  # per wave
SEED = 20251124
WARMUP_BASE = 20_000
WARMUP_WAVES = 3

BODY = """
both = edges | union(edges | select(src = dst, dst = src))
init = both | select(id = src, label = src) | distinct

components = loop cc(labels = init) with (e = both) {
    best   = labels | reduce(by id, label = min(label))
    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)
    feedback labels <- spread
    emit state best
}
sink components -> csv("out/components", header = true)
"""
STREAM_FLOW = ("# bench_stream.py: connected components over a stream of edge files (epoch 0: the base)\n"
               "pipeline bench_stream_cc\n"
               'source edges = stream files("stream_in", format = "csv", header = true, max_files_per_epoch = 1) '
               "schema (src: long, dst: long)\n" + BODY)
BATCH_FLOW = ("# bench_stream.py: the same connected components over all the files at once\n"
              "pipeline bench_batch_cc\n"
              'source edges = read csv("stream_in", header = true) schema (src: long, dst: long)\n' + BODY)


# ---- input -------------------------------------------------------------------------------------------------


def make_waves(base: list, waves: int, per_wave: int, new_per_wave: int, seed: int) -> list[list]:
    """`waves` lists of `per_wave` new edges (no self-loops, none already there): each wave adds
    `new_per_wave` new vertices (ids above every id so far), each tied to an existing vertex by one edge and,
    for a third of them, to the previous new vertex too; the rest of the wave joins two random existing
    vertices (which may merge components)."""
    rng = random.Random(seed)
    seen = {(min(a, b), max(a, b)) for a, b in base}
    vertices = sorted({v for e in base for v in e})
    top = vertices[-1]
    out = []
    for _ in range(waves):
        wave = []

        def add(a, b):
            key = (min(a, b), max(a, b))
            if a == b or key in seen:
                return False
            seen.add(key)
            wave.append((a, b) if rng.random() < 0.5 else (b, a))
            return True

        fresh = list(range(top + 1, top + 1 + new_per_wave))
        top += new_per_wave
        for i, v in enumerate(fresh):
            add(v, rng.choice(vertices))
            if i % 3 == 2:
                add(v, fresh[i - 1])
        while len(wave) < per_wave:
            add(rng.choice(vertices), rng.choice(vertices))
        vertices += fresh
        rng.shuffle(wave)
        out.append(wave)
    return out


def write_input(folder: str, base: list, waves: list) -> list[str]:
    """The base and the waves as CSV files in `folder` (replaced), modification times increasing: base, then the
    waves in order, 10 s apart and in the past."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    names = ["base.csv"] + [f"wave-{i + 1:02d}.csv" for i in range(len(waves))]
    t0 = time.time() - 3600
    paths = []
    for i, (name, edges) in enumerate(zip(names, [base] + waves)):
        path = gen_graphs.write_csv(os.path.join(folder, name), edges)
        os.utime(path, (t0 + 10 * i, t0 + 10 * i))
        paths.append(path)
    return paths


def link_input(paths: list, folder: str) -> None:
    """`folder` holds the input files (hard links: same content and modification time; a copy where links fail)."""
    os.makedirs(folder)
    for p in paths:
        dst = os.path.join(folder, os.path.basename(p))
        try:
            os.link(p, dst)
        except OSError:
            shutil.copy2(p, dst)


# ---- the runs ------------------------------------------------------------------------------------------------


def run_stream(spark, paths: list) -> dict:
    """The streaming pipeline over `paths`, `--trigger available-now`: every file one epoch."""
    from scopeflow.runtime.arguments import SnapshotOptions
    from scopeflow.runtime.streaming import StreamOptions

    return _run(spark, paths, "stream", STREAM_FLOW,
                lambda work: {"snapshots": SnapshotOptions(checkpoint=os.path.join(work, "ckpt")),
                              "stream": StreamOptions("available-now")})


def run_batch(spark, paths: list) -> dict:
    """The same pipeline with `read csv` over the folder of all `paths`: one batch run."""
    return _run(spark, paths, "batch", BATCH_FLOW, lambda work: {})


def _run(spark, paths: list, kind: str, text: str, options) -> dict:
    from scopeflow.api import compile_to_module
    from scopeflow.runtime.launcher import execute

    work = tempfile.mkdtemp(prefix=f"sf-bench-{kind}-")
    try:
        link_input(paths, os.path.join(work, "stream_in"))
        flow = os.path.join(work, f"bench_{kind}_cc.flow")
        with open(flow, "w", encoding="utf-8") as fh:
            fh.write(text)
        report = os.path.join(work, "report.json")
        module = compile_to_module(flow)
        t = time.perf_counter()
        code, _ = execute(module, spark=spark, quiet=True, report=report, **options(work))
        seconds = time.perf_counter() - t
        if code != 0:
            raise RuntimeError(f"the {kind} run failed (exit {int(code)}); report in {report}")
        with open(report, encoding="utf-8") as fh:
            doc = json.load(fh)
        rows = read_output(os.path.join(work, "out", "components"))
        return {"seconds": seconds, "report": doc, "rows": rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(rows: list, reference: set, what: str) -> set:
    got = set(rows)
    assert len(got) == len(rows), f"{what}: duplicate rows"
    assert got == reference, f"{what}: wrong components ({len(got ^ reference):,} rows differ)"
    return got


# ---- the figures -----------------------------------------------------------------------------------------------


def epoch_figures(entry: dict) -> dict:
    """One epoch of the stream's report, in seconds. `epoch` is Spark's triggerExecution (the whole micro-batch);
    `overhead` = triggerExecution - addBatch (Spark's own work around the foreachBatch call: listing the new
    files, the offset log, planning, the commit log); `rest` = what is left of `epoch` after read, loop, sink,
    commit and overhead (the pipeline outside the loop and the sinks, the epoch's bookkeeping, the call)."""
    ms = entry.get("spark_ms") or {}
    whole = ms["triggerExecution"] / 1000 if "triggerExecution" in ms else entry["seconds"]
    add = ms["addBatch"] / 1000 if "addBatch" in ms else entry["seconds"]
    loop = sum(lp.get("seconds", 0.0) for lp in entry["loops"])
    sink = sum(s.get("seconds", 0.0) for s in entry["sinks"])
    f = {"epoch": whole, "read": entry.get("read_seconds", 0.0), "loop": loop, "sink": sink,
         "commit": entry.get("commit_seconds", 0.0), "overhead": whole - add,
         "pipeline_rest": entry.get("pipeline_seconds", 0.0) - loop - sink,
         "callback": entry["seconds"], "add_batch": add,
         "rounds": sum(lp["rounds"] for lp in entry["loops"]), "new_rows": entry["input_rows"],
         "rows_so_far": sum(entry.get("state_rows", {}).values()), "files": entry["files"],
         "number": entry["epoch"], "records": sum(lp.get("records", 0) for lp in entry["loops"])}
    f["rest"] = whole - f["read"] - loop - sink - f["commit"] - f["overhead"]
    for k in ("latestOffset", "getBatch", "walCommit", "queryPlanning", "commitOffsets"):
        f["spark_" + k] = ms.get(k, 0) / 1000
    return f


def fmt(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def med(xs):
    return statistics.median(xs)


def summarise(streams: list, batches: list, expected_epochs: int) -> dict:
    per_run = []
    for s in streams:
        epochs = sorted(s["report"]["epochs"], key=lambda e: e["epoch"])
        assert len(epochs) == expected_epochs, f"{len(epochs)} epochs, expected {expected_epochs}"
        per_run.append([epoch_figures(e) for e in epochs])
    n = len(per_run[0])
    table = []
    for i in range(n):
        runs = [r[i] for r in per_run]
        row = {k: med([r[k] for r in runs]) for k in runs[0]}
        row["rounds_all"] = sorted({r["rounds"] for r in runs})
        row["epoch_runs"] = [r["epoch"] for r in runs]
        table.append(row)
    batch_secs = [b["seconds"] for b in batches]
    batch_rounds = sorted({sum(1 for r in b["report"]["rounds"] if r["scope"] == "cc") for b in batches})
    batch_loop = med([sum(r["seconds"] for r in b["report"]["rounds"] if r["scope"] == "cc") for b in batches])
    batch_sink = med([sum(s.get("seconds", 0.0) for s in b["report"]["sinks"]) for b in batches])
    waves = table[1:]
    # each streaming run against the batch run right after it: the median of its waves' epochs / that batch run
    paired = [med([f["epoch"] for f in run[1:]]) / b["seconds"] for run, b in zip(per_run, batches)]
    return {"paired": paired, "loads": [(s.get("load"), b.get("load")) for s, b in zip(streams, batches)],
            "table": table, "batch_seconds": batch_secs, "batch_median": med(batch_secs),
            "batch_rounds": batch_rounds, "batch_loop": batch_loop, "batch_sink": batch_sink,
            "wave_epoch_median": med([r["epoch"] for r in waves]) if waves else None,
            "stream_wall": [s["seconds"] for s in streams]}


def render(summary: dict, m: dict, args, graph: str, wave_info: str, started: str, components: tuple) -> str:
    t = summary["table"]
    rows = []
    for r in t:
        rounds = "/".join(str(x) for x in r["rounds_all"])
        rows.append(f"| {int(r['number'])} | {int(r['new_rows']):,} | {int(r['rows_so_far']):,} | {rounds} | "
                    f"{fmt(r['epoch'])} | {fmt(r['read'])} | {fmt(r['loop'])} | {fmt(r['sink'])} | "
                    f"{fmt(r['commit'])} | {fmt(r['overhead'])} | {fmt(r['rest'])} |")
    waves = t[1:]
    batch = summary["batch_median"]
    wave_med = summary["wave_epoch_median"]
    spark_keys = ("latestOffset", "getBatch", "walCommit", "queryPlanning", "commitOffsets")
    over = ", ".join(f"{k} {med([r['spark_' + k] for r in waves]):.2f}" for k in spark_keys)
    rest_split = (f"{med([r['pipeline_rest'] for r in waves]):.2f} s in the pipeline outside the loop and the sink, "
                  f"{med([r['add_batch'] - r['callback'] for r in waves]):.2f} s between Spark's addBatch and the "
                  f"epoch's own clock")
    ratios = ", ".join(f"{x / batch:.2f}" for x in (r["epoch"] for r in waves))
    paired = ", ".join(f"{x:.2f}" for x in summary["paired"])
    r0 = "/".join(str(x) for x in t[0]["rounds_all"])
    rw = "/".join(str(x) for x in sorted({x for r in waves for x in r["rounds_all"]}))
    rounds_note = ("" if r0 == rw else
                   f"\nEpoch 0 (the base alone) needs {r0} rounds, the waves' epochs {rw}"
                   f"{', like the batch run' if rw == '/'.join(str(x) for x in summary['batch_rounds']) else ''}: the waves' "
                   f"edges between\nexisting vertices join the base's components ({components[0]:,} components → "
                   f"{components[1]:,} after all waves), so\nthe minimum labels travel further: a wave's loop "
                   f"handles {med([r['records'] for r in waves]) / 1e6:.1f}M records over its rounds, epoch 0's "
                   f"{t[0]['records'] / 1e6:.1f}M.\n")
    loads = ", ".join(f"{a:.1f} / {b:.1f}" for a, b in summary["loads"])
    load = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    return f"""{BEGIN}
{TITLE}

Generated by `benchmarks/bench_stream.py` on {started}: {m['cores']} cores ({m['cpu']}), Python {m['python']},
PySpark {m['pyspark']}, scopeflow at commit {m['commit']}{' (with uncommitted changes in runtime/ or compiler/)' if m['dirty'] else ''};
load average at the start: {load(m['load_start'])}; at the end: {load(m['load_end'])} (on {m['cores']} cores; the
machine is shared, so absolute times are noisy: compare the ratios, and see the load after each run below).

Setup:

- Input: 11 CSV files (`src,dst`) in one folder, modification times increasing file by file, so that with
  `max_files_per_epoch = 1` the base is epoch 0 and wave *k* is epoch *k*:
  - the base: {graph};
  - {WAVES} waves of {WAVE_EDGES:,} new edges each: {wave_info}.
- One SparkSession (`build_session`, `local[*]`, shuffle partitions = default parallelism = {args.partitions},
  driver memory {args.driver_memory}, `spark.sql.ui.retainedExecutions` = 20, as bench_cc.py).
- stream: examples/connected_components.flow with `source edges = stream files("stream_in", format = "csv",
  header = true, max_files_per_epoch = 1)`, run in-process by `execute(..., stream=StreamOptions("available-now"),
  report=...)`: one run of 11 epochs, fresh checkpoint and sink each run.
- batch: the same program with `read csv("stream_in", header = true)` over the folder of all 11 files, one
  run (wall time of `execute`: read, loop, write).
- Untimed warm-up first (a {WARMUP_BASE:,}-edge base and {WARMUP_WAVES} waves, both), then {args.repeats} measured
  pair{'s' if args.repeats != 1 else ''} (stream, batch), alternating. Every output (the stream's sink after its last epoch, the batch sink) was
  checked against a union-find over all the input, and so against each other.

Columns (seconds, median over the {args.repeats} streaming run{'s' if args.repeats != 1 else ''}, epoch by epoch), from the run report's
epochs and Spark's progress (`durationMs`) of each micro-batch:

- *epoch s*: Spark's `triggerExecution`, the whole micro-batch;
- *read+state s*: the report's `read_seconds` (the epoch's new files listed and read, written to the
  stream's state as a Parquet part);
- *loop s*: the `cc` loop's rounds (sum of the rounds' seconds), *sink s*: the sink's write,
  *commit s*: the epoch's commit (manifest, dropping old parts);
- *Spark overhead s*: `triggerExecution` − `addBatch` (Spark's micro-batch work around the foreachBatch call:
  latestOffset, getBatch, walCommit, queryPlanning, commitOffsets);
- *rest s*: *epoch s* minus all the columns before it (the pipeline outside the loop and the sink, the
  epoch's bookkeeping, the foreachBatch call itself).

| epoch | new rows | rows so far | rounds | epoch s | read+state s | loop s | sink s | commit s | Spark overhead s | rest s |
|---|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Batch run over the same input (all 11 files): median {fmt(batch)} s (runs: {', '.join(fmt(x) for x in summary['batch_seconds'])}),
{'/'.join(str(x) for x in summary['batch_rounds'])} rounds; its loop {fmt(summary['batch_loop'])} s, its sink {fmt(summary['batch_sink'])} s.
The streaming runs took {', '.join(fmt(x) for x in summary['stream_wall'])} s each (all 11 epochs, query start and stop
included). Load average (1 minute) after each run, stream / batch: {loads}.

**An epoch of {WAVE_EDGES:,} edges / the batch run: {wave_med / batch:.2f}** (median epoch of waves 1–{WAVES},
{fmt(wave_med)} s, against the batch run's median, {fmt(batch)} s; epoch by epoch:
{ratios}; each streaming run's median wave epoch against the batch run right after it: {paired}). Every epoch
recomputes the whole fixpoint over all the input so far, so an epoch that adds 0.1 % of the edges costs
about what the batch run over everything costs; issue #24 (incremental loops) is measured against this.
{rounds_note}
In the waves' epochs (medians): Spark's overhead splits into {over} s;
the rest is {rest_split}.
{END}
"""


def write_results(section: str) -> None:
    """Replace this script's block in RESULTS.md, or append it at the end (below bench_cc.py's notes marker,
    which bench_cc.py keeps when it rewrites the file; the marker is added if the file has none)."""
    old = ""
    if os.path.exists(RESULTS):
        with open(RESULTS, encoding="utf-8") as fh:
            old = fh.read()
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + section.rstrip("\n") + tail
    else:
        text = old.rstrip("\n")
        if NOTES_MARK not in text:
            text += ("\n\n" if text else "") + NOTES_MARK
        text += "\n\n" + section
    tmp = RESULTS + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, RESULTS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="measured (stream, batch) pairs")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--base-edges", type=int, help="only the first N edges of the base (a quick try; implies --no-write)")
    ap.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    ap.add_argument("--json", help="also dump the raw figures (reports included) to this JSON file")
    args = ap.parse_args()

    started = datetime.date.today().isoformat()
    import scopeflow.api  # noqa: F401 - the code measured is the code on disk now: its commit goes in the report
    import scopeflow.runtime.launcher  # noqa: F401

    m = machine()
    m["load_start"] = os.getloadavg()
    print(f"load average at the start: {m['load_start']}", flush=True)

    base_csv = gen_graphs.ensure("random")
    base = read_edges(base_csv)
    if args.base_edges:
        base, args.no_write = base[:args.base_edges], True
    waves = make_waves(base, WAVES, WAVE_EDGES, WAVE_NEW_VERTICES, SEED)
    paths = write_input(DATA, base, waves)
    every = base + [e for w in waves for e in w]
    reference = reference_union_find(every)
    n_base_v = len({v for e in base for v in e})
    components = (len({lab for _, lab in reference_union_find(base)}), len({lab for _, lab in reference}))
    graph = (f"`{os.path.relpath(base_csv, ROOT)}` ({len(base):,} edges, {n_base_v:,} vertices, "
             f"{components[0]:,} components)")
    wave_info = (f"{WAVE_NEW_VERTICES} new vertices per wave, each tied to an existing vertex, a third also to\n"
                 f"    another new one; the rest between random existing vertices (seed {SEED}); after all waves\n"
                 f"    {len(every):,} edges, {len(reference):,} vertices, {components[1]:,} components")
    print(f"input: base {graph}; waves: {' '.join(wave_info.split())}", flush=True)

    warm_dir = os.path.join(DATA, "warmup")
    warm_base = base[:WARMUP_BASE]
    warm_waves = make_waves(warm_base, WARMUP_WAVES, WAVE_EDGES, WAVE_NEW_VERTICES, SEED + 1)
    warm_paths = write_input(warm_dir, warm_base, warm_waves)
    warm_ref = reference_union_find(warm_base + [e for w in warm_waves for e in w])

    from scopeflow.runtime.session import build_session

    conf = {"spark.sql.shuffle.partitions": str(args.partitions), "spark.default.parallelism": str(args.partitions),
            "spark.driver.memory": args.driver_memory, "spark.sql.ui.retainedExecutions": "20"}
    spark = build_session("scopeflow-bench-stream", conf=conf)

    t = time.perf_counter()
    res = run_stream(spark, warm_paths)
    check(res["rows"], warm_ref, "warm-up stream")
    assert len(res["report"]["epochs"]) == WARMUP_WAVES + 1, "warm-up: wrong number of epochs"
    res = run_batch(spark, warm_paths)
    check(res["rows"], warm_ref, "warm-up batch")
    print(f"warm-up: {time.perf_counter() - t:.1f}s", flush=True)

    streams, batches = [], []
    for rep in range(args.repeats):
        s = run_stream(spark, paths)
        got_s = check(s.pop("rows"), reference, f"stream run {rep + 1}")
        streams.append(s)
        s["load"] = os.getloadavg()[0]
        figs = [epoch_figures(e) for e in sorted(s["report"]["epochs"], key=lambda e: e["epoch"])]
        print(f"run {rep + 1}/{args.repeats} stream {s['seconds']:7.1f}s  epochs: "
              + " ".join(f"{f['epoch']:.1f}({f['rounds']})" for f in figs)
              + f"  load {os.getloadavg()[0]:.1f}", flush=True)
        b = run_batch(spark, paths)
        got_b = check(b.pop("rows"), reference, f"batch run {rep + 1}")
        assert got_b == got_s, "stream and batch disagree"
        batches.append(b)
        b["load"] = os.getloadavg()[0]
        rounds = sum(1 for r in b["report"]["rounds"] if r["scope"] == "cc")
        print(f"run {rep + 1}/{args.repeats} batch  {b['seconds']:7.1f}s  {rounds} rounds  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    m["load_end"] = os.getloadavg()
    summary = summarise(streams, batches, WAVES + 1)
    section = render(summary, m, args, graph, wave_info, started, components)
    print()
    print(section)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"summary": summary, "streams": streams, "batches": batches, "machine": m, "graph": graph,
                       "wave_info": wave_info, "components": components, "started": started},
                      fh, indent=1, default=str)
    if not args.no_write:
        write_results(section)
        print(f"wrote {RESULTS}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
