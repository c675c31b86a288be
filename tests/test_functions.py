"""Every builtin function of the registry (stdlib/functions.py) runs on Spark and gives what a
plain-Python reference computes; every documented example type-checks and compiles."""
from __future__ import annotations

import datetime as dt
import glob
import hashlib
import inspect
import json
import math
import re
import time
from decimal import ROUND_HALF_UP, Decimal

import pytest

from scopeflow.compiler import check_flow
from scopeflow.compiler.codegen import plan_to_pyspark
from scopeflow.api import run_file
from scopeflow.runtime.spec import split_top_level
from scopeflow.stdlib.functions import FUNCTIONS

TS = 'to_timestamp("2024-03-15 13:45:30")'
D = 'to_date("2024-03-15")'


def half_up(x: str, places: int) -> float:
    return float(Decimal(x).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def today_offset() -> int:
    return (dt.date.today() - dt.date(2000, 1, 1)).days


# (expression, reference value or a predicate on the value Spark returns)
CASES = [
    ('if(1 < 2, "yes", "no")', "yes"),
    ("coalesce(null, 7, 8)", 7),
    ("isnan(sqrt(-1.0))", True),
    ("abs(-3)", 3),
    ("sqrt(16.0)", 4.0),
    ("cbrt(27.0)", pytest.approx(3.0)),
    ("exp(1.0)", pytest.approx(math.e)),
    ("ln(10.0)", pytest.approx(math.log(10.0))),
    ("log10(1000.0)", pytest.approx(3.0)),
    ("log2(8.0)", pytest.approx(3.0)),
    ("pow(2.0, 10.0)", 1024.0),
    ("round(2.345, 2)", half_up("2.345", 2)),
    ("round(2.5)", half_up("2.5", 0)),  # half up, not Python's round-half-even
    ("floor(7.8)", math.floor(7.8)),
    ("ceil(7.2)", math.ceil(7.2)),
    ("sign(-4.0)", -1.0),
    ("least(3, 1, 2)", 1),
    ("greatest(3, 1, 2)", 3),
    ("sin(0.5)", pytest.approx(math.sin(0.5))),
    ("cos(0.5)", pytest.approx(math.cos(0.5))),
    ("tan(0.5)", pytest.approx(math.tan(0.5))),
    ("atan2(1.0, 2.0)", pytest.approx(math.atan2(1.0, 2.0))),
    ("hash(1, 2)", "sql:SELECT xxhash64(CAST(1 AS BIGINT), CAST(2 AS BIGINT))"),  # Spark SQL's own xxhash64
    ('lower("AbC")', "abc"),
    ('upper("AbC")', "ABC"),
    ('length("héllo")', len("héllo")),
    ('substr("scopeflow", 2, 3)', "scopeflow"[1:4]),
    ('concat("a", "-", "b")', "a-b"),
    ('split("a,b,,c", ",")', "a,b,,c".split(",")),
    ('split("x;y", sep)', "x;y".split(";")),  # a param where Spark takes a Python value
    ('trim("  x  ")', "x"),
    ('ltrim("  x  ")', "x  "),
    ('rtrim("  x  ")', "  x"),
    ('replace("a/b/c", "/", "_")', "a/b/c".replace("/", "_")),
    ('starts_with("https://x", "https")', True),
    ('ends_with("f.csv", ".txt")', False),
    ('like("alpha", "a%")', True),
    ('regexp_extract("id-123-x", "([0-9]+)", 1)', re.search("([0-9]+)", "id-123-x").group(1)),
    ('regexp_replace("a1b22", "[0-9]", "#")', re.sub("[0-9]", "#", "a1b22")),
    ('lpad("42", 5, "0")', "42".rjust(5, "0")),
    ('rpad("42", 5, ".")', "42".ljust(5, ".")),
    ('reverse("abc")', "cba"),
    ('initcap("hello world")', "hello world".title()),
    ('instr("a@b", "@")', "a@b".index("@") + 1),
    ('md5("abc")', hashlib.md5(b"abc").hexdigest()),
    ('sha2("abc", 256)', hashlib.sha256(b"abc").hexdigest()),
    ("array(1, 2)", [1, 2]),
    ("size(array(1, 2, 3))", 3),
    ("contains(array(1, 2), 2)", True),
    ('contains("scopeflow", "flow")', True),
    ("array_distinct(array(1, 2, 1))", [1, 2]),
    ("sort_array(array(3, 1, 2))", [1, 2, 3]),
    ("array_min(array(3, 1, 2))", 1),
    ("array_max(array(3, 1, 2))", 3),
    (f"year({D})", 2024),
    (f"month({D})", 3),
    (f"day({D})", 15),
    (f"dayofweek({D})", dt.date(2024, 3, 15).isoweekday() % 7 + 1),  # 1 = Sunday
    (f"hour({TS})", 13),
    (f"minute({TS})", 45),
    (f"second({TS})", 30),
    ('date_add(to_date("2024-02-27"), 3)', str(dt.date(2024, 2, 27) + dt.timedelta(days=3))),
    ('date_sub(to_date("2024-03-01"), 1)', str(dt.date(2024, 3, 1) - dt.timedelta(days=1))),
    (f'datediff({D}, to_date("2024-01-01"))', (dt.date(2024, 3, 15) - dt.date(2024, 1, 1)).days),
    ('add_months(to_date("2024-01-31"), 1)', "2024-02-29"),  # clamped to the month's last day
    ('to_date("15/03/2024", "dd/MM/yyyy")', "2024-03-15"),
    (f'date_format({TS}, "yyyy-MM-dd HH:mm:ss")', "2024-03-15 13:45:30"),
    (f'date_format(date_trunc("month", {TS}), "yyyy-MM-dd HH:mm:ss")', "2024-03-01 00:00:00"),
    ("unix_timestamp(timestamp_seconds(1700000000))", 1700000000),
    ("unix_timestamp(to_timestamp(from_unixtime(1700000000)))", 1700000000),  # a string in the session zone
    (f"dayofyear({D})", dt.date(2024, 3, 15).timetuple().tm_yday),
    (f"weekofyear({D})", dt.date(2024, 3, 15).isocalendar()[1]),
    (f"quarter({D})", (3 - 1) // 3 + 1),
    ('months_between(to_date("2024-03-31"), to_date("2024-01-31"))', 2.0),
    ('concat_ws("-", "a", "b", "c")', "-".join("abc")),
    ('rlike("me@example.com", "@example\\.com$")', re.search(r"@example\.com$", "me@example.com") is not None),
    ("element_at(array(10, 20, 30), -1)", [10, 20, 30][-1]),
    ("element_at(array(10, 20, 30), 4)", None),  # past the end: null, not an error
    ('array_join(array("x", "y"), ",")', ",".join(["x", "y"])),
    ("pmod(-7, 3)", -7 % 3),
    ("nullif(5, 5)", None),
    ('datediff(current_date(), to_date("2000-01-01"))', lambda v: abs(v - today_offset()) <= 1),
    ("unix_timestamp(current_timestamp())", lambda v: abs(v - time.time()) < 600),
]


def _called(expr: str) -> set:
    return set(re.findall(r"([a-z_0-9]+)\(", re.sub(r'"[^"]*"', '""', expr)))


def test_every_registry_function_has_a_case():
    missing = set(FUNCTIONS) - set().union(*(_called(e) for e, _ in CASES))
    assert not missing, f"add a case for {sorted(missing)}"


@pytest.mark.spark
def test_every_builtin_runs_on_spark_and_matches_python(tmp_path, spark):
    cols = ",\n        ".join(f"c{i} = {expr}" for i, (expr, _) in enumerate(CASES))
    flow = tmp_path / "fns.flow"
    flow.write_text(f"param sep: string = \";\"\n"
                    f"source one = values (x: long) [(1)]\n"
                    f"sink one | select(\n        {cols}) -> json(\"out/r\")\n")
    run_file(str(flow), spark=spark)
    (line,) = [ln for f in sorted(glob.glob(str(tmp_path / "out/r/part-*"))) for ln in open(f) if ln.strip()]
    row = json.loads(line)
    wrong = []
    for i, (expr, want) in enumerate(CASES):
        got = row.get(f"c{i}")
        if isinstance(want, str) and want.startswith("sql:"):
            want = spark.sql(want[4:]).first()[0]
        ok = want(got) if inspect.isfunction(want) else got == want
        if not ok:
            wrong.append(f"{expr} = {got!r}, want {want!r}")
    assert not wrong, "\n".join(wrong)


def _example_program(func) -> str:
    """A one-line program around the registry example: its bare field names become fields of the
    input, typed by the argument they are passed as."""
    kinds = {"num": "double", "int": "long", "str": "string", "date": "timestamp", "arr": "array<long>",
             "any": "long", "bool": "boolean", "strarr": "array<string>"}
    inner = func.example[len(func.name) + 1:-1]
    args = split_top_level(re.sub(r'"[^"]*"', lambda m: m.group(0).replace(",", "\0"), inner))  # no split in "a,b"
    fields = {}
    for i, a in enumerate(args):
        if re.fullmatch(r"[a-z_]\w*", a):
            fields[a] = kinds[func.kind_of(i).removeprefix("lit:")]
    for ident in re.findall(r"\b([a-z_]\w*)\b(?!\()", re.sub(r'"[^"]*"', '""', inner)):
        fields.setdefault(ident, "double")
    schema = ", ".join(f"{k}: {v}" for k, v in fields.items()) or "x: long"
    return f"source t = values ({schema}) []\nsink t | select(r = {func.example}) -> console()\n"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_registry_example_type_checks_and_compiles(name):
    text = _example_program(FUNCTIONS[name])
    result = check_flow(text, "example.flow", "/nonexistent")
    assert not result.errors, (text, [d.message for d in result.errors])
    code = plan_to_pyspark(result.plan, "/nonexistent/example.flow")
    compile(code, "example.py", "exec")


@pytest.mark.parametrize("expr, message", [
    ("contains(x, 3)", "argument 1 of `contains` must be a string or an array, got long"),
    ('contains(xs, "q")', "`contains` looks for a long in an array<long>, got a string"),
    ("least(s, x)", "the arguments of `least` need one common type, got string, long"),
    ("if(x > 1, s, x)", "the arguments of `if` need one common type, got string, long"),
    ("abs(s)", "argument 1 of `abs` must be a number, got string"),
    ("contains(xs, null)", "`contains` needs a string or an array and a value to look for, got null"),
    ("contains(s, xs)", "`contains` looks for a string in a string, got an array<long>"),
])
def test_calls_spark_would_reject_are_compile_errors(expr, message):
    result = check_flow("source e = values (x: long, s: string, xs: array<long>) []\n"
                        f"sink e | select(a = {expr}) -> console()\n", "t.flow", "/nonexistent")
    assert [(d.code, d.message) for d in result.errors] == [("E0305", message)]


@pytest.mark.parametrize("expr", ["contains(xs, 2)", "coalesce(x, 1.5)", "least(x, 2, 3.5)", "if(x > 1, s, null)",
                                  "coalesce(d, ts)", "greatest(d, ts)", "if(x > 1, xs, xd)", "contains(xd, x)"])
def test_calls_with_compatible_types_check_clean(expr):
    result = check_flow("source e = values (x: long, s: string, xs: array<long>, xd: array<double>, d: date, "
                        "ts: timestamp) []\n"
                        f"sink e | select(a = {expr}) -> console()\n", "t.flow", "/nonexistent")
    assert not result.errors, [d.message for d in result.errors]
