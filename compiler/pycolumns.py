"""Typed expressions (`compiler/expr.py`) as PySpark Column code: builtins from the stdlib's table, Python
functions as Arrow UDFs. Anything it cannot translate raises InternalError, never silent output."""
from __future__ import annotations

from scopeflow.compiler import expr as X
from scopeflow.dsl.diagnostics import InternalError
from scopeflow.stdlib.functions import AGGREGATES, FUNCTIONS
from scopeflow.stdlib.types import spark_ddl_type

_BINARY = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "%", "==": "==", "!=": "!=", "<": "<", "<=": "<=",
           ">": ">", ">=": ">=", "and": "&", "or": "|"}


def _py(value) -> str:
    return repr(value)


class ColumnCode:
    """Column code inside one generated function; `ctx` is that function's run or round (params come from it)."""

    def __init__(self, ctx: str):
        self.ctx = ctx

    def named(self, name: str, t: X.TExpr) -> str:
        if isinstance(t, X.TCol) and t.name == name and t.side is None:
            return f"F.col({_py(name)})"
        return f"{self.expr(t)}.alias({_py(name)})"

    def expr(self, t: X.TExpr, sides=None) -> str:
        if isinstance(t, X.TCol):
            if t.side is not None and sides is not None:
                alias = sides[0] if t.side == "left" else sides[1]
                return f"F.col({_py(alias + '.' + t.name)})"
            return f"F.col({_py(t.name)})"
        if isinstance(t, X.TLit):
            return self.long(f"F.lit({_py(t.value)})", t)
        if isinstance(t, X.TParam):
            return self.long(f"F.lit({self.ctx}.param({_py(t.name)}))", t)
        if isinstance(t, X.TCall):
            return self.call(t, sides)
        raise InternalError(f"codegen cannot translate expression {t!r}")

    @staticmethod
    def long(code: str, t: X.TExpr) -> str:
        """Integer literals are `long` (docs/language.md#lexical); `F.lit(1)` alone would be a Spark int."""
        return f"{code}.cast('long')" if t.type == "long" else code

    def operand(self, t: X.TExpr, partner: X.TExpr, sides) -> str:
        """A literal next to a long/double/... expression in `x + 1`, `x < 1`, `x in (1, 2)`: Spark's coercion
        to that type gives the type the checker inferred, so the literal needs no cast."""
        if isinstance(t, (X.TLit, X.TParam)) and not isinstance(partner, (X.TLit, X.TParam)) \
                and partner.type in ("long", "double", "string", "boolean", "date", "timestamp"):
            return f"F.lit({_py(t.value)})" if isinstance(t, X.TLit) else f"F.lit({self.ctx}.param({_py(t.name)}))"
        return self.expr(t, sides)

    def call(self, t: X.TCall, sides) -> str:
        e = lambda x: self.expr(x, sides)  # noqa: E731
        fn, args = t.fn, t.args
        if fn in _BINARY:
            a, b = args
            return f"({self.operand(a, b, sides)} {_BINARY[fn]} {self.operand(b, a, sides)})"
        if fn == "not":
            return f"(~{e(args[0])})"
        if fn == "neg":
            return f"(-{e(args[0])})"
        if fn == "is_null":
            return f"{e(args[0])}.isNull()"
        if fn == "is_not_null":
            return f"{e(args[0])}.isNotNull()"
        if fn in ("in", "not_in"):
            inner = f"{e(args[0])}.isin({', '.join(self.operand(a, args[0], sides) for a in args[1:])})"
            return inner if fn == "in" else f"(~{inner})"
        if fn == "cast":
            return f"{e(args[0])}.cast({_py(spark_ddl_type(t.type))})"
        if fn == "index":
            return f"{e(args[0])}.getItem({e(args[1])})"
        if fn.startswith("agg:"):
            return AGGREGATES[fn[4:]].spark_call(e(args[0]) if args else None)
        if fn.startswith("func:"):
            func = FUNCTIONS[fn[5:]]
            rendered = []
            for i, a in enumerate(args):
                if func.kind_of(i).startswith("lit:") and isinstance(a, X.TLit):
                    rendered.append(_py(a.value))
                elif func.kind_of(i).startswith("lit:") and isinstance(a, X.TParam):
                    rendered.append(f"{self.ctx}.param({_py(a.name)})")  # Spark takes a Python value here
                else:
                    rendered.append(e(a))
            return func.template([a.type for a in args]).format(*rendered, args=", ".join(rendered))
        if fn == "udf":
            module, name = t.extra[:2]
            arg_types = ", ".join(_py(a.type) for a in args)
            line = t.extra[2] if len(t.extra) > 2 else 0
            return (f"sf.scalar_udf(UDFS[{_py(module)}].{name}, {_py(t.type)}, [{arg_types}], flow_line={line})"
                    f"({', '.join(e(a) for a in args)})")
        raise InternalError(f"codegen cannot translate function `{fn}`")
