"""The benchmark's summary table (benchmarks/bench_cc.py): lower bounds for runs that did not finish."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import bench_cc  # noqa: E402


def run(seconds, rounds, stopped=False, error=None):
    return {"seconds": seconds, "rounds": rounds, "stopped": stopped, "error": error}


def test_failed_runs_give_rounded_down_lower_bounds():
    results = {
        ("path", "scopeflow"): [run(106.42, 409), run(102.55, 409), run(101.33, 409)],
        ("path", "delta"): [run(86.17, 408), run(80.36, 408), run(89.70, 408)],
        ("path", "naive"): [run(157.66, 216, True, "boom"), run(237.92, 216, True, "boom"),
                            run(248.57, 216, True, "boom")],
    }
    table, ratios = bench_cc.summarise(results, ["path"], ["scopeflow", "delta", "naive"])
    rows = {line.split(" | ")[1]: line for line in table.splitlines() if line.startswith("| path | ")}
    assert "| 216 (failed) |" in rows["naive"]  # failed, not stopped by the time limit
    ratio_row = [line for line in table.splitlines() if line.startswith("| path |") and "x |" in line][0]
    cells = [c.strip() for c in ratio_row.strip("|").split("|")]
    # 101.33 / 80.36 and 102.55 / 86.17; naive: 157.66 / 101.33 = 1.556 -> "> 1.5x" (a lower bound is
    # rounded down), median 237.92 / 102.55 = 2.32 -> "> 2.3x"
    assert cells == ["path", "1.26x", "1.19x", "> 1.5x", "> 2.3x"]
    assert abs(ratios["path"]["naive/scopeflow"][0] - 157.66 / 101.33) < 1e-9


def test_runs_stopped_by_the_time_limit_say_so():
    results = {
        ("path", "scopeflow"): [run(100.0, 409)],
        ("path", "naive"): [run(900.5, 300, True)],
    }
    table, _ = bench_cc.summarise(results, ["path"], ["scopeflow", "naive"])
    assert "| 300+ (stopped) |" in table and "stopped after 300 rounds" in table
    assert "| > 9.0x | > 9.0x |" in table
