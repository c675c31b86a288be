"""Running a generated pipeline module: the generated script's `main` and `execute`.

`scopeflow run F.flow`, `run_file` (both in the face, `scopeflow/api.py`) and
`python job.py` / `spark-submit job.py` all go through `execute`: the generated
code is the only execution path, so they behave the same.
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import types
from typing import Optional

from attrs import define

from scopeflow.runtime.errors import ExitCode, RuntimeFailure


class UsageError(Exception):
    pass


def _convert(name: str, kind: str, raw: str):
    try:
        if kind in ("long", "int"):
            return int(raw)
        if kind == "double":
            return float(raw)
        if kind == "boolean":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        return raw
    except ValueError:
        raise UsageError(f"--param {name}={raw}: `{name}` is a {kind}") from None


def parse_params(declared: dict, overrides: list[str]) -> dict:
    values = {name: default for name, (_, default) in declared.items()}
    for item in overrides:
        if "=" not in item:
            raise UsageError(f"--param {item}: expected NAME=VALUE")
        name, raw = item.split("=", 1)
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else (f"; params: {', '.join(declared)}" if declared
                                                                   else "; the pipeline declares no params")
            raise UsageError(f"--param {name}: no such param{hint}")
        values[name] = _convert(name, declared[name][0], raw)
    return values


def parse_conf(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--conf {item}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        out[k] = v
    return out


@define
class SnapshotOptions:
    checkpoint: Optional[str] = None
    every: Optional[int] = None
    mode: Optional[str] = None  # persist | recompute
    async_writes: bool = False
    keep: int = 3
    resume: bool = False
    disabled: bool = False

    def wanted(self, module) -> bool:
        if self.disabled:
            return False
        declared = any(getattr(v, "snapshot_every", None) or getattr(v, "snapshot_recompute", False)
                       for v in vars(module).values() if type(v).__name__ == "LoopSpec")
        return bool(self.checkpoint or self.every or self.mode or self.async_writes or self.resume or declared)


def execute(module, params: Optional[dict] = None, spark=None, master=None, remote=None, conf=None, quiet=True,
            trace=False, verbose=False, report: Optional[str] = None, raise_errors: bool = False,
            diagnostics: bool = False, snapshots: Optional[SnapshotOptions] = None):
    """Run a generated pipeline module. Returns (exit code, job)."""
    from scopeflow.runtime.job import Job, restore_conf
    from scopeflow.runtime.progress import Progress
    from scopeflow.runtime.session import build_session, keep_jvm_log
    from scopeflow.runtime.snapshots import SnapshotRefused
    from scopeflow.runtime.termination import LoopMaxError

    name, flow_file = module.PIPELINE, module.FLOW_FILE
    progress = Progress(enabled=not quiet)
    job = None
    status, code, message = "ok", ExitCode.OK, None
    saved_conf: dict = {}  # a session the caller gave: the settings this run's `config` changed, as they were
    try:
        if spark is None:
            spark = build_session(f"scopeflow:{name}", master, remote, {**module.CONFIG, **(conf or {})}, verbose)
        else:
            for k, v in module.CONFIG.items():
                try:
                    before = spark.conf.get(k, None)
                    spark.conf.set(k, v)
                    saved_conf[k] = before
                except Exception:  # a static conf of a shared session: it stays as the session has it
                    pass
        job = Job(spark, name, flow_file, params if params is not None else parse_params(module.PARAMS, []),
                  module.FINGERPRINT, progress, trace)
        job.diagnostics = diagnostics
        job.detailed = bool(report)
        job.operator_names = dict(getattr(module, "OPERATORS", {}))
        if snapshots is not None and snapshots.wanted(module):
            job.configure_snapshots(snapshots, module.OPERATORS, module.SOURCES)
        module.pipeline(job)
        job.finish()
    except SnapshotRefused as exc:
        status, code, message = "refused", ExitCode.SNAPSHOT, f"error: snapshot refused: {exc}"
        if raise_errors:
            raise
    except LoopMaxError as exc:
        status, code, message = "max", ExitCode.MAX, str(exc)
        if raise_errors:
            raise
    except RuntimeFailure as exc:
        status, code, message = "failed", ExitCode.RUNTIME, exc.render()
        if raise_errors:
            raise
    except Exception as exc:  # Spark and user-function failures: one clean message, not a JVM wall
        status, code, message = "failed", ExitCode.RUNTIME, describe_failure(exc, flow_file)
        if raise_errors:
            raise
    finally:
        if job is not None and report:
            job.write_report(report, status, message)
        restore_conf(spark, saved_conf)  # `config` applies to its own run, not to the caller's later work
    if message:
        print(message if message.startswith("error") else f"error: {message}", file=sys.stderr)
    elif job is not None:
        progress.summary(name)
    if code != ExitCode.OK:
        keep_jvm_log()  # the process's JVM log stays for a look (it is removed at exit when every run succeeded)
    return code, job


_USER_ERROR = re.compile(r"SCOPEFLOW_USER_ERROR line (\d+) in (\w+):\n(.*?)(?:\n\n|\Z|\n\tat |\nJVM stacktrace)", re.S)


def describe_failure(exc: Exception, flow_file: str) -> str:
    text = str(exc)
    m = _USER_ERROR.search(text)
    if m:
        line, fn, tb = m.groups()
        user_tb = _user_frames(tb)
        return (f"error: Python function `{fn}` failed ({flow_file}:{line})\n{user_tb}".rstrip())
    first = next((ln for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return f"error: Spark failed: {first[:500]}"


_SHIPPED_FRAME = re.compile(r"(scopeflow-[^/]*\.zip|pyspark\.zip|py4j[^/]*\.zip)/|/site-packages/(pyspark|py4j)/")


def _internal_roots() -> tuple:
    """Where scopeflow's own modules and pyspark live here (the user's code may be anywhere else,
    also in a folder called `scopeflow`)."""
    import importlib.util

    roots = []
    for name in ("scopeflow", "scopeflow.runtime", "scopeflow.stdlib", "scopeflow.compiler", "scopeflow.dsl", "pyspark"):
        spec = importlib.util.find_spec(name)  # (locates the package without running it: no compiler, no lark)
        roots += [os.path.abspath(d) + os.sep for d in (spec.submodule_search_locations or []) if spec]
    return tuple(roots)


def _user_frames(tb: str, roots: Optional[tuple] = None) -> str:
    """Keep the traceback frames of the user's code, drop scopeflow's and pyspark's (by their real
    locations, or the zips they are shipped to executors in); keep every line that is not a frame."""
    roots = _internal_roots() if roots is None else roots
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


def _snapshot_options(args) -> SnapshotOptions:
    return SnapshotOptions(getattr(args, "checkpoint", None), getattr(args, "snapshot_every", None),
                           getattr(args, "snapshot_mode", None), getattr(args, "async_snapshots", False),
                           getattr(args, "keep_snapshots", 3), getattr(args, "resume", False),
                           getattr(args, "no_snapshots", False))


def run_with_arguments(module, args) -> int:
    """Run a generated module with parsed run arguments (`add_run_arguments`); return the exit code."""
    try:
        params = parse_params(module.PARAMS, args.param)
        conf = parse_conf(args.conf)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    code, _ = execute(module, params=params, master=args.master, remote=args.remote, conf=conf, quiet=args.quiet,
                      trace=args.trace, verbose=args.verbose, report=args.report, snapshots=_snapshot_options(args))
    return code


def main(argv, module) -> int:
    """Entry point of a generated script (`python job.py ...` or `spark-submit job.py ...`)."""
    p = argparse.ArgumentParser(prog=os.path.basename(sys.argv[0] or "job.py"),
                                description=f"Run pipeline `{module.PIPELINE}` (generated by scopeflow).")
    add_run_arguments(p)
    return run_with_arguments(module, p.parse_args(argv))


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `scopeflow run` and of a generated script: one list for both."""
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="override a `param`")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--remote", help="Spark Connect URL, sc://HOST:PORT")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--trace", action="store_true", help="print every termination attempt")
    p.add_argument("--verbose", action="store_true", help="show Spark's own log output")
    p.add_argument("--report", metavar="RUN.json", help="write per-round, per-operator statistics as JSON")
    p.add_argument("--checkpoint", metavar="DIR", help="snapshot directory (default .scopeflow/<pipeline>/)")
    p.add_argument("--snapshot-every", type=int, metavar="N", help="rounds between snapshots (default 10)")
    p.add_argument("--snapshot-mode", choices=("persist", "recompute"), default=None,
                   help="persist loop state (default) or only positions (recompute on recovery)")
    p.add_argument("--async-snapshots", action="store_true", help="write snapshots while the next round runs")
    p.add_argument("--keep-snapshots", type=int, default=3, metavar="K", help="snapshots to keep (default 3)")
    p.add_argument("--resume", action="store_true", help="continue from the latest complete snapshot")
    p.add_argument("--no-snapshots", action="store_true", help="take no snapshots")
