"""Compiler benchmark: how long `scopeflow check` takes on a large pipeline.

Generates (see gen_pipeline.py) a valid pipeline of ~2,000 operators and 50
nested loops, then measures

- `scopeflow.compiler.check_file(path)` in-process: one warm-up, then the
  median (and min/max) of 5 timed calls — parse, lower, checks and chaining;
- `plan_to_pyspark` on the checked plan (codegen; informational);
- the wall time of the CLI `scopeflow check PATH` as a fresh process (Python
  start-up and imports included): median of 5.

Target: check_file under 1 second. With `--profile` (or automatically when the
target is missed) it prints the cProfile hotspots as file:function.

    .venv/bin/python benchmarks/bench_check.py [--operators 2000] [--runs 5] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_pipeline  # noqa: E402

TARGET_SECONDS = 1.0


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def scopeflow_cli() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "scopeflow")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "scopeflow.cli"]


def profile(path: str, top: int = 25) -> str:
    from scopeflow.compiler import check_file

    prof = cProfile.Profile()
    prof.enable()
    check_file(path)
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    buf.write("\n---- by cumulative time ----\n")
    stats.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--operators", type=int, default=2000)
    ap.add_argument("--depths", default=",".join(map(str, gen_pipeline.DEFAULT_DEPTHS)))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=gen_pipeline.DEFAULT_OUT)
    ap.add_argument("--profile", action="store_true", help="print cProfile hotspots even when under target")
    args = ap.parse_args()

    depths = tuple(int(d) for d in args.depths.split(","))
    path = gen_pipeline.write(args.out, args.operators, depths)

    from scopeflow.compiler import check_file
    from scopeflow.compiler.codegen import plan_to_pyspark

    result = check_file(path)  # warm-up (imports, grammar load, caches)
    if result.diagnostics:
        for d in result.diagnostics:
            print(d.render(), file=sys.stderr)
        print("the generated pipeline does not check clean", file=sys.stderr)
        return 1
    plan = result.plan
    n_nodes, n_loops = len(plan.nodes), len(plan.loop_scopes())
    max_depth = max(s.depth for s in plan.scopes.values())
    with open(path, encoding="utf-8") as fh:
        n_lines = sum(1 for _ in fh)

    check_times = timed(lambda: check_file(path), args.runs)
    codegen_times = timed(lambda: plan_to_pyspark(plan, path), args.runs)
    cli = scopeflow_cli() + ["check", path]
    cli_times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        proc = subprocess.run(cli, capture_output=True, text=True)
        cli_times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            return 1
    noop_times = []  # interpreter start-up + `import scopeflow.cli` floor, for reference
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import scopeflow.cli, scopeflow.compiler"], check=True)
        noop_times.append(time.perf_counter() - t)

    def row(name, xs):
        return f"| {name} | {statistics.median(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} |"

    print(f"pipeline: {path}")
    print(f"  {n_lines} lines, {n_nodes} operators, {n_loops} loops, max nesting depth {max_depth}")
    print()
    print(f"| measurement (n={args.runs}) | median s | min s | max s |")
    print("|---|---|---|---|")
    print(row("check_file (in-process)", check_times))
    print(row("plan_to_pyspark (codegen)", codegen_times))
    print(row("`scopeflow check` CLI wall", cli_times))
    print(row("python start-up + imports only", noop_times))
    med = statistics.median(check_times)
    ok = med < TARGET_SECONDS
    print()
    print(f"check_file median {med:.3f}s: {'within' if ok else 'MISSES'} the {TARGET_SECONDS:.0f}s target")
    if args.profile or not ok:
        print()
        print(profile(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
