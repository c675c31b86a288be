"""Symbol tables for the scope tree: pipeline scope, loop scopes (any depth), def namespaces."""
from __future__ import annotations

import importlib.util
import inspect
import sys
import typing
from typing import Optional

from attrs import define, field

from scopeflow.compiler.types import Schema


@define
class Symbol:
    name: str
    node: Optional[str]  # None when its definition failed (suppresses follow-on errors)
    schema: Optional[Schema]
    outputs: Optional[dict] = None  # loop with named emits: member -> (node, schema)
    kind: str = "stream"  # stream | var | import | param
    span: object = None


@define
class Symbols:
    """One namespace: a scope's streams. Lookups walk outwards so crossings can be reported."""

    scope: str  # Plan scope id that owns the streams defined here
    scope_label: str  # "pipeline" / "loop `cc`"
    parent: Optional["Symbols"] = None
    barrier: bool = False  # a def body: names outside it are invisible (hygiene)
    table: dict = field(factory=dict)
    loop_vars: dict = field(factory=dict)  # var name -> var node id (innermost loop only)
    child_locals: dict = field(factory=dict)  # name -> loop label, for streams local to a child loop
    scalars: dict = field(factory=dict)  # def scalar params -> TLit

    def define(self, sym: Symbol) -> Optional[Symbol]:
        """Add `sym`; return the earlier symbol of the same name if there is one."""
        old = self.table.get(sym.name)
        self.table[sym.name] = sym
        return old

    def lookup(self, name: str) -> tuple[Optional[Symbol], Optional["Symbols"]]:
        ns: Optional[Symbols] = self
        while ns is not None:
            if name in ns.table:
                return ns.table[name], ns
            if ns.barrier:
                return None, None
            ns = ns.parent
        return None, None

    def hidden_by_def(self, name: str) -> bool:
        """Whether `name` is defined outside the def body this namespace is in (hygiene hides it)."""
        ns: Optional[Symbols] = self
        while ns is not None and not ns.barrier:
            ns = ns.parent
        return ns is not None and ns.parent is not None and ns.parent.lookup(name)[0] is not None

    def visible_names(self) -> list[str]:
        out, ns = [], self
        while ns is not None:
            out += list(ns.table)
            if ns.barrier:
                break
            ns = ns.parent
        return out

    def local_to_child(self, name: str) -> Optional[str]:
        ns = self
        while ns is not None:
            if name in ns.child_locals:
                return ns.child_locals[name]
            ns = ns.parent
        return None


# ---- Python functions (LANGUAGE.md section 7) ------------------------------------------

_ANNOTATIONS = {int: "long", float: "double", str: "string", bool: "boolean"}


def python_type(annotation) -> Optional[str]:
    import datetime

    if annotation in _ANNOTATIONS:
        return _ANNOTATIONS[annotation]
    if annotation is datetime.datetime:
        return "timestamp"
    if annotation is datetime.date:
        return "date"
    if typing.get_origin(annotation) is list:
        (inner,) = typing.get_args(annotation) or (None,)
        t = python_type(inner)
        return f"array<{t}>" if t else None
    return None


def load_python_module(path: str, alias: str):
    """Import a user's module by path (at compile time). Raises on any import error."""
    name = f"scopeflow_udf_{alias}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def python_functions(module) -> dict:
    """name -> (arg types, return type) for annotated scalar functions, or ("bad", reason)."""
    out = {}
    for name, fn in vars(module).items():
        if name.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != module.__name__:
            continue
        out[name] = _signature(fn)
    return out


def _signature(fn):
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # a broken annotation is the user's problem to see
        return ("bad", f"its annotations cannot be evaluated: {exc}")
    params = list(inspect.signature(fn).parameters)
    missing = [p for p in params if p not in hints]
    if missing or "return" not in hints:
        what = ", ".join(f"`{p}`" for p in missing) if missing else "the return value"
        return ("bad", f"{what} has no type annotation")
    types = []
    for p in params + ["return"]:
        t = python_type(hints[p])
        if t is None:
            return ("bad", f"annotation `{getattr(hints[p], '__name__', hints[p])}` of `{p}` is not supported "
                           f"(use int, float, str, bool, list[...], date or datetime)")
        types.append(t)
    return (tuple(types[:-1]), types[-1])
