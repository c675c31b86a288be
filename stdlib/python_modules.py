"""Users' Python modules (`use python "udfs.py" as u`, docs/language.md#python-functions).

The checker imports a module to read its functions' signatures; a running job
imports it again to call them. Both load it here, under the same module name,
so the runtime can tell users' modules from its own (`is_user_module`).
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
import typing

from scopeflow.stdlib.types import python_type

MODULE_PREFIX = "scopeflow_udf_"


def load_python_module(path: str, alias: str):
    """Import a user's module by path. Raises whatever the module raises while it is imported."""
    name = MODULE_PREFIX + alias
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def is_user_module(name: str) -> bool:
    return name.startswith(MODULE_PREFIX)


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
    except Exception as exc:  # a broken annotation is the user's problem to see: reported as E0112
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
