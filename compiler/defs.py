"""Expanding a call of a `def` (docs/language.md#defs-and-imports): the body is lowered in place, in a def scope
that sees only the parameters, with every stream it names prefixed by the call's tag (hygiene)."""
from __future__ import annotations

from scopeflow.compiler import expr as X
from scopeflow.compiler import lower, operators
from scopeflow.compiler.declarations import fits
from scopeflow.compiler.lowering import Lowering
from scopeflow.compiler.scopes import Scope, Symbol
from scopeflow.compiler.types import Schema
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import did_you_mean
from scopeflow.stdlib.types import SCALARS, is_valid_type, widen


def expand_call(lw: Lowering, call: A.OpCall, piped, scope: Scope) -> tuple[str, Schema]:
    """Lower `name(args)` (with `piped`, the (id, schema) of the stream piped into it, if any)."""
    if call.name not in lw.decl.defs:
        lw.fail("E0103", f"unknown operator `{call.name}`", call.span, "not an operator or def",
                did_you_mean(call.name, list(lw.decl.defs) + [a.kind for a in operators.RULES]) or
                ["define it with `def` or import it: from \"stdlib:graph\" import ..."])
    decl, _ = lw.decl.defs[call.name]
    if any(c[0] == call.name for c in lw.calls):
        lw.fail("E0107", f"operator `{call.name}` calls itself", call.span, "recursive call",
                ["defs are expanded at compile time; write the recursion as a loop"])
    args = ([("stream", piped)] if piped else []) + [_argument(lw, a, scope) for a in call.args]
    streams = [value for kind, value in args if kind == "stream"]
    scalars = [value for kind, value in args if kind == "scalar"]
    stream_params = [p for p in decl.params if p.schema is not None]
    scalar_params = [p for p in decl.params if p.schema is None]
    if len(streams) != len(stream_params) or len(scalars) > len(scalar_params):
        lw.fail("E0107", f"`{call.name}` takes {len(stream_params)} stream(s) and up to {len(scalar_params)} "
                f"constant(s), got {len(streams)} and {len(scalars)}", call.span, "wrong arguments",
                [f"signature: {_signature(decl)}"])
    body = scope.child("def", scope.owner, scope.label)
    _bind_streams(lw, call, decl, stream_params, streams, body)
    _bind_constants(lw, call, decl, scalar_params, scalars, body)
    count = lw.expansions[call.name] = lw.expansions.get(call.name, 0) + 1
    lw.calls.append((call.name, call.span, call.name if count == 1 else f"{call.name}{count}"))
    try:
        return _lower_body(lw, decl, body)
    finally:
        lw.calls.pop()


def _argument(lw: Lowering, a, scope: Scope) -> tuple[str, object]:
    """("scalar", TLit | TParam | A.Lit) or ("stream", (id, schema)). A bare name that is no stream is a
    constant by name: a def's constant parameter in view, or a `param`."""
    if isinstance(a, A.Lit):
        return ("scalar", a)
    if (isinstance(a, A.StreamExpr) and not a.ops and isinstance(a.head, A.Ref) and a.head.member is None
            and scope.lookup(a.head.name)[0] is None):
        constants = scope.scalars_in_view()
        if a.head.name in constants:
            return ("scalar", constants[a.head.name])
        if a.head.name in lw.decl.params:
            return ("scalar", X.TParam(a.head.name, lw.decl.params[a.head.name][0]))
    return ("stream", lower.lower_stream(lw, a, scope))


def _bind_streams(lw: Lowering, call, decl, params, streams, body: Scope) -> None:
    """Each stream parameter names its argument, which must have the fields the parameter declares."""
    for p, (nid, schema) in zip(params, streams):
        need = lw.schema_of(p.schema)
        for f in need.fields:
            got = schema.get(f.name)
            if got is None or widen(f.type, got.type) != f.type:
                lw.fail("E0109", f"`{call.name}` needs field `{f.name}: {f.type}` in `{p.name}`", call.span,
                        "input lacks a field", [f"the input has {schema.unqualified()}", f"`{p.name}` needs {need}"])
        body.define(Symbol(p.name, nid, schema.unqualified(), kind="param", span=p.span))


def _bind_constants(lw: Lowering, call, decl, params, scalars, body: Scope) -> None:
    """Each constant parameter takes its argument or its default, of its declared type."""
    for i, p in enumerate(params):
        lit = scalars[i] if i < len(scalars) else p.default
        if lit is None:
            lw.fail("E0107", f"`{call.name}` needs a value for `{p.name}`", call.span, "missing argument",
                    [f"signature: {_signature(decl)}"])
        if not is_valid_type(p.type):
            lw.fail("E0119", f"unknown type `{p.type}`", p.span, "bad type", did_you_mean(p.type, SCALARS))
        if not fits(p.type, lit.type):
            given = "its default" if i >= len(scalars) else "the argument"
            lw.fail("E0107", f"`{p.name}` of `{call.name}` is {p.type} but {given} is {lit.type}",
                    getattr(lit, "span", None) or call.span, "wrong type", [f"signature: {_signature(decl)}"])
        # a `param` (or an enclosing def's constant bound to one) stays a param: --param overrides it
        body.scalars[p.name] = X.TParam(lit.name, p.type) if isinstance(lit, X.TParam) else X.TLit(lit.value, p.type)


def _lower_body(lw: Lowering, decl: A.DefDecl, body: Scope) -> tuple[str, Schema]:
    result = None
    for stmt in decl.body:
        if isinstance(stmt, A.Return):
            if result is not None:
                lw.fail("E0108", f"`{decl.name}` has more than one `return`", stmt.span, "second return",
                        ["a def ends with exactly one `return`"])
            result = lower.lower_stream(lw, stmt.expr, body)
        else:
            lower.lower_statement(lw, stmt, body, in_def=True)
    if result is None:
        lw.fail("E0108", f"`{decl.name}` has no `return`", decl.span, "no return",
                ["end the body with `return STREAM`"])
    nid, schema = result
    return nid, schema.unqualified()


def _signature(decl: A.DefDecl) -> str:
    parts = []
    for p in decl.params:
        if p.schema is not None:
            parts.append(f"{p.name}: ({', '.join(f'{f.name}: {f.type}' for f in p.schema.fields)})")
        else:
            parts.append(f"{p.name}: {p.type}" + (f" = {_flow_literal(p.default.value)}" if p.default else ""))
    return f"{decl.name}({', '.join(parts)})"


def _flow_literal(value) -> str:
    """A constant as it is written in .flow."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)
