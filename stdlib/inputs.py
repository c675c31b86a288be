"""A file source's files, read without Spark: which files a path names (globs as Spark reads them), what
they say about their fields, whether that fits the source's declared schema, and the source's options as
Spark's reader takes them.

A CSV file's header, a Parquet file's footer and the keys of a JSON file's first records name the
fields. Spark matches none of them to a declared schema by name on its own: it reads a CSV file by
position (a header in another order silently swaps columns) and a Parquet or JSON field the file lacks as
null. The checker (for an input there at check time) and the run, before Spark starts
(`runtime/preflight.py`), both call `check_fields`, so the two say the same thing; the runtime then reads a
CSV file with the schema put in its header's order and selects the declared fields by name.

Only local files are read here (plain paths and file:); the runtime asks Spark about other file systems
when it reads them. A file is never read in full: a header line, a footer, the first records. The functions
that take a source's options take its `normalized_options` (`file_fields` normalises them itself).
"""
from __future__ import annotations

import bz2
import csv
import difflib
import glob
import gzip
import json
import os
from typing import Callable, Optional

from attrs import frozen

from scopeflow.stdlib.paths import hidden, local_path

JSON_SAMPLE_RECORDS = 1000  # records of a JSON file whose keys are looked at
JSON_SAMPLE_FILES = 20  # JSON files of a folder looked at
JSON_SAMPLE_BYTES = 1 << 20  # at most this much of each
OPENERS = {".gz": gzip.open, ".bz2": bz2.open}
FIELD_CHECKED = ("csv", "json", "parquet")  # formats whose files name their fields (`check_fields`)
# a source's `on_error`: what a malformed record does, as Spark's reader `mode`; the formats that take it
ON_ERROR_MODES = {"fail": "FAILFAST", "skip": "DROPMALFORMED", "null": "PERMISSIVE"}
ON_ERROR_FORMATS = ("csv", "json")
UNREADABLE_HERE = (".snappy", ".lz4", ".zst", ".deflate", ".xz", ".br")  # compressed in a way Python cannot open


@frozen
class Fields:
    """The field names one file has (a CSV header, a Parquet footer, the keys of JSON records), in order."""

    file: str
    names: tuple


@frozen
class Mismatch:
    """Why a source's files do not fit its schema: a one-line message, notes and a hint."""

    message: str
    notes: tuple = ()
    hint: str = ""


def normalized_options(options: dict) -> dict:
    """A source's options as Spark's reader takes them: names in lower case (Spark ignores their case, so
    `Header = true` is `header = true`), values as text (`true`, not True). scopeflow reads a source's
    options only through this, so it reads them as Spark does."""
    return {str(k).lower(): str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


def _option(options: dict, *names: str, default=None):
    """The value of the first of `names` (lower case) a source has, in its `normalized_options`."""
    return next((options[n] for n in names if n in options), default)


def on_error_problem(fmt: str, options: dict) -> Optional[Mismatch]:
    """Why a source's `on_error` (in its `normalized_options`) is not one scopeflow knows, or None."""
    value = options.get("on_error")
    if fmt not in ON_ERROR_FORMATS or value is None or value in ON_ERROR_MODES:
        return None
    return Mismatch(f'on_error = "{value}": on_error is "fail", "skip" or "null"', (),
                    'on_error = "fail" stops at a malformed record, "skip" leaves it out, "null" reads what it '
                    'cannot read as null')


def reader_options(fmt: str, options: dict) -> dict:
    """The options Spark's reader gets for a source: its `normalized_options`, with `on_error` (checked by
    `on_error_problem` before) as Spark's `mode`."""
    opts = normalized_options(options)
    on_error = opts.pop("on_error", "fail")
    if fmt in ON_ERROR_FORMATS:
        opts["mode"] = ON_ERROR_MODES[on_error]
    return opts


def has_header(fmt: str, options: dict) -> bool:
    """A CSV source whose files start with a header line (`header = true`, in its `normalized_options`)."""
    return fmt == "csv" and options.get("header", "false").lower() == "true"


def is_glob(path: str) -> bool:
    """Whether Spark reads `path` as a glob pattern (Hadoop's: `* ? [...] [^...] {a,b} \\c`)."""
    return any(c in path for c in "{}[]*?\\")


def matches(path: str) -> list[str]:
    """What a local input path names, as Spark finds it: the path itself if it exists, or the files and
    folders a glob matches, in name order; [] for nothing."""
    if not is_glob(path):
        return [path] if os.path.exists(path) else []
    found: set = set()
    for pattern in _braces_expanded(path):
        found.update(glob.glob(_python_glob(pattern)))
    return sorted(found)


def _braces_expanded(pattern: str) -> list[str]:
    """The patterns of Hadoop's `{a,b}` alternatives (nested ones too), each without braces."""
    depth, start, i = 0, -1, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
            start = i if depth == 1 else start
        elif c == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                head, body, tail = pattern[:start], pattern[start + 1:i], pattern[i + 1:]
                return [p for alt in _alternatives(body) for p in _braces_expanded(head + alt + tail)]
        i += 1
    return [pattern]


def _alternatives(body: str) -> list[str]:
    """`a,b{c,d}` -> `a`, `b{c,d}`: split at the commas outside nested braces."""
    out, depth, cur, i = [], 0, "", 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            cur += body[i:i + 2]
            i += 2
            continue
        depth += c == "{"
        depth -= c == "}"
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    return out + [cur]


def _python_glob(pattern: str) -> str:
    """A Hadoop glob without braces as Python's `glob` reads it: `[^a]` is `[!a]`, `\\c` the character c."""
    out, i = "", 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            out += glob.escape(pattern[i + 1])
            i += 2
        elif pattern.startswith("[^", i):
            out += "[!"
            i += 2
        else:
            out += pattern[i]
            i += 1
    return out


def data_files(path: str) -> list[str]:
    """The files Spark reads for a local `path`: the file, or the files under a folder (partition folders
    included, hidden names skipped), or those of what a glob matches; in name order."""
    out = []
    for root in matches(path):
        if os.path.isfile(root):
            out.append(root)
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not hidden(d))
            out += [os.path.join(folder, f) for f in sorted(files) if not hidden(f)]
    return out


def unreadable(path: str) -> Optional[str]:
    """The first file or folder Spark would read for a local `path` that this user cannot read (a folder:
    list and enter), or None."""
    for root in matches(path):
        todo = [root]
        while todo:
            p = todo.pop()
            if not os.path.isdir(p):
                if not os.access(p, os.R_OK):
                    return p
                continue
            if not os.access(p, os.R_OK | os.X_OK):
                return p
            todo += [os.path.join(p, n) for n in sorted(os.listdir(p), reverse=True) if not hidden(n)]
    return None


def open_text(file: str, options: dict):
    """A local file opened as text the way a source's `encoding` and the file's compression say; None for a
    compression Python cannot read."""
    ext = os.path.splitext(file)[1].lower()
    if ext in UNREADABLE_HERE:
        return None
    encoding = str(_option(options, "encoding", "charset", default="utf-8"))
    opener = OPENERS.get(ext)
    if opener is not None:
        return opener(file, "rt", encoding=encoding, errors="replace", newline="")
    return open(file, encoding=encoding, errors="replace", newline="")


def separator(options: dict) -> str:
    """A CSV source's column separator (`sep` or `delimiter`; `\\t` is a tab)."""
    sep = str(_option(options, "sep", "delimiter", default=","))
    return "\t" if sep == "\\t" else sep


def csv_header(file: str, options: dict) -> Optional[tuple]:
    """The column names in the header line of a CSV file (Spark's `sep`, `quote`, `escape`, `comment` and
    `encoding` options), skipping the empty and comment lines before it as Spark does. None: no header line
    (an empty file) or a compression Python cannot read."""
    fh = open_text(file, options)
    if fh is None:
        return None
    sep = separator(options)
    quote = str(_option(options, "quote", default='"'))
    escape = str(_option(options, "escape", default="\\"))
    comment = _option(options, "comment")
    with fh:
        for line in fh:
            if not line.strip() or (comment and line.startswith(str(comment))):
                continue
            line = line.rstrip("\r\n").lstrip("\ufeff")
            if len(sep) == 1 and len(quote) <= 1 and len(escape) <= 1:
                names = next(csv.reader([line], delimiter=sep, quotechar=quote or None, escapechar=escape or None))
            else:
                names = [name.strip(quote) if quote else name for name in line.split(sep)]
            return tuple(_trimmed(n, options) for n in names)
    return None


def _trimmed(name: str, options: dict) -> str:
    """A header name as Spark reads it: trimmed only when the source asks for it."""
    if str(_option(options, "ignoreleadingwhitespace", default="false")).lower() == "true":
        name = name.lstrip()
    if str(_option(options, "ignoretrailingwhitespace", default="false")).lower() == "true":
        name = name.rstrip()
    return name


def parquet_fields(file: str) -> tuple:
    import pyarrow.parquet as pq

    return tuple(pq.read_schema(file).names)


def parquet_type(file: str, name: str) -> Optional[str]:
    """The .flow type of field `name` in a Parquet file's footer (None: no such field)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(file)
    i = schema.get_field_index(name)
    return arrow_type(schema.field(i).type) if i >= 0 else None


def arrow_type(t) -> str:
    """The .flow type of an Arrow (Parquet) type."""
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
        return f"array<{arrow_type(t.value_type)}>"
    return "string"


def json_keys(file: str, options: dict) -> Optional[tuple]:
    """The keys of the first records of a JSON file (JSON Lines, or one document with `multiLine`), in the
    order first seen; None when there is nothing to go by."""
    fh = open_text(file, options)
    if fh is None:
        return None
    keys: dict = {}
    with fh:
        if str(_option(options, "multiline", default="false")).lower() == "true":
            text = fh.read(JSON_SAMPLE_BYTES + 1)
            if len(text) > JSON_SAMPLE_BYTES:
                return None
            try:
                doc = json.loads(text)
            except ValueError:
                return None
            records = doc if isinstance(doc, list) else [doc]
        else:
            records, size = [], 0
            for line in fh:
                size += len(line)
                if size > JSON_SAMPLE_BYTES or len(records) >= JSON_SAMPLE_RECORDS:
                    break
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue  # blank or malformed: what `on_error` is about, not the fields
        for r in records[:JSON_SAMPLE_RECORDS]:
            if isinstance(r, dict):
                keys.update(dict.fromkeys(r))
    return tuple(keys) if keys else None


def file_fields(fmt: str, path: str, options: dict) -> list[Fields]:
    """What the files of a local source say about their fields: each CSV file's header (with `header =
    true`; without, columns are positional and there is nothing to match), each Parquet file's footer, the
    keys of the first records of the first JSON files. [] for other formats and paths."""
    local = local_path(path)
    if local is None:
        return []
    options = normalized_options(options)
    if has_header(fmt, options):
        read = lambda f: csv_header(f, options)  # noqa: E731
        files = data_files(local)
    elif fmt == "parquet":
        read = parquet_fields
        files = data_files(local)
    elif fmt == "json":
        read = lambda f: json_keys(f, options)  # noqa: E731
        files = data_files(local)[:JSON_SAMPLE_FILES]
    else:
        return []
    out = []
    for f in files:
        names = read(f)
        if names is not None:
            out.append(Fields(f, tuple(names)))
    return out


def _listed(names) -> str:
    """Names as a file has them; one with spaces around it in quotes, so the spaces show."""
    return ", ".join(f'"{n}"' if n != n.strip() else n for n in names) if names else "(none)"


def _ticked(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _close(name: str, candidates) -> Optional[str]:
    lower = {c.lower(): c for c in candidates}
    if name.lower() in lower:
        return lower[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.75)
    return lower[close[0]] if close else None


def _suggestions(missing, names) -> list[str]:
    out = []
    for m in missing:
        c = _close(m, [n for n in names])
        if c is not None:
            out.append(f"did you mean `{c}` for `{m}`?")
    return out


def check_fields(fmt: str, declared: list[str], found: list[Fields],
                 shown: Callable[[str], str] = str) -> Optional[Mismatch]:
    """Whether the files of a source fit its declared fields (names compared ignoring case, as Spark
    does), or why not. `shown` writes a file's path as the message shows it.

    - csv (with a header): every file's header names every declared field, once; all files list their
      columns in the same order (Spark reads them with one schema). Extra columns are fine (left out).
    - parquet: every file's footer has every declared field.
    - json: records leave null fields out (Spark's JSON writer does), so a declared field no record has
      may be null throughout; it is a mismatch when no record has any declared field, or when the
      records have a field of a close name instead (`dest` for `dst`)."""
    if not found:
        return None
    if fmt == "csv":
        return _check_csv(declared, found, shown)
    if fmt == "parquet":
        for ff in found:
            have = {n.lower() for n in ff.names}
            missing = [d for d in declared if d.lower() not in have]
            if missing:
                return Mismatch(f"{shown(ff.file)} has no field {_ticked(missing)}",
                                (f"its fields: {_listed(ff.names)}", *_suggestions(missing, ff.names)),
                                "declare the fields the file has (Parquet fields are matched by name), or read "
                                "the file with the fields the schema says")
        return None
    if fmt == "json":
        keys = list(dict.fromkeys(k for ff in found for k in ff.names))
        have = {k.lower() for k in keys}
        missing = [d for d in declared if d.lower() not in have]
        what = shown(found[0].file) if len(found) == 1 else f"{shown(os.path.dirname(found[0].file))} ({len(found)} files)"
        undeclared = [k for k in keys if k.lower() not in {d.lower() for d in declared}]
        renamed = _suggestions(missing, undeclared)
        if missing and (len(missing) == len(declared) or renamed):
            return Mismatch(f"no record of {what} has the field {_ticked(missing)}",
                            (f"the records' fields: {_listed(keys)}", *renamed),
                            "name the fields as the records do (JSON fields are matched by name; a field "
                            "no record has would be null throughout)")
        return None
    return None


def _check_csv(declared: list[str], found: list[Fields], shown) -> Optional[Mismatch]:
    hint = ("name the columns in the header as the schema does, or change the schema: columns are matched by "
            "name, in any order, and columns the schema does not declare are left out")
    for ff in found:
        seen: dict = {}
        for n in ff.names:
            if n.lower() in seen:
                return Mismatch(f"the header of {shown(ff.file)} names the column `{n}` twice",
                                (f"its header: {_listed(ff.names)}",), hint)
            seen[n.lower()] = n
        missing = [d for d in declared if d.lower() not in seen]
        if missing:
            spaced = [d for d in missing if d.lower() in {n.strip().lower() for n in ff.names}]
            more = (["its column names have spaces around them: ignoreLeadingWhiteSpace = true and "
                     "ignoreTrailingWhiteSpace = true read them (and the values) trimmed"] if spaced
                    else _suggestions(missing, ff.names))
            return Mismatch(f"the header of {shown(ff.file)} has no column {_ticked(missing)}",
                            (f"its header: {_listed(ff.names)}", *more), hint)
    first = found[0]
    for ff in found[1:]:
        if [n.lower() for n in ff.names] != [n.lower() for n in first.names]:
            folder = os.path.commonpath([first.file, ff.file])
            return Mismatch(f"the files in {shown(folder)} list their columns in different orders",
                            (f"{shown(first.file)}: {_listed(first.names)}", f"{shown(ff.file)}: {_listed(ff.names)}"),
                            "give every file the same header (Spark reads a source's files with one schema), "
                            "or read them as separate sources and `union` them")
    return None


def in_header_order(declared: list[tuple[str, str]], header: tuple) -> list[tuple[str, str]]:
    """The (name, type) fields to read a CSV file with, in its header's order: a declared field under its
    declared name and type, a column the schema does not declare as a string under the header's name
    (left out after the read)."""
    types = {n.lower(): (n, t) for n, t in declared}
    return [types.get(h.lower(), (h, "string")) for h in header]
