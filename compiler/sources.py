"""Sources and sinks: their formats, arguments, schemas and paths (docs/language.md#sources, #sinks)."""
from __future__ import annotations

import difflib
import os
from typing import Optional

from scopeflow.compiler import lower, ops
from scopeflow.compiler.declarations import fits
from scopeflow.compiler.lowering import Lowering
from scopeflow.compiler.plan import Sink
from scopeflow.compiler.scopes import Scope, Symbol
from scopeflow.compiler.types import Schema
from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import did_you_mean
from scopeflow.stdlib.inputs import FIELD_CHECKED, ON_ERROR_FORMATS, ON_ERROR_MODES, check_fields
from scopeflow.stdlib.paths import CONTAINS, SAME, is_local, local_path, normalized, relation
from scopeflow.stdlib.sinks import FILE_SINKS, SINK_MODES

SOURCE_FORMATS = ("csv", "json", "parquet", "table")
STREAM_FORMATS = ("files", "rate")
SINK_FORMATS = FILE_SINKS + ("table", "console")
FILE_SINK_OPTIONS = ("mode", "partition_by", "single_file")
SINK_OPTIONS = {"csv": ("header", "sep") + FILE_SINK_OPTIONS, "json": FILE_SINK_OPTIONS,
                "parquet": FILE_SINK_OPTIONS, "table": (), "console": ("rows",)}
# What a sink option's value must be; an option not listed takes any constant or a `param`. A tuple: one of
# these strings; "boolean": true or false; "fields": names of fields of the sink's stream. These three are
# constants (not params): they decide what a run may delete and the shape of its output.
SINK_OPTION_VALUES = {"mode": SINK_MODES, "single_file": "boolean", "partition_by": "fields"}
ANY = object()
# Sink options that do not go together: (option, value), (option, value or ANY), why.
SINK_OPTION_CONFLICTS = (
    (("single_file", True), ("mode", "append"),
     "`append` adds part files to the folder, a single file cannot take another run's rows"),
    (("single_file", True), ("partition_by", ANY),
     "`partition_by` writes a folder per value, each with its own files"),
)
# The source options scopeflow reads itself, by format: option -> the values it takes. Any other option of a
# batch source goes to Spark's reader as it is. Option names are matched ignoring case, as Spark does.
SOURCE_OPTIONS = {fmt: {"on_error": tuple(ON_ERROR_MODES)} for fmt in ON_ERROR_FORMATS}
# Spark reader options scopeflow sets itself (by lower-case name), and what to write instead.
OWNED_OPTIONS = {
    "mode": 'say what a malformed record does with `on_error = "fail"` (the default), `"skip"` or `"null"`',
    "enforceschema": "a CSV header is matched to the schema by name (and checked) by scopeflow itself",
}


def lower_source(lw: Lowering, stmt: A.SourceDecl, scope: Scope, in_def: bool) -> None:
    if scope.owner != "pipeline" or in_def:
        lw.fail("E0211", "`source` is not allowed inside a loop body or def", stmt.span, "source here",
                ["declare the source at the top level and bring it in with `with (...)`"])
    src = stmt.source
    if isinstance(src, A.ValuesSource):
        schema = lw.schema_of(src.schema)
        nid = lw.plan.add(ops.Values, "pipeline", [], schema, stmt.span, name=stmt.name, rows=_rows(lw, src, schema))
    else:
        schema, path, options = _read(lw, src)
        nid = lw.plan.add(ops.Source, "pipeline", [], schema, stmt.span, name=stmt.name, format=src.format,
                          path=path, options=options, streaming=src.streaming)
        lw.plan.streaming |= src.streaming
    lw.define(scope, Symbol(stmt.name, nid, schema, span=stmt.span))


def _rows(lw: Lowering, src: A.ValuesSource, schema: Schema) -> tuple:
    rows = []
    for row in src.rows:
        if len(row) != len(schema.fields):
            lw.fail("E0319", f"a row has {len(row)} values, the schema {len(schema.fields)}",
                    row[0].span if row else src.span, "row", [f"schema: {schema}"])
        for lit, f in zip(row, schema.fields):
            if not fits(f.type, lit.type):
                lw.fail("E0319", f"value {lit.value!r} is {lit.type}, field `{f.name}` is {f.type}", lit.span,
                        "wrong type", [f"write a {f.type} value"])
        rows.append(tuple(lit.value for lit in row))
    return tuple(rows)


def _read(lw: Lowering, src: A.ReadSource):
    """(schema, path, options) of `read FORMAT(...)` or `stream FORMAT(...)`."""
    formats = STREAM_FORMATS if src.streaming else SOURCE_FORMATS
    if src.format not in formats:
        lw.fail("E0114", f"unknown source format `{src.format}`", src.format_span, "unknown format",
                did_you_mean(src.format, formats))
    path, options = _arguments(lw, src.args, f"`{src.format}`", None)
    if not src.streaming:
        _check_options(lw, src, src.format, f"`read {src.format}`")
    else:
        _check_stream_options(lw, src, path, dict(options))
    if path is None and src.format != "rate":
        lw.fail("E0114", f"`read {src.format}(...)` needs a path", src.span, "missing path",
                [f"e.g. `read {src.format}(\"data/input\")`; a relative path is relative to the .flow file"])
    if src.format == "rate":
        schema = Schema.of([("timestamp", "timestamp"), ("value", "long")])
    elif src.schema is not None:
        schema = lw.schema_of(src.schema)
    elif src.format == "parquet":
        schema = _parquet_schema(lw, path, src)
    else:
        verb = "stream" if src.streaming else "read"
        lw.fail("E0115", f"`{verb} {src.format}` needs a schema", src.span, "no schema",
                [f"add one: {verb} {src.format}(...) schema (id: long, name: string)"])
    if src.format not in ("table", "rate"):
        _warn_missing(lw, path, src.span)
    if src.schema is not None and src.format in FIELD_CHECKED and not src.streaming:
        _check_fields(lw, src, path, options, schema)
    return schema, path, options


# `stream files(PATH, format = ..., max_files_per_epoch = N, ...)`: the formats its files may have; `stream
# rate(rows_per_second = N)`: its one option. Other options of `files` go to Spark's reader of the format, as
# for `read` (docs/language.md#streaming).
STREAM_FILE_FORMATS = ("csv", "json", "parquet")
STREAM_COUNTS = {"files": ("max_files_per_epoch",), "rate": ("rows_per_second",)}


def _check_stream_options(lw: Lowering, src: A.ReadSource, path, options: dict) -> None:
    """A `stream` source's options: `files` needs a path and `format`; the counts are positive whole numbers."""
    what = f"`stream {src.format}`"
    given = {a.name: a for a in src.args if a.name is not None}
    if src.format == "rate":
        if path is not None:
            lw.fail("E0114", f"{what} takes no path", src.args[0].span, "a path",
                    ["stream rate(rows_per_second = 100) makes its own rows (timestamp, value)"])
        for name, a in given.items():
            if name != "rows_per_second":
                lw.fail("E0114", f"{what} has no option `{name}`", a.span, "unknown option",
                        did_you_mean(name, ("rows_per_second",)) or ["its one option is rows_per_second"])
        if "rows_per_second" not in given:
            lw.fail("E0114", f"{what} needs `rows_per_second`", src.span, "how many rows",
                    ["e.g. stream rate(rows_per_second = 100)"])
    else:
        fmt = given.get("format")
        if fmt is None:
            lw.fail("E0114", f"{what} needs the format of its files", src.span, "no format",
                    ['add format = "csv", "json" or "parquet": stream files("in", format = "csv") schema (...)'])
        value = options.get("format")
        if value not in STREAM_FILE_FORMATS:
            shown = f"param `{value.name}`" if isinstance(value, ops.ParamRef) else _shown_value(value)
            lw.fail("E0114", f"`format` is {_choices(STREAM_FILE_FORMATS)}, not {shown}", fmt.span, "not a format",
                    did_you_mean(str(value), STREAM_FILE_FORMATS) if isinstance(value, str) else
                    ["the format is a constant: the stream's checkpoint is bound to it"])
        _check_options(lw, src, value, what, {**OWNED_OPTIONS, **STREAM_OWNED})  # (the files' format's options)
    for name in STREAM_COUNTS[src.format]:
        a = given.get(name)
        if a is None:
            continue
        value = options[name]
        if isinstance(value, ops.ParamRef):
            if lw.decl.params[value.name][0] not in ("long", "int"):
                lw.fail("E0117", f"param `{value.name}` is {lw.decl.params[value.name][0]}, `{name}` takes a whole "
                        "number", a.span, "not a number", [f"declare it: param {value.name}: long = 1"])
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            lw.fail("E0114", f"`{name}` is a whole number of at least 1, not {_shown_value(value)}", a.span,
                    "not a count", [f"e.g. {name} = 10"])


# Spark file-stream options scopeflow sets itself, so that every file is read exactly once, in the epoch after it
# appears (docs/language.md#streaming).
STREAM_OWNED = {o.lower(): "scopeflow reads every file that appears in the folder, once, whatever its age or "
                "order; `max_files_per_epoch` bounds an epoch" for o in
                ("maxFileAge", "latestFirst", "maxFilesPerTrigger", "maxBytesPerTrigger", "cleanSource",
                 "sourceArchiveDir", "fileNameOnly", "maxCachedFiles", "discardCachedInputRatio")}


def _check_options(lw: Lowering, src: A.ReadSource, fmt: str, what: str, owned: dict = OWNED_OPTIONS) -> None:
    """The options scopeflow reads itself take one of their values; those it sets itself (`owned`) are refused.
    `fmt`: the format of the source's files; `what`: the source as messages name it (`read csv`)."""
    own = SOURCE_OPTIONS.get(fmt, {})
    for a in src.args:
        if a.name is None:
            continue
        name = a.name.lower()
        if name in owned:
            lw.fail("E0114", f"{what} option `{a.name}` is set by scopeflow", a.span, "set by scopeflow",
                    [owned[name]])
        if name == "on_error" and name not in own:
            lw.fail("E0114", f"{what} has no option `{a.name}`", a.span, "unknown option",
                    ["only csv and json sources read records that can be malformed"])
        if name not in own:
            continue
        allowed = own[name]
        value, whose = _value(lw, a), ""
        if isinstance(value, ops.ParamRef):
            kind, value = lw.decl.params[value.name]
            whose = f" (the default of param `{a.value.name}`)"
            if kind != "string":
                lw.fail("E0117", f"param `{a.value.name}` is {kind}, `{a.name}` takes a string", a.span,
                        "not a string", [f"declare it: param {a.value.name}: string = \"{allowed[0]}\""])
        if value not in allowed:
            choices = ", ".join(f'"{v}"' for v in allowed[:-1]) + f' or "{allowed[-1]}"'
            lw.fail("E0114", f"`{a.name}` is {choices}, not {_shown_value(value)}{whose}", a.span,
                    "not one of these", did_you_mean(str(value), allowed) if isinstance(value, str) else ())


def _shown_value(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else str(value)


def _check_fields(lw: Lowering, src: A.ReadSource, path: ops.Location, options: tuple, schema: Schema) -> None:
    """A local input there at check time: its files name the declared fields (a CSV header, a Parquet
    footer, JSON records), as the run checks before Spark starts (stdlib/inputs.py). A path or option given
    as a param is checked with the param's default (the run checks the values it gets)."""
    full = _local_input(lw, _path_text(lw, path))
    if full is None or not lw.loader.exists(full):
        return  # on another file system, or missing (W0001)
    opts = {k: _param_default(lw, v) for k, v in options}
    try:
        found = lw.loader.file_fields(src.format, full, opts)
    except Exception:  # an unreadable file (pyarrow's and the codecs' many errors): the run says why (E0502)
        return
    problem = check_fields(src.format, [f.name for f in schema.fields], found,
                           shown=lambda f: os.path.relpath(f, lw.base_dir))
    if problem is not None:
        params = [f"the default of param `{v.name}`" for v in (path, *dict(options).values())
                  if isinstance(v, ops.ParamRef)]
        lw.error("E0503", problem.message, src.span, "read here",
                 [*problem.notes, *([f"checked with {', '.join(params)}"] if params else []), problem.hint])


def _param_default(lw: Lowering, value):
    """A constant as it is, a param as its default."""
    return lw.decl.params[value.name][1] if isinstance(value, ops.ParamRef) else value


def _value(lw: Lowering, arg: A.Arg):
    """A constant argument, or a reference to a `param`."""
    if isinstance(arg.value, A.Names):
        lw.fail("E0405", f"option `{arg.name}` takes a constant or a param, not a list of names", arg.value.span,
                "a list of names", ["a list of field names is what `partition_by` of a file sink takes"])
    if isinstance(arg.value, A.Name):
        if arg.value.name not in lw.decl.params:
            lw.fail("E0104", f"unknown param `{arg.value.name}`", arg.value.span, "not a param",
                    did_you_mean(arg.value.name, lw.decl.params) or ["declare it: param name: string = \"...\""])
        return ops.ParamRef(arg.value.name)
    return arg.value.value


def _option(lw: Lowering, arg: A.Arg, kind):
    """The value of sink option `arg` that takes `kind` (SINK_OPTION_VALUES; None: any constant or a param)."""
    v = arg.value
    if kind is None:
        if isinstance(v, A.Name) and v.name not in lw.decl.params:  # `sep = tab`: a string without quotes
            lw.fail("E0104", f"unknown param `{v.name}`", v.span, "not a param",
                    [*did_you_mean(v.name, lw.decl.params),
                     f'a constant string is written in quotes: {arg.name} = "{v.name}" (true, false and numbers '
                     "without)"])
        return _value(lw, arg)
    if kind == "fields":
        if isinstance(v, A.Names):
            return tuple(n.name for n in v.names)
        if isinstance(v, A.Name):
            return (v.name,)
        lw.fail("E0405", f"`{arg.name}` takes field names, not a {v.type}", v.span, "not field names",
                [f"name the fields: {arg.name} = (k, day)"])
    if isinstance(v, A.Name) and v.name not in lw.decl.params:
        _unquoted(lw, arg, kind)
    if isinstance(v, (A.Name, A.Names)):
        what = "a param" if isinstance(v, A.Name) else "a list of names"
        lw.fail("E0405", f"`{arg.name}` takes a constant, not {what}", v.span, "not a constant",
                [f"write the value in the file, e.g. {_example(lw, arg, kind)}: it decides what a run may replace "
                 "and the shape of its output"])
    if kind == "boolean":
        if v.type != "boolean":
            lw.fail("E0405", f"`{arg.name}` is true or false, not {_literal(v)}", v.span, "not a boolean",
                    [f"{arg.name} = true"])
        return v.value
    if v.type != "string" or v.value not in kind:
        lw.fail("E0405", f"`{arg.name}` is one of {_choices(kind)}, not {_literal(v)}", v.span, f"not a {arg.name}",
                (isinstance(v.value, str) and did_you_mean(str(v.value), kind)) or [f'e.g. {arg.name} = "{kind[0]}"'])
    return v.value


def _choices(kind: tuple) -> str:
    """`"a", "b" or "c"`."""
    return ", ".join(f'"{k}"' for k in kind[:-1]) + f' or "{kind[-1]}"'


def _meant(word: str, kind: tuple) -> Optional[str]:
    """The string of `kind` a bare word stands for: itself, or the closest."""
    return word if word in kind else next(iter(difflib.get_close_matches(word, kind, n=1, cutoff=0.6)), None)


def _example(lw: Lowering, arg: A.Arg, kind) -> str:
    """The option written with a constant in place of the param it names (its default, when that is one)."""
    if kind == "boolean":
        return f"{arg.name} = true"
    default = lw.decl.params[arg.value.name][1] if isinstance(arg.value, A.Name) else None
    meant = _meant(arg.value.name, kind) if isinstance(arg.value, A.Name) else None
    return f'{arg.name} = "{meant or (default if default in kind else kind[0])}"'


def _unquoted(lw: Lowering, arg: A.Arg, kind) -> None:
    """A sink option that takes a string or a boolean given a bare word that is no param: `mode = overwrite`
    (the quotes forgotten), `single_file = yes`."""
    word = arg.value.name
    if kind == "boolean":
        lw.fail("E0405", f"`{arg.name}` is true or false, not `{word}`", arg.value.span, "not a boolean",
                [f"{arg.name} = true"])
    meant = _meant(word, kind)
    hint = f'write it in quotes: {arg.name} = "{meant}"' if meant else \
        f"write one of these in quotes: {_choices(kind)}"
    lw.fail("E0405", f"`{arg.name}` takes a string, {_choices(kind)}, not the name `{word}` (no param has it)",
            arg.value.span, "not a string", [hint])


def _literal(lit: A.Lit) -> str:
    """A literal as it is written in .flow."""
    if lit.type == "string":
        return f'"{lit.value}"'
    return {True: "true", False: "false", None: "null"}.get(lit.value, str(lit.value)) if lit.type in (
        "boolean", "null") else str(lit.value)


def _arguments(lw: Lowering, args, what: str, allowed, kinds=None) -> tuple[Optional[ops.Location], tuple]:
    """(the path, the options by name) of a source's or sink's arguments. `allowed`: the option names (None:
    any), `kinds`: what some options' values must be (SINK_OPTION_VALUES; None for a source)."""
    positional, options = [], {}
    for a in args:
        if a.name is None:
            positional.append((a, _value(lw, a)))
        elif allowed is not None and a.name not in allowed:
            takers = [f for f, names in SINK_OPTIONS.items() if a.name in names]
            lw.fail("E0114", f"{what} has no option `{a.name}`" + (f": `{a.name}` is an option of "
                                                                   f"{_formats(takers)}" if takers else ""),
                    a.span, "unknown option", did_you_mean(a.name, allowed) if not takers else
                    [f"options of {what}: {', '.join(allowed) or 'none'}"])
        else:
            options[a.name] = _value(lw, a) if kinds is None else _option(lw, a, kinds.get(a.name))
    if len(positional) > 1:
        lw.fail("E0114", f"{what} takes one positional argument (the path)", args[1].span, "extra argument",
                ["pass options by name, e.g. `header = true`"])
    if not positional:
        return None, tuple(options.items())
    arg, path = positional[0]
    if isinstance(path, ops.ParamRef) and lw.decl.params[path.name][0] != "string":
        kind = lw.decl.params[path.name][0]
        lw.fail("E0117", f"param `{path.name}` is {kind}, a path must be a string", arg.span, "not a string",
                [f"declare it: param {path.name}: string = \"...\""])
    return (path if isinstance(path, ops.ParamRef) else ops.Path(str(path))), tuple(options.items())


def _formats(formats: list) -> str:
    """`the file sinks (csv, json, parquet)`, `console`, `csv`."""
    if tuple(formats) == FILE_SINKS:
        return f"the file sinks ({', '.join(FILE_SINKS)})"
    return ", ".join(f"`{f}`" for f in formats)


def _local_input(lw: Lowering, path) -> Optional[str]:
    """An input path on this machine, relative to the .flow file's folder; None for another file system (or
    no path)."""
    local = local_path(path) if isinstance(path, str) else None
    return os.path.join(lw.base_dir, local) if local is not None else None


def _path_text(lw: Lowering, path: ops.Location) -> Optional[str]:
    """The path as written, or its param's default."""
    if isinstance(path, ops.ParamRef):
        return lw.decl.params.get(path.name, (None, None))[1]
    return path.value


def _warn_missing(lw: Lowering, path: ops.Location, span) -> None:
    p = _path_text(lw, path)
    full = _local_input(lw, p)
    if full is not None and not lw.loader.exists(full):
        lw.error("W0001", f"input `{p}` does not exist (yet)", span, "missing input",
                 [f"looked for {full}; the run fails if it is still missing"], severity="warning")


def _parquet_schema(lw: Lowering, path: ops.Location, src: A.ReadSource) -> Schema:
    p = _path_text(lw, path)
    full = _local_input(lw, p)
    if full is None or not lw.loader.exists(full):
        lw.fail("E0116", f"parquet input `{p}` does not exist, so its schema cannot be read", src.span, "no schema",
                [f"looked for {full}" if full else "", "declare the schema: read parquet(...) schema (...)"])
    try:
        columns = lw.loader.parquet_schema(full)
    except Exception as exc:  # pyarrow's many error types: what it says is the user's clue
        lw.fail("E0116", f"cannot read the schema of parquet input `{p}`: {exc}", src.span, "no schema",
                ["declare it: read parquet(...) schema (...)"])
    return Schema.of(columns)


def lower_sink(lw: Lowering, stmt: A.SinkDecl, scope: Scope, in_def: bool) -> None:
    if scope.owner != "pipeline" or in_def:
        lw.fail("E0211", "sinks are only allowed at the pipeline level", stmt.span, "sink here",
                ["emit the stream from the loop and sink the loop's output"])
    nid, schema = lower.lower_stream(lw, stmt.expr, scope)
    spec = stmt.sink
    if spec.format not in SINK_FORMATS:
        lw.fail("E0114", f"unknown sink `{spec.format}`", spec.span, "unknown sink", did_you_mean(spec.format,
                                                                                                 SINK_FORMATS))
    path, options = _arguments(lw, spec.args, f"sink `{spec.format}`", SINK_OPTIONS[spec.format],
                               SINK_OPTION_VALUES)
    if path is None and spec.format != "console":
        lw.fail("E0114", f"sink `{spec.format}` needs a path", spec.span, "missing path",
                [f"e.g. `{spec.format}(\"out/result\")`"])
    given = {a.name: a for a in spec.args if a.name is not None}
    if "partition_by" in given:
        _check_partition_fields(lw, given["partition_by"], schema)
    _check_conflicts(lw, dict(options), given)
    path_arg = next((a for a in spec.args if a.name is None), None)
    lw.plan.add_sink(Sink(nid, spec.format, path, options, stmt.span,
                          path_span=path_arg.span if path_arg is not None else spec.span))


def _check_partition_fields(lw: Lowering, arg: A.Arg, schema: Schema) -> None:
    names = arg.value.names if isinstance(arg.value, A.Names) else (arg.value,)
    seen = set()
    for n in names:
        f = schema.get(n.name)
        if f is None:
            lw.fail("E0301", f"unknown field `{n.name}` in `partition_by`", n.span, "no such field",
                    did_you_mean(n.name, schema.names()))
        if n.name in seen:
            lw.fail("E0406", f"`partition_by` names field `{n.name}` twice", n.span, "again", ["name it once"])
        if f.type.startswith("array"):
            lw.fail("E0406", f"cannot partition by field `{n.name}` of type {f.type}", n.span, "an array",
                    ["partition by a field of a simple type (long, string, date, ...)"])
        seen.add(n.name)
    if seen >= set(schema.names()):
        lw.fail("E0406", "`partition_by` names every field of the stream: the files would hold no column",
                arg.span, "every field", [f"leave out at least one field; the stream is {schema}"])


def _check_conflicts(lw: Lowering, options: dict, given: dict) -> None:
    for (a, va), (b, vb), why in SINK_OPTION_CONFLICTS:
        if options.get(a, ANY) == va and b in options and (vb is ANY or options[b] == vb):
            first, second = sorted((given[a], given[b]), key=lambda g: (g.span.line, g.span.col))
            lw.fail("E0406", f"sink options `{a}` and `{b}` do not go together: {why}", second.span,
                    f"with `{first.name}`", ["drop one of them"])


# ---- sink paths -------------------------------------------------------------------------------------------


def check_sink_paths(lw: Lowering) -> None:
    """A sink replaces its whole target folder: a sink path that is or contains the .flow file's folder, that
    is, contains or is inside an input, a Python module or another sink's path is an error (E0401), on the
    path. A path given as a param is checked with the param's default (the run checks the value it gets)."""
    base = normalized(lw.base_dir)
    inputs = [(n, _path_text(lw, n.path)) for n in lw.plan.nodes.values()
              if isinstance(n, ops.Source) and n.format != "table" and n.path is not None]
    inputs = [(f"input `{p}` (source `{n.name}`)", p) for n, p in inputs if isinstance(p, str) and is_local(p)]
    inputs += [(f"Python module `{u.path}` (`use python ... as {u.alias}`)", u.path) for u in lw.decl.udfs.values()]
    earlier: list = []
    for sink in lw.plan.sinks:
        p = _path_text(lw, sink.path) if sink.format in FILE_SINKS and sink.path is not None else None
        if not isinstance(p, str) or not is_local(p):
            continue
        full = normalized(p, lw.base_dir)
        what = f"sink path `{p}`" + (f" (the default of param `{sink.path.name}`)"
                                     if isinstance(sink.path, ops.ParamRef) else "")
        rel = relation(full, base)
        if rel in (SAME, CONTAINS):
            _unsafe(lw, sink, f"{what} {rel} the folder of the .flow file ({base})",
                    "a sink replaces its whole target folder: give it a folder of its own, e.g. `out/result`")
            continue
        clash = next(((name, r) for name, q in inputs if (r := relation(full, normalized(q, lw.base_dir)))), None)
        if clash is not None:
            _unsafe(lw, sink, f"{what} {clash[1]} {clash[0]}",
                    "a sink replaces its whole target folder and must not touch what the pipeline reads: "
                    "write to a folder of its own, e.g. `out/result`")
            continue
        clash = next(((line, r) for line, q in earlier if (r := relation(full, q))), None)
        if clash is not None:
            _unsafe(lw, sink, f"{what} {clash[1]} the path of the sink on line {clash[0]}",
                    "each sink needs a folder of its own, apart from the others'")
            continue
        earlier.append((sink.span.line if sink.span else 0, full))


def check_stream_sinks(lw: Lowering) -> None:
    """A streaming pipeline's sinks hold the result over all input so far and are replaced once per epoch,
    exactly once: a file sink that replaces its target, or `console`. `append` (each epoch would add the whole
    result again) and `table` (a catalog table cannot be committed once per epoch) are E0407."""
    if not lw.plan.streaming:
        return
    for sink in lw.plan.sinks:
        mode = dict(sink.options).get("mode")
        if sink.format == "table":
            lw.error("E0407", "a streaming pipeline cannot write a `table` sink: it is replaced every epoch, and a "
                     "catalog table cannot be committed exactly once per epoch", sink.span, "not exactly once",
                     ["write files (csv, json or parquet): each epoch replaces the folder atomically, once"])
        elif mode == "append":
            lw.error("E0407", 'a streaming sink cannot take `mode = "append"`: after every epoch it holds the '
                     "result over all input so far, which appending would add again", sink.span, "append",
                     ['leave `mode` out (or "overwrite"): each epoch replaces the folder atomically'])


def _unsafe(lw: Lowering, sink: Sink, message: str, hint: str) -> None:
    lw.error("E0401", message, sink.path_span or sink.span, "unsafe sink path", [hint])
