"""Run-time failures in the user's terms (docs/errors.md, "Run-time failures (E05xx)").

Spark fails with a Java exception: a chain of causes, each with a class and, for Spark's own errors, an
error condition (`MALFORMED_CSV_RECORD`) and its parameters (`badRecord`). `explain` walks that chain with
pyspark's exception API (the conditions and parameters of `SparkThrowable`s, through py4j), finds the first
rule of `RULES` that fits any cause, and tells the failure as a `RuntimeFailure`: the source whose file it
is, or the sink or loop that was running (`Action`), the file and the record or value where Spark gives
them, the path and the OS's reason, a code, a hint. The full Java error goes to the JVM log, and the
message says where that is.

`RULES` is a table: each row says which causes it fits (Spark error conditions, Java or Python exception
classes, and words of the message for errors that have neither: an OS reason, a lost executor) and how to
tell the failure. The first row that fits wins, so the specific come before the general: to Spark a value of
the wrong type is also a malformed record, and both are a file it failed to read.
"""
from __future__ import annotations

import csv
import datetime
import json
import os
import re
import traceback
from typing import Callable, Optional

from attrs import field, frozen

from scopeflow.runtime.errors import Position, RuntimeFailure, shown_path
from scopeflow.stdlib import inputs
from scopeflow.stdlib.paths import local_path
from scopeflow.stdlib.types import SPARK_TYPE

LOCATE_BYTES = 64 << 20  # how much of a local file is read to find the line of a bad record


# ---- what was running, and the run's inputs ---------------------------------------------------------------


@frozen
class Action:
    """What was running when Spark failed: a sink's write, a loop's rounds, a source's read."""

    what: str  # sink `edges -> csv("out/x")`, loop `reach`, source `edges`
    at: Optional[Position]
    doing: str = "writing"  # the verb of the note: "while writing sink ..."
    step: Optional[Callable[[], str]] = None  # where it was when it failed: "round 3 of activation 1"
    target: Optional[str] = None  # a sink's local output path: what the OS may refuse

    def note(self) -> str:
        step = f" ({self.step()})" if self.step is not None else ""
        return f"while {self.doing} {self.what}{step}" + (f", {self.at}" if self.at is not None else "")


@frozen
class Input:
    """A file source of the run."""

    name: str  # source `edges`
    at: Optional[Position]
    path: str  # as Spark reads it (absolute, or a URI)
    format: str
    fields: tuple  # (name, .flow type) as declared
    options: dict = field(factory=dict)
    header: tuple = ()  # a CSV source's columns in its files' order (its header), when it has one

    def holds(self, file: str) -> bool:
        """Whether `file` (as Spark names it, often a file: URI) is one of this source's files."""
        mine, theirs = local_path(self.path), local_path(file)
        if mine is None or theirs is None:
            return file == self.path or file.startswith(self.path.rstrip("/") + "/")
        mine, theirs = os.path.normpath(mine), os.path.normpath(theirs)
        if theirs == mine or theirs.startswith(mine.rstrip(os.sep) + os.sep):
            return True
        import fnmatch

        return any(fnmatch.fnmatch(p, mine) for p in _ancestors(theirs))


def _ancestors(path: str) -> list[str]:
    out = [path]
    while os.path.dirname(out[-1]) not in ("", out[-1]):
        out.append(os.path.dirname(out[-1]))
    return out


@frozen
class Scene:
    """What `explain` knows of the run: what was running, the file sources, where the JVM log is (None:
    the Java error is not recorded), the .flow file."""

    action: Optional[Action] = None
    inputs: tuple = ()
    log: Optional[str] = None
    flow_file: str = ""


# ---- the causes of an exception -------------------------------------------------------------------------


@frozen
class Cause:
    """One exception of a failure's chain of causes."""

    kind: str  # its Java class (or Python type)
    classes: tuple  # it and its superclasses
    condition: Optional[str] = None  # Spark's error condition, e.g. FAILED_READ_FILE.NO_HINT
    params: dict = field(factory=dict)  # the condition's message parameters
    message: str = ""


def causes(exc: BaseException) -> list[Cause]:
    """The chain of causes of `exc`, outermost first: a Java exception's (through py4j), a Spark Connect
    error's condition, a Python exception's `__cause__`s."""
    out: list[Cause] = []
    seen = set()
    e: Optional[BaseException] = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
        if java is not None:
            out += _java_causes(java)
        else:
            condition, params = _condition(e)
            out.append(Cause(type(e).__name__, tuple(k.__name__ for k in type(e).__mro__), condition, params,
                             str(e)))
        e = e.__cause__
    return out


def _condition(e: BaseException) -> tuple[Optional[str], dict]:
    """pyspark's exception API on an exception without a JVM behind it (Spark Connect)."""
    try:
        return e.getCondition(), dict(e.getMessageParameters() or {})
    except Exception:  # not a PySparkException, or one that cannot say
        return None, {}


def _java_causes(java) -> list[Cause]:
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    gateway, jvm = SparkContext._gateway, SparkContext._jvm
    out = []
    while java is not None and len(out) < 30:
        classes, k = [], java.getClass()
        while k is not None:
            classes.append(k.getName())
            k = k.getSuperclass()
        condition, params = None, {}
        if is_instance_of(gateway, java, "org.apache.spark.SparkThrowable"):  # as pyspark's getCondition() asks
            condition = jvm.PythonErrorUtils.getCondition(java)
            params = dict(jvm.PythonErrorUtils.getMessageParameters(java) or {})
        out.append(Cause(classes[0], tuple(classes), condition, params, java.getMessage() or ""))
        java = java.getCause()
    return out


def probe(action: Optional[Action]) -> list[Cause]:
    """What the OS says about a sink's output path, for failures Spark tells without a reason (Hadoop's
    local file system answers a refused mkdirs or rename with `false`): a folder on the way that this
    user cannot write in."""
    if action is None or action.target is None:
        return []
    path = local_path(action.target)
    if path is None:
        return []
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if os.access(folder, os.W_OK | os.X_OK):
        return []
    return [Cause("PermissionError", ("PermissionError", "OSError"), message=f"Permission denied: {folder}",
                  params={"path": folder})]


# ---- the table ----------------------------------------------------------------------------------------------


@frozen
class Found:
    """What a rule tells from: the cause it fits, the whole chain, the scene."""

    cause: Cause
    chain: list
    scene: Scene

    def param(self, name: str, condition: str = "") -> Optional[str]:
        """A message parameter of the first cause (with `condition`, or its prefix) that has it."""
        for c in self.chain:
            if name in c.params and (not condition or _fits_condition(c.condition, (condition,))):
                return c.params[name]
        return None

    def file(self) -> Optional[str]:
        """The file Spark says it was reading."""
        return self.param("path", "FAILED_READ_FILE")

    def input(self) -> Optional[Input]:
        file = self.file()
        return next((i for i in self.scene.inputs if file and i.holds(file)), None)


@frozen
class Told:
    """A failure told: what went wrong (the subject is added in front), about which file, and more."""

    what: str
    file: Optional[str] = None  # the file Spark named: the source it belongs to is the subject
    notes: tuple = ()
    hint: Optional[str] = None  # instead of the rule's
    at: Optional[Position] = None  # instead of the source's or the action's position
    label: str = ""
    subject: bool = True  # False: `what` says who failed itself
    detail: str = ""  # lines shown after the position (a Python traceback)


@frozen
class Rule:
    code: str
    meaning: str  # docs/errors.md's row
    example: str
    hint: str
    tell: Callable[[Found], Told]
    conditions: tuple = ()  # Spark error conditions (a prefix fits its sub-conditions)
    classes: tuple = ()  # Java or Python exception classes (a subclass fits)
    words: tuple = ()  # words of a cause's message (OS reasons, lost executors: no condition of their own)

    def fits(self, c: Cause) -> bool:
        return (_fits_condition(c.condition, self.conditions) or any(k in self.classes for k in c.classes)
                or any(w in c.message for w in self.words))


def _fits_condition(condition: Optional[str], conditions: tuple) -> bool:
    return condition is not None and any(condition == k or condition.startswith(k + ".") for k in conditions)


def _unquote(text: Optional[str]) -> str:
    return (text or "").strip().strip("'\"`")


FLOW_TYPE = {spark.upper(): flow for flow, spark in SPARK_TYPE.items()}


def flow_type(spark_type: Optional[str]) -> str:
    t = _unquote(spark_type)
    return FLOW_TYPE.get(t.upper(), t.lower())


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _shown_file(file: Optional[str]) -> str:
    local = local_path(file or "")
    return shown_path(os.path.normpath(local)) if local else (file or "")


# -- Python functions

_USER_ERROR = re.compile(r"SCOPEFLOW_USER_ERROR line (\d+) in (\w+):\n(.*?)(?:\n\n|\Z|\n\tat |\nJVM stacktrace)", re.S)
_SHIPPED_FRAME = re.compile(r"(scopeflow-[^/]*\.zip|pyspark\.zip|py4j[^/]*\.zip)/|/site-packages/(pyspark|py4j)/")


def internal_roots() -> tuple:
    """Where scopeflow's own modules and pyspark live here (the user's code may be anywhere else,
    also in a folder called `scopeflow`)."""
    import importlib.util

    roots = []
    for name in ("scopeflow", "scopeflow.runtime", "scopeflow.stdlib", "scopeflow.compiler", "scopeflow.dsl", "pyspark"):
        spec = importlib.util.find_spec(name)  # (locates a package without running it: no compiler, no lark)
        if spec is not None:  # (a job may run with the runtime alone: no compiler, no dsl)
            roots += [os.path.abspath(d) + os.sep for d in spec.submodule_search_locations or []]
    return tuple(roots)


def user_frames(tb: str, roots: Optional[tuple] = None) -> str:
    """Keep the traceback frames of the user's code, drop scopeflow's and pyspark's (by their real
    locations, or the zips they are shipped to executors in); keep every line that is not a frame."""
    roots = internal_roots() if roots is None else roots
    out, skip = [], False
    for ln in tb.splitlines():
        if ln.startswith('  File "'):
            path = ln[len('  File "'):].split('"', 1)[0]
            skip = path.startswith(roots) or _SHIPPED_FRAME.search(path) is not None
        elif not ln.startswith(" "):  # the exception line, "Traceback ...", "During handling ..."
            skip = False
        if not skip:
            out.append(ln)
    return "\n".join(out)


def _python_function(f: Found) -> Told:
    m = _USER_ERROR.search(f.cause.message)
    if m is None:  # a failure around the user's function (its value could not be converted, say)
        return Told(f"a Python function failed: {_last_line(f.cause.message)}")
    line, fn, tb = m.groups()
    flow = f.scene.flow_file
    return Told(f"Python function `{fn}` failed ({flow}:{line})", subject=False,
                at=Position(flow, int(line)) if flow else None, label=f"`{fn}` called here",
                detail=user_frames(tb).rstrip())


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("\tat ")]
    return lines[-1] if lines else text


# -- resources and the OS


def _out_of_memory(f: Found) -> Told:
    if f.cause.kind == "MemoryError":  # Python's, in this process
        return Told("the driver (this Python process) ran out of memory")
    return Told(f"Spark ran out of memory ({_first_line(f.cause.message) or f.cause.kind})")


def _path_in(text: str) -> Optional[str]:
    """The path in an OS error's message: `/x/y (Permission denied)`, `Permission denied: /x/y`, `/x/y`, and
    Python's `[Errno 13] Permission denied: '/x/y'`."""
    m = re.match(r"^\[Errno \d+\] [^:]+: '(.*)'$", text)
    if m:
        return m.group(1)
    m = re.match(r"^(.*?) \((Permission denied|Operation not permitted)\)$", text)
    if m:
        return m.group(1)
    m = re.match(r"^(?:Permission denied|Operation not permitted): (.*)$", text)
    if m:
        return m.group(1)
    return text if text.startswith(("/", "file:")) and "\n" not in text else None


def _permission(f: Found) -> Told:
    if f.cause.kind == "PermissionError" and "path" in f.cause.params:  # `probe`: a folder of a sink's path
        folder = _shown_file(f.cause.params["path"])
        return Told(f"permission denied: cannot write in {folder}",
                    hint=f"give this user write access (chmod u+w {folder}) or write somewhere else")
    path = _path_in(f.cause.message.strip())
    what = _shown_file(path) if path else _first_line(f.cause.message)
    hint = (f"give this user access to {what} (chmod u+rw, or u+rwx for a folder) or use another path" if path
            else "check the permissions of the input and output paths")
    return Told(f"permission denied: {what}", hint=hint)


_OS_REASONS = ("No space left on device", "Disk quota exceeded", "Read-only file system", "Input/output error")


def _os_failure(f: Found) -> Told:
    reason = next((w for w in _OS_REASONS if w in f.cause.message), _first_line(f.cause.message))
    action = f.scene.action
    path = action.target if action is not None and action.target else (f.param("path") or "")
    where = f" writing {_shown_file(path)}" if action is not None and action.target else (
        f" ({_shown_file(path)})" if path else "")
    return Told(f"{reason.lower() if reason in _OS_REASONS else reason}{where}")


def _lost(f: Found) -> Told:
    text = f.cause.message
    if "Python worker" in text:
        return Told("a Python worker crashed (it exited without a Python error: a crash in native code, "
                    "os._exit, or the OS killed it)",
                    hint="check the Python functions the pipeline calls; the JVM log has Spark's account")
    if f.cause.kind in ("Py4JNetworkError", "Py4JError"):
        return Told("Spark's JVM went away (it crashed or was killed, often for want of memory)")
    m = re.search(r"ExecutorLostFailure \(([^)]*)\)", text)
    return Told(f"a Spark executor was lost ({m.group(1)})" if m else f"a Spark executor was lost: {_first_line(text)}")


# -- the data


def _mismatch(f: Found) -> Told:
    file = f.file()
    column = _unquote(f.param("column")).strip("[]")
    if column:
        actual = f"Parquet type {_unquote(f.param('actualType'))}"
        try:  # in .flow terms, from the file's footer
            local = local_path(file or "")
            kind = inputs.parquet_type(local, column) if local else None
            actual = f"{kind} ({actual})" if kind else actual
        except Exception:  # noqa: BLE001 - pyarrow's errors: Spark's own type name is what there is
            pass
        return Told(f"field `{column}` of {_shown_file(file)} is {actual} in the file, the schema says "
                    f"{flow_type(f.param('expectedType'))}", file=file)
    text = f.cause.params.get("msg") or f.cause.message  # Spark's CSV header check (a legacy error: no fields)
    m = re.search(r"CSV file: (\S+)", text)
    file = m.group(1) if m else file
    header = re.search(r"Header: (.*)", text)
    return Told(f"the header of {_shown_file(file)} does not list the columns as the other files do", file=file,
                notes=(f"its header: {header.group(1).strip()}",) if header else ())


def _wrong_value(f: Found) -> Told:
    c = f.cause
    if c.condition == "CAST_INVALID_INPUT":
        return Told(f"the value {c.params.get('expression', '?')} ({flow_type(c.params.get('sourceType'))}) cannot "
                    f"be cast to {flow_type(c.params.get('targetType'))}",
                    hint="correct the value, or keep only the records whose value converts: e.g. "
                         "where(rlike(s, \"^-?[0-9]+$\")) before cast(s as long)")
    file, source = f.file(), f.input()
    if c.condition == "CANNOT_PARSE_JSON_FIELD":
        name, value = _unquote(c.params.get("fieldName")), c.params.get("fieldValue", "")
        where = _locate(file, source, lambda text: _json_has(text, name, value))
        return Told(f"value {json.dumps(value)} of field `{name}` is not a {flow_type(c.params.get('dataType'))}"
                    f" ({_shown_file(file)}{where})", file=file)
    m = re.search(r'input string: "(.*)"', c.message)
    value = m.group(1) if m else _first_line(c.message)
    column: list = []
    where = _locate(file, source, lambda text: _csv_value(text, value, source, column))
    if column:
        name, kind = column[0]
        return Told(f"value {json.dumps(value)} of field `{name}` is not a {kind} ({_shown_file(file)}{where})",
                    file=file)
    return Told(f"value {json.dumps(value)} cannot be read as the type its field is declared with "
                f"({_shown_file(file)}{where})", file=file)


def _malformed(f: Found) -> Told:
    file, source = f.file(), f.input()
    raw = f.param("badRecord", "MALFORMED_CSV_RECORD")
    if raw is not None:
        where = _locate(file, source, lambda text: text == raw)
        return Told(f"malformed record in {_shown_file(file)}{where}", file=file, notes=(f"the record: {raw}",))
    if any("JsonParseException" in k for c in f.chain for k in c.classes):
        where = _locate(file, source, _json_malformed)
        return Told(f"malformed record in {_shown_file(file)}{where}", file=file)
    parsed = f.param("badRecord")
    return Told(f"malformed record in {_shown_file(file)}", file=file,
                notes=(f"Spark read it as {parsed}",) if parsed else ())


def _missing(f: Found) -> Told:
    path = f.param("path")
    return Told(f"input {_shown_file(path)} does not exist" if path else
                f"a file is missing: {_first_line(f.cause.message)}", file=path)


def _unreadable(f: Found) -> Told:
    file = f.file()
    reason = _last_line(f.chain[-1].message) if f.chain else ""
    return Told(f"cannot read {_shown_file(file)}" + (f": {reason}" if reason else ""), file=file)


def _other(f: Found) -> Told:
    """Spark's error condition (or the innermost exception) and its message."""
    c = next((c for c in f.chain if c.condition), None) or (f.chain[-1] if f.chain else f.cause)
    spark = "java.lang.Throwable" in c.classes or c.condition is not None
    return Told(f"{'Spark failed: ' if spark else ''}{c.condition or c.kind}: {_first_line(c.message)[:300]}")


# -- finding the line of a record in a local file


def _locate(file: Optional[str], source: Optional[Input], matches: Callable[[str], bool]) -> str:
    """", line N" of the first line of a local `file` (at most LOCATE_BYTES of it) that `matches`; "" if
    none is found."""
    local = local_path(file or "")
    if local is None or not os.path.isfile(local):
        return ""
    options = source.options if source is not None else {}
    header = source is not None and inputs.has_header(source.format, options)
    try:
        fh = inputs.open_text(local, options)
        if fh is None:
            return ""
        with fh:
            size = 0
            for number, line in enumerate(fh, 1):
                size += len(line)
                if size > LOCATE_BYTES:
                    return ""
                if header and number == 1:
                    continue
                if matches(line.rstrip("\r\n")):
                    return f", line {number}"
    except OSError:
        return ""
    return ""


def _csv_value(text: str, value: str, source: Optional[Input], column: list) -> bool:
    """Whether the CSV line `text` has `value` in a column declared with a type other than string (and
    which: `column` gets (name, type))."""
    if source is None:
        return False
    sep = inputs.separator(source.options)
    try:
        values = next(csv.reader([text], delimiter=sep)) if len(sep) == 1 else text.split(sep)
    except csv.Error:
        return False
    names = list(source.header) or [n for n, _ in source.fields]
    types = {n.lower(): t for n, t in source.fields}
    declared = {n.lower(): n for n, _ in source.fields}
    for name, v in zip(names, values):
        if v == value and types.get(name.lower(), "string") != "string":
            column.append((declared[name.lower()], types[name.lower()]))
            return True
    return False


def _json_has(text: str, name: str, value: str) -> bool:
    try:
        record = json.loads(text)
    except ValueError:
        return False
    return isinstance(record, dict) and name in record and str(record[name]) == value


def _json_malformed(text: str) -> bool:
    if not text.strip():
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


MALFORMED_HINT = ('fix the record, or say what a malformed record does: on_error = "skip" leaves it out, '
                  'on_error = "null" reads the fields it cannot read as null')

RULES = (
    Rule("E0510", "a Python function of the pipeline raised (its traceback, and the `.flow` line that calls it)",
         "`m.ratio(a, b)` dividing by zero",
         "fix the function, or keep the records it cannot take from reaching it (a `where` before it)",
         _python_function, classes=("org.apache.spark.api.python.PythonException", "PythonException"),
         words=("SCOPEFLOW_USER_ERROR",)),
    Rule("E0509", "Spark ran out of memory", "a `group` whose keys hold most records, on a small driver",
         "give Spark more memory (--conf spark.driver.memory=4g; on a cluster spark.executor.memory) or more "
         "partitions (--conf spark.sql.shuffle.partitions=400; inside a loop also --conf "
         "spark.scopeflow.loopPartitions=400)",
         _out_of_memory, conditions=("UNABLE_TO_ACQUIRE_MEMORY",),
         classes=("java.lang.OutOfMemoryError", "MemoryError"),
         words=("java.lang.OutOfMemoryError", "GC overhead limit exceeded", "exceeding memory limits")),
    Rule("E0506", "permission denied: a file or folder the run must read or write, refused once the run has started",
         "a sink's folder made read-only while the run goes on (read-only before it starts: E0404)",
         "give this user access to the path, or use another one",
         _permission, classes=("java.nio.file.AccessDeniedException", "org.apache.hadoop.security.AccessControlException",
                               "PermissionError"),
         words=("Permission denied", "Operation not permitted")),
    Rule("E0507", "the file system refused a write: no space left on device, disk quota exceeded, read-only, "
                  "I/O error", "a sink onto a full disk",
         "free space on that file system, or write somewhere else (the previous output is intact)",
         _os_failure, words=_OS_REASONS),
    Rule("E0503", "a file's fields do not fit the source's schema: a CSV header without a declared column or "
                  "in another order than the source's other files, a Parquet or JSON file without a declared "
                  "field or with one of another type (found by `check` when the file is there, and before Spark "
                  "starts for local files; a Parquet field of another type when Spark reads it)",
         "`read csv(\"e.csv\", header = true) schema (src: long, w: double)` with header `src,dst,weight`",
         "declare the fields the files have: they are matched by name, in any order, and undeclared ones are "
         "left out",
         _mismatch, conditions=("FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH",),
         classes=("org.apache.spark.sql.execution.datasources.SchemaColumnConvertNotSupportedException",),
         words=("CSV header does not conform to the schema",)),
    Rule("E0505", "a value of the wrong type: a field that cannot be read as its declared type, or a cast of a "
                  "value that is not of the target type",
         "`4.0` in a `long` column; `cast(s as long)` of `\"4.0\"`",
         'correct the value or declare the field with its type (e.g. double); on_error = "null" reads it as '
         'null, "skip" leaves its record out',
         _wrong_value, conditions=("CAST_INVALID_INPUT", "CANNOT_PARSE_JSON_FIELD", "CANNOT_PARSE_TIMESTAMP"),
         classes=("java.lang.NumberFormatException", "java.time.format.DateTimeParseException")),
    Rule("E0504", "a malformed record: a CSV row Spark cannot split into the declared fields, a JSON line that "
                  "is not JSON (see `on_error`)", "`3,\"4,1.5` (an unclosed quote); `5,6` for three columns",
         MALFORMED_HINT, _malformed, conditions=("MALFORMED_CSV_RECORD", "MALFORMED_RECORD_IN_PARSING"),
         classes=("com.fasterxml.jackson.core.JsonParseException",)),
    Rule("E0501", "an input does not exist, or is a glob that matches no file (found before Spark starts for "
                  "local paths, else when Spark reads it)",
         "`read csv(\"nope/edges.csv\")`",
         "check the path; relative paths are relative to the .flow file (a `param` path can be given with "
         "--param NAME=PATH)",
         _missing, conditions=("PATH_NOT_FOUND", "FAILED_READ_FILE.FILE_NOT_EXIST"),
         classes=("java.io.FileNotFoundException",)),
    Rule("E0502", "an input cannot be read: no read permission for one of its files or folders (found before "
                  "Spark starts), or a file Spark fails to read (not of the source's format, corrupt)",
         "`read parquet(\"notes.txt\")`",
         "check that the files are readable and of the source's format",
         _unreadable, conditions=("FAILED_READ_FILE",)),
    Rule("E0508", "a Spark executor, a Python worker or Spark's JVM was lost", "an executor killed by the OS",
         "run again; if it happens again, give executors more memory (spark.executor.memory) and check the "
         "Python functions the pipeline calls",
         _lost, classes=("Py4JNetworkError",),
         words=("ExecutorLostFailure", "Python worker exited unexpectedly", "Lost executor")),
    # raised by the runtime itself (runtime/streaming.py), never by Spark: no condition, class or words fit it
    Rule("E0511", "a file of a `stream files(...)` source was removed or changed (its size or modification time) "
                  "after an epoch read it (found by the next epoch: a stream's input only grows, so add new data as "
                  "new files)",
         "`data/stream/wave-1.csv` rewritten after epoch 0 read it",
         "add new data as new files; to take the change in, run with --full-refresh (it recomputes from the files "
         "as they are now)",
         _other),
    Rule("E0512", "an empty file in the folder of a `stream files(...)` source (Spark passes over it, so rows "
                  "written into it later would never be read)",
         "`touch data/stream/wave-5.csv`, then rows written into it",
         "write files elsewhere and move them into the folder complete (one rename); remove the empty file, then "
         "run again",
         _other),
    Rule("E0599", "any other failure of Spark (named with the operator that was running)",
         "an error Spark reports with a condition scopeflow does not know",
         "the full Java error is in the JVM log the message names", _other),
)


def rule_of(chain: list[Cause]) -> tuple[Rule, Cause]:
    """The first rule that fits a cause of `chain`, and the cause."""
    for rule in RULES[:-1]:
        for c in chain:
            if rule.fits(c):
                return rule, c
    return RULES[-1], (chain[0] if chain else Cause("Exception", ("Exception",)))


def explain(exc: BaseException, scene: Scene) -> RuntimeFailure:
    """`exc` (a failure of Spark, py4j or the file system) as a `RuntimeFailure` in the user's terms; the full
    error goes to the JVM log (`scene.log`)."""
    chain = causes(exc) + probe(scene.action)
    rule, cause = rule_of(chain)
    told = rule.tell(Found(cause, chain, scene))
    source = next((i for i in scene.inputs if told.file and i.holds(told.file)), None)
    action = scene.action
    if told.at is not None:
        at, label = told.at, told.label
    elif source is not None:
        at, label = source.at, "read here"
    else:
        at, label = (action.at if action is not None else None), ""
    subject = source.name if source is not None else (action.what if action is not None else None)
    message = f"{subject}: {told.what}" if told.subject and subject else told.what
    notes = list(told.notes)
    if action is not None and (source is not None or not told.subject or action.step is not None):
        notes.append(action.note())
    if scene.log is not None and record(exc, scene.log, f"the run failed, error[{rule.code}]"):
        notes.append(f"the full Java error is in {scene.log}")
    return RuntimeFailure(message, hint=told.hint or rule.hint, code=rule.code, at=at, label=label, notes=notes,
                          detail=told.detail)


def record(exc: BaseException, log: str, heading: str) -> bool:
    """Append the full error (Python traceback, Java stack trace with every cause) to the JVM log under
    `heading`; the log then stays when the process exits. False when it cannot be written."""
    from scopeflow.runtime.session import keep_jvm_log

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    origin = getattr(exc, "_origin", None)
    if origin is not None:  # pyspark's own exception: its Java stack trace is not in its text unless asked for
        try:
            from pyspark import SparkContext

            text += "\nJVM stack trace:\n" + SparkContext._jvm.org.apache.spark.util.Utils.exceptionString(origin)
        except Exception:  # the JVM is gone: the Python side is what there is
            pass
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    try:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"\n==== scopeflow {stamp}: {heading} ====\n{text}\n")
    except OSError:
        return False
    keep_jvm_log()
    return True


def explained_types() -> tuple:
    """The exceptions `explain` is for: Spark's (through py4j or pyspark), py4j's own, the file system's, and
    the driver running out of memory. Any other exception of a run is a bug of scopeflow's (`internal`)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException, OSError, MemoryError)


def internal(exc: BaseException, log: str) -> str:
    """The message of an exception no rule is for: scopeflow's own failure (a bug), not the pipeline's or
    Spark's. Its traceback goes to the JVM log (or, when that cannot be written, into the message)."""
    kept = record(exc, log, "an internal error of scopeflow")
    where = (f"   = note: its traceback is in {log}" if kept else
             "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())
    return "\n".join([f"error: internal error in scopeflow: {type(exc).__name__}: {exc}", where,
                      "   = help: this is a bug of scopeflow, not of the pipeline or its data: please report it with "
                      "the traceback" + (f" in {log}" if kept else " above")])
