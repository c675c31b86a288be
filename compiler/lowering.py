"""The context lowering's stages share (`Lowering`): the declarations, the plan under construction,
the diagnostics and the stack of def calls being expanded; and `Failed`, which a stage raises when a
stream cannot be lowered (its diagnostic already recorded)."""
from __future__ import annotations

from typing import Optional

from attrs import define, field

from scopeflow.compiler import expr as X
from scopeflow.compiler.builder import PlanBuilder
from scopeflow.compiler.declarations import Declarations
from scopeflow.compiler.ops import ParamRef
from scopeflow.compiler.scopes import Scope, Symbol
from scopeflow.compiler.types import Schema
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import Diagnostic, did_you_mean
from scopeflow.stdlib.types import SCALARS, is_valid_type


class Failed(Exception):
    """A stream could not be lowered; its diagnostic is already recorded."""


@define
class Lowering:
    """What the walk shares: the declarations, the plan under construction, the diagnostics, and the
    stack of def calls being expanded."""

    base_dir: str
    loader: object
    plan: PlanBuilder
    decl: Optional[Declarations] = None
    diags: list = field(factory=list)
    calls: list = field(factory=list)  # def expansion stack: (def name, call site, hygienic tag)
    expansions: dict = field(factory=dict)  # def name -> times expanded
    failed: set = field(factory=set)  # (scope id, "Feedback" | "Emit"): silences "no feedback / no emit"

    # ---- diagnostics ----------------------------------------------------------------------------

    def error(self, code, message, span, label="", hints=(), severity="error") -> None:
        notes = tuple(Diagnostic("", f"in operator `{name}` expanded here", s, label=f"call of `{name}`")
                      for name, s, _ in reversed(self.calls))
        d = Diagnostic(code, message, span, severity=severity, label=label, hints=tuple(h for h in hints if h),
                       notes=notes)
        if not any(o.code == d.code and o.span == d.span and o.message == d.message for o in self.diags):
            self.diags.append(d)

    def fail(self, *args, **kw):
        self.error(*args, **kw)
        raise Failed()

    # ---- names and types ------------------------------------------------------------------------

    def hygienic(self, name: str) -> str:
        """A name defined inside def expansions, prefixed by their tags (`undirected_both`)."""
        return "_".join([c[2] for c in self.calls] + [name]) if self.calls else name

    def define(self, scope: Scope, s: Symbol) -> None:
        old = scope.define(s)
        if old is not None:
            first = f"first defined at {old.span}" if old.span else ""
            self.error("E0102", f"`{s.name}` is already defined", s.span, "defined again",
                       [first, "streams are defined once; pick a new name"])

    def schema_of(self, decl: A.SchemaDecl) -> Schema:
        seen = set()
        for f in decl.fields:
            if not is_valid_type(f.type):
                self.fail("E0119", f"unknown type `{f.type}`", f.span, "bad type", did_you_mean(f.type, SCALARS))
            if f.name in seen:
                self.fail("E0314", f"field `{f.name}` is declared twice", f.span, "duplicate field",
                          ["rename or remove one of them"])
            seen.add(f.name)
        return Schema.of((f.name, f.type) for f in decl.fields)

    def env(self, schema: Schema, scope: Scope, right: Optional[Schema] = None, allow_agg: bool = False) -> X.Env:
        params = {k: v[0] for k, v in self.decl.params.items()}
        udfs = {**{alias: None for alias in self.decl.failed_udfs},  # None: failed to load (already reported)
                **{alias: u.functions for alias, u in self.decl.udfs.items()}}
        return X.Env(schema, params, udfs, right, allow_agg, scope.scalars_in_view())

    def typed(self, e: A.Expr, env: X.Env) -> X.TExpr:
        try:
            return X.type_expr(e, env)
        except X.TypeErrorAt as err:
            d = err.diag
            if d is None:  # a follow-on of an error already reported
                raise Failed() from None
            self.fail(d.code, d.message, d.span, d.label, d.hints)


def count_param(lw: Lowering, name: A.Name, scope: Scope, what: str):
    """A count given by name (of rounds, of records): a def's constant, or a long `param` (resolved when the
    job runs). `what` names what needs it in messages."""
    constants = scope.scalars_in_view()
    if name.name in constants and isinstance(constants[name.name], X.TParam):
        name = A.Name(constants[name.name].name, span=name.span)  # a def's constant bound to a param: the param
    elif name.name in constants:
        constant = constants[name.name]
        if constant.type not in ("long", "int"):
            lw.fail("E0104", f"`{name.name}` is {constant.type}, {what} needs an integer", name.span,
                    "not an integer", ["declare the def's parameter as `NAME: long`"])
        return constant.value
    params = lw.decl.params
    if name.name in params and params[name.name][0] in ("long", "int"):
        return ParamRef(name.name)
    if name.name in params:
        lw.fail("E0104", f"param `{name.name}` is {params[name.name][0]}, {what} needs an integer", name.span,
                "not an integer param", ["declare it as `param NAME: long = N`"])
    lw.fail("E0104", f"unknown integer param `{name.name}`", name.span, "not a param",
            did_you_mean(name.name, list(params) + list(constants)))
