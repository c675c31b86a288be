"""The `scopeflow` command line (docs/cli.md).

Exit codes (`runtime.errors.ExitCode`, listed by `scopeflow --help`): 0 ok, 1 compile errors, 2 usage or
a run refused before it started, 3 a loop hit `max`, 4 run-time failure, 5 snapshot refused,
130 interrupted.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

from scopeflow.runtime.arguments import add_run_arguments
from scopeflow.runtime.errors import ExitCode, exit_codes_help
from scopeflow.version import __version__


def _print_diagnostics(diags) -> None:
    for d in diags:
        print(d.render(), file=sys.stderr)
        print(file=sys.stderr)
    errors = sum(d.is_error for d in diags)
    warnings = len(diags) - errors
    if diags:
        print(f"{errors} error(s), {warnings} warning(s)", file=sys.stderr)


def _load(path: str):
    """Check a .flow file; print its diagnostics; return the Compiled result or None if unreadable."""
    from scopeflow.compiler import check_file
    from scopeflow.dsl.files import UnreadableFlow

    if not os.path.isfile(path):
        print(f"error: no such file: {path}", file=sys.stderr)
        return None
    try:
        result = check_file(path)
    except UnreadableFlow as err:  # permission denied, not UTF-8
        print(err.render(), file=sys.stderr)
        return None
    _print_diagnostics(result.diagnostics)
    return result


def _checked(path: str):
    """(exit code, checked plan or None): the plan when the file is readable and has no errors."""
    result = _load(path)
    if result is None:
        return ExitCode.USAGE, None
    if result.errors:
        return ExitCode.COMPILE, None
    return ExitCode.OK, result.plan


def flow_files(paths: list[str]) -> list[str]:
    """The .flow files named: files as they are, a folder's `*.flow` files (not its subfolders')."""
    out = []
    for p in paths:
        out += sorted(glob.glob(os.path.join(p, "*.flow"))) if os.path.isdir(p) else [p]
    return out


def _no_files(named: list[str]) -> int:
    print(f"error: no .flow files in {', '.join(named)}", file=sys.stderr)
    return ExitCode.USAGE


def _worst(codes: list[int]) -> int:
    """The exit code of a command over several files: usage problems first, then compile errors."""
    for code in (ExitCode.USAGE, ExitCode.COMPILE):
        if code in codes:
            return code
    return ExitCode.OK


def _parent_made(path: str) -> bool:
    """Create the folder `path` goes into (every command that writes a file does); False and a message
    if it cannot be made."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as err:
        print(f"error: cannot create the folder {parent} for {path}: {err.strerror or err}", file=sys.stderr)
        return False
    return True


def cmd_check(args) -> int:
    files = flow_files(args.files)
    if not files:
        return _no_files(args.files)
    codes = []
    for path in files:
        code, plan = _checked(path)
        codes.append(code)
        if plan is not None:
            print(f"{path}: ok ({len(plan.nodes)} operators, {len(plan.loop_scopes())} loops)")
    return _worst(codes)


def cmd_explain(args) -> int:
    from scopeflow.compiler.explain import explain

    code, plan = _checked(args.file)
    if plan is not None:
        sys.stdout.write(explain(plan))
    return code


def cmd_compile(args) -> int:
    from scopeflow.compiler.codegen import plan_to_pyspark

    files = flow_files(args.files)
    if not files:
        return _no_files(args.files)
    several = len(files) > 1 or any(os.path.isdir(p) for p in args.files)
    if several and args.output in (None, "-"):
        print("error: compiling several files needs -o DIR (one script per file: DIR/NAME.py)", file=sys.stderr)
        return ExitCode.USAGE
    clash = _clashes(files, args.output, several)
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return ExitCode.USAGE
    codes = []
    for path in files:
        code, plan = _checked(path)
        codes.append(code)
        if plan is None:
            continue
        if args.output in (None, "-"):
            sys.stdout.write(plan_to_pyspark(plan, path, os.getcwd()))
            continue
        target = _script_path(path, args.output, several)
        if not _parent_made(target):
            return ExitCode.USAGE
        try:
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(plan_to_pyspark(plan, path, os.path.dirname(os.path.abspath(target))))
        except OSError as err:
            print(f"error: cannot write {target}: {err.strerror or err}", file=sys.stderr)
            return ExitCode.USAGE
        print(f"wrote {target}", file=sys.stderr)
    return _worst(codes)


def _script_path(flow: str, output: str, several: bool) -> str:
    return os.path.join(output, os.path.basename(flow)[:-5] + ".py") if several else output


def _clashes(files: list[str], output, several: bool) -> str:
    """Why `compile` must not write its scripts where it was told ("" when it may): over one of its
    inputs, or two scripts of the same name."""
    if output in (None, "-"):
        return ""
    inputs = {os.path.realpath(f) for f in files}
    seen: dict = {}
    for f in files:
        target = os.path.realpath(_script_path(f, output, several))
        if target in inputs:
            return f"-o {output}: that would overwrite the input {f}"
        if target in seen:
            return (f"{seen[target]} and {f} would both be compiled to {_script_path(f, output, several)}: "
                    f"compile them into different folders")
        seen[target] = f
    return ""


def cmd_run(args) -> int:
    from scopeflow.api import plan_to_module
    from scopeflow.runtime.launcher import run_with_arguments

    code, plan = _checked(args.file)
    if plan is None:
        return code
    return run_with_arguments(plan_to_module(plan, args.file), args)


def cmd_show(args) -> int:
    from scopeflow.api import plan_to_module
    from scopeflow.compiler.preview import NotShowable, preview_plan, streams_read_now
    from scopeflow.runtime.launcher import run_with_arguments

    code, plan = _checked(args.file)
    if plan is None:
        return code
    if args.rows < 1:
        print(f"error: --rows {args.rows}: give at least 1", file=sys.stderr)
        return ExitCode.USAGE
    try:
        shown, node = preview_plan(plan, args.stream, args.rows)
    except NotShowable as err:
        print(f"error: {err}" + "".join(f"\n   = help: {h}" for h in err.hints), file=sys.stderr)
        return ExitCode.USAGE
    print(f"{args.stream}: {plan.nodes[node].schema}")
    sys.stdout.flush()
    for name in streams_read_now(plan, shown):
        print(f"note: stream `{name}` is read as the files in its folder are now (a preview, not an epoch)",
              file=sys.stderr)
    args.report, args.no_snapshots = None, True  # a preview writes nothing: no sinks, no report, no snapshots
    return run_with_arguments(plan_to_module(shown, args.file), args)


def cmd_graph(args) -> int:
    code, plan = _checked(args.file)
    if plan is None:
        return code
    return draw(plan, args.output, args.stats)


def draw(plan, output: str, stats_path: str | None = None) -> int:
    """`scopeflow graph FILE -o OUT [--stats RUN.json]`: exit 0, 2 on bad arguments or an output it cannot
    write, 4 without graphviz."""
    from scopeflow.compiler import graph

    stats = None
    if stats_path:
        try:
            with open(stats_path, encoding="utf-8") as fh:
                stats = json.load(fh)
        except (OSError, ValueError) as err:
            print(f"error: cannot read run report {stats_path}: {err}", file=sys.stderr)
            return ExitCode.USAGE
        wrong = _foreign_report(plan, stats)
        if wrong:
            print(f"error: run report {stats_path} {wrong}\n   = help: draw it with the .flow file it was run from, "
                  f"or run this one with --report to get its own", file=sys.stderr)
            return ExitCode.USAGE
    try:
        graph.output_format(output)  # an unknown format is said before anything is made
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return ExitCode.USAGE
    if not _parent_made(output):
        return ExitCode.USAGE
    try:
        graph.render(plan, output, stats)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return ExitCode.USAGE
    except (graph.GraphvizMissing, graph.GraphvizFailed) as err:
        print(f"error: {err}", file=sys.stderr)
        return ExitCode.RUNTIME
    except OSError as err:
        print(f"error: cannot write {output}: {err.strerror or err}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"wrote {output}")
    return ExitCode.OK


def _foreign_report(plan, stats) -> str:
    """Why a run report is not of this plan ("" when it is): its figures would land on the wrong nodes."""
    if not isinstance(stats, dict) or "pipeline" not in stats:
        return "is not a run report of `scopeflow run --report`"
    if stats["pipeline"] != plan.pipeline:
        return f"is of pipeline `{stats['pipeline']}`, not `{plan.pipeline}`"
    if stats.get("fingerprint") != plan.fingerprint():
        return (f"is of another version of `{plan.pipeline}` (plan fingerprint {stats.get('fingerprint')}, "
                f"this file's is {plan.fingerprint()}): the file changed since that run")
    return ""


def cmd_docs(args) -> int:
    from scopeflow.stdlib.functions import functions_markdown

    sys.stdout.write(functions_markdown())
    return ExitCode.OK


def cmd_cluster(args) -> int:
    from scopeflow.runtime.cluster import cli

    return cli(args)


def cmd_graphalytics(args) -> int:
    from scopeflow.graphalytics import cmd_graphalytics as run

    return run(args)


COMMANDS = "check explain compile run show graph cluster graphalytics docs".split()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scopeflow", description="Scoped iterative dataflow on Apache Spark: check, "
                                "explain, compile, run and draw .flow pipelines.",
                                epilog=exit_codes_help() + "\n\nDocs: docs/cli.md, docs/language.md, docs/errors.md.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"scopeflow {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, summary: str, func, description: str = "") -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=summary, description=description or summary[0].upper() + summary[1:] + ".",
                           epilog=exit_codes_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
        c.set_defaults(func=func)
        return c

    c = command("check", "check .flow files and report every problem", cmd_check)
    c.add_argument("files", nargs="+", metavar="FILE", help=".flow files, or folders (their *.flow files)")

    e = command("explain", "print the checked plan: scopes, operators, schemas, chains", cmd_explain)
    e.add_argument("file", metavar="FILE", help="the .flow file")

    co = command("compile", "write a standalone PySpark script for each pipeline", cmd_compile,
                 "Write a standalone PySpark script for each pipeline. The script names the .flow file and "
                 "Python modules relative to itself: move it with the project.")
    co.add_argument("files", nargs="+", metavar="FILE", help=".flow files, or folders (their *.flow files)")
    co.add_argument("-o", "--output", metavar="OUT",
                    help="output .py file for one FILE, a folder for several (default: stdout); "
                         "missing folders are created")

    r = command("run", "run the pipeline on Spark", cmd_run)
    r.add_argument("file", metavar="FILE", help="the .flow file")
    add_run_arguments(r)

    s = command("show", "run the pipeline up to one stream and print its schema and first rows", cmd_show,
                "Run the pipeline up to one stream (a pipeline-level stream or a loop's output) and print its "
                "schema and first rows. Only what the stream needs runs; nothing is written (no sinks, no "
                "snapshots).")
    s.add_argument("file", metavar="FILE", help="the .flow file")
    s.add_argument("stream", metavar="STREAM", help="the stream's name (a named loop output: LOOP.OUTPUT)")
    s.add_argument("--rows", type=int, default=20, metavar="N", help="rows to print (default 20)")
    add_run_arguments(s, writes=False)

    g = command("graph", "draw the pipeline topology (svg, png, pdf, dot, mmd)", cmd_graph)
    g.add_argument("file", metavar="FILE", help="the .flow file")
    g.add_argument("-o", "--output", required=True,
                   help="output file; the format follows the extension; missing folders are created")
    g.add_argument("--stats", metavar="RUN.json",
                   help="annotate with a run report of this pipeline (`scopeflow run --report RUN.json`)")

    cl = command("cluster", "start, stop or inspect a local Spark standalone cluster (127.0.0.1)", cmd_cluster,
                 "A local Spark standalone cluster for trying `--master` / `--remote`: a master and N workers "
                 "(and optionally a Spark Connect server) on 127.0.0.1 with free ports; logs, work dirs and pid "
                 "files under --dir. See docs/cluster.md.")
    cl.add_argument("action", choices=("up", "down", "status"), help="start, stop, or say what runs")
    cl.add_argument("--dir", default=os.path.join(".scopeflow", "cluster"),
                    help="folder for logs, work dirs and pid files (default .scopeflow/cluster)")
    cl.add_argument("--workers", type=int, default=2, help="workers to start (default 2)")
    cl.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    cl.add_argument("--memory", default="2g", help="memory per worker (default 2g)")
    cl.add_argument("--connect", action="store_true", help="also start a Spark Connect server on the cluster")
    cl.add_argument("--timeout", type=float, default=180, help="seconds to wait for registration (default 180)")
    cl.add_argument("--json", action="store_true", help="status as JSON")

    from scopeflow.graphalytics import add_arguments as graphalytics_arguments

    ga = command("graphalytics", "run an LDBC Graphalytics kernel on a data set in LDBC's layout", cmd_graphalytics,
                 "Run one LDBC Graphalytics kernel (stdlib:graphalytics) on a data set in LDBC's layout "
                 "(NAME.properties, NAME.v, NAME.e) and write LDBC's output format, `vertex value` per line; "
                 "--validate compares it with an expected output under LDBC's rules. Takes the options of "
                 "`run`. See docs/cli.md#graphalytics.")
    graphalytics_arguments(ga)

    command("docs", "print the builtin function reference (Markdown)", cmd_docs)
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command is None:  # a bare `scopeflow`: what it can do
        p.print_help()
        return ExitCode.OK
    try:
        return args.func(args)
    except KeyboardInterrupt:  # before a run started (a run handles Ctrl-C itself)
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
