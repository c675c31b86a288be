"""Which loops of a streaming pipeline run incrementally across epochs, decided at compile time from the plan
(compiler/incremental.py), with a reason for every loop that does not qualify; explain and the graph show it.
No Spark here: runs are in test_incremental.py."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from scopeflow.compiler import compile_flow
from scopeflow.compiler.explain import explain
from scopeflow.compiler.graph import plan_to_dot, plan_to_mermaid
from scopeflow.compiler.incremental import loop_strategies

ROOT = Path(__file__).resolve().parents[1]

HEAD = """pipeline p
source edges = stream files("in", format = "csv") schema (src: long, dst: long, w: double)
source seeds = read csv("seeds.csv") schema (v: long)
both = edges | union(edges | select(src = dst, dst = src, w))
init = both | select(id = src, label = src) | distinct
"""


def strategy(body: str, head: str = HEAD, scope: str = "l"):
    plan = compile_flow(head + body + "\nsink out -> csv(\"out/x\")\n", "p.flow")
    return loop_strategies(plan)[scope]


def cc(best="labels | reduce(by id, label = min(label))",
       spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label)",
       options="", emit="emit state best", entry="init", imported="both"):
    return f"""out = loop l(labels = {entry}) with (e = {imported}) {options} {{
    best = {best}
    spread = {spread}
    feedback labels <- spread
    {emit}
}}"""


def streaming(example: str) -> str:
    """An example with its first `read csv` made a `stream files`."""
    text = (ROOT / "examples" / example).read_text()
    head, _, rest = text.partition("read csv(")
    path, _, rest = rest.partition(", header = true)")
    return f"{head}stream files({path}, format = \"csv\", header = true){rest}"


@pytest.mark.parametrize("example, scope, states", [
    ("connected_components.flow", "cc", ("n009",)),
    ("sssp.flow", "sssp", ("n008",)),
    ("reachability.flow", "reach", ("n010",)),
    ("transitive_closure.flow", "tc", ("n006",)),
])
def test_the_monotone_examples_are_incremental(example, scope, states):
    plan = compile_flow(streaming(example), example, str(ROOT / "examples"))
    s = loop_strategies(plan)[scope]
    assert s.incremental and s.reasons == () and s.states == states and s.streams == ("n001",)
    assert len(s.seeds) == 1 and "monotone" in s.why


def test_connected_components_pushes_new_edges_across_the_reduce_state():
    s = strategy(cc())
    assert s.incremental, s.reasons
    (seed,) = s.seeds
    assert (seed.imported, seed.import_left, seed.state, seed.var) == ("e", False, s.states[0], None)


def test_reachability_pushes_new_edges_across_the_variables_history():
    s = strategy("""out = loop l(r = seeds) with (e = edges) {
    next = r | join(e, on r.v == e.src) | select(v = e.dst) | union(r) | distinct
    feedback r <- next
    emit next
}""")
    assert s.incremental, s.reasons
    (seed,) = s.seeds
    assert seed.var == "r" and seed.states == s.states and seed.state is None
    assert s.sources == ("n002",)  # the bounded seeds: a change between epochs means recomputing


def test_an_import_on_the_left_of_its_join():
    s = strategy(cc(spread="e | join(best, on e.src == best.id) | select(id = dst, label = label)"))
    assert s.incremental and s.seeds[0].import_left


def test_a_loop_over_bounded_input_only_is_incremental_with_nothing_to_push():
    head = HEAD + "fixed = seeds | select(src = v, dst = v)\n"
    s = strategy(cc(entry="fixed | select(id = src, label = src)", imported="fixed"), head=head)
    assert s.incremental and s.streams == () and s.seeds == ()


@pytest.mark.parametrize("body, reason", [
    (cc(options="rounds 5"), "`rounds 5`: its result is the state after that many rounds"),
    (cc(options="until empty(spread)"), "`until empty(...)`"),
    (cc(options="max 10 on max stop"), "`on max stop`"),
    (cc(best="labels | reduce(by id, label = sum(label))"), "folds with `sum`"),
    (cc(emit="emit last spread"), "`emit last spread`"),
    (cc(emit="emit spread"), "`emit spread` gives the records of every round"),
    (cc(spread="best | join(e, on best.id == e.src, kind = anti)"), "the anti join (line 8)"),
    (cc(spread="best | join(e, on best.id == e.src, kind = left) | select(id = coalesce(dst, id), label)"),
     "the left join (line 8) gives records with nulls"),
    (cc(spread="best | join(e, on best.id == e.src) | group(by id = dst, label = max(label))"),
     "group `spread` (line 8) aggregates each round's records"),
    (cc(spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = 0 - best.label)"),
     "`min(label)` folds a value whose order is reversed"),
    (cc(spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label * best.label)"),
     "may not keep the order"),
    (cc(spread="best | join(e, on best.label == e.src) | select(id = e.dst, label = best.label)"),
     "decides which records meet"),
    (cc(spread="best | where(label > 3) | join(e, on id == e.src) | select(id = e.dst, label)"),
     "`label > 3` could drop a better value"),
    (cc(spread="best | distinct | join(e, on id == e.src) | select(id = e.dst, label)"),
     "it keeps every value `label` takes"),
    (cc(spread="best | select(id, label) | join(e, on id == e.src) | select(id = e.dst, label)"),
     "reads `select#"),
    (cc(spread="best | select(a = id, b = label) | join(best, on a == id) | select(id, label = b)"),
     "two streams of the loop"),
    (cc(spread="best | where(label < 100) | join(e, on id == e.src) | select(id = e.dst, label)"),
     "reads `where#"),
    (cc(spread="e | select(id = src, label = dst) | union(best)"), "import `e` is read by select"),
    (cc(entry="both | group(by id = src, label = min(dst))"), "aggregates its input"),
    (cc(entry="both | join(both | select(x = src, y = dst), on src == y) | select(id = src, label = x)"),
     "joins two streams that grow"),
    (cc(best="labels | derive(t = current_date()) | reduce(by id, label = min(label))"), "`current_date()`"),
])
def test_what_stops_a_loop_from_being_incremental(body, reason):
    s = strategy(body)
    assert not s.incremental
    assert any(reason in r for r in s.reasons), s.reasons


# inputs whose new records an epoch's run over the new input alone would not give
OTHER_LOOP = """ok = loop r(x = seeds) with (g = seeds | select(a = v, b = v + 1)) {
    nx = x | join(g, on x.v == g.a) | select(v = g.b) | union(x) | distinct
    feedback x <- nx
    emit nx
}
allowed = both | join(ok, on src == v) | select(src, dst, w)
"""


@pytest.mark.parametrize("extra, kwargs, reason", [
    (OTHER_LOOP, {"imported": "allowed"}, "import `e`: it comes from loop `r`, whose output each epoch recomputes"),
    ('source roots = read table("db.roots") schema (v: long)\n',
     {"entry": "init | union(roots | select(id = v, label = v))"},
     "source `roots` (line 6) reads table `db.roots`, whose changes between epochs scopeflow cannot see"),
    ("", {"imported": "both | union(seeds | select(src = v, dst = v, w = 0.0))"},
     "adds `select#"),
])
def test_inputs_an_epoch_cannot_derive_from_its_new_records(extra, kwargs, reason):
    s = strategy(cc(**kwargs), head=HEAD + extra)
    assert not s.incremental
    assert any(reason in r for r in s.reasons), s.reasons


def test_a_value_that_takes_its_order_after_several_feedbacks_is_checked():
    """`aux` holds a value of no order until `hop` gives it `label`'s, two feedbacks in: the check passes over
    the body until nothing changes, not a fixed number of times."""
    head = HEAD.replace("label = src)", "label = src, aux = src - src - 1000000)") + \
        'source dag = read csv("dag.csv") schema (a: long, b: long)\n'
    body = """out = loop l(x = init) with (e = both, g = dag) {
    best = x | select(id, label) | union(x | select(id, label = 0 - aux)) | reduce(by id, label = min(label))
    spread = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label, aux = e.dst - e.dst - 1)
    hop = x | join(g, on x.id == g.a) | select(id = g.b, label, aux = label)
    feedback x <- spread | union(hop)
    emit state best
}"""
    s = strategy(body, head=head)
    assert not s.incremental
    assert any("improve downwards from one input and upwards from another" in r for r in s.reasons), s.reasons


def test_an_order_passed_through_many_fields_is_still_followed():
    """`label = 0 - a11` where a11 gets `label`'s order only after eleven feedbacks (a1 = label, a2 = a1, ...):
    more feedbacks than the body has operators, so the passes are bounded by operators times fields."""
    fields = [f"a{i}" for i in range(1, 12)]
    zero = ", ".join(f"{f} = src - src" for f in fields)
    head = ("pipeline p\nsource edges = stream files(\"in\", format = \"csv\") schema (src: long, dst: long)\n"
            "source dag = read csv(\"dag.csv\") schema (a: long, b: long)\n"
            f"init = edges | select(id = src, label = src, {zero}) | distinct\n")
    shifted = ", ".join(f"{f} = {g}" for f, g in zip(fields[1:], fields))
    body = f"""out = loop l(x = init) with (e = edges, g = dag) {{
    best = x | reduce(by id, label = min(label))
    sp = best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label, a1 = best.label, """ + \
        ", ".join(f"{f} = e.dst - e.dst" for f in fields[1:]) + f""")
    sh = x | join(g, on x.id == g.a) | select(id = g.b, label = 0 - a11, a1 = g.b - g.b, {shifted})
    feedback x <- sp | union(sh)
    emit state best
}}"""
    s = strategy(body, head=head)
    assert not s.incremental
    assert any("improve downwards from one input and upwards from another" in r for r in s.reasons), s.reasons


def test_a_date_in_input_that_does_not_grow_is_recomputed():
    """`current_date()` on a bounded source's way into the loop: the input changes with the day, not the files."""
    head = HEAD + 'source leases = read csv("leases.csv") schema (v: long, until: date)\n'
    body = cc(entry="init | union(leases | where(until >= current_date()) | select(id = v, label = v))")
    s = strategy(body, head=head)
    assert not s.incremental
    assert any("calls `current_date()`" in r for r in s.reasons), s.reasons


def test_a_bounded_sources_fingerprint_sees_a_glob_and_says_none_for_remote_paths(tmp_path):
    from scopeflow.runtime.incremental import bounded_fingerprint

    (tmp_path / "part-1.csv").write_text("1\n")
    pattern = str(tmp_path / "part-*.csv")
    first = bounded_fingerprint(pattern)
    assert [f[0] for f in first["files"]] == ["part-1.csv"]
    (tmp_path / "part-2.csv").write_text("2\n")
    assert bounded_fingerprint(pattern) != first
    assert bounded_fingerprint(str(tmp_path / "missing.csv"))["files"] == []
    assert bounded_fingerprint("s3a://bucket/seeds.csv") is None


@pytest.mark.parametrize("spread", [
    "best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label + 1)",
    "best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label * 2 + cast(e.w as long))",
    "best | join(e, on best.id == e.src) | select(id = e.dst, label = least(best.label, e.src))",
    "best | join(e, on best.id == e.src) | where(label < 100) | select(id = e.dst, label)",
    "best | join(e, on best.id == e.src) | where(w >= 0 and label <= 50) | select(id = dst, label)",
])
def test_order_keeping_values_stay_incremental(spread):
    s = strategy(cc(spread=spread))
    assert s.incremental, s.reasons


def test_a_function_that_skips_nulls_where_the_state_keeps_them_makes_the_loop_recomputed():
    """A null is the worst value a `min` or `max` keeps. `greatest(null, x) = x` would be a better value than the
    real one arriving later gives under a `min` (and `least` under a `max`): recomputed, with the reason. `least`
    under a `min` keeps the order, nulls too (test_order_keeping_values_stay_incremental)."""
    for best, fn in (("min", "greatest"), ("max", "least")):
        s = strategy(cc(best=f"labels | reduce(by id, label = {best}(label))",
                        spread=f"best | join(e, on best.id == e.src) | select(id = e.dst, label = {fn}(best.label, e.src))"))
        assert not s.incremental, (best, fn)
        assert any(f"`{fn}(label, src)` skips nulls" in r for r in s.reasons), s.reasons
    ok = strategy(cc(best="labels | reduce(by id, label = max(label))",
                     spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = greatest(best.label, e.src))"))
    assert ok.incremental, ok.reasons


@pytest.mark.parametrize("dist, reverse, incremental", [
    ("w", "0 - dist", False), ("w", "-dist", False), ("w", "dist * -2", False),
    ("cast(w as long)", "0 - dist", True), ("cast(w as long)", "-dist", True), ("cast(w as long)", "dist * -2", True),
])
def test_reversing_a_double_makes_the_loop_recomputed(dist, reverse, incremental):
    """Spark orders NaN above every number and `0.0 - NaN` is NaN: reversed, the worst distance a `min` keeps would
    be the best value of the `max` over it. A `long` has no NaN, so its reversal stays incremental."""
    s = strategy(f"""out = loop l(d = edges | select(id = src, dist = {dist})) with (e = both) {{
    best = d | reduce(by id, dist = min(dist))
    relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist + {dist.replace('w', 'e.w')})
    far = best | select(id, x = {reverse}) | reduce(by id, x = max(x))
    feedback d <- relax
    emit state far
}}""")
    assert s.incremental is incremental, s.reasons
    if not incremental:
        assert any("reverses the order of a `double`" in r for r in s.reasons), s.reasons


def test_a_factor_that_is_not_finite_keeps_no_order():
    """`dist * 1e999` is `dist * inf`, and `0 * inf` is NaN: no order to keep; a finite factor keeps it."""
    for factor, incremental in (("1e999", False), ("2.5", True)):
        s = strategy(f"""out = loop l(d = edges | select(id = src, dist = w)) with (e = both) {{
    best = d | reduce(by id, dist = min(dist))
    relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist + e.w)
    far = best | select(id, x = dist * {factor}) | reduce(by id, x = min(x))
    feedback d <- relax
    emit state far
}}""")
        assert s.incremental is incremental, (factor, s.reasons)
        assert incremental or any("may not keep the order" in r for r in s.reasons), s.reasons


def _relax(spread: str, fold: str = "min", dist: str = "w") -> str:
    return f"""out = loop l(d = edges | select(id = src, dist = {dist})) with (e = both) {{
    best = d | reduce(by id, dist = {fold}(dist))
    relax = best | join(e, on best.id == e.src) | {spread}
    feedback d <- relax
    emit state best
}}"""


@pytest.mark.parametrize("spread, fold, dist, guarded", [
    ("select(id = e.dst, dist = best.dist + e.w)", "min", "w", True),
    ("select(id = e.dst, dist = best.dist - e.w)", "min", "w", True),
    ("select(id = e.dst, dist = least(best.dist, e.w) + e.w)", "min", "w", True),
    ("select(id = e.dst, dist = best.dist + 1.5)", "min", "w", False),  # a finite literal never makes NaN
    ("select(id = e.dst, dist = best.dist * 2.0)", "min", "w", False),  # nor does a finite positive factor
    ("select(id = e.dst, dist = best.dist + cast(e.w as long))", "min", "cast(w as long)", False),  # (a long)
    ("select(id = e.dst, dist = best.dist + 1.5)", "max", "w", False),
    # a filter: `-Infinity + w <= 5.0` is `NaN <= 5.0` (false) where a finite value passes
    ("where(best.dist + e.w <= 5.0) | select(id = e.dst, dist = least(best.dist, e.w))", "min", "w", True),
    # arithmetic that cannot overflow down to -Infinity leaves the value as good as the state's
    ("derive(x = best.dist + 1.0) | select(id = e.dst, dist = x - e.w)", "min", "w", True),
    ("derive(x = best.dist * 0.5) | select(id = e.dst, dist = x / 2.0 + e.w)", "min", "w", True),
])
def test_a_min_whose_double_meets_an_infinity_is_guarded_against_minus_infinity(spread, fold, dist, guarded):
    """`-Infinity + Infinity` is NaN, which Spark orders above every number: a `min`'s best value, -Infinity,
    would give the worst result. The `double`s a `min` keeps that reach a `+`/`-` with an operand that can be
    infinite are guarded: the runtime checks them for -Infinity after every epoch (test_incremental.py)."""
    s = strategy(_relax(spread, fold, dist))
    assert s.incremental, s.reasons
    assert s.guards == ((s.states[0], "dist"),) if guarded else s.guards == ()
    plan = compile_flow(HEAD + _relax(spread, fold, dist) + "\nsink out -> csv(\"out/x\")\n", "p.flow")
    assert ("must hold no -Infinity" in explain(plan)) is guarded


@pytest.mark.parametrize("body", [
    # through a join (with an import that does not grow, the stream on its right)
    """best = d | reduce(by id, dist = min(dist))
    t = best | join(e, on best.id == e.src) | select(id = e.dst, x = best.dist * 2.0, w = e.w)
    relax = s | join(t, on s.v == t.id) | select(id, dist = x + w)""",
    # through a union with a stream that went through none
    """best = d | reduce(by id, dist = min(dist))
    t = best | join(e, on best.id == e.src) | select(id = e.dst, dist, w = e.w)
    relax = t | select(id, x = dist * 2.0, w) | union(t | select(id, x = dist, w)) | select(id, dist = x + w)""",
    # through the feedback, into the variable, before any reduce
    """x = d | select(id, dist = dist + cast(id as double))
    best = x | reduce(by id, dist = min(dist))
    relax = best | join(e, on best.id == e.src) | select(id = e.dst, dist = best.dist * 2.0)""",
])
def test_arithmetic_is_followed_through_joins_unions_and_the_feedback(body):
    s = strategy(f"""out = loop l(d = edges | select(id = src, dist = w)) with (e = both, s = seeds) {{
    {body}
    feedback d <- relax
    emit state best
}}""")
    assert not s.incremental
    assert any("went through arithmetic of `double`s" in r for r in s.reasons), s.reasons


@pytest.mark.parametrize("spread, fold, says", [
    ("select(id = e.dst, dist = best.dist + e.w)", "max", "adds `double`s under a `max`"),
    ("select(id = e.dst, dist = best.dist * 2.0 + e.w)", "min", "adds to `dist * 2.0`, which went through arithmetic"),
    ("derive(x = best.dist - 1.0) | select(id = e.dst, dist = x - e.w)", "min", "adds to `x`, which went through"),
    ("derive(t = best.dist * 2.0) | where(t + e.w <= 5.0) | select(id = e.dst, dist = least(best.dist, e.w))", "min",
     "adds to `t`, which went through"),
])
def test_a_double_whose_nan_no_state_shows_makes_the_loop_recomputed(spread, fold, says):
    """Where -Infinity meeting an infinity cannot be seen in a `min`'s state, the loop is recomputed: a `max`
    (-Infinity is its worst value, which its state does not keep; a run over all input may push it before a
    better one arrives), and a value that went through arithmetic of `double`s since its `min` (an overflow
    makes a finite value -Infinity)."""
    s = strategy(_relax(spread, fold))
    assert not s.incremental
    assert any(says in r for r in s.reasons), s.reasons


def test_integer_arithmetic_on_an_ordered_value_is_named_for_the_runtime():
    """`label + 1` keeps the order while an overflow fails the run (Spark's ANSI mode, the default); the runtime
    recomputes the loop when `spark.sql.ansi.enabled=false` lets it wrap around (test_incremental.py)."""
    assert strategy(cc(spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = best.label + 1)")) \
        .wraps == "`label + 1` in select `spread` (line 8)"
    assert strategy(cc()).wraps == ""  # the label passes as it is
    top = "labels | reduce(by id, label = max(label))"
    assert strategy(cc(best=top, spread="best | join(e, on best.id == e.src) | where(best.label + 1 > 0) | "
                                        "select(id = e.dst, label = best.label)")).wraps == "`label + 1` in where (line 8)"
    assert strategy(cc(spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = -best.label) | "
                              "select(id, label = -label)")).wraps == "`-label` in select (line 8)"
    assert strategy(_relax("select(id = e.dst, dist = best.dist + e.w)")).wraps == ""  # (doubles: `guards`)


def test_a_max_reduce_wants_values_that_grow():
    ok = strategy(cc(best="labels | reduce(by id, label = max(label))"))
    assert ok.incremental, ok.reasons
    bad = strategy(cc(best="labels | reduce(by id, label = max(label))",
                      spread="best | join(e, on best.id == e.src) | select(id = e.dst, label = -best.label)"))
    assert not bad.incremental and any("reversed" in r for r in bad.reasons), bad.reasons


def test_a_nested_loop_is_recomputed_with_its_parent():
    text = (ROOT / "examples" / "kcore.flow").read_text().replace(
        'read csv(edges_path, header = true)', 'stream files(edges_path, format = "csv", header = true)')
    plan = compile_flow(text, "kcore.flow", str(ROOT / "examples"))
    strategies = loop_strategies(plan)
    assert list(strategies) == ["kcore"]  # its nested loop runs inside its rounds
    assert any("it runs loop `peel` in every round" in r for r in strategies["kcore"].reasons)


def test_a_batch_pipeline_has_no_strategies():
    plan = compile_flow((ROOT / "examples" / "connected_components.flow").read_text(), "cc.flow",
                        str(ROOT / "examples"))
    assert loop_strategies(plan) == {}
    assert "loops across epochs" not in explain(plan)


def test_explain_and_the_graph_show_each_loops_strategy():
    plan = compile_flow(HEAD + cc() + "\n" + cc(options="rounds 3").replace("loop l(", "loop m(").replace(
        "out =", "out2 =") + "\nsink out -> csv(\"out/x\")\nsink out2 -> csv(\"out/y\")\n", "p.flow")
    text = explain(plan)
    assert "loops across epochs:\n  l: incremental\n    - monotone: reduce min `best` only improves" in text
    assert "new records of import `e` meet the state of `best` at the join (line 8)" in text
    assert "  m: recomputed\n    - `rounds 3`" in text
    dot = plan_to_dot(plan)
    assert "incremental across epochs" in dot and "recomputed each epoch" in dot
    assert "recomputed each epoch: `rounds 3`" in dot  # the reason, in the loop's tooltip
    assert "incremental across epochs" in plan_to_mermaid(plan)


@pytest.mark.parametrize("setting, says", [
    ("spark.scopeflow.incremental=sometimes", "expected auto, off or always"),
    ("spark.scopeflow.incremental.maxChange=ten", "expected a fraction of the input so far"),
    ("spark.scopeflow.incremental.maxChange=-0.5", "at least 0"),
    ("spark.scopeflow.incremnetal=off", "not a scopeflow setting (did you mean spark.scopeflow.incremental?)"),
])
def test_a_bad_incremental_setting_is_a_usage_error_before_spark_starts(run_cli, tmp_path, setting, says):
    (tmp_path / "in").mkdir()
    flow = tmp_path / "p.flow"
    flow.write_text(streaming("connected_components.flow").replace('"data/graph.csv"', '"in"'))
    out = run_cli("run", str(flow), "--trigger", "available-now", "--checkpoint", str(tmp_path / "ck"),
                  "--conf", setting, env={**os.environ, "JAVA_HOME": "/nonexistent", "PATH": os.path.dirname(sys.executable)})
    assert out.returncode == 2, out.stderr
    assert f"--conf {setting}: " in out.stderr and says in out.stderr
    assert not (tmp_path / "ck").exists()
