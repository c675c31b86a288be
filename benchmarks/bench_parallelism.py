"""What a loop's partition count costs: connected components (min-label, examples/connected_components.flow)
on random graphs of 10k to 1M edges, scopeflow with its loops pinned to 1, 2 and 4 partitions and with its
own choice (`auto`, runtime/parallelism.py), beside the hand-written delta loop (bench_cc's `cc_delta`, at
the session's 4 partitions), in one session, interleaved.

The graphs are the first N edges of gen_graphs' 1M-edge random graph (generated on first use, not committed).
Every output is checked against a plain-Python union-find. The table goes to stdout and into
benchmarks/RESULTS.md (its own section, between the markers below).

    .venv/bin/python benchmarks/bench_parallelism.py [--repeats 2] [--sizes 10000,30000,100000,300000,1000000]
            [--no-write]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_cc  # noqa: E402
import bench_kernels  # noqa: E402
import gen_graphs  # noqa: E402

SECTION_BEGIN = "<!-- bench_parallelism.py: begin (rewritten by each run) -->"
SECTION_END = "<!-- bench_parallelism.py: end -->"
SETTINGS = ("1", "2", "4", "auto")  # spark.scopeflow.loopPartitions for scopeflow's runs
PARTITIONS = 4


def run(spark, contender: str, csv_path: str, setting: str | None) -> dict:
    if setting is not None:
        spark.conf.set("spark.scopeflow.loopPartitions", setting)
    try:
        r = bench_cc.run_one(spark, contender, csv_path, PARTITIONS, 3600.0)
    finally:
        spark.conf.unset("spark.scopeflow.loopPartitions")
    want = bench_cc.reference_union_find(bench_cc.read_edges(csv_path))
    if set(r["rows"]) != want:
        raise SystemExit(f"{contender} ({setting}) on {csv_path}: wrong output")
    chosen = r["info"]["loops"]["cc"]["partitions"]["partitions"] if contender == "scopeflow" else None
    return {"seconds": r["seconds"], "rounds": r["rounds"], "chosen": chosen}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from scopeflow.runtime.session import build_session

    spark = build_session("bench-parallelism", conf={"spark.sql.shuffle.partitions": str(PARTITIONS),
                                                     "spark.default.parallelism": str(PARTITIONS),
                                                     "spark.driver.memory": "4g"})
    contenders = [("scopeflow", s) for s in SETTINGS] + [("delta", None)]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            path = gen_graphs.random_prefix(n, folder)
            results: dict = {c: [] for c in contenders}
            for c in contenders:  # warm-up
                run(spark, c[0], path, c[1])
            for _ in range(args.repeats):
                for c in contenders:
                    results[c].append(run(spark, c[0], path, c[1]))
            chosen = results[("scopeflow", "auto")][0]["chosen"]
            hand = statistics.median(r["seconds"] for r in results[("delta", None)])
            line = [f"{n:,}", f"{os.path.getsize(path) / 2**20:.1f} MiB", str(chosen),
                    str(results[("scopeflow", "1")][0]["rounds"])]
            for c in contenders:
                med = statistics.median(r["seconds"] for r in results[c])
                line.append(f"{med:.2f} ({med / hand:.2f}x)" if c[0] == "scopeflow" else f"{med:.2f}")
            rows.append(line)
            print(" | ".join(line), flush=True)
    spark.stop()
    head = ("| edges | CSV | auto chose | rounds | scopeflow, 1 partition | 2 | 4 | auto | hand delta (4) |\n"
            "|---|---|---|---|---|---|---|---|---|")
    table = head + "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows)
    bench_kernels.publish(table, "Loop partitions: what the count costs (bench_parallelism.py)",
                          "Seconds per run (ratio to the hand-written delta loop at 4 partitions).", args, PARTITIONS,
                          SECTION_BEGIN, SECTION_END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
