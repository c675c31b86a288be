"""The `scopeflow` command line.

Exit codes (`runtime.errors.ExitCode`): 0 ok, 1 compile errors, 2 usage, 3 a
loop hit `max`, 4 runtime failure, 5 snapshot refused.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from scopeflow.runtime.errors import ExitCode
from scopeflow.runtime.arguments import add_run_arguments


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

    if not os.path.isfile(path):
        print(f"error: no such file: {path}", file=sys.stderr)
        return None
    result = check_file(path)
    _print_diagnostics(result.diagnostics)
    return result


def cmd_check(args) -> int:
    result = _load(args.file)
    if result is None:
        return ExitCode.USAGE
    if result.errors:
        return ExitCode.COMPILE
    print(f"{args.file}: ok ({len(result.plan.nodes)} operators, {len(result.plan.loop_scopes())} loops)")
    return ExitCode.OK


def cmd_explain(args) -> int:
    from scopeflow.compiler.explain import explain

    result = _load(args.file)
    if result is None:
        return ExitCode.USAGE
    if result.errors:
        return ExitCode.COMPILE
    sys.stdout.write(explain(result.plan))
    return ExitCode.OK


def cmd_compile(args) -> int:
    from scopeflow.compiler.codegen import plan_to_pyspark

    result = _load(args.file)
    if result is None:
        return ExitCode.USAGE
    if result.errors:
        return ExitCode.COMPILE
    code = plan_to_pyspark(result.plan, os.path.abspath(args.file))
    if args.output in (None, "-"):
        sys.stdout.write(code)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(code)
        print(f"wrote {args.output}", file=sys.stderr)
    return ExitCode.OK


def cmd_run(args) -> int:
    from scopeflow.api import plan_to_module
    from scopeflow.runtime.launcher import run_with_arguments

    result = _load(args.file)
    if result is None:
        return ExitCode.USAGE
    if result.errors:
        return ExitCode.COMPILE
    return run_with_arguments(plan_to_module(result.plan, args.file), args)


def cmd_graph(args) -> int:
    result = _load(args.file)
    if result is None:
        return ExitCode.USAGE
    if result.errors:
        return ExitCode.COMPILE
    return draw(result.plan, args.output, args.stats)


def draw(plan, output: str, stats_path: str | None = None) -> int:
    """`scopeflow graph FILE -o OUT [--stats RUN.json]`: exit 0, 2 on bad arguments, 4 without graphviz."""
    from scopeflow.compiler import graph

    stats = None
    if stats_path:
        try:
            with open(stats_path, encoding="utf-8") as fh:
                stats = json.load(fh)
        except (OSError, ValueError) as err:
            print(f"error: cannot read run report {stats_path}: {err}", file=sys.stderr)
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
        print(f"error: cannot write {output}: {err}", file=sys.stderr)
        return ExitCode.RUNTIME
    print(f"wrote {output}")
    return ExitCode.OK


def cmd_docs(args) -> int:
    from scopeflow.stdlib.functions import functions_markdown

    sys.stdout.write(functions_markdown())
    return ExitCode.OK


def cmd_cluster(args) -> int:
    from scopeflow.runtime.cluster import cli

    return cli(args)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scopeflow", description="Scoped iterative dataflow on Apache Spark.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    c = sub.add_parser("check", help="check a .flow file and report every problem")
    c.add_argument("file")
    c.set_defaults(func=cmd_check)

    e = sub.add_parser("explain", help="print the checked plan: scopes, operators, schemas, chains")
    e.add_argument("file")
    e.set_defaults(func=cmd_explain)

    co = sub.add_parser("compile", help="write a standalone PySpark script for the pipeline")
    co.add_argument("file")
    co.add_argument("-o", "--output", help="output .py file (default: stdout)")
    co.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run the pipeline on Spark")
    r.add_argument("file")
    add_run_arguments(r)
    r.set_defaults(func=cmd_run)

    g = sub.add_parser("graph", help="draw the pipeline topology (svg, png, pdf, dot, mmd)")
    g.add_argument("file")
    g.add_argument("-o", "--output", required=True, help="output file; the format follows the extension")
    g.add_argument("--stats", metavar="RUN.json", help="annotate with a run report from `scopeflow run --report`")
    g.set_defaults(func=cmd_graph)

    cl = sub.add_parser("cluster", help="start, stop or inspect a local Spark standalone cluster (127.0.0.1)",
                        description="A local Spark standalone cluster for trying `--master` / `--remote`: a master "
                                    "and N workers (and optionally a Spark Connect server) on 127.0.0.1 with free "
                                    "ports; logs, work dirs and pid files under --dir. See docs/cluster.md.")
    cl.add_argument("action", choices=("up", "down", "status"))
    cl.add_argument("--dir", default=os.path.join(".scopeflow", "cluster"),
                    help="folder for logs, work dirs and pid files (default .scopeflow/cluster)")
    cl.add_argument("--workers", type=int, default=2, help="workers to start (default 2)")
    cl.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    cl.add_argument("--memory", default="2g", help="memory per worker (default 2g)")
    cl.add_argument("--connect", action="store_true", help="also start a Spark Connect server on the cluster")
    cl.add_argument("--timeout", type=float, default=180, help="seconds to wait for registration (default 180)")
    cl.add_argument("--json", action="store_true", help="status as JSON")
    cl.set_defaults(func=cmd_cluster)

    d = sub.add_parser("docs", help="print the builtin function reference (Markdown)")
    d.set_defaults(func=cmd_docs)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
