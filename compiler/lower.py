"""Resolve and lower the AST into the Plan IR (`ast_to_plan`), collecting diagnostics.

One walk does name resolution (scope tree, defs, imports), schema inference
and the scope rules of LANGUAGE.md section 5; whole-plan checks that need the
finished plan live in `compiler/checks/`.
"""
from __future__ import annotations

import os
from importlib import resources
from typing import Optional

from scopeflow.compiler import expr as X
from scopeflow.compiler.plan import Edge, EmitInfo, Node, Plan, Scope, Sink
from scopeflow.compiler.scopes import Symbol, Symbols
from scopeflow.compiler.types import Field, Schema
from scopeflow.stdlib.python_modules import load_python_module, python_functions
from scopeflow.stdlib.types import SCALARS, is_valid_type, widen
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import Diagnostic, FlowError, did_you_mean

SOURCE_FORMATS = ("csv", "json", "parquet", "table")
STREAM_FORMATS = ("files", "rate")
SINK_FORMATS = ("csv", "json", "parquet", "table", "console")
JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti")
LOOP_OPTIONS = ("max", "on_max", "rounds", "until", "snapshot_every", "snapshot_recompute")


class _Failed(Exception):
    """A stream could not be lowered; its diagnostic is already recorded."""


class Lowerer:
    def __init__(self, program: A.Program, base_dir: str):
        self.program = program
        self.base_dir = base_dir
        self.diags: list[Diagnostic] = []
        self.plan = Plan(pipeline=os.path.splitext(os.path.basename(program.file))[0], file=program.file)
        self.defs: dict[str, tuple[A.DefDecl, str]] = {}  # name -> (decl, defining file's dir)
        self.calls: list[tuple[str, A.Span, str]] = []  # def expansion stack: (def, call site, hygienic tag)
        self.expansions: dict[str, int] = {}
        self.failed: set[tuple[str, str]] = set()  # (scope, "Feedback"/"Emit"): silences "no feedback/emit"
        self.failed_udfs: set[str] = set()  # aliases whose `use python` failed (their calls are not re-reported)
        self.plan.scopes["pipeline"] = Scope("pipeline", "pipeline", self.plan.pipeline, None, 0)

    # ---- diagnostics ---------------------------------------------------------------

    def error(self, code, message, span, label="", hints=(), severity="error"):
        notes = tuple(Diagnostic("", f"in operator `{name}` expanded here", s, label=f"call of `{name}`")
                      for name, s, _ in reversed(self.calls))
        d = Diagnostic(code, message, span, severity=severity, label=label, hints=tuple(h for h in hints if h),
                       notes=notes)
        if not any(o.code == d.code and o.span == d.span and o.message == d.message for o in self.diags):
            self.diags.append(d)

    def fail(self, *args, **kw):
        self.error(*args, **kw)
        raise _Failed()

    # ---- nodes -----------------------------------------------------------------------

    def add_node(self, op, scope, inputs, schema, span, args=None, name=None, edge_kind="data") -> str:
        nid = f"n{len(self.plan.nodes) + 1:03d}"
        self.plan.nodes[nid] = Node(nid, op, scope, list(inputs), schema.unqualified(), dict(args or {}), name, span)
        self.plan.scopes[scope].nodes.append(nid)
        for i in inputs:
            self.plan.edges.append(Edge(i, nid, edge_kind))
        return nid

    # ---- program ---------------------------------------------------------------------

    def lower_program(self) -> Plan:
        top = Symbols("pipeline", "the pipeline")
        self.top = top
        self.collect_defs(self.program.stmts, self.base_dir, top)
        for stmt in self.program.stmts:
            self.lower_stmt(stmt, top, in_def=False)
        return self.plan

    def collect_defs(self, stmts, base_dir, top):
        for stmt in stmts:
            if isinstance(stmt, A.DefDecl):
                if stmt.name in self.defs:
                    self.error("E0102", f"operator `{stmt.name}` is defined twice", stmt.span, "second definition",
                               ["rename one of them"])
                self.defs[stmt.name] = (stmt, base_dir)
            elif isinstance(stmt, A.ImportDecl):
                self.lower_import(stmt, base_dir)

    def lower_stmt(self, stmt, sym: Symbols, in_def: bool):
        try:
            handler = getattr(self, f"stmt_{type(stmt).__name__}")
            handler(stmt, sym, in_def)
        except _Failed:
            if isinstance(stmt, (A.Assign, A.SourceDecl)):
                sym.define(Symbol(stmt.name, None, None, span=stmt.span))
            elif isinstance(stmt, (A.Feedback, A.Emit)):
                self.failed.add((sym.scope, type(stmt).__name__))

    def top_only(self, stmt, sym: Symbols, what: str, in_def: bool) -> bool:
        if sym.scope != "pipeline" or in_def:
            where = "a loop body" if sym.scope != "pipeline" else "a def body"
            self.error("E0113", f"{what} is not allowed in {where}", stmt.span, "move it to the top level",
                       ["`pipeline`, `param`, `config`, `use`, `from` and `def` are declared at the top level"])
            return False
        return True

    def stmt_PipelineDecl(self, stmt, sym, in_def):
        if self.top_only(stmt, sym, "`pipeline`", in_def):
            self.plan.pipeline = stmt.name

    def stmt_ParamDecl(self, stmt, sym, in_def):
        if not self.top_only(stmt, sym, "`param`", in_def):
            return
        if not is_valid_type(stmt.type):
            self.fail("E0119", f"unknown type `{stmt.type}`", stmt.span, "bad type", did_you_mean(stmt.type, SCALARS))
        lit = stmt.default
        if not _fits(stmt.type, lit.type):
            self.fail("E0117", f"param `{stmt.name}` is {stmt.type} but its default is {lit.type}", lit.span,
                      "wrong type", [f"give a {stmt.type} default"])
        if stmt.name in self.plan.params:
            self.fail("E0102", f"param `{stmt.name}` is declared twice", stmt.span, "second declaration",
                      ["remove one declaration or rename it"])
        self.plan.params[stmt.name] = (stmt.type, lit.value)

    def stmt_ConfigDecl(self, stmt, sym, in_def):
        if self.top_only(stmt, sym, "`config`", in_def):
            v = stmt.value.value
            self.plan.config[stmt.key] = str(v).lower() if isinstance(v, bool) else str(v)

    def stmt_UseDecl(self, stmt, sym, in_def):
        if not self.top_only(stmt, sym, "`use python`", in_def):
            return
        if stmt.alias in self.plan.udfs or stmt.alias in self.failed_udfs:
            self.fail("E0102", f"Python module alias `{stmt.alias}` is declared twice", stmt.span, "second declaration",
                      ["give each module its own alias"])
        path = os.path.join(self.base_dir, stmt.path)
        if not os.path.isfile(path):
            self.failed_udfs.add(stmt.alias)
            self.fail("E0110", f"Python module `{stmt.path}` not found", stmt.span, "no such file",
                      [f"looked for {path}; paths are relative to the .flow file"])
        try:
            module = load_python_module(path, stmt.alias)
        except Exception as exc:  # the user's module failed to import: show why
            self.failed_udfs.add(stmt.alias)
            self.fail("E0110", f"Python module `{stmt.path}` failed to import: {type(exc).__name__}: {exc}",
                      stmt.span, "import failed", ["the module is imported when the pipeline is checked; fix the error"])
        self.plan.udfs[stmt.alias] = {"path": path, "functions": python_functions(module), "line": stmt.span.line,
                                      "table_functions": sorted(n for n in python_functions(module))}

    def stmt_ImportDecl(self, stmt, sym, in_def):
        self.top_only(stmt, sym, "`from ... import`", in_def)

    def stmt_DefDecl(self, stmt, sym, in_def):
        self.top_only(stmt, sym, "`def`", in_def)

    def stmt_Return(self, stmt, sym, in_def):
        if not in_def:
            self.error("E0108", "`return` is only allowed at the end of a def", stmt.span, "outside a def",
                       ["at the top level, define a stream: `name = STREAM`"])

    def lower_import(self, stmt: A.ImportDecl, base_dir: str):
        path = self.resolve_import(stmt, base_dir)
        if path is None:
            return
        from scopeflow.dsl.parser import flow_to_ast

        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        try:
            lib = flow_to_ast(text, path)
        except FlowError as err:
            self.diags.extend(err.diagnostics)
            return
        lib_defs: dict[str, A.DefDecl] = {}
        for s in lib.stmts:
            if isinstance(s, A.DefDecl):
                lib_defs[s.name] = s
            elif isinstance(s, A.ImportDecl):
                self.lower_import(s, os.path.dirname(path))
        for name, span in zip(stmt.names, stmt.name_spans):
            if name not in lib_defs:
                self.error("E0106", f"`{stmt.path}` has no operator `{name}`", span, "not defined there",
                           did_you_mean(name, lib_defs))
                continue
            self.defs[name] = (lib_defs[name], os.path.dirname(path))
        for name, d in lib_defs.items():  # helpers a library def calls stay reachable, unexported
            self.defs.setdefault(name, (d, os.path.dirname(path)))

    def resolve_import(self, stmt: A.ImportDecl, base_dir: str) -> Optional[str]:
        if stmt.path.startswith("stdlib:"):
            module = stmt.path.split(":", 1)[1]
            res = resources.files("scopeflow.stdlib").joinpath(f"{module}.flow")
            if not res.is_file():
                libs = [p.name[:-5] for p in resources.files("scopeflow.stdlib").iterdir() if p.name.endswith(".flow")]
                self.error("E0105", f"no stdlib module `{module}`", stmt.span, "unknown module",
                           list(did_you_mean(module, libs)) or [f"stdlib modules: {', '.join(sorted(libs)) or 'none'}"])
                return None
            return str(res)
        path = os.path.join(base_dir, stmt.path)
        if not os.path.isfile(path):
            self.error("E0105", f"cannot import `{stmt.path}`: file not found", stmt.span, "no such file",
                       [f"looked for {path}"])
            return None
        return path

    # ---- sources and sinks ------------------------------------------------------------

    def stmt_SourceDecl(self, stmt, sym, in_def):
        if sym.scope != "pipeline" or in_def:
            self.fail("E0211", "`source` is not allowed inside a loop body or def", stmt.span, "source here",
                      ["declare the source at the top level and bring it in with `with (...)`"])
        src = stmt.source
        if isinstance(src, A.ValuesSource):
            schema = self.schema_of(src.schema)
            rows = self.check_rows(src, schema)
            nid = self.add_node("values", "pipeline", [], schema, stmt.span, {"rows": rows}, name=stmt.name)
        else:
            schema, args = self.read_source(src)
            nid = self.add_node("source", "pipeline", [], schema, stmt.span, args, name=stmt.name)
            self.plan.streaming |= src.streaming
        self.define(sym, Symbol(stmt.name, nid, schema, span=stmt.span))

    def check_rows(self, src: A.ValuesSource, schema: Schema):
        rows = []
        for row in src.rows:
            if len(row) != len(schema.fields):
                self.fail("E0319", f"a row has {len(row)} values, the schema {len(schema.fields)}",
                          row[0].span if row else src.span, "row", [f"schema: {schema}"])
            for lit, f in zip(row, schema.fields):
                if not _fits(f.type, lit.type):
                    self.fail("E0319", f"value {lit.value!r} is {lit.type}, field `{f.name}` is {f.type}", lit.span,
                              "wrong type", [f"write a {f.type} value"])
            rows.append(tuple(lit.value for lit in row))
        return rows

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

    def path_arg(self, path, args):
        """Check that a path given as a param names a string param."""
        if isinstance(path, dict) and self.plan.params[path["param"]][0] != "string":
            arg = next(a for a in args if a.name is None)
            self.fail("E0117", f"param `{path['param']}` is {self.plan.params[path['param']][0]}, a path must be a "
                      "string", arg.span, "not a string", [f"declare it: param {path['param']}: string = \"...\""])
        return path

    def arg_value(self, arg: A.Arg):
        if isinstance(arg.value, A.Name):
            if arg.value.name not in self.plan.params:
                self.fail("E0104", f"unknown param `{arg.value.name}`", arg.value.span, "not a param",
                          did_you_mean(arg.value.name, self.plan.params) or ["declare it: param name: string = \"...\""])
            return {"param": arg.value.name}
        return arg.value.value

    def call_args(self, args, what, allowed) -> tuple[object, dict]:
        positional, options = [], {}
        for a in args:
            if a.name is None:
                positional.append(self.arg_value(a))
            elif allowed is not None and a.name not in allowed:
                self.fail("E0114", f"{what} has no option `{a.name}`", a.span, "unknown option",
                          did_you_mean(a.name, allowed))
            else:
                options[a.name] = self.arg_value(a)
        if len(positional) > 1:
            self.fail("E0114", f"{what} takes one positional argument (the path)", args[1].span, "extra argument",
                      ["pass options by name, e.g. `header = true`"])
        return (positional[0] if positional else None), options

    def read_source(self, src: A.ReadSource):
        formats = STREAM_FORMATS if src.streaming else SOURCE_FORMATS
        if src.format not in formats:
            self.fail("E0114", f"unknown source format `{src.format}`", src.format_span, "unknown format",
                      did_you_mean(src.format, formats))
        path, options = self.call_args(src.args, f"`{src.format}`", None)
        self.path_arg(path, src.args)
        if path is None and src.format != "rate":
            self.fail("E0114", f"`read {src.format}(...)` needs a path", src.span, "missing path",
                      [f"e.g. `read {src.format}(\"data/input\")`; a relative path is relative to the .flow file"])
        if src.format == "rate":
            schema = Schema.of([("timestamp", "timestamp"), ("value", "long")])
        elif src.schema is not None:
            schema = self.schema_of(src.schema)
        elif src.format == "parquet":
            schema = self.parquet_schema(path, src)
        else:
            self.fail("E0115", f"`read {src.format}` needs a schema", src.span, "no schema",
                      [f"add one: read {src.format}(...) schema (id: long, name: string)"])
        if src.format not in ("table", "rate"):
            self.warn_missing(path, src.span)
        return schema, {"format": src.format, "path": path, "options": options, "streaming": src.streaming,
                        "line": src.span.line}

    def path_value(self, path) -> Optional[str]:
        if isinstance(path, dict):
            return self.plan.params.get(path["param"], (None, None))[1]
        return path

    def warn_missing(self, path, span):
        p = self.path_value(path)
        if isinstance(p, str) and "://" not in p and not os.path.exists(os.path.join(self.base_dir, p)):
            self.error("W0001", f"input `{p}` does not exist (yet)", span, "missing input",
                       [f"looked for {os.path.join(self.base_dir, p)}; the run fails if it is still missing"],
                       severity="warning")

    def parquet_schema(self, path, src) -> Schema:
        p = self.path_value(path)
        full = os.path.join(self.base_dir, p) if isinstance(p, str) else None
        if full is None or not os.path.exists(full):
            self.fail("E0116", f"parquet input `{p}` does not exist, so its schema cannot be read", src.span,
                      "no schema", [f"looked for {full}" if full else "",
                                    "declare the schema: read parquet(...) schema (...)"])
        try:
            import pyarrow.dataset as ds

            arrow = ds.dataset(full, format="parquet").schema
        except Exception as exc:
            self.fail("E0116", f"cannot read the schema of parquet input `{p}`: {exc}", src.span, "no schema",
                      ["declare it: read parquet(...) schema (...)"])
        return Schema.of((f.name, _arrow_type(f.type)) for f in arrow)

    def stmt_SinkDecl(self, stmt, sym, in_def):
        if sym.scope != "pipeline" or in_def:
            self.fail("E0211", "sinks are only allowed at the pipeline level", stmt.span, "sink here",
                      ["emit the stream from the loop and sink the loop's output"])
        nid, _ = self.lower_stream(stmt.expr, sym)
        spec = stmt.sink
        if spec.format not in SINK_FORMATS:
            self.fail("E0114", f"unknown sink `{spec.format}`", spec.span, "unknown sink",
                      did_you_mean(spec.format, SINK_FORMATS))
        allowed = {"csv": ("header", "sep"), "json": (), "parquet": (), "table": (), "console": ("rows",)}[spec.format]
        path, options = self.call_args(spec.args, f"sink `{spec.format}`", allowed)
        self.path_arg(path, spec.args)
        if path is None and spec.format != "console":
            self.fail("E0114", f"sink `{spec.format}` needs a path", spec.span, "missing path",
                      [f"e.g. `{spec.format}(\"out/result\")`"])
        self.plan.sinks.append(Sink(nid, spec.format, {"path": path, "options": options, "line": stmt.span.line},
                                    stmt.span))

    # ---- definitions -------------------------------------------------------------------

    def define(self, sym: Symbols, s: Symbol):
        old = sym.define(s)
        if old is not None:
            self.error("E0102", f"`{s.name}` is already defined", s.span, "defined again",
                       [f"first defined at {old.span}" if old.span else "", "streams are defined once; pick a new name"])

    def stmt_Assign(self, stmt, sym, in_def):
        if isinstance(stmt.expr.head, A.Loop) and not stmt.expr.ops:
            result = self.lower_loop(stmt.expr.head, sym, out_name=stmt.name)
            if isinstance(result, dict):
                self.define(sym, Symbol(stmt.name, None, None, outputs=result, span=stmt.span))
                return
            nid, schema = result
        else:
            nid, schema = self.lower_stream(stmt.expr, sym)
        node = self.plan.nodes[nid]
        if node.name is None or node.op in ("var", "import") or node.name != stmt.name:
            if node.name is not None:  # an alias: `x = y` adds an identity node, so both names survive
                nid = self.add_node("select", sym.scope, [nid], schema, stmt.span,
                                    {"items": [(f.name, X.TCol(f.name, f.type)) for f in schema.fields]})
            self.plan.nodes[nid].name = self.hygienic(stmt.name)
        self.define(sym, Symbol(stmt.name, nid, schema, span=stmt.span))

    def hygienic(self, name: str) -> str:
        if not self.calls:
            return name
        return "_".join([c[2] for c in self.calls] + [name])

    # ---- streams -----------------------------------------------------------------------

    def lower_stream(self, e: A.StreamExpr, sym: Symbols, binary=None) -> tuple[str, Schema]:
        head = e.head
        if isinstance(head, A.Ref):
            nid, schema = self.lower_ref(head, sym, binary)
        elif isinstance(head, A.Loop):
            result = self.lower_loop(head, sym, out_name=None)
            if isinstance(result, dict):
                self.fail("E0208", f"loop `{head.name}` has several named emits; assign it and use `name.output`",
                          head.span, "several outputs",
                          [f"e.g. `out = loop {head.name}(...) {{ ... }}`, then `out.{next(iter(result))}`"])
            nid, schema = result
        else:
            nid, schema = self.expand_call(head, None, sym)
        for op in e.ops:
            nid, schema = self.lower_op(op, nid, schema, sym)
        return nid, schema

    def lower_ref(self, ref: A.Ref, sym: Symbols, binary=None) -> tuple[str, Schema]:
        s, owner = sym.lookup(ref.name)
        if s is None:
            child = sym.local_to_child(ref.name)
            if child:
                self.fail("E0203", f"`{ref.name}` is local to {child} and invisible outside it", ref.span,
                          "loop-local stream", [f"emit it from the loop: `emit {ref.name} as {ref.name}`"])
            if ref.name in self.defs:
                self.fail("E0101", f"`{ref.name}` is an operator, not a stream", ref.span, "operator",
                          [f"call it: `{ref.name}(...)`"])
            if self.calls and sym.hidden_by_def(ref.name):
                self.fail("E0101", f"`{ref.name}` is defined outside operator `{self.calls[-1][0]}`, which sees only its "
                          "parameters and its own streams", ref.span, "not visible in the def",
                          [f"pass it in as a stream parameter, e.g. `{ref.name}: (...)`"])
            self.fail("E0101", f"unknown stream `{ref.name}`", ref.span, "not defined",
                      did_you_mean(ref.name, sym.visible_names()))
        if s.node is None and s.outputs is None:
            raise _Failed()  # its definition already failed and was reported
        if owner.scope != sym.scope:
            self.scope_crossing(ref, sym, owner, binary)
        if s.outputs is not None:
            if ref.member is None:
                self.fail("E0118", f"loop output `{ref.name}` has several streams", ref.span, "not a stream",
                          [f"use one of: {', '.join(f'{ref.name}.{m}' for m in s.outputs)}"])
            if ref.member not in s.outputs:
                self.fail("E0118", f"loop `{ref.name}` has no output `{ref.member}`", ref.span, "unknown output",
                          did_you_mean(ref.member, s.outputs))
            nid, schema = s.outputs[ref.member]
            return nid, schema.qualified(ref.name).qualified(ref.member)
        if ref.member is not None:
            self.fail("E0118", f"`{ref.name}` is a stream, not a loop with named outputs", ref.span,
                      "no member", [f"write `{ref.name}`"])
        return s.node, s.schema.unqualified().qualified(ref.name)

    def scope_crossing(self, ref, sym, owner, binary):
        mine, theirs = sym.scope_label, owner.scope_label
        hint = f"import it into the loop: with ({ref.name} = {ref.name})"
        if binary is not None:
            op, left_label = binary
            self.fail("E0202", f"{op} between a stream of {left_label} and `{ref.name}` ({theirs}) crosses scopes",
                      ref.span, f"`{ref.name}` lives outside {mine}", [hint])
        self.fail("E0201", f"{mine} refers to `{ref.name}` of {theirs}", ref.span, f"`{ref.name}` lives outside {mine}",
                  [hint])

    # ---- operators ---------------------------------------------------------------------

    def lower_op(self, op: A.Op, nid: str, schema: Schema, sym: Symbols) -> tuple[str, Schema]:
        if isinstance(op, A.OpCall):
            return self.expand_call(op, (nid, schema), sym)
        handler = getattr(self, f"op_{op.kind}")
        return handler(op, nid, schema, sym)

    def env(self, schema, sym, right=None, allow_agg=False) -> X.Env:
        params = {k: v[0] for k, v in self.plan.params.items()}
        return X.Env(schema, params, self.udf_env(), right, allow_agg, dict(self.scalars_of(sym)))

    def scalars_of(self, sym: Symbols) -> dict:
        ns, out = sym, {}
        while ns is not None:
            out = {**ns.scalars, **out}
            if ns.barrier:
                break
            ns = ns.parent
        return out

    def udf_env(self) -> dict:
        failed = {alias: None for alias in self.failed_udfs}  # None: the module failed to load (already reported)
        return {**failed, **{alias: u["functions"] for alias, u in self.plan.udfs.items()}}

    def typed(self, e: A.Expr, env: X.Env) -> X.TExpr:
        try:
            t = X.type_expr(e, env)
        except X.TypeErrorAt as err:
            d = err.diag
            if d is None:  # a follow-on of an error already reported
                raise _Failed() from None
            self.fail(d.code, d.message, d.span, d.label, d.hints)
        return t

    def items(self, items, schema, sym, what) -> list[tuple[str, X.TExpr]]:
        out, seen = [], set()
        for it in items:
            t = self.typed(it.expr, self.env(schema, sym))
            name = it.name or X.output_name(it.expr)
            if name is None:
                self.fail("E0313", f"this {what} item needs a name", it.span, "unnamed expression",
                          ["name it: `n = EXPR`"])
            if name in seen:
                self.fail("E0314", f"field `{name}` appears twice in the output", it.span, "duplicate field",
                          ["rename one of them: `new_name = EXPR`"])
            seen.add(name)
            out.append((name, t))
        return out

    def op_select(self, op, nid, schema, sym):
        items = self.items(op.items, schema, sym, "select")
        kept = {f.name: f for f in schema.fields}
        out = Schema(tuple(Field(n, t.type, kept[n].quals if isinstance(t, X.TCol) and t.name == n and n in kept
                                  else frozenset()) for n, t in items))
        return self.add_node("select", sym.scope, [nid], out, op.span, {"items": items}), out

    def op_derive(self, op, nid, schema, sym):
        items = self.items(op.items, schema, sym, "derive")
        new = dict(items)
        fields = [Field(f.name, new[f.name].type) if f.name in new else f for f in schema.fields]
        fields += [Field(n, t.type) for n, t in items if schema.get(n) is None]
        out = Schema(tuple(fields))
        return self.add_node("derive", sym.scope, [nid], out, op.span, {"items": items}), out

    def op_drop(self, op, nid, schema, sym):
        for n in op.names:
            if schema.get(n) is None:
                self.fail("E0301", f"cannot drop `{n}`: no such field", op.span, "unknown field",
                          list(did_you_mean(n, schema.names())) + [f"the input has fields {schema}"])
        out = Schema(tuple(f for f in schema.fields if f.name not in op.names))
        return self.add_node("drop", sym.scope, [nid], out, op.span, {"names": list(op.names)}), out

    def op_where(self, op, nid, schema, sym):
        cond = self.typed(op.cond, self.env(schema, sym))
        if cond.type not in ("boolean", "null"):
            self.fail("E0306", f"`where` needs a boolean condition, got {cond.type}", op.cond.span, "not a boolean",
                      ["compare it, e.g. `where(x > 0)`"])
        return self.add_node("where", sym.scope, [nid], schema, op.span, {"cond": cond}), schema

    def op_explode(self, op, nid, schema, sym):
        ((name, t),) = self.items([op.item], schema, sym, "explode")
        if not t.type.startswith("array<"):
            self.fail("E0315", f"`explode` needs an array, got {t.type}", op.item.span, "not an array",
                      ["make one with `split(s, \",\")` or `array(a, b)`"])
        out = Schema(tuple(f for f in schema.fields if f.name != name) + (Field(name, t.type[6:-1]),))
        return self.add_node("explode", sym.scope, [nid], out, op.span, {"name": name, "expr": t}), out

    def op_union(self, op, nid, schema, sym):
        inputs = [nid]
        for other in op.others:
            oid, osch = self.lower_stream(other, sym, binary=("union", sym.scope_label))
            if not schema.same_as(osch):
                self.fail("E0307", "union inputs have different schemas", other.span, "this input",
                          schema.diff(osch) + [f"left: {schema.unqualified()}, right: {osch.unqualified()}"])
            inputs.append(oid)
        out = schema.unqualified()
        return self.add_node("union", sym.scope, inputs, out, op.span), out

    def op_join(self, op, nid, schema, sym):
        if op.how not in JOIN_KINDS:
            self.fail("E0309", f"unknown join kind `{op.how}`", op.how_span or op.span, "unknown kind",
                      did_you_mean(op.how, JOIN_KINDS))
        rid, rschema = self.lower_stream(op.other, sym, binary=("join", sym.scope_label))
        cond = self.typed(op.on, self.env(schema, sym, right=rschema))
        if cond.type != "boolean":
            self.fail("E0306", f"a join condition must be boolean, got {cond.type}", op.on.span, "not a boolean",
                      ["compare fields of both sides, e.g. `on a.id == b.id`"])
        keys = _equi_keys(cond)
        if op.how in ("semi", "anti"):
            out = schema
        else:
            shared = {lk for lk, rk in keys if lk == rk}
            fields = list(schema.fields)
            for f in rschema.fields:
                left = schema.get(f.name)
                if left is None:
                    fields.append(f)
                elif f.name in shared:
                    i = fields.index(left)
                    fields[i] = Field(f.name, left.type, left.quals | f.quals)
                else:
                    self.fail("E0308", f"both join inputs have a field `{f.name}`", op.span, "field clash",
                              [f"rename one side first, e.g. `{_qual(rschema)} | select(..., {f.name}_2 = {f.name})`",
                               f"or join on `{f.name}` with itself to keep one `{f.name}`"])
            out = Schema(tuple(fields))
        args = {"on": cond, "how": op.how, "keys": keys, "left_fields": schema.names(), "right_fields": rschema.names()}
        jid = self.add_node("join", sym.scope, [nid, rid], out, op.span, args)
        return jid, out

    def grouping(self, op, schema, sym, what):
        keys, aggs = [], []
        for it in op.items:
            t = self.typed(it.expr, self.env(schema, sym, allow_agg=True))
            name = it.name or X.output_name(it.expr)
            if X.has_agg(t):
                if name is None or it.name is None:
                    self.fail("E0313", f"an aggregate in `{what}` needs a name", it.span, "unnamed aggregate",
                              ["name it: `n = count()`"])
                aggs.append((name, t, it))
            else:
                if not op.has_by:
                    self.fail("E0312", f"`{what}` without `by` takes only aggregates", it.span, "not an aggregate",
                              [f"group by it: `{what}(by {name or 'key'}, ...)`"])
                if aggs:
                    self.fail("E0312", "keys come before aggregates", it.span, "key after an aggregate",
                              [f"write the keys first: `{what}(by k, n = count())`"])
                if name is None:
                    self.fail("E0313", f"this `{what}` key needs a name", it.span, "unnamed key", ["name it: `k = EXPR`"])
                keys.append((name, t))
        names = [n for n, _ in keys] + [n for n, _, _ in aggs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            self.fail("E0314", f"field `{dup}` appears twice in the `{what}` output", op.span, "duplicate field",
                      ["rename one of them: `new_name = EXPR`"])
        out = Schema(tuple(Field(n, t.type) for n, t in keys) + tuple(Field(n, t.type) for n, t, _ in aggs))
        return keys, aggs, out

    def op_group(self, op, nid, schema, sym):
        keys, aggs, out = self.grouping(op, schema, sym, "group")
        args = {"keys": keys, "aggs": [(n, t) for n, t, _ in aggs]}
        return self.add_node("group", sym.scope, [nid], out, op.span, args), out

    def op_reduce(self, op, nid, schema, sym):
        from scopeflow.stdlib.functions import AGGREGATES, INCREMENTAL

        keys, aggs, out = self.grouping(op, schema, sym, "reduce")
        if not aggs:
            self.fail("E0312", "`reduce` needs at least one aggregate", op.span, "no aggregate",
                      ["e.g. `reduce(by id, label = min(label))`; for set semantics use `distinct`"])
        for name, t, it in aggs:
            fn = t.fn.split(":", 1)[1] if t.fn.startswith("agg:") else None
            if fn is None:
                self.fail("E0311", f"`reduce` needs a plain aggregate for `{name}`", it.expr.span,
                          "aggregate inside an expression", ["compute the expression after the reduce with `derive`"])
            if not AGGREGATES[fn].incremental:
                self.fail("E0311", f"`{fn}` cannot be folded incrementally in `reduce`", it.expr.span,
                          "not incremental", [f"reduce accepts {', '.join(INCREMENTAL)}",
                                              "for a mean keep `s = sum(x)` and `n = count()`, then derive s / n"
                                              if fn == "avg" else "use `group` for a per-round aggregate"])
        args = {"keys": keys, "aggs": [(n, t) for n, t, _ in aggs]}
        return self.add_node("reduce", sym.scope, [nid], out, op.span, args), out

    def op_distinct(self, op, nid, schema, sym):
        return self.add_node("distinct", sym.scope, [nid], schema, op.span), schema

    def op_apply(self, op, nid, schema, sym):
        udf = self.plan.udfs.get(op.module)
        if op.module in self.failed_udfs:
            raise _Failed()
        if udf is None:
            self.fail("E0111", f"unknown Python module alias `{op.module}`", op.span, "not declared",
                      list(did_you_mean(op.module, self.plan.udfs)) + [f'declare it: use python "file.py" as {op.module}'])
        if op.func not in udf["functions"]:
            self.fail("E0111", f"`{op.module}` has no function `{op.func}`", op.span, "unknown function",
                      did_you_mean(op.func, udf["functions"]))
        out = self.schema_of(op.schema)
        return self.add_node("apply", sym.scope, [nid], out, op.span, {"module": op.module, "func": op.func}), out

    def op_sort(self, op, nid, schema, sym):
        self.pipeline_only(op, sym, "sort")
        keys = [(self.typed(k.expr, self.env(schema, sym)), k.desc) for k in op.keys]
        return self.add_node("sort", sym.scope, [nid], schema, op.span, {"keys": keys}), schema

    def op_limit(self, op, nid, schema, sym):
        self.pipeline_only(op, sym, "limit")
        return self.add_node("limit", sym.scope, [nid], schema, op.span, {"n": op.n}), schema

    def pipeline_only(self, op, sym, what):
        if sym.scope != "pipeline":
            self.fail("E0211", f"`{what}` is not allowed inside a loop body", op.span, f"{what} here",
                      [f"{what} the loop's output at the pipeline level"])

    # ---- defs ---------------------------------------------------------------------------

    def expand_call(self, call: A.OpCall, piped, sym: Symbols) -> tuple[str, Schema]:
        if call.name not in self.defs:
            builtin = ["select", "derive", "drop", "where", "explode", "union", "join", "group", "reduce",
                       "distinct", "apply", "sort", "limit"]
            self.fail("E0103", f"unknown operator `{call.name}`", call.span, "not an operator or def",
                      did_you_mean(call.name, list(self.defs) + builtin) or
                      ["define it with `def` or import it: from \"stdlib:graph\" import ..."])
        decl, def_dir = self.defs[call.name]
        if any(c[0] == call.name for c in self.calls):
            self.fail("E0107", f"operator `{call.name}` calls itself", call.span, "recursive call",
                      ["defs are expanded at compile time; write the recursion as a loop"])
        args = ([("stream", piped)] if piped else []) + [self.def_arg(a, sym) for a in call.args]
        stream_params = [p for p in decl.params if p.schema is not None]
        scalar_params = [p for p in decl.params if p.schema is None]
        streams = [a for a in args if a[0] == "stream"]
        scalars = [a for a in args if a[0] == "scalar"]
        if len(streams) != len(stream_params) or len(scalars) > len(scalar_params):
            self.fail("E0107", f"`{call.name}` takes {len(stream_params)} stream(s) and up to {len(scalar_params)} "
                      f"constant(s), got {len(streams)} and {len(scalars)}", call.span, "wrong arguments",
                      [f"signature: {_def_signature(decl)}"])
        ns = Symbols(sym.scope, sym.scope_label, parent=sym, barrier=True)
        for p, (_, (nid, schema)) in zip(stream_params, streams):
            need = self.schema_of(p.schema)
            for f in need.fields:
                got = schema.get(f.name)
                if got is None or widen(f.type, got.type) != f.type:
                    self.fail("E0109", f"`{call.name}` needs field `{f.name}: {f.type}` in `{p.name}`", call.span,
                              "input lacks a field", [f"the input has {schema.unqualified()}",
                                                      f"`{p.name}` needs {need}"])
            ns.define(Symbol(p.name, nid, schema.unqualified(), kind="param", span=p.span))
        for i, p in enumerate(scalar_params):
            lit = scalars[i][1] if i < len(scalars) else p.default
            if lit is None:
                self.fail("E0107", f"`{call.name}` needs a value for `{p.name}`", call.span, "missing argument",
                          [f"signature: {_def_signature(decl)}"])
            if not is_valid_type(p.type):
                self.fail("E0119", f"unknown type `{p.type}`", p.span, "bad type", did_you_mean(p.type, SCALARS))
            if not _fits(p.type, lit.type):
                given = "its default" if i >= len(scalars) else "the argument"
                self.fail("E0107", f"`{p.name}` of `{call.name}` is {p.type} but {given} is {lit.type}",
                          getattr(lit, "span", None) or call.span, "wrong type", [f"signature: {_def_signature(decl)}"])
            # a `param` (or an enclosing def's scalar bound to one) stays a param: --param overrides it
            ns.scalars[p.name] = X.TParam(lit.name, p.type) if isinstance(lit, X.TParam) else X.TLit(lit.value, p.type)
        count = self.expansions[call.name] = self.expansions.get(call.name, 0) + 1
        self.calls.append((call.name, call.span, call.name if count == 1 else f"{call.name}{count}"))
        try:
            return self.lower_def_body(decl, ns)
        finally:
            self.calls.pop()

    def def_arg(self, a, sym):
        if isinstance(a, A.Lit):
            return ("scalar", a)
        if (isinstance(a, A.StreamExpr) and not a.ops and isinstance(a.head, A.Ref) and a.head.member is None
                and sym.lookup(a.head.name)[0] is None):  # a bare name that is no stream: a constant by name
            scal = self.scalars_of(sym)
            if a.head.name in scal:
                return ("scalar", scal[a.head.name])
            if a.head.name in self.plan.params:
                return ("scalar", X.TParam(a.head.name, self.plan.params[a.head.name][0]))
        return ("stream", self.lower_stream(a, sym))

    def lower_def_body(self, decl: A.DefDecl, ns: Symbols) -> tuple[str, Schema]:
        result = None
        for stmt in decl.body:
            if isinstance(stmt, A.Return):
                if result is not None:
                    self.fail("E0108", f"`{decl.name}` has more than one `return`", stmt.span, "second return",
                              ["a def ends with exactly one `return`"])
                result = self.lower_stream(stmt.expr, ns)
            else:
                self.lower_stmt(stmt, ns, in_def=True)
        if result is None:
            self.fail("E0108", f"`{decl.name}` has no `return`", decl.span, "no return",
                      ["end the body with `return STREAM`"])
        nid, schema = result
        return nid, schema.unqualified()

    # ---- loops --------------------------------------------------------------------------

    def stmt_Feedback(self, stmt, sym, in_def):
        loop_ns = self.loop_ns(sym)
        if loop_ns is None:
            self.fail("E0212", "`feedback` is only allowed inside a loop body", stmt.span, "outside a loop",
                      ["write it in the body: `loop name(v = init) { ...; feedback v <- next; emit ... }`"])
        scope = self.plan.scopes[sym.scope]
        if stmt.var not in loop_ns.loop_vars:
            outer = self.outer_var_owner(loop_ns, stmt.var)
            hints = [f"variables of `{scope.name}`: {', '.join(loop_ns.loop_vars)}"]
            if outer:
                self.fail("E0204", f"`{stmt.var}` is a variable of the outer loop `{outer}`; feedback may only target "
                          f"the innermost loop `{scope.name}`", stmt.var_span, "outer variable", hints)
            close = [h for h in did_you_mean(stmt.var, loop_ns.loop_vars) if h.startswith("did you mean")]
            self.fail("E0204", f"`{stmt.var}` is not a variable of loop `{scope.name}`", stmt.var_span,
                      "not a loop variable", close + hints)
        nid, schema = self.lower_stream(stmt.expr, sym)
        var_id = loop_ns.loop_vars[stmt.var]
        var_schema = self.plan.nodes[var_id].schema
        if not var_schema.same_as(schema):
            self.fail("E0205", f"feedback to `{stmt.var}` has schema {schema.unqualified()}, the variable has "
                      f"{var_schema}", stmt.expr.span, "schema differs", var_schema.diff(schema))
        scope.feedback.append((var_id, nid))
        self.plan.edges.append(Edge(nid, var_id, "feedback"))

    def stmt_Emit(self, stmt, sym, in_def):
        loop_ns = self.loop_ns(sym)
        if loop_ns is None:
            self.fail("E0212", "`emit` is only allowed inside a loop body", stmt.span, "outside a loop",
                      ["write it in the body: `loop name(v = init) { ...; feedback v <- next; emit ... }`"])
        nid, schema = self.lower_stream(stmt.expr, sym)
        if stmt.mode == "state" and self.plan.nodes[nid].op not in ("reduce", "distinct"):
            self.fail("E0209", f"`emit state` needs a `reduce` or `distinct` stream, got `{self.plan.nodes[nid].op}`",
                      stmt.expr.span, "not stateful", ["emit a stream defined as `... | reduce(...)` or `... | distinct`",
                                                       "use `emit last` for the final round's records"])
        self.plan.scopes[sym.scope].emits.append(EmitInfo(stmt.as_name, stmt.mode, nid, span=stmt.span))

    def loop_ns(self, sym: Symbols) -> Optional[Symbols]:
        ns = sym
        while ns is not None and not ns.loop_vars:
            if ns.scope != sym.scope:
                return None
            ns = ns.parent
        return ns if ns is not None and ns.scope == sym.scope else None

    def outer_var_owner(self, ns: Symbols, var: str) -> Optional[str]:
        p = ns.parent
        while p is not None:
            if var in p.loop_vars:
                return self.plan.scopes[p.scope].name
            p = p.parent
        return None

    def lower_loop(self, loop: A.Loop, sym: Symbols, out_name: Optional[str]):
        parent = sym.scope
        entries = []
        for v in loop.vars:
            entry = self.lower_stream(v.init, sym) if v.init is not None else None
            declared = self.schema_of(v.schema) if v.schema is not None else None
            if declared is not None and entry is not None and not declared.same_as(entry[1]):
                self.fail("E0214", f"the entry stream of `{v.name}` does not match its declared schema", v.init.span,
                          "schema differs", declared.diff(entry[1]))
            entries.append((v, entry, declared or (entry[1].unqualified() if entry else None)))
        imports = [(imp, self.lower_stream(imp.expr, sym)) for imp in loop.imports]
        self.check_var_count(loop, entries)
        local = self.hygienic(loop.name)
        sid = local if parent == "pipeline" else f"{parent}.{local}"
        if sid in self.plan.scopes:
            self.fail("E0102", f"loop `{loop.name}` is already defined in this scope", loop.name_span, "duplicate loop",
                      ["loop names are unique within a scope; rename one"])
        scope = Scope(sid, loop.kind, loop.name, parent, self.plan.scopes[parent].depth + 1, span=loop.span)
        self.plan.scopes[sid] = scope
        self.plan.scopes[parent].children.append(sid)
        scope.options = self.loop_options(loop, sym)
        loop_id = self.add_node("loop", parent, [e[1][0] for e in entries if e[1]] + [i[1][0] for i in imports],
                                Schema(()), loop.span, {"scope": sid}, name=loop.name, edge_kind="entry")
        scope.loop_node = loop_id
        label = f"loop `{loop.name}`"
        ns = Symbols(sid, label, parent=sym)
        for v, entry, schema in entries:
            vid = self.add_node("var", sid, [], schema, v.span, {"var": v.name, "entry": entry[0] if entry else None},
                                name=v.name)
            if entry:
                self.plan.edges.append(Edge(entry[0], vid, "entry"))
            scope.vars.append(vid)
            ns.loop_vars[v.name] = vid
            self.define(ns, Symbol(v.name, vid, schema, kind="var", span=v.span))
        for imp, (src, schema) in imports:
            iid = self.add_node("import", sid, [], schema, imp.span, {"source": src}, name=imp.name)
            self.plan.edges.append(Edge(src, iid, "import"))
            scope.imports.append(iid)
            self.define(ns, Symbol(imp.name, iid, schema.unqualified(), kind="import", span=imp.span))
        for stmt in loop.body:
            self.lower_stmt(stmt, ns, in_def=False)
        for name in ns.table:
            if ns.table[name].kind not in ("var", "import"):
                sym.child_locals.setdefault(name, label)
        self.check_loop(loop, scope, ns)
        return self.loop_outputs(loop, scope, parent, loop_id, out_name)

    def check_var_count(self, loop, entries):
        n = len(loop.vars)
        if loop.kind == "loop" and n != 1:
            self.fail("E0207", f"a `loop` has exactly one variable, `{loop.name}` has {n}", loop.name_span,
                      "wrong variable count", ["use `coloop` for two variables of different schemas"])
        if loop.kind == "coloop":
            if n != 2:
                self.fail("E0207", f"a `coloop` has exactly two variables, `{loop.name}` has {n}", loop.name_span,
                          "wrong variable count", ["use `loop` for one variable"])
            (_, _, s1), (_, _, s2) = entries
            if s1 is not None and s2 is not None and s1.same_as(s2):
                self.fail("E0207", f"the two variables of coloop `{loop.name}` have the same schema {s1}",
                          loop.name_span, "same schemas", ["a coloop connects streams of different schemas; "
                                                           "use a `loop` over their union"])

    def loop_options(self, loop: A.Loop, sym: Symbols) -> dict:
        opts: dict = {"max": 1000, "on_max": "fail"}
        seen = set()
        for o in loop.options:
            if o.name in seen:
                self.fail("E0213", f"loop option `{o.name.replace('_', ' ')}` is given twice", o.span, "duplicate option",
                          ["keep one of them"])
            seen.add(o.name)
            value = o.value
            if isinstance(value, A.Lit):
                value = value.value
                if value < 1:
                    self.fail("E0213", f"`{o.name.replace('_', ' ')}` must be at least 1", o.span, "too small",
                              ["give a positive number of rounds"])
            elif isinstance(value, A.Name) and o.name != "until":
                value = self.option_param(value, sym)
            opts[o.name] = value.name if isinstance(value, A.Name) else value
        if "rounds" in opts and "until" in opts:
            later = [o for o in loop.options if o.name in ("rounds", "until")][-1]
            self.error("E0213", "`rounds` and `until` cannot be combined", later.span, "conflicting options",
                       ["use `until empty(S)` with `max N`"])
        if "rounds" in opts and "max" not in seen:
            opts["max"] = opts["rounds"]  # `rounds N` means exactly N rounds: the default max must not cut it short
        elif "rounds" in opts and all(isinstance(opts[k], int) for k in ("rounds", "max")) \
                and opts["rounds"] > opts["max"]:
            span = next(o.span for o in loop.options if o.name == "max")
            self.error("E0213", f"`rounds {opts['rounds']}` exceeds `max {opts['max']}`", span, "max too small",
                       [f"raise `max` to at least {opts['rounds']}, or drop it: `rounds N` runs exactly N rounds"])
        return opts

    def option_param(self, name: A.Name, sym: Symbols):
        scal = self.scalars_of(sym)
        if name.name in scal and isinstance(scal[name.name], X.TParam):
            name = A.Name(scal[name.name].name, span=name.span)  # a def's scalar bound to a param: use the param
        elif name.name in scal:
            return scal[name.name].value
        if name.name in self.plan.params and self.plan.params[name.name][0] in ("long", "int"):
            return {"param": name.name}
        if name.name in self.plan.params:
            self.fail("E0104", f"param `{name.name}` is {self.plan.params[name.name][0]}, a loop option needs an "
                      "integer", name.span, "not an integer param", ["declare it as `param NAME: long = N`"])
        self.fail("E0104", f"unknown integer param `{name.name}`", name.span, "not a param",
                  did_you_mean(name.name, list(self.plan.params) + list(scal)))

    def check_loop(self, loop: A.Loop, scope: Scope, ns: Symbols):
        if not scope.feedback and (scope.id, "Feedback") not in self.failed:
            self.error("E0206", f"loop `{loop.name}` has no feedback", loop.name_span, "no feedback",
                       [f"send records around: feedback {next(iter(ns.loop_vars), 'v')} <- ..."])
        emits = scope.emits
        if not emits and (scope.id, "Emit") not in self.failed:
            self.error("E0208", f"loop `{loop.name}` has no emit", loop.name_span, "no output",
                       ["add `emit STREAM` (or `emit last` / `emit state`)"])
        unnamed = [e for e in emits if e.name is None]
        if len(emits) > 1 and unnamed:
            self.error("E0208", f"loop `{loop.name}` has several emits; each must be named", unnamed[-1].span,
                       "unnamed emit", ["name them: `emit S as name`, then use `OUT.name`"])
        names = [e.name for e in emits if e.name]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            second = [e for e in emits if e.name == dup][1]
            self.error("E0208", f"two emits of loop `{loop.name}` are named `{dup}`", second.span,
                       "duplicate emit name", ["give each emit its own name"])
        until = scope.options.get("until")
        if until is not None:
            s = ns.table.get(until)
            span = next(o.value.span for o in loop.options if o.name == "until")
            if s is None or s.kind == "import":
                why = "an import is the same in every round" if s is not None else "not defined in the loop body"
                self.error("E0210", f"`until empty({until})` needs a stream of loop `{loop.name}`'s body ({why})",
                           span, "not a body stream", did_you_mean(until, [n for n, v in ns.table.items()
                                                                           if v.kind != "import"]))
            elif s.node is not None:
                scope.options["until"] = s.node

    def loop_outputs(self, loop, scope, parent, loop_id, out_name):
        outputs = {}
        for em in scope.emits:
            body = self.plan.nodes[em.node]
            name = f"{out_name or loop.name}.{em.name}" if em.name else (out_name or loop.name)
            oid = self.add_node("loop_out", parent, [loop_id], body.schema, em.span,
                                {"emit": em.name, "mode": em.mode, "scope": scope.id, "source": em.node},
                                name=self.hygienic(name))
            self.plan.edges.append(Edge(em.node, oid, "emit"))
            em.out = oid
            outputs[em.name] = (oid, body.schema)
        if not outputs:
            raise _Failed()
        if len(outputs) == 1 and None in outputs:
            return outputs[None]
        return outputs


def _fits(declared: str, literal: str) -> bool:
    """Whether a literal of type `literal` can stand for a value of type `declared` (dates are written as strings)."""
    return widen(declared, literal) == declared or (declared in ("date", "timestamp") and literal == "string")


def _equi_keys(cond: X.TExpr) -> list[tuple[str, str]]:
    """Left/right field pairs compared with `==` in the top-level conjunction of a join condition."""
    if isinstance(cond, X.TCall) and cond.fn == "and":
        return _equi_keys(cond.args[0]) + _equi_keys(cond.args[1])
    if isinstance(cond, X.TCall) and cond.fn == "==":
        a, b = cond.args
        if isinstance(a, X.TCol) and isinstance(b, X.TCol) and {a.side, b.side} == {"left", "right"}:
            left, right = (a, b) if a.side == "left" else (b, a)
            return [(left.name, right.name)]
    return []


def _qual(schema: Schema) -> str:
    quals = sorted({q for f in schema.fields for q in f.quals})
    return quals[0] if quals else "other"


def _def_signature(decl: A.DefDecl) -> str:
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
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def _arrow_type(t) -> str:
    import pyarrow as pa

    if pa.types.is_integer(t):
        return "long" if t.bit_width > 32 else "int"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_list(t):
        return f"array<{_arrow_type(t.value_type)}>"
    return "string"


def ast_to_plan(program: A.Program, base_dir: Optional[str] = None) -> tuple[Plan, list[Diagnostic]]:
    """Lower a parsed program; returns the plan and every diagnostic found (errors and warnings)."""
    low = Lowerer(program, base_dir if base_dir is not None else os.path.dirname(os.path.abspath(program.file)))
    plan = low.lower_program()
    return plan, low.diags
