"""Running a generated pipeline module: the generated script's `main` and `execute`.

`scopeflow run F.flow` (`scopeflow/cli.py`), `run_file` (`scopeflow/api.py`) and
`python job.py` / `spark-submit job.py` all go through `execute`: the generated
code is the only execution path, so they behave the same.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid
from typing import Optional

from scopeflow.runtime import failures
from scopeflow.runtime.arguments import (SnapshotOptions, UsageError, add_run_arguments, check_session_settings,
                                         check_setting, parse_conf, parse_params)
from scopeflow.runtime.context import RunContext, settings
from scopeflow.runtime.errors import ExitCode, RunRefused, RuntimeFailure, exit_codes_help
from scopeflow.runtime.interrupts import Interrupted, stop_on_interrupt
from scopeflow.runtime.preflight import flow_dir, preflight
from scopeflow.runtime.progress import Progress
from scopeflow.runtime.session import build_session, jvm_log_path, keep_jvm_log
from scopeflow.runtime.snapshots import SnapshotRefused, read_sink_log
from scopeflow.runtime.spec import sources, streams
from scopeflow.runtime.streaming import (CheckpointRefused, StreamOptions, StreamRun, Trigger, check_checkpoint,
                                         restarted)
from scopeflow.runtime.termination import LoopMaxError


def execute(module, params: Optional[dict] = None, spark=None, master=None, remote=None, conf=None, quiet=True,
            trace=False, verbose=False, report: Optional[str] = None, raise_errors: bool = False,
            diagnostics: bool = False, snapshots: Optional[SnapshotOptions] = None, base_dir: Optional[str] = None,
            stream: Optional[StreamOptions] = None):
    """Run a generated pipeline module. Returns (exit code, the run: `RunContext`, None if it never started;
    for a streaming pipeline its last epoch's)."""
    progress = Progress(enabled=not quiet)
    run = interrupts = streaming = None
    status, code, message = "ok", ExitCode.OK, None
    try:
        values = params if params is not None else parse_params(module.PARAMS, [])
        base_dir = os.path.abspath(base_dir) if base_dir else flow_dir(module)
        is_stream = bool(streams(module))
        stream = stream or StreamOptions()
        if not is_stream and (stream.trigger or stream.full_refresh):
            raise RunRefused(f"{'--trigger' if stream.trigger else '--full-refresh'}: pipeline `{module.PIPELINE}` "
                             "reads no `stream` source; it runs once over its input",
                             hint="leave the option out (--trigger and --full-refresh are for streaming pipelines)")
        wanted = is_stream or (snapshots is not None and snapshots.wanted(module))
        checkpoint = (snapshots or SnapshotOptions()).root(module.PIPELINE) if wanted else None
        # `--resume`: the run it continues may have committed some sinks (its targets are its own, not refused)
        resumed = (read_sink_log(checkpoint, module.FINGERPRINT) if wanted and not is_stream and snapshots.resume
                   else None)
        if is_stream:
            Trigger.parse(stream.trigger)  # a bad --trigger is told before anything starts
            check_checkpoint(checkpoint)
        preflight(module, values, base_dir, checkpoint, resumed,
                  restarted=is_stream and not stream.full_refresh and restarted(checkpoint))
        if report:
            _report_folder(report)
        for key, value in (conf or {}).items():  # (the CLI's --conf were checked as parsed; a caller's dict here)
            check_setting(key, str(value))
        if spark is None:
            spark = build_session(f"scopeflow:{module.PIPELINE}", master, remote, {**module.CONFIG, **(conf or {})},
                                  verbose)
            config = {}  # the session was built with them
        else:  # a caller's session: this run's `config` applies to this run only
            config = module.CONFIG
        check_session_settings(spark)
        if is_stream:
            with settings(spark, config, on_fixed=_fixed):
                loop_snapshots = snapshots if snapshots is not None and snapshots.of_loops(module) else None
                streaming = StreamRun(spark, module, values, progress, stream, checkpoint, base_dir, trace=trace,
                                      detailed=bool(report), diagnostics=diagnostics, report_path=report,
                                      loop_snapshots=loop_snapshots)
                try:
                    streaming.run()
                finally:
                    run = streaming.last_run
            return _streamed(streaming, progress, report)
        tag = f"scopeflow-{uuid.uuid4().hex[:12]}"  # the run's Spark jobs: what Ctrl-C cancels
        with settings(spark, config, on_fixed=_fixed), stop_on_interrupt(spark, tag) as interrupts:
            run = RunContext(spark, module, values, progress, trace, detailed=bool(report), diagnostics=diagnostics,
                             base_dir=base_dir)
            run.interrupts = interrupts
            if wanted:
                run.configure_snapshots(snapshots, sources(module))
            module.pipeline(run)
            run.finish()
    except (Exception, KeyboardInterrupt) as exc:
        if isinstance(exc, (Interrupted, KeyboardInterrupt)) or (interrupts is not None and interrupts.requested):
            status, code, message = "interrupted", ExitCode.INTERRUPTED, _interrupted(run)
        else:
            status, code, message = _outcome(exc, module, run)
        if raise_errors:
            raise
    finally:
        if streaming is not None and report and code != ExitCode.OK:
            with contextlib.suppress(OSError):
                streaming.write_report(status, message)
        elif streaming is None and run is not None and report:
            try:
                run.report.write(report, status, message)
            except OSError as err:  # the run's outputs stand; its report is lost, and the exit code says so
                lost = f"error: could not write the run report {report}: {err.strerror or err}"
                code, message = (ExitCode.RUNTIME, lost) if code == ExitCode.OK else (code, f"{message}\n{lost}")
    if message:
        print(message if message.startswith(("error", "interrupted")) else f"error: {message}", file=sys.stderr)
    elif run is not None:
        progress.summary(module.PIPELINE)
    if code != ExitCode.OK:
        keep_jvm_log()  # the process's JVM log stays for a look (it is removed at exit when every run succeeded)
    return code, run


def _streamed(streaming: StreamRun, progress: Progress, report: Optional[str]):
    """The end of a streaming run that did not fail: its report, its last line; (exit code, last epoch's run)."""
    stopped = streaming.stop_message()
    if report:
        streaming.write_report("stopped" if stopped else "ok")
    if stopped:
        print(stopped, file=sys.stderr)
    epochs = streaming.epochs_run
    last = streaming.manifest["epoch"] if streaming.manifest is not None else None
    progress.trace(f"{epochs} epoch{'s' if epochs != 1 else ''} run" +
                   (f"; committed up to epoch {last}" if last is not None else "") +
                   f" in {time.perf_counter() - streaming.started:.1f}s")
    return ExitCode.OK, streaming.last_run


def _report_folder(report: str) -> None:
    """`--report PATH`: its folder is made now, before Spark starts, so a run never ends unable to write it."""
    folder = os.path.dirname(os.path.abspath(report))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise RunRefused(f"--report {report}: cannot create the folder {folder}: {err.strerror or err}",
                         hint="give a report path in a folder you can write") from None
    if not os.access(folder, os.W_OK):
        raise RunRefused(f"--report {report}: the folder {folder} is not writable",
                         hint="give a report path in a folder you can write")


def _interrupted(run) -> str:
    """The one line a run stopped by Ctrl-C ends with."""
    store = run.snapshots if run is not None else None
    if store is not None:
        with contextlib.suppress(Exception):
            store.wait()  # an asynchronous snapshot being written is finished (or stays incomplete, unused)
    if store is not None and store.committed():
        return "interrupted (Ctrl-C): the snapshots taken so far are kept; `--resume` continues from the latest"
    return "interrupted (Ctrl-C)"


def _fixed(key: str) -> None:
    print(f"note: config {key} is fixed when a Spark session starts; this run keeps the session's value",
          file=sys.stderr)


def _outcome(exc: Exception, module, run: Optional[RunContext]) -> tuple[str, ExitCode, str]:
    """(status, exit code, message) of a run that raised `exc`."""
    if isinstance(exc, CheckpointRefused):
        return "refused", ExitCode.SNAPSHOT, f"error: checkpoint refused: {exc}"
    if isinstance(exc, SnapshotRefused):
        return "refused", ExitCode.SNAPSHOT, f"error: snapshot refused: {exc}"
    if isinstance(exc, LoopMaxError):
        return "max", ExitCode.MAX, str(exc)
    if isinstance(exc, RuntimeFailure):
        failure = exc
    elif isinstance(exc, failures.explained_types()):  # outside the pipeline's actions (which tell their own)
        failure = run.explain(exc) if run is not None else failures.explain(
            exc, failures.Scene(log=jvm_log_path(), flow_file=module.FLOW_FILE))
    else:  # not a failure of Spark, the file system or the pipeline's data: a bug of scopeflow's
        return "failed", ExitCode.RUNTIME, failures.internal(exc, jvm_log_path())
    return ("refused" if isinstance(failure, RunRefused) else "failed"), failure.exit_code, failure.render()


def _snapshot_options(args) -> SnapshotOptions:
    return SnapshotOptions(getattr(args, "checkpoint", None), getattr(args, "snapshot_every", None),
                           getattr(args, "snapshot_mode", None), getattr(args, "async_snapshots", False),
                           getattr(args, "keep_snapshots", 3), getattr(args, "resume", False),
                           getattr(args, "no_snapshots", False))


def run_with_arguments(module, args, spark=None) -> int:
    """Run a generated module with parsed run arguments (`add_run_arguments`); return the exit code. `spark`: a
    session to run in (else one is made from the arguments, as `scopeflow run` does)."""
    try:
        params = parse_params(module.PARAMS, args.param)
        conf = parse_conf(args.conf)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    code, _ = execute(module, params=params, spark=spark, master=args.master, remote=args.remote, conf=conf, quiet=args.quiet,
                      trace=args.trace, verbose=args.verbose, report=args.report, snapshots=_snapshot_options(args),
                      base_dir=getattr(args, "base_dir", None),
                      stream=StreamOptions(getattr(args, "trigger", None), getattr(args, "full_refresh", False)))
    return code


def params_help(params: dict) -> str:
    """The pipeline's params, for `--help`: `--param NAME=TYPE (default ...)`."""
    if not params:
        return "params: none (this pipeline declares no `param`)"
    width = max(len(n) + len(t) for n, (t, _) in params.items()) + 1
    lines = [f"  --param {f'{n}={t.upper()}':<{width}}  (default: {d!r})" for n, (t, d) in params.items()]
    return "params of this pipeline:\n" + "\n".join(lines)


def main(argv, module) -> int:
    """Entry point of a generated script (`python job.py ...` or `spark-submit job.py ...`)."""
    p = argparse.ArgumentParser(prog=os.path.basename(sys.argv[0] or "job.py"),
                                description=f"Run pipeline `{module.PIPELINE}` (generated by scopeflow from "
                                            f"{os.path.basename(module.FLOW_FILE)}).",
                                epilog=params_help(module.PARAMS) + "\n\n" + exit_codes_help(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p)
    return run_with_arguments(module, p.parse_args(argv))
