"""The builtin function library: one declarative registry.

Each entry names a function, its signature (argument kinds and a return-type
rule), the Spark column code it compiles to, a docstring and an example. The
checker (`compiler/expr.py`), the code generator (`compiler/codegen.py`) and
`docs/functions.md` (`scopeflow docs`) all read this table.

Argument kinds: ``num`` (int/long/double), ``str``, ``bool``, ``date`` (date or
timestamp), ``arr`` (any array), ``strarr`` (a string or an array), ``any``, and ``lit:<kind>`` for arguments that
must be literals (Spark takes them as Python values, not columns).
"""
from __future__ import annotations

from typing import Callable, Optional

from attrs import frozen

from scopeflow.stdlib.types import NUMERIC, element_type, widen


@frozen
class Func:
    name: str
    args: tuple[str, ...]  # argument kinds; a trailing "*" kind repeats (e.g. ("num", "num*"))
    returns: object  # a type name, or a callable (arg types) -> type
    spark: object  # code template ({0} {1} positional, {args} all), or {first argument type: template, "*": ...}
    doc: str
    example: str
    min_args: Optional[int] = None  # when optional trailing arguments exist
    category: str = "scalar"

    def arity_ok(self, n: int) -> bool:
        if self.args and self.args[-1].endswith("*"):
            return n >= len(self.args) - 1
        lo = self.min_args if self.min_args is not None else len(self.args)
        return lo <= n <= len(self.args)

    def kind_of(self, i: int) -> str:
        if self.args and self.args[-1].endswith("*") and i >= len(self.args) - 1:
            return self.args[-1][:-1]
        return self.args[i]

    def template(self, arg_types: list[str]) -> str:
        if isinstance(self.spark, dict):
            return self.spark.get(arg_types[0] if arg_types else "*", self.spark["*"])
        return self.spark

    def signature(self) -> str:
        return f"{self.name}({', '.join(self.args)})"


@frozen
class Agg:
    """An aggregate: its type rule, the `pyspark.sql.functions` call it is, and how `reduce` folds it.

    The code generator writes the call as text (`spark_call`); the runtime builds the same call on
    Columns (`spark_column`, for `reduce` inside loops). `fold(F, old, new)` merges two partial
    results of one key (the state and a round's delta); it is applied only where both are non-null
    (a null partial result is no value, as a null input is to the aggregate), see `runtime/state.py`.
    """

    name: str
    function: str  # the function of pyspark.sql.functions
    returns: object  # type or callable(arg type) -> type
    doc: str
    options: tuple = ()  # keyword arguments of the call: (("ignorenulls", True),)
    fold: Optional[Callable] = None  # (F, old Column, new Column) -> Column; None: `reduce` cannot fold it

    @property
    def incremental(self) -> bool:
        return self.fold is not None

    def spark_call(self, arg: Optional[str]) -> str:
        """The call as PySpark source over the argument's code (`count()`: None, it counts records)."""
        args = [arg if arg is not None else "F.lit(1)"] + [f"{k}={v!r}" for k, v in self.options]
        return f"F.{self.function}({', '.join(args)})"

    def spark_column(self, F, column):
        """The same call on a Column (None for `count()`); `F` is pyspark.sql.functions."""
        return getattr(F, self.function)(F.lit(1) if column is None else column, **dict(self.options))


def _same(types):
    out = types[0]
    for t in types[1:]:
        out = _common(out, t) or out
    return out


def _double(_types):
    return "double"


def _elem(types):
    return element_type(types[0]) or "null"


def _array_of(types):
    return f"array<{_same(types)}>"


def _kinds_match(kind: str, t: str) -> bool:
    kind = kind.removeprefix("lit:")
    if t == "null" or kind == "any":
        return True
    return {
        "num": t in NUMERIC,
        "str": t == "string",
        "bool": t == "boolean",
        "date": t in ("date", "timestamp", "string"),
        "arr": t.startswith("array<"),
        "strarr": t == "string" or t.startswith("array<"),
        "int": t in ("int", "long"),
    }[kind]


def check_call(func: Func, types: list[str]) -> tuple[Optional[str], Optional[str]]:
    """(return type, None) or (None, error message) for a call with these argument types."""
    if not func.arity_ok(len(types)):
        want = len(func.args) if func.min_args is None else f"{func.min_args} to {len(func.args)}"
        if func.args and func.args[-1].endswith("*"):
            want = f"at least {len(func.args) - 1}"
        return None, f"`{func.name}` takes {want} argument(s), got {len(types)}"
    for i, t in enumerate(types):
        kind = func.kind_of(i)
        if not _kinds_match(kind, t):
            want = KIND_TEXT.get(kind.removeprefix("lit:"), kind.removeprefix("lit:"))
            return None, f"argument {i + 1} of `{func.name}` must be {want}, got {t}"
    if func.name in SAME_TYPE:
        start = 1 if func.name == "if" else 0
        common = types[start]
        for t in types[start + 1:]:
            common = _common(common, t) if common is not None else None
        if common is None:
            shown = ", ".join(types[start:])
            return None, f"the arguments of `{func.name}` need one common type, got {shown}"
    if func.name == "contains":
        if "null" in types:
            return None, "`contains` needs a string or an array and a value to look for, got null"
        want = element_type(types[0]) if types[0].startswith("array<") else "string"
        if want is not None and _common(want, types[1]) is None:
            return None, f"`contains` looks for {_a(want)} in {_a(types[0])}, got {_a(types[1])}"
    ret = func.returns(types) if callable(func.returns) else func.returns
    return ret, None


def _a(t: str) -> str:
    return f"an {t}" if t[0] in "aeiou" else f"a {t}"


def _common(a: str, b: str) -> Optional[str]:
    """The type Spark coerces a and b to where one value type is needed (or None): numbers widen, a date
    meets a timestamp as a timestamp, arrays by their elements."""
    if {a, b} == {"date", "timestamp"}:
        return "timestamp"
    ea, eb = element_type(a), element_type(b)
    if ea is not None and eb is not None:
        inner = _common(ea, eb)
        return f"array<{inner}>" if inner is not None else None
    return widen(a, b)


KIND_TEXT = {"num": "a number", "str": "a string", "bool": "a boolean", "date": "a date, timestamp or string",
             "arr": "an array", "strarr": "a string or an array", "int": "an integer"}

# Functions whose (value) arguments must share one type: Spark would reject or silently cast the rest.
SAME_TYPE = ("if", "coalesce", "least", "greatest", "array", "nullif")


def _f(name, args, returns, spark, doc, example, min_args=None, category="scalar"):
    return Func(name, tuple(args), returns, spark, doc, example, min_args, category)


_FUNCS = [
    # control flow and nulls
    _f("if", ["bool", "any", "any"], lambda t: _same(t[1:]), "F.when({0}, {1}).otherwise({2})",
       "`b` when the condition holds, else `c`.", "if(d < k, 0, d)", category="control"),
    _f("coalesce", ["any", "any*"], _same, "F.coalesce({args})", "The first non-null argument.",
       "coalesce(label, id)", category="control"),
    _f("isnan", ["num"], "boolean", "F.isnan({0})", "True when x is NaN.", "isnan(x)", category="control"),
    # math
    _f("abs", ["num"], _same, "F.abs({0})", "Absolute value.", "abs(x - y)", category="math"),
    _f("sqrt", ["num"], "double", "F.sqrt({0})", "Square root.", "sqrt(dx * dx + dy * dy)", category="math"),
    _f("cbrt", ["num"], "double", "F.cbrt({0})", "Cube root.", "cbrt(v)", category="math"),
    _f("exp", ["num"], "double", "F.exp({0})", "e to the power x.", "exp(-d)", category="math"),
    _f("ln", ["num"], "double", "F.log({0})", "Natural logarithm.", "ln(x)", category="math"),
    _f("log10", ["num"], "double", "F.log10({0})", "Base-10 logarithm.", "log10(x)", category="math"),
    _f("log2", ["num"], "double", "F.log2({0})", "Base-2 logarithm.", "log2(x)", category="math"),
    _f("pow", ["num", "num"], "double", "F.pow({0}, {1})", "x to the power y.", "pow(rank, 2)", category="math"),
    _f("round", ["num", "lit:int"], _same, "F.round({args})", "Round half up to n decimals (default 0).",
       "round(rank, 3)", min_args=1, category="math"),
    _f("floor", ["num"], "long", "F.floor({0})", "Largest integer not above x.", "floor(x / 10)", category="math"),
    _f("ceil", ["num"], "long", "F.ceil({0})", "Smallest integer not below x.", "ceil(x)", category="math"),
    _f("sign", ["num"], "double", "F.signum({0})", "-1.0, 0.0 or 1.0 by the sign of x.", "sign(delta)", category="math"),
    _f("least", ["any", "any", "any*"], _same, "F.least({args})", "The smallest argument (nulls skipped).",
       "least(a, b)", category="math"),
    _f("greatest", ["any", "any", "any*"], _same, "F.greatest({args})", "The largest argument (nulls skipped).",
       "greatest(a, b)", category="math"),
    _f("sin", ["num"], "double", "F.sin({0})", "Sine (radians).", "sin(angle)", category="math"),
    _f("cos", ["num"], "double", "F.cos({0})", "Cosine (radians).", "cos(angle)", category="math"),
    _f("tan", ["num"], "double", "F.tan({0})", "Tangent (radians).", "tan(angle)", category="math"),
    _f("atan2", ["num", "num"], "double", "F.atan2({0}, {1})", "Angle of the point (x, y).", "atan2(y, x)",
       category="math"),
    _f("pmod", ["num", "num"], _same, "F.pmod({0}, {1})", "The non-negative remainder of x divided by y.",
       "pmod(id, 16)", category="math"),
    _f("nullif", ["any", "any"], lambda t: t[0], "F.nullif({0}, {1})", "Null when a equals b, else a.",
       "nullif(label, 0)", category="control"),
    _f("hash", ["any", "any*"], "long", "F.xxhash64({args})", "64-bit xxHash of the arguments.", "hash(src, dst)",
       category="math"),
    # strings
    _f("lower", ["str"], "string", "F.lower({0})", "Lower-case.", "lower(name)", category="string"),
    _f("upper", ["str"], "string", "F.upper({0})", "Upper-case.", "upper(name)", category="string"),
    _f("length", ["str"], "int", "F.length({0})", "Number of characters.", "length(name)", category="string"),
    _f("substr", ["str", "num", "num"], "string", "{0}.substr({1}.cast('int'), {2}.cast('int'))",
       "Substring from 1-based position `pos` of length `len`.", "substr(name, 1, 3)", category="string"),
    _f("concat", ["str", "str*"], "string", "F.concat({args})", "Concatenate strings.", 'concat(first, " ", last)',
       category="string"),
    _f("split", ["str", "lit:str"], "array<string>", "F.split({0}, {1})", "Split by a regular expression.",
       'split(line, ",")', category="string"),
    _f("trim", ["str"], "string", "F.trim({0})", "Remove leading and trailing spaces.", "trim(name)", category="string"),
    _f("ltrim", ["str"], "string", "F.ltrim({0})", "Remove leading spaces.", "ltrim(name)", category="string"),
    _f("rtrim", ["str"], "string", "F.rtrim({0})", "Remove trailing spaces.", "rtrim(name)", category="string"),
    _f("replace", ["str", "str", "str"], "string", "F.replace({0}, {1}, {2})", "Replace every occurrence of a substring.",
       'replace(path, "/", "_")', category="string"),
    _f("starts_with", ["str", "str"], "boolean", "{0}.startswith({1})", "True when s starts with the prefix.",
       'starts_with(url, "https")', category="string"),
    _f("ends_with", ["str", "str"], "boolean", "{0}.endswith({1})", "True when s ends with the suffix.",
       'ends_with(file, ".csv")', category="string"),
    _f("like", ["str", "lit:str"], "boolean", "{0}.like({1})", "SQL LIKE pattern match (`%`, `_`).",
       'like(name, "a%")', category="string"),
    _f("regexp_extract", ["str", "lit:str", "lit:int"], "string", "F.regexp_extract({0}, {1}, {2})",
       "The group `idx` of the first match of a regular expression.", 'regexp_extract(s, "([0-9]+)", 1)',
       category="string"),
    _f("regexp_replace", ["str", "lit:str", "lit:str"], "string", "F.regexp_replace({0}, {1}, {2})",
       "Replace every match of a regular expression.", 'regexp_replace(s, "[0-9]", "#")', category="string"),
    _f("lpad", ["str", "lit:int", "lit:str"], "string", "F.lpad({0}, {1}, {2})", "Left-pad to a length.",
       'lpad(code, 5, "0")', category="string"),
    _f("rpad", ["str", "lit:int", "lit:str"], "string", "F.rpad({0}, {1}, {2})", "Right-pad to a length.",
       'rpad(code, 5, " ")', category="string"),
    _f("reverse", ["str"], "string", "F.reverse({0})", "Characters in reverse order.", "reverse(s)", category="string"),
    _f("initcap", ["str"], "string", "F.initcap({0})", "Capitalise each word.", "initcap(name)", category="string"),
    _f("instr", ["str", "lit:str"], "int", "F.instr({0}, {1})", "1-based position of a substring, 0 if absent.",
       'instr(s, "@")', category="string"),
    _f("concat_ws", ["lit:str", "str", "str*"], "string", "F.concat_ws({args})",
       "Join strings with a separator, skipping nulls.", 'concat_ws("-", first, last)', category="string"),
    _f("rlike", ["str", "lit:str"], "boolean", "{0}.rlike({1})", "True when a regular expression matches part of s.",
       'rlike(email, "@example\\.com$")', category="string"),
    _f("md5", ["str"], "string", "F.md5({0})", "MD5 digest as hex.", "md5(email)", category="string"),
    _f("sha2", ["str", "lit:int"], "string", "F.sha2({0}, {1})", "SHA-2 digest (224, 256, 384, 512 bits) as hex.",
       "sha2(email, 256)", category="string"),
    # arrays
    _f("array", ["any", "any*"], _array_of, "F.array({args})", "An array of the arguments.", "array(src, dst)",
       category="array"),
    _f("size", ["arr"], "int", "F.size({0})", "Number of elements.", "size(neighbours)", category="array"),
    _f("contains", ["strarr", "any"], "boolean", {"string": "{0}.contains({1})", "*": "F.array_contains({0}, {1})"},
       "Array membership, or substring test for strings.", "contains(tags, \"x\")", category="array"),
    _f("array_distinct", ["arr"], lambda t: t[0], "F.array_distinct({0})", "Remove duplicate elements.",
       "array_distinct(xs)", category="array"),
    _f("sort_array", ["arr"], lambda t: t[0], "F.sort_array({0})", "Sort ascending.", "sort_array(xs)",
       category="array"),
    _f("element_at", ["arr", "num"], _elem, "F.try_element_at({0}, {1}.cast('int'))",
       "The element at a 1-based position (negative: from the end); null past either end (position 0 is an "
       "error).", "element_at(xs, 1)", category="array"),
    _f("array_join", ["arr", "lit:str"], "string", "F.array_join({0}, {1})",
       "The elements as strings joined with a separator.", 'array_join(tags, ",")', category="array"),
    _f("array_min", ["arr"], _elem, "F.array_min({0})", "Smallest element.", "array_min(xs)", category="array"),
    _f("array_max", ["arr"], _elem, "F.array_max({0})", "Largest element.", "array_max(xs)", category="array"),
    # dates and times
    _f("year", ["date"], "int", "F.year({0})", "Year of a date or timestamp.", "year(ts)", category="datetime"),
    _f("month", ["date"], "int", "F.month({0})", "Month (1-12).", "month(ts)", category="datetime"),
    _f("day", ["date"], "int", "F.dayofmonth({0})", "Day of month (1-31).", "day(ts)", category="datetime"),
    _f("dayofweek", ["date"], "int", "F.dayofweek({0})", "Day of week (1 = Sunday).", "dayofweek(d)",
       category="datetime"),
    _f("hour", ["date"], "int", "F.hour({0})", "Hour of a timestamp.", "hour(ts)", category="datetime"),
    _f("minute", ["date"], "int", "F.minute({0})", "Minute of a timestamp.", "minute(ts)", category="datetime"),
    _f("second", ["date"], "int", "F.second({0})", "Second of a timestamp.", "second(ts)", category="datetime"),
    _f("date_add", ["date", "num"], "date", "F.date_add({0}, {1}.cast('int'))", "The date `n` days later.", "date_add(d, 7)",
       category="datetime"),
    _f("date_sub", ["date", "num"], "date", "F.date_sub({0}, {1}.cast('int'))", "The date `n` days earlier.", "date_sub(d, 1)",
       category="datetime"),
    _f("datediff", ["date", "date"], "int", "F.datediff({0}, {1})", "Days from `start` to `end`.",
       "datediff(end, start)", category="datetime"),
    _f("add_months", ["date", "num"], "date", "F.add_months({0}, {1}.cast('int'))", "The date `n` months later.",
       "add_months(d, 1)", category="datetime"),
    _f("to_date", ["str", "lit:str"], "date", "F.to_date({args})", "Parse a date (optional format).",
       'to_date(s, "yyyy-MM-dd")', min_args=1, category="datetime"),
    _f("to_timestamp", ["str", "lit:str"], "timestamp", "F.to_timestamp({args})", "Parse a timestamp (optional format).",
       "to_timestamp(s)", min_args=1, category="datetime"),
    _f("date_format", ["date", "lit:str"], "string", "F.date_format({0}, {1})", "Format a date or timestamp.",
       'date_format(ts, "yyyy-MM")', category="datetime"),
    _f("date_trunc", ["lit:str", "date"], "timestamp", "F.date_trunc({0}, {1})",
       "Truncate a timestamp to a unit (\"year\", \"month\", \"day\", \"hour\", ...).", 'date_trunc("day", ts)',
       category="datetime"),
    _f("unix_timestamp", ["date"], "long", "F.unix_timestamp({0})", "Seconds since the epoch.", "unix_timestamp(ts)",
       category="datetime"),
    _f("from_unixtime", ["num"], "string", "F.from_unixtime({0})",
       "Seconds since the epoch as a `yyyy-MM-dd HH:mm:ss` string in the session time zone (as in Spark SQL).",
       "from_unixtime(secs)", category="datetime"),
    _f("timestamp_seconds", ["num"], "timestamp", "F.timestamp_seconds({0})",
       "Timestamp from seconds since the epoch.", "timestamp_seconds(secs)", category="datetime"),
    _f("dayofyear", ["date"], "int", "F.dayofyear({0})", "Day of the year (1-366).", "dayofyear(d)",
       category="datetime"),
    _f("weekofyear", ["date"], "int", "F.weekofyear({0})", "ISO week number (1-53).", "weekofyear(d)",
       category="datetime"),
    _f("quarter", ["date"], "int", "F.quarter({0})", "Quarter of the year (1-4).", "quarter(d)", category="datetime"),
    _f("months_between", ["date", "date"], "double", "F.months_between({0}, {1})",
       "Months from `start` to `end` (fractional unless both are the same day of month or month ends).",
       "months_between(end, start)", category="datetime"),
    _f("current_date", [], "date", "F.current_date()", "Today's date (fixed per query).", "current_date()",
       category="datetime"),
    _f("current_timestamp", [], "timestamp", "F.current_timestamp()", "The current time (fixed per query).",
       "current_timestamp()", category="datetime"),
]

FUNCTIONS: dict[str, Func] = {f.name: f for f in _FUNCS}


def _numeric_sum(t):
    return "double" if t == "double" else "long"


AGGREGATES: dict[str, Agg] = {
    a.name: a
    for a in [
        Agg("min", "min", lambda t: t, "Smallest value.", fold=lambda F, old, new: F.least(old, new)),
        Agg("max", "max", lambda t: t, "Largest value.", fold=lambda F, old, new: F.greatest(old, new)),
        Agg("sum", "sum", _numeric_sum, "Sum.", fold=lambda F, old, new: old + new),
        Agg("count", "count", "long", "Number of records (`count()`), or of non-null values (`count(x)`).",
            fold=lambda F, old, new: old + new),
        Agg("avg", "avg", "double", "Mean value."),
        Agg("any", "bool_or", "boolean", "True if any value is true.", fold=lambda F, old, new: old | new),
        Agg("all", "bool_and", "boolean", "True if every value is true.", fold=lambda F, old, new: old & new),
        Agg("first", "first", lambda t: t, "Some non-null value of the group.", options=(("ignorenulls", True),)),
        Agg("collect_set", "collect_set", lambda t: f"array<{t}>", "The distinct values as an array."),
        Agg("collect_list", "collect_list", lambda t: f"array<{t}>", "All values as an array."),
    ]
}

INCREMENTAL = tuple(name for name, a in AGGREGATES.items() if a.incremental)


def agg_type(agg: Agg, arg_type: Optional[str]) -> str:
    if arg_type is None:
        return "long"
    return agg.returns(arg_type) if callable(agg.returns) else agg.returns


def functions_markdown() -> str:
    """The reference table of docs/functions.md, generated from the registry."""
    out = ["# Builtin functions", "",
           "Generated from `stdlib/functions.py` by `scopeflow docs > docs/functions.md`; do not edit by hand.", ""]
    for cat in ("control", "math", "string", "array", "datetime"):
        out += [f"## {cat}", "", "| function | meaning | example |", "|---|---|---|"]
        for f in _FUNCS:
            if f.category == cat:
                out.append(f"| `{f.signature()}` | {f.doc} | `{f.example}` |")
        out.append("")
    out += ["## aggregates", "", "| aggregate | meaning | in `reduce` |", "|---|---|---|"]
    for a in AGGREGATES.values():
        out.append(f"| `{a.name}` | {a.doc} | {'yes' if a.incremental else 'no (not incremental)'} |")
    return "\n".join(out) + "\n"


ResultType = Callable[[list[str]], str]
