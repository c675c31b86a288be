"""The `scopeflow` command line.

Exit codes: 0 ok, 1 compile errors, 2 usage, 3 a loop hit `max`, 4 runtime
failure, 5 snapshot refused.
"""
from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_COMPILE, EXIT_USAGE, EXIT_MAX, EXIT_RUNTIME, EXIT_SNAPSHOT = 0, 1, 2, 3, 4, 5


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
        return EXIT_USAGE
    if result.errors:
        return EXIT_COMPILE
    print(f"{args.file}: ok ({len(result.plan.nodes)} operators, {len(result.plan.loop_scopes())} loops)")
    return EXIT_OK


def cmd_explain(args) -> int:
    from scopeflow.compiler.explain import explain

    result = _load(args.file)
    if result is None:
        return EXIT_USAGE
    if result.errors:
        return EXIT_COMPILE
    sys.stdout.write(explain(result.plan))
    return EXIT_OK


def cmd_compile(args) -> int:
    from scopeflow.compiler.codegen import plan_to_pyspark

    result = _load(args.file)
    if result is None:
        return EXIT_USAGE
    if result.errors:
        return EXIT_COMPILE
    code = plan_to_pyspark(result.plan, os.path.abspath(args.file))
    if args.output in (None, "-"):
        sys.stdout.write(code)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(code)
        print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def cmd_run(args) -> int:
    from scopeflow.runtime.launcher import run_cli

    return run_cli(args)


def cmd_graph(args) -> int:
    from scopeflow.compiler.graph import graph_cli

    result = _load(args.file)
    if result is None:
        return EXIT_USAGE
    if result.errors:
        return EXIT_COMPILE
    return graph_cli(result.plan, args)


def cmd_docs(args) -> int:
    from scopeflow.stdlib.functions import functions_markdown

    sys.stdout.write(functions_markdown())
    return EXIT_OK


def cmd_cluster(args) -> int:
    from scopeflow.runtime.cluster import cli

    return cli(args)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
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
