"""`top(N, by k, ..., order EXPR [desc|asc], ...)`: the first N records of each key group in that order, ties
broken by the record's other fields, at the pipeline level and per round inside a loop; checked against a
plain-Python reference that follows Spark's order of nulls (first ascending, last descending)."""
from __future__ import annotations

import functools
import random
import textwrap
from collections import Counter

import pytest

from conftest import read_output
from scopeflow.api import run_file
from scopeflow.compiler import check_flow

pytestmark = pytest.mark.spark


def _compare(a, b, desc: bool) -> int:
    if a == b:
        return 0
    if a is None or b is None:  # Spark: nulls first ascending, last descending
        return (-1 if a is None else 1) * (-1 if desc else 1)
    return (-1 if a < b else 1) * (-1 if desc else 1)


def reference_top(rows, n, keys, order, ties):
    """`rows` as dicts; keys: field names; order: (function of a row, desc); ties: field names, ascending."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)

    def cmp(a, b):
        for f, desc in [*order, *((lambda r, t=t: r[t], False) for t in ties)]:
            c = _compare(f(a), f(b), desc)
            if c:
                return c
        return 0

    return [r for group in groups.values() for r in sorted(group, key=functools.cmp_to_key(cmp))[:n]]


def write(tmp_path, text: str) -> str:
    path = tmp_path / "top.flow"
    path.write_text(textwrap.dedent(text))
    return str(path)


def rows_text(rows) -> str:
    def lit(x):
        return "null" if x is None else (f'"{x}"' if isinstance(x, str) else str(x))

    return ", ".join("(" + ", ".join(lit(x) for x in r) + ")" for r in rows)


def opt_int(text):
    return None if text == "" else int(text)


RNG = random.Random(11)
ROWS = [(RNG.randint(1, 4), RNG.randint(1, 3), RNG.choice([None, 1, 2, 2, 3, 5]), RNG.choice("abc"))
        for _ in range(60)]  # (g, h, v, s): many ties, some nulls


def test_top_at_the_pipeline_level(spark, tmp_path):
    flow = write(tmp_path, f"""
        param k: long = 2
        source t = values (g: long, h: long, v: long, s: string) [{rows_text(ROWS)}]
        sink t | top(k, by g, order v desc) -> csv("out/by_g", header = true)
        sink t | top(3, by g, h, order v, s desc) -> csv("out/by_gh", header = true)
        sink t | top(4, order v * 10 - h desc) -> csv("out/all", header = true)
    """)
    run_file(flow, spark=spark, params={"k": 3})
    dicts = [dict(zip("ghvs", r)) for r in ROWS]
    types = (int, int, opt_int, str)

    def got(name):
        return Counter(read_output(str(tmp_path / "out" / name), types))

    def want(rows):
        return Counter(tuple(r[f] for f in "ghvs") for r in rows)

    assert got("by_g") == want(reference_top(dicts, 3, ["g"], [(lambda r: r["v"], True)], ["h", "s"]))
    assert got("by_gh") == want(reference_top(dicts, 3, ["g", "h"], [(lambda r: r["v"], False),
                                                                       (lambda r: r["s"], True)], []))
    score = (lambda r: None if r["v"] is None else r["v"] * 10 - r["h"])
    assert got("all") == want(reference_top(dicts, 4, [], [(score, True)], ["g", "h", "v", "s"]))
    assert sum(got("by_g").values()) < len(ROWS)  # it kept fewer than all


def test_top_per_round_inside_a_loop(spark, tmp_path):
    """Each round's records only: round i holds the records with r >= i (r counted down)."""
    rows = [(g, v, r) for g, _, v, r in ((g, h, v, RNG.randint(0, 3)) for g, h, v, _ in ROWS)]
    flow = write(tmp_path, f"""
        source t = values (g: long, v: long, r: long) [{rows_text(rows)}]
        tops = loop l(x = t) {{
            best = x | top(2, by g, order v desc)
            feedback x <- x | where(r > 0) | derive(r = r - 1)
            emit best
        }}
        sink tops -> csv("out/tops", header = true)
    """)
    run_file(flow, spark=spark)
    want: Counter = Counter()
    for i in range(4):
        now = [{"g": g, "v": v, "r": r - i} for g, v, r in rows if r >= i]
        want.update((r["g"], r["v"], r["r"]) for r in reference_top(now, 2, ["g"], [(lambda r: r["v"], True)], ["r"]))
    assert Counter(read_output(str(tmp_path / "out" / "tops"), (int, opt_int, int))) == want


def test_top_without_keys_and_with_a_param_count_per_round(spark, tmp_path):
    """`top(k, order ...)` in a loop: the round's k best records (a sort and a limit in the round's job)."""
    rows = [(v, r) for _, _, v, r in ((g, h, v, RNG.randint(0, 3)) for g, h, v, _ in ROWS)]
    flow = write(tmp_path, f"""
        param k: long = 2
        source t = values (v: long, r: long) [{rows_text(rows)}]
        tops = loop l(x = t) {{
            feedback x <- x | where(r > 0) | derive(r = r - 1)
            emit x | top(k, order v desc) as best
            emit x | top(1, order r, v) as first
        }}
        sink tops.best -> csv("out/best", header = true)
        sink tops.first -> csv("out/first", header = true)
    """)
    run_file(flow, spark=spark, params={"k": 3})
    best: Counter = Counter()
    first: Counter = Counter()
    for i in range(4):
        now = [{"v": v, "r": r - i} for v, r in rows if r >= i]
        best.update((r["v"], r["r"]) for r in reference_top(now, 3, [], [(lambda r: r["v"], True)], ["r"]))
        first.update((r["v"], r["r"]) for r in reference_top(now, 1, [], [(lambda r: r["r"], False),
                                                                            (lambda r: r["v"], False)], []))
    assert Counter(read_output(str(tmp_path / "out" / "best"), (opt_int, int))) == best
    assert Counter(read_output(str(tmp_path / "out" / "first"), (opt_int, int))) == first


def test_a_top_count_param_below_one_fails_the_run(spark, tmp_path):
    from scopeflow.runtime.errors import RuntimeFailure

    flow = write(tmp_path, """
        param k: long = 2
        source t = values (g: long, v: long) [(1, 2)]
        sink t | top(k, by g, order v) -> csv("out/t", header = true)
    """)
    with pytest.raises(RuntimeFailure, match="must be at least 1"):
        run_file(flow, spark=spark, params={"k": 0})
    assert not (tmp_path / "out" / "t").exists()


DEF_TOP = """def best(s: (g: long, v: long), k: long = 2) {
    return s | top(k, by g, order v desc)
}
def named(s: (g: long, v: long), k: string) {
    return s | top(k, order v)
}
"""


@pytest.mark.parametrize("text,code", [
    ("x = t | top(0, order v)", "E0320"),
    ("x = t | top(name, order v)", "E0104"),
    ("x = t | top(2, by g, order w)", "E0301"),
    ("x = t | top(2, order count())", "E0310"),
    ("x = t | best(0)", "E0320"),
    ('x = t | named("a")', "E0104"),
])
def test_top_errors(text, code):
    result = check_flow('param name: string = "x"\nsource t = values (g: long, v: long) [(1, 2)]\n'
                        f"{DEF_TOP}{text}\nsink x -> console()\n")
    assert [d.code for d in result.errors] == [code], [d.render() for d in result.errors]
