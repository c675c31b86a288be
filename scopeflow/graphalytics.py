"""`scopeflow graphalytics GRAPH --algorithm ALG`: run one LDBC Graphalytics kernel of `stdlib:graphalytics`
on a data set in LDBC's layout and write LDBC's output format; `--validate` compares with an expected output
under LDBC's rules (docs/cli.md#graphalytics).

A data set is `<name>.properties` (Java properties: `graph.<name>.directed`, the edge properties, each
algorithm's parameters) with its vertex file (`<name>.v`, one id per line) and edge file (`<name>.e`,
`src dst [properties...]` per line, space-separated). The command writes the pipeline it runs next to the
output (`OUTPUT.flow`, a plain .flow file: `scopeflow run OUTPUT.flow` runs it again), runs it like
`scopeflow run`, and joins Spark's part files into OUTPUT, one `vertex value` line per vertex.
"""
from __future__ import annotations

import glob
import math
import os
import re
import shutil
import sys
from typing import Optional

from scopeflow.runtime.errors import ExitCode

ALGORITHMS = {  # LDBC's name -> (stdlib kernel, LDBC's suffix of expected-output files, value type)
    "bfs": ("bfs", "BFS", "long"),
    "cdlp": ("cdlp", "CDLP", "long"),
    "lcc": ("lcc", "LCC", "double"),
    "pr": ("pagerank", "PR", "double"),
    "sssp": ("sssp", "SSSP", "double"),
    "wcc": ("wcc", "WCC", "long"),
}
EPSILON = 1e-4  # LDBC's relative error for PR, LCC and SSSP


def value_kind(algorithm: str):
    """How an output value of `algorithm` is read: int for the `long` kernels, float for the others."""
    return int if ALGORITHMS[algorithm][2] == "long" else float


class DatasetError(Exception):
    """A data set the runner cannot use (exit 2): the message names the file and what is wrong."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


# ---- the data set ---------------------------------------------------------------------------------------


def read_properties(path: str) -> dict:
    """Java properties (`key = value` or `key: value`, `#`/`!` comments), as LDBC writes them."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            m = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line)
            if m:
                out[m.group(1)] = m.group(2).strip()
    return out


def find_properties(graph: str) -> str:
    """GRAPH as a `.properties` file, a folder holding exactly one, or a path prefix `DIR/NAME`."""
    if os.path.isfile(graph) and graph.endswith(".properties"):
        return graph
    if os.path.isdir(graph):
        found = sorted(glob.glob(os.path.join(graph, "*.properties")))
        if len(found) == 1:
            return found[0]
        if found:
            raise DatasetError(f"{graph}: holds {len(found)} data sets ({', '.join(os.path.basename(f) for f in found)})",
                               "name one: DIR/NAME or DIR/NAME.properties")
        raise DatasetError(f"{graph}: no <name>.properties in this folder",
                           "LDBC's layout: NAME.properties with NAME.v and NAME.e")
    if os.path.isfile(graph + ".properties"):
        return graph + ".properties"
    also = "" if graph.endswith(".properties") else f", nor {graph}.properties"
    raise DatasetError(f"{graph}: no such data set (neither a .properties file, a folder{also})",
                       "give DIR/NAME, DIR/NAME.properties or a folder with one data set")


class Dataset:
    def __init__(self, properties: str):
        self.properties = properties
        self.name = os.path.basename(properties)[:-len(".properties")]
        self.folder = os.path.dirname(os.path.abspath(properties))
        try:
            self.props = read_properties(properties)
        except (OSError, UnicodeDecodeError) as err:
            raise DatasetError(f"{properties}: cannot read it: {getattr(err, 'strerror', None) or err}") from err
        self.directed = self._bool("directed")
        self.vertex_file = self._file("vertex-file", ".v")
        self.edge_file = self._file("edge-file", ".e")
        names = [n.strip() for n in self.get("edge-properties.names", "").split(",") if n.strip()]
        types = [t.strip() for t in self.get("edge-properties.types", "").split(",") if t.strip()]
        self.edge_properties = [(n, "long" if i < len(types) and types[i] in ("int", "integer", "long") else "double")
                                for i, n in enumerate(names)]

    def key(self, name: str) -> str:
        return f"graph.{self.name}.{name}"

    def get(self, name: str, default: Optional[str] = None) -> str:
        value = self.props.get(self.key(name), default)
        if value is None:
            raise DatasetError(f"{self.properties}: no `{self.key(name)}`",
                               f"LDBC's data sets give it in NAME.properties, e.g. `{self.key(name)} = ...`")
        return value

    def _bool(self, name: str) -> bool:
        value = self.get(name).lower()
        if value not in ("true", "false"):
            raise DatasetError(f"{self.properties}: `{self.key(name)} = {value}` is not true or false")
        return value == "true"

    def _file(self, name: str, suffix: str) -> str:
        path = os.path.join(self.folder, self.get(name, self.name + suffix))
        if not os.path.isfile(path):
            raise DatasetError(f"{self.properties}: its {name} {path} does not exist",
                               f"put {os.path.basename(path)} next to {os.path.basename(self.properties)}")
        return path

    def number(self, name: str, kind):
        raw = self.get(name)
        try:
            return kind(raw)
        except ValueError:
            raise DatasetError(f"{self.properties}: `{self.key(name)} = {raw}` is not a {kind.__name__}") from None


# ---- the pipeline ---------------------------------------------------------------------------------------


def _ident(name: str, taken: set) -> str:
    out = re.sub(r"\W", "_", name) or "p"
    if out[0].isdigit() or out in taken:
        out = "p_" + out
    taken.add(out)
    return out


def _flow_string(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pipeline_text(ds: Dataset, algorithm: str, parts: str) -> str:
    """The .flow program that runs `algorithm` on the data set and writes `parts` (a folder of CSV part
    files, `vertex value` lines)."""
    kernel = ALGORITHMS[algorithm][0]
    taken = {"src", "dst"}
    props = [(_ident(n, taken), t) for n, t in ds.edge_properties]
    schema = ", ".join(["src: long", "dst: long", *(f"{n}: {t}" for n, t in props)])
    params = [f"param vertex_file: string = {_flow_string(ds.vertex_file)}",
              f"param edge_file: string = {_flow_string(ds.edge_file)}",
              f"param directed: boolean = {str(ds.directed).lower()}"]
    edges = "links = edges | select(src, dst)"
    if algorithm in ("bfs", "sssp"):
        params.append(f"param source: long = {ds.number(f'{algorithm}.source-vertex', int)}")
    if algorithm == "sssp":
        wanted = ds.get("sssp.weight-property", ds.edge_properties[0][0] if ds.edge_properties else "(none)")
        named = dict(zip((n for n, _ in ds.edge_properties), (n for n, _ in props)))
        if wanted not in named:
            raise DatasetError(f"{ds.properties}: SSSP's weight property `{wanted}` is not among the edge properties "
                               f"({', '.join(named) or 'none'})",
                               f"list it in `{ds.key('edge-properties.names')}`, in the edge file's column order")
        edges = f"links = edges | select(src, dst, w = cast({named[wanted]} as double))"
    if algorithm == "cdlp":
        params.append(f"param iterations: long = {ds.number('cdlp.max-iterations', int)}")
    if algorithm == "pr":
        params.append(f"param iterations: long = {ds.number('pr.num-iterations', int)}")
        params.append(f"param damping: double = {ds.number('pr.damping-factor', float)!r}")
    call = {"bfs": "bfs(vertices, links, source, directed)", "sssp": "sssp(vertices, links, source, directed)",
            "cdlp": "cdlp(vertices, links, iterations, directed)", "lcc": "lcc(vertices, links, directed)",
            "pr": "pagerank(vertices, links, iterations, damping, directed)", "wcc": "wcc(vertices, links)"}[algorithm]
    return "\n".join([
        f"# LDBC Graphalytics {algorithm.upper()} on data set {ds.name} ({ds.properties}), written by",
        "# `scopeflow graphalytics`; run it again with `scopeflow run` (--param changes a value).",
        f"pipeline graphalytics_{algorithm}",
        f'from "stdlib:graphalytics" import {kernel}',
        *params,
        'source vertices = read csv(vertex_file, sep = " ") schema (id: long)',
        f'source edges = read csv(edge_file, sep = " ") schema ({schema})',
        edges,
        f'sink {call} -> csv({_flow_string(parts)}, header = false, sep = " ")',
        ""])


def join_parts(parts: str, output: str) -> int:
    """Spark's part files of `parts` as one file `output` (written aside, then renamed); the number of lines."""
    lines = 0
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        for part in sorted(glob.glob(os.path.join(parts, "part-*"))):
            with open(part, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        out.write(line if line.endswith("\n") else line + "\n")
                        lines += 1
    os.replace(tmp, output)
    return lines


# ---- validation (LDBC's rules) ------------------------------------------------------------------------


def read_values(path: str, kind) -> dict:
    """`vertex value` lines -> {vertex: value}; a vertex twice or a line that does not parse is an error."""
    out = {}
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetError(f"{path}: cannot read it: {getattr(err, 'strerror', None) or err}") from None
    for n, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        try:
            vertex, value = int(fields[0]), kind(fields[1])
            if len(fields) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise DatasetError(f"{path}:{n}: `{line.strip()}` is not `vertex value`") from None
        if vertex in out:
            raise DatasetError(f"{path}:{n}: vertex {vertex} has a second line")
        out[vertex] = value
    return out


def _close(got: float, want: float) -> bool:
    """LDBC's `EpsilonValidationRule`: equal; both NaN; both infinity-like (beyond 99.9 % of the largest double)
    with the same sign; both zero-like (within 10 ulps of 0); else |got - want| < 1e-4 * want."""
    if got == want or (math.isnan(got) and math.isnan(want)):
        return True
    big = sys.float_info.max * 0.999
    if (math.isinf(got) or abs(got) > big) and (math.isinf(want) or abs(want) > big):
        return math.copysign(1, got) == math.copysign(1, want)
    tiny = 5e-324 * 10
    if abs(got) < tiny and abs(want) < tiny:
        return True
    return abs(got - want) < EPSILON * want


def compare(algorithm: str, got: dict, want: dict) -> list[str]:
    """LDBC's rule for `algorithm`: exact for BFS, the same partition for WCC, a relative error below 1e-4 for
    PR, LCC and SSSP; exact for CDLP too (LDBC accepts the same communities under any labels: stricter,
    and stdlib's CDLP gives LDBC's own labels); every vertex of one file in the other. The differences, as sentences."""
    problems = []
    missing, extra = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    if missing:
        problems.append(f"{len(missing)} vertices missing from the output, e.g. {missing[:5]}")
    if extra:
        problems.append(f"{len(extra)} vertices in the output that the expected output lacks, e.g. {extra[:5]}")
    common = sorted(want.keys() & got.keys())
    if algorithm == "wcc":
        label_of, seen = {}, {}
        for v in common:  # a partition: expected label <-> output label, one to one
            a, b = want[v], got[v]
            paired, back = label_of.setdefault(a, b), seen.setdefault(b, a)
            if paired != b or back != a:
                problems.append(f"vertex {v}: its component differs (expected label {a} goes with output label "
                                f"{label_of[a]}, output label {b} with expected label {seen[b]})")
                break
        return problems
    exact = value_kind(algorithm) is int
    same = (lambda x, y: x == y) if exact else _close
    bad = [v for v in common if not same(got[v], want[v])]
    if bad:
        rule = "exactly" if exact else f"within a relative error below {EPSILON:g}"
        shown = "; ".join(f"vertex {v}: {got[v]!r}, expected {want[v]!r}" for v in bad[:5])
        problems.append(f"{len(bad)} of {len(common)} values differ (LDBC's rule for {algorithm}: equal {rule}): {shown}")
    return problems


# ---- the command ----------------------------------------------------------------------------------------


def _fail(err: DatasetError) -> int:
    print(f"error: {err}" + (f"\n   = help: {err.hint}" if err.hint else ""), file=sys.stderr)
    return ExitCode.USAGE


def cmd_graphalytics(args, spark=None) -> int:
    """`scopeflow graphalytics`; `spark`: a session to run in (Python callers, tests), else one is made."""
    from scopeflow.cli import _checked
    from scopeflow.api import plan_to_module
    from scopeflow.runtime.launcher import run_with_arguments

    algorithm = args.algorithm
    output = args.output
    try:
        ds = Dataset(find_properties(args.graph))
        output = os.path.abspath(args.output or f"{ds.name}-{ALGORITHMS[algorithm][1]}")
        if os.path.isdir(output):
            raise DatasetError(f"--output {output}: is a folder", "give a file name: LDBC's output is one file")
        listed = [a.strip() for a in ds.props.get(ds.key("algorithms"), "").split(",") if a.strip()]
        expected = None
        if args.validate:
            expected = read_values(args.validate, value_kind(algorithm))  # a bad expected file is told before the run
        os.makedirs(os.path.dirname(output), exist_ok=True)
        parts = output + ".parts"
        flow = output + ".flow"
        with open(flow, "w", encoding="utf-8") as fh:
            fh.write(pipeline_text(ds, algorithm, parts))
    except DatasetError as err:
        return _fail(err)
    except OSError as err:  # the output's folder, or FILE.flow
        print(f"error: cannot write {err.filename or output}: {err.strerror or err}", file=sys.stderr)
        return ExitCode.USAGE
    if listed and algorithm not in listed:
        print(f"note: {ds.properties} lists the algorithms {', '.join(listed)}; running {algorithm} anyway",
              file=sys.stderr)
    code, plan = _checked(flow)
    if plan is None:
        return code
    code = run_with_arguments(plan_to_module(plan, flow), args, spark=spark)
    if code != ExitCode.OK:
        return code
    lines = join_parts(parts, output)
    shutil.rmtree(parts, ignore_errors=True)
    print(f"wrote {output}: {lines} vertices ({algorithm} on {ds.name}; the pipeline: {flow})")
    if expected is None:
        return ExitCode.OK
    try:
        got = read_values(output, value_kind(algorithm))
    except DatasetError as err:
        return _fail(err)
    problems = compare(algorithm, got, expected)
    if problems:
        print(f"validation failed against {args.validate}:\n" + "\n".join(f"  - {p}" for p in problems),
              file=sys.stderr)
        return ExitCode.VALIDATION
    print(f"validation: ok, {len(expected)} vertices equal {args.validate} under LDBC's rule for {algorithm}")
    return ExitCode.OK


def add_arguments(p) -> None:
    from scopeflow.runtime.arguments import add_run_arguments

    p.add_argument("graph", metavar="GRAPH", help="the data set: DIR/NAME, DIR/NAME.properties, or a folder with one")
    p.add_argument("-a", "--algorithm", required=True, choices=sorted(ALGORITHMS), help="the kernel to run")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the output file, `vertex value` per line (default NAME-ALG in the current folder, as "
                        "LDBC names expected outputs); FILE.flow gets the pipeline")
    p.add_argument("--validate", metavar="EXPECTED",
                   help="compare the output with LDBC's expected output EXPECTED under LDBC's rules (exit 6 if "
                        "they differ)")
    add_run_arguments(p)
