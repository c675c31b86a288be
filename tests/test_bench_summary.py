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
    # no stdlib runs: its ratios are n/a
    assert cells == ["path", "1.26x", "1.19x", "> 1.5x", "> 2.3x", "n/a", "n/a"]
    assert abs(ratios["path"]["naive/scopeflow"][0] - 157.66 / 101.33) < 1e-9


def test_stdlib_against_delta():
    results = {
        ("path", "stdlib"): [run(16.0, 22), run(15.0, 22), run(18.0, 22)],
        ("path", "delta"): [run(80.0, 408), run(90.0, 408), run(85.0, 408)],
    }
    table, ratios = bench_cc.summarise(results, ["path"], ["stdlib", "delta"])
    ratio_row = [line for line in table.splitlines() if line.startswith("| path |") and "x |" in line][0]
    cells = [c.strip() for c in ratio_row.strip("|").split("|")]
    assert cells[-2:] == ["0.19x", "0.19x"]  # 15 / 80 and 16 / 85
    assert ratios["path"]["stdlib/delta"] == (15.0 / 80.0, 16.0 / 85.0)


def test_runs_stopped_by_the_time_limit_say_so():
    results = {
        ("path", "scopeflow"): [run(100.0, 409)],
        ("path", "naive"): [run(900.5, 300, True)],
    }
    table, _ = bench_cc.summarise(results, ["path"], ["scopeflow", "naive"])
    assert "| 300+ (stopped) |" in table and "stopped after 300 rounds" in table
    assert "| > 9.0x | > 9.0x |" in table


def test_unfinished_naive_runs_are_compared_over_as_many_rounds():
    # scopeflow: 1 s of reading, then 10 rounds of 2 s each (the runs' reports); its last round is
    # followed by 1 s of writing
    per_round = [{"seconds": 2.0} for _ in range(10)]
    ours = [dict(run(22.0, 10), info={"report_rounds": per_round}),
            dict(run(24.0, 10), info={"report_rounds": per_round})]
    results = {("path", "scopeflow"): ours,
               ("path", "naive"): [run(30.0, 4, True, "boom"), run(40.0, 6, True), run(50.0, 10)]}
    table, _ = bench_cc.summarise(results, ["path"], ["scopeflow", "naive"])
    rows = [line for line in table.splitlines() if line.startswith("| path | ") and line.count("|") == 7]
    # run 1 failed in its 5th round: scopeflow's runs took 22 - 5 * 2 = 12 and 14 s to get through 5
    # rounds, median 13 s; run 2 was stopped after 6 rounds: 14 and 16 s, median 15; run 3 finished
    assert rows == ["| path | 1 | 5 | 30.0 | 13.0 | 2.3x |", "| path | 2 | 6 | 40.0 | 15.0 | 2.7x |"]
    assert "after 4-6 rounds: boom" in table  # the main table: the range of rounds the unfinished runs got through


def test_no_equal_round_table_without_round_figures():
    results = {("path", "scopeflow"): [run(100.0, 409)], ("path", "naive"): [run(900.5, 300, True)]}
    table, _ = bench_cc.summarise(results, ["path"], ["scopeflow", "naive"])
    assert "as many rounds" not in table
