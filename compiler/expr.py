"""Typed expressions: resolve names against a schema and type-check (AST Expr -> TExpr)."""
from __future__ import annotations

import json
from typing import Callable, Optional

from attrs import define, field, frozen

from scopeflow.compiler.types import Schema
from scopeflow.stdlib.types import NUMERIC, SCALARS, element_type, is_numeric, is_valid_type, widen
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import Diagnostic, did_you_mean
from scopeflow.stdlib.functions import AGGREGATES, FUNCTIONS, check_call


class TExpr:
    type: str


@frozen
class TCol(TExpr):
    name: str
    type: str
    side: Optional[str] = None  # "left" / "right" inside a join condition


@frozen
class TLit(TExpr):
    value: object
    type: str


@frozen
class TParam(TExpr):
    name: str
    type: str


@frozen
class TCall(TExpr):
    """Operators, builtins (`func:abs`), aggregates (`agg:min`), casts, Python functions (`udf`)."""

    fn: str
    args: tuple
    type: str
    extra: object = None


class TypeErrorAt(Exception):
    def __init__(self, diag: Optional[Diagnostic]):  # None: a follow-on of an error already reported
        self.diag = diag


@define
class Env:
    """What an expression can see: one schema, or the two sides of a join; params; Python functions."""

    schema: Schema
    params: dict  # name -> type
    udfs: dict  # alias -> {fn name -> (arg types, return type)}
    right: Optional[Schema] = None  # set inside a join condition
    allow_agg: bool = False
    scalar_params: dict = field(factory=dict)  # def scalar params: name -> TLit
    in_agg: bool = False  # typing the argument of an aggregate (so another aggregate is nested)


def type_expr(e: A.Expr, env: Env) -> TExpr:
    """Resolve and type `e`; raise TypeErrorAt with a diagnostic on the first problem."""
    return _TYPERS[type(e)](e, env)


def _fail(code, message, span, label="", hints=()):
    raise TypeErrorAt(Diagnostic(code, message, span, label=label, hints=tuple(hints)))


def _lit(e: A.Lit, env: Env) -> TExpr:
    return TLit(e.value, e.type)


def _sides(env: Env):
    if env.right is None:
        return [(None, env.schema)]
    return [("left", env.schema), ("right", env.right)]


def _name(e: A.Name, env: Env) -> TExpr:
    hits = [(side, f) for side, s in _sides(env) for f in s.fields if f.name == e.name]
    if len(hits) == 1:
        side, f = hits[0]
        return TCol(f.name, f.type, side)
    if len(hits) > 1:
        quals = sorted({q for _, f in hits for q in f.quals})
        _fail("E0302", f"field `{e.name}` is ambiguous: both join inputs have it", e.span, "ambiguous",
              [f"qualify it: {' or '.join(f'`{q}.{e.name}`' for q in quals)}"] if quals else [])
    if e.name in env.scalar_params:
        return env.scalar_params[e.name]
    if e.name in env.params:
        return TParam(e.name, env.params[e.name])
    names = [f.name for _, s in _sides(env) for f in s.fields]
    _fail("E0301", f"unknown field `{e.name}`", e.span, "not a field of the input",
          list(did_you_mean(e.name, names)) + [f"the input has fields {_fields_text(env)}"])


def _fields_text(env: Env) -> str:
    return " and ".join(str(s) for _, s in _sides(env))


def _field_access(e: A.FieldAccess, env: Env) -> TExpr:
    if isinstance(e.base, A.Name):
        qual = e.base.name
        scoped = [(side, s) for side, s in _sides(env) if any(qual in f.quals for f in s.fields)]
        if scoped:
            for side, s in scoped:
                f = next((f for f in s.fields if f.name == e.name and qual in f.quals), None)
                if f is not None:
                    return TCol(f.name, f.type, side)
            names = [f.name for _, s in scoped for f in s.fields if qual in f.quals]
            _fail("E0301", f"stream `{qual}` has no field `{e.name}`", e.span, "unknown field",
                  list(did_you_mean(e.name, names)) + [f"`{qual}` has fields {', '.join(names)}"])
        quals = sorted({q for _, s in _sides(env) for f in s.fields for q in f.quals})
        _fail("E0301", f"`{qual}` is not an input of this operator", e.base.span, "unknown stream",
              list(did_you_mean(qual, quals)) or ([f"qualify fields with {', '.join(quals)}"] if quals else
                                                  ["refer to the field by its name alone"]))
    base = type_expr(e.base, env)
    _fail("E0303", f"`.{e.name}` needs a stream name before it, not a {base.type} value", e.span, "field access",
          ["name a field directly (`x`) or qualify it with an input stream (`s.x`)"])


def _index(e: A.Index, env: Env) -> TExpr:
    base, idx = type_expr(e.base, env), type_expr(e.index, env)
    elem = element_type(base.type)
    if elem is None:
        _fail("E0303", f"cannot index a value of type {base.type}", e.span, "not an array",
              ["only arrays can be indexed, e.g. `split(s, \",\")[0]`"])
    if idx.type not in ("int", "long"):
        _fail("E0303", f"an array index must be an integer, got {idx.type}", e.index.span, "index",
              ["index from 0 with a long, e.g. `a[0]`"])
    return TCall("index", (base, idx), elem)


def _unary(e: A.Unary, env: Env) -> TExpr:
    x = type_expr(e.operand, env)
    if e.op == "not":
        _want(x, "boolean", e.operand.span, "`not` needs a boolean")
        return TCall("not", (x,), "boolean")
    if not is_numeric(x.type):
        _fail("E0303", f"unary `-` needs a number, got {x.type}", e.span, "not a number",
              ["convert it first, e.g. `-cast(x as double)`"])
    return TCall("neg", (x,), x.type)


def _want(x: TExpr, t: str, span, what: str):
    if x.type not in (t, "null"):
        _fail("E0303", f"{what}, got {x.type}", span, f"this is {x.type}", ["compare it, e.g. `x > 0` or `s == \"a\"`"])


_ARITH = ("+", "-", "*", "/", "%")
_CMP = ("==", "!=", "<", "<=", ">", ">=")


def _binary(e: A.Binary, env: Env) -> TExpr:
    left, right = type_expr(e.left, env), type_expr(e.right, env)
    if e.op in ("and", "or"):
        _want(left, "boolean", e.left.span, f"`{e.op}` needs booleans")
        _want(right, "boolean", e.right.span, f"`{e.op}` needs booleans")
        return TCall(e.op, (left, right), "boolean")
    if e.op in _ARITH:
        if not (is_numeric(left.type) and is_numeric(right.type)):
            hint = ["join strings with `concat(a, b)`"] if "string" in (left.type, right.type) and e.op == "+" else []
            _fail("E0303", f"`{e.op}` needs numbers, got {left.type} {e.op} {right.type}", e.span,
                  "incompatible operand types", hint)
        t = "double" if e.op == "/" else (widen(left.type, right.type) or "double")
        return TCall(e.op, (left, right), "long" if t == "null" else t)
    if widen(left.type, right.type) is None:
        _fail("E0303", f"cannot compare {left.type} with {right.type}", e.span, "incompatible types",
              [f"convert one side, e.g. `cast(x as {left.type})`"])
    return TCall(e.op, (left, right), "boolean")


def _call(e: A.Call, env: Env) -> TExpr:
    if e.module is not None:
        return _udf_call(e, env)
    in_agg = env.in_agg or (e.func in AGGREGATES and env.allow_agg)
    args = tuple(type_expr(a, Env(env.schema, env.params, env.udfs, env.right, False, env.scalar_params, in_agg))
                 for a in e.args)
    if e.func in AGGREGATES:
        return _agg_call(e, args, env)
    func = FUNCTIONS.get(e.func)
    if func is None:
        _fail("E0304", f"unknown function `{e.func}`", e.span, "not a builtin",
              did_you_mean(e.func, list(FUNCTIONS) + list(AGGREGATES)) or ("see docs/functions.md",))
    ret, err = check_call(func, [a.type for a in args])
    if err:
        _fail("E0305", err, e.span, "bad call", [f"signature: {func.signature()}", f"example: {func.example}"])
    for i, (a, src) in enumerate(zip(args, e.args)):
        if func.kind_of(i).startswith("lit:") and not isinstance(a, (TLit, TParam)):
            _fail("E0305", f"argument {i + 1} of `{func.name}` must be a literal", src.span, "not a literal",
                  [f"example: {func.example}"])
    return TCall(f"func:{func.name}", args, ret)


def _agg_call(e: A.Call, args, env: Env) -> TExpr:
    agg = AGGREGATES[e.func]
    if env.in_agg:
        _fail("E0310", "aggregates cannot be nested", e.span, "nested aggregate",
              ["aggregate once, then aggregate the result in a second `group`"])
    if not env.allow_agg:
        _fail("E0310", f"aggregate `{e.func}` is only allowed in `group` or `reduce`", e.span, "aggregate here",
              ["aggregate with `group(by key, n = count())`"])
    if len(args) > 1 or (len(args) == 0 and e.func != "count"):
        _fail("E0305", f"`{e.func}` takes one argument, got {len(args)}", e.span, "bad call",
              [f"aggregate one expression per output field, e.g. `m = {e.func}(x)`"])
    if any(_has_agg(a) for a in args):
        _fail("E0310", "aggregates cannot be nested", e.span, "nested aggregate")
    arg_t = args[0].type if args else None
    if e.func in ("sum", "avg") and arg_t is not None and arg_t not in NUMERIC:
        _fail("E0305", f"`{e.func}` needs a number, got {arg_t}", e.span, "not a number",
              [f"convert it, e.g. `{e.func}(cast(x as double))`"])
    if e.func in ("any", "all") and arg_t not in ("boolean", "null"):
        _fail("E0305", f"`{e.func}` needs a boolean, got {arg_t}", e.span, "not a boolean",
              [f"aggregate a condition, e.g. `{e.func}(x > 0)`"])
    from scopeflow.stdlib.functions import agg_type

    return TCall(f"agg:{e.func}", args, agg_type(agg, arg_t))


def _has_agg(x: TExpr) -> bool:
    return isinstance(x, TCall) and (x.fn.startswith("agg:") or any(_has_agg(a) for a in x.args if isinstance(a, TExpr)))


def has_agg(x: TExpr) -> bool:
    return _has_agg(x)


def _udf_call(e: A.Call, env: Env) -> TExpr:
    funcs = env.udfs.get(e.module)
    if funcs is None and e.module in env.udfs:  # its `use python` failed and was reported
        raise TypeErrorAt(None)
    if funcs is None:
        _fail("E0304", f"unknown function module `{e.module}`", e.span, "not declared",
              list(did_you_mean(e.module, env.udfs)) + [f'declare it: use python "{e.module}.py" as {e.module}'])
    sig = funcs.get(e.func)
    if sig is None:
        _fail("E0111", f"`{e.module}` has no annotated function `{e.func}`", e.span, "unknown function",
              did_you_mean(e.func, funcs))
    if sig[0] == "bad":
        _fail("E0112", f"Python function `{e.module}.{e.func}` cannot be used in an expression: {sig[1]}", e.span,
              "unusable function", ["annotate it, e.g. `def score(x: float, y: int) -> float`"])
    params, ret = sig
    args = tuple(type_expr(a, env) for a in e.args)
    signature = f"signature: {e.module}.{e.func}({', '.join(params)}) -> {ret}"
    if len(args) != len(params):
        _fail("E0305", f"`{e.module}.{e.func}` takes {len(params)} argument(s), got {len(args)}", e.span, "bad call",
              [signature])
    for i, (a, p) in enumerate(zip(args, params)):
        if widen(a.type, p) != p:
            _fail("E0305", f"argument {i + 1} of `{e.module}.{e.func}` must be {p}, got {a.type}", e.args[i].span,
                  "wrong type", [signature, f"convert it: `cast(x as {p})`"])
    return TCall("udf", args, ret, extra=(e.module, e.func, e.span.line if e.span else 0))  # line: runtime errors


def _cast(e: A.Cast, env: Env) -> TExpr:
    x = type_expr(e.expr, env)
    if not is_valid_type(e.type):
        _fail("E0119", f"unknown type `{e.type}`", e.span, "bad type", did_you_mean(e.type, SCALARS))
    return TCall("cast", (x,), e.type)


def _is_null(e: A.IsNull, env: Env) -> TExpr:
    return TCall("is_not_null" if e.negated else "is_null", (type_expr(e.expr, env),), "boolean")


def _in_list(e: A.InList, env: Env) -> TExpr:
    x = type_expr(e.expr, env)
    items = tuple(type_expr(i, env) for i in e.items)
    for i, src in zip(items, e.items):
        if widen(x.type, i.type) is None:
            _fail("E0303", f"cannot compare {x.type} with {i.type} in `in (...)`", src.span, "incompatible type",
                  [f"every item must be a {x.type}"])
    return TCall("not_in" if e.negated else "in", (x,) + items, "boolean")


_TYPERS: dict[type, Callable] = {
    A.Lit: _lit,
    A.Name: _name,
    A.FieldAccess: _field_access,
    A.Index: _index,
    A.Unary: _unary,
    A.Binary: _binary,
    A.Call: _call,
    A.Cast: _cast,
    A.IsNull: _is_null,
    A.InList: _in_list,
}


def output_name(e: A.Expr) -> Optional[str]:
    """The field name a bare item keeps: `id` -> id, `e.dst` -> dst."""
    if isinstance(e, A.Name):
        return e.name
    if isinstance(e, A.FieldAccess):
        return e.name
    return None


def columns_used(x: TExpr) -> set:
    if isinstance(x, TCol):
        return {(x.side, x.name)}
    if isinstance(x, TCall):
        return set().union(*(columns_used(a) for a in x.args if isinstance(a, TExpr))) if x.args else set()
    return set()


# ---- typed expressions back as .flow text ---------------------------------------------------

_INFIX = {"or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
          "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def expr_text(x, outer: int = 0) -> str:
    """A TExpr back in .flow syntax (join sides dropped): operator descriptions, graph labels."""
    if isinstance(x, TCol):
        return x.name
    if isinstance(x, TParam):
        return x.name
    if isinstance(x, TLit):
        return _literal(x.value)
    if not isinstance(x, TCall):
        return str(x)
    fn, args = x.fn, x.args
    if fn in _INFIX:
        prec = _INFIX[fn]
        text = f"{expr_text(args[0], prec)} {fn} {expr_text(args[1], prec + 1)}"
        return f"({text})" if prec < outer else text
    if fn == "not":
        return f"not {expr_text(args[0], 3)}"
    if fn == "neg":
        return f"-{expr_text(args[0], 7)}"
    if fn in ("is_null", "is_not_null"):
        return f"{expr_text(args[0], 4)} is {'not ' if fn == 'is_not_null' else ''}null"
    if fn in ("in", "not_in"):
        items = ", ".join(expr_text(a) for a in args[1:])
        return f"{expr_text(args[0], 4)} {'not ' if fn == 'not_in' else ''}in ({items})"
    if fn == "cast":
        return f"cast({expr_text(args[0])} as {x.type})"
    if fn == "index":
        return f"{expr_text(args[0], 8)}[{expr_text(args[1])}]"
    name = ".".join(x.extra[:2]) if fn == "udf" and x.extra else fn.split(":")[-1]
    return f"{name}({', '.join(expr_text(a) for a in args)})"


def _literal(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)
