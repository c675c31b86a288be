"""What a run checks before it starts Spark: everything that can be known without the JVM.

Starting Spark takes seconds; a missing input, an unreadable one, one whose files do not name the declared
fields, a bad `on_error` or an unsafe sink path must not cost them. `preflight` runs before the session is
built and raises `RunRefused` (exit 2, nothing computed, nothing written) with the source's or sink's
position in the `.flow` file. Inputs and sinks on other file systems (hdfs://, s3a://) are checked when
Spark reads or writes them.
"""
from __future__ import annotations

import os
from typing import Optional

from scopeflow.runtime import targets
from scopeflow.runtime.errors import Position, RunRefused, shown_path
from scopeflow.runtime.filesystems import LOCAL
from scopeflow.runtime.spec import Param, ddl_columns, sources, streams, value_of
from scopeflow.stdlib import inputs as files
from scopeflow.stdlib.paths import CONTAINS, SAME, is_local, local_path, normalized, relation, resolve
from scopeflow.stdlib.sinks import FILE_SINKS


def flow_dir(module) -> str:
    """The .flow file's folder: relative paths of the pipeline resolve against it, unless the run is given
    another (`--base-dir DIR`)."""
    return os.path.dirname(os.path.abspath(module.FLOW_FILE))


def source_at(module, op: str) -> tuple[str, Optional[Position]]:
    """An operator of the module as messages name it (source `edges`), and where it is in the .flow file."""
    record = module.OPERATORS[op]
    return record.described(), Position.of(module.FLOW_FILE, record.at)


def check_inputs(module, params: dict, base_dir: str) -> None:
    """Every file source: its `on_error` is one scopeflow knows (E0114); and for one on this machine, its path
    names files (E0501: a missing path, a glob that matches nothing), this user can read them (E0502), and
    they name the declared fields (E0503: a CSV header, a Parquet footer, JSON records)."""
    for op, source in sources(module).items():
        what, at = source_at(module, op)

        def refuse(code: str, message: str, hint: str, notes: tuple = ()):
            raise RunRefused(f"{what}: {message}", hint, code, at, "read here", notes)

        options = files.normalized_options(source.options_in(params))
        problem = files.on_error_problem(source.format, options)
        if problem is not None:
            given = source.options.get("on_error")
            refuse("E0114", problem.message, problem.hint,
                   (f"the value of --param {given.name}",) if isinstance(given, Param) else ())
        path = resolve(base_dir, value_of(source.path, params))
        local = local_path(path)
        if local is None:
            continue  # hdfs://, s3a://...: Spark's file systems answer (at the read, with the source's position)
        local = normalized(local)
        if not files.matches(local):
            glob = files.is_glob(local)
            against = "the .flow file" if normalized(base_dir) == normalized(flow_dir(module)) else \
                f"the base folder {base_dir} (--base-dir)"
            refuse("E0501", f"input {local} {'matches no file' if glob else 'does not exist'}",
                   f"check the path; relative paths are relative to {against} (a `param` path can be given "
                   "with --param NAME=PATH)" + ("; Spark reads it as a glob pattern (* ? [...] {a,b})" if glob else ""))
        denied = files.unreadable(local)
        if denied is not None:
            refuse("E0502", f"input {local} cannot be read: permission denied" +
                   (f" for {denied}" if denied != local else ""),
                   f"give this user read access: chmod {'-R ' if os.path.isdir(local) else ''}u+rX {denied}")
        if source.schema and source.format in files.FIELD_CHECKED:
            try:
                found = files.file_fields(source.format, local, options)
            except Exception:  # noqa: BLE001 - a file the check cannot read: Spark's read says what is wrong (E0502)
                continue
            problem = files.check_fields(source.format, ddl_columns(source.schema), found, shown_path)
            if problem is not None:
                refuse("E0503", problem.message, problem.hint, problem.notes)


def check_streams(module, params: dict, base_dir: str) -> None:
    """The folder of every `stream files(...)` source exists and can be read (its files are checked as they
    appear, each in its epoch)."""
    for op, stream in streams(module).items():
        if stream.format != "files":
            continue
        raw = value_of(stream.path, params)
        full = resolve(base_dir, raw)
        local = local_path(full)
        if local is None:
            continue  # on another file system: Spark's listing says
        name, at = source_at(module, op)
        options = files.normalized_options(stream.options_in(params))
        problem = files.on_error_problem(options.get("format", ""), options)
        if problem is not None:  # (an `on_error` param given a value that is no mode)
            raise RunRefused(f"{name}: {problem.message}", problem.hint, "E0114", at, "read here")
        what = f"{name}: stream folder {raw}" + (f" (--param {stream.path.name})" if isinstance(stream.path, Param)
                                                 else "")
        if not os.path.exists(local) and not files.is_glob(local):
            raise RunRefused(f"{what} does not exist ({local})", code="E0501", at=at, label="read here",
                             hint=f"create it (mkdir -p {shown_path(local)}): the stream reads the files that "
                                  "appear in it")
        if os.path.exists(local) and not os.path.isdir(local):
            raise RunRefused(f"{what} is a file, not a folder", code="E0501", at=at, label="read here",
                             hint="a stream reads the files that appear in a folder: give the folder")
        if os.path.isdir(local) and not os.access(local, os.R_OK | os.X_OK):
            raise RunRefused(f"{what} cannot be read: permission denied", code="E0502", at=at, label="read here",
                             hint=f"give this user read access: chmod -R u+rX {shown_path(local)}")


def check_sinks(module, params: dict, base_dir: str, checkpoint: Optional[str] = None,
                resumed: Optional[dict] = None, restarted: bool = False) -> None:
    """Every file sink on this machine: its path is safe (E0401: not the .flow file's folder, nor the base
    folder `--base-dir`, nor one holding them; apart from every input, the other sinks and the checkpoint
    folder; with this run's params), its mode lets it write its target (E0402 files scopeflow did not write,
    E0403 `error_if_exists`), no other live run is writing it (E0408), and it can be written (E0404). Sinks
    on other file systems are checked when they write.

    `resumed`: the sink log of the run a `--resume` continues (`snapshots.read_sink_log`). A sink it lists as
    committed is skipped by the run, and a target holding the commit the run would make (committed before the
    kill, not yet logged) is the run's own: neither is refused for existing."""
    token, done = (resumed.get("token", ""), set(resumed.get("sinks", ()))) if resumed else ("", set())
    # a sink replaces its whole target: never the .flow file's folder, nor the base folder of relative paths
    protected = [("the folder of the .flow file", normalized(flow_dir(module)))]
    if normalized(base_dir) != protected[0][1]:
        protected.append(("the base folder of relative paths", normalized(base_dir), "--base-dir"))
    given = {**sources(module), **{op: s for op, s in streams(module).items() if s.path is not None}}
    inputs = [(op, resolve(base_dir, value_of(s.path, params))) for op, s in given.items()]
    inputs = [(f"input {p} ({source_at(module, op)[0]})", normalized(p)) for op, p in inputs if is_local(p)]
    if checkpoint is not None and is_local(checkpoint):
        inputs.append((f"the checkpoint folder {normalized(checkpoint)} (--checkpoint DIR, default "
                       f".scopeflow/{module.PIPELINE})", normalized(checkpoint)))
    earlier: list = []
    for sink in getattr(module, "SINKS", ()):  # (a script generated before sinks were listed has none)
        if sink.format not in FILE_SINKS or sink.path is None:
            continue
        raw = value_of(sink.path, params)
        path = resolve(base_dir, raw)
        if not is_local(path):
            continue  # hdfs://, s3a://...: checked when the sink writes
        full = normalized(path)
        at = Position.of(module.FLOW_FILE, sink.at)
        what = f"sink path {raw}" + (f" (--param {sink.path.name})" if isinstance(sink.path, Param) else "")

        def refuse(code: str, message: str, hint: str, notes: tuple = ()):
            raise RunRefused(message, hint, code, at, "written here", notes)

        clashes = [(rel, name, folder, option) for name, folder, *option in protected
                   if (rel := relation(full, folder)) in (SAME, CONTAINS)]
        if clashes:  # (the one it is, before one it contains)
            rel, name, folder, option = min(clashes, key=lambda c: c[0] != SAME)
            refuse("E0401", f"{what} {rel} {name} ({', '.join([folder, *option])})",
                   "a sink replaces its whole target folder: give it a folder of its own, e.g. out/result")
        for name, other in inputs + earlier:
            rel = relation(full, other)
            if rel is not None:
                refuse("E0401", f"{what} {rel} {name}",
                       "a sink replaces its whole target folder: give it a folder of its own, apart from the "
                       "inputs, the other sinks and the checkpoint folder")
        key = targets.sink_key(sink.op, sink.format, path)  # as the run names it
        commit = targets.commit_id(token, key) if token else ""
        mode = sink.option("mode", params)
        if restarted and mode == "error_if_exists":  # a streaming query restarted: the target is its own
            mode = None
        problem = None if key in done else (targets.busy(LOCAL, full, commit)
                                            or targets.check(LOCAL, full, mode, commit)
                                            or targets.writable(full))
        if problem is not None:
            refuse(problem.code, problem.message, problem.hint, problem.notes)
        earlier.append((f"the path of the sink on line {sink.at[0] if sink.at else '?'} ({full})", full))


def preflight(module, params: dict, base_dir: str, checkpoint: Optional[str] = None,
              resumed: Optional[dict] = None, restarted: bool = False) -> None:
    """Refuse a run whose inputs or outputs are known to be wrong before Spark starts. `checkpoint`: the
    snapshot folder of a run that takes snapshots; `resumed`: the sink log of the run a `--resume` continues."""
    check_streams(module, params, base_dir)
    check_inputs(module, params, base_dir)
    check_sinks(module, params, base_dir, checkpoint, resumed, restarted)
