"""What a generated job declares about its pipeline: operator records, params, loop specs.

Plain data, built when the job's module is imported (before any Spark session):
the executor, snapshots and the run report read them.
"""
from __future__ import annotations

import enum
import os
from typing import Optional, Union

from attrs import field, frozen


class FlipType(enum.IntEnum):
    """FLIP-15's operator types, which the termination protocol reports by."""

    HEAD = 1  # a loop variable: receives the feedback
    FEEDBACK = 2  # its output is fed back: it puts records in flight
    OTHER = 3  # any other operator of the loop's scope


HEAD, FEEDBACK, OTHER = FlipType.HEAD, FlipType.FEEDBACK, FlipType.OTHER


@frozen
class Param:
    """A `param` given where a constant is expected (a loop option, a source's path): its value in this run."""

    name: str


Count = Union[int, Param]


def value_of(v, params: dict):
    """A constant as it is, a `Param` as its value in this run."""
    return params[v.name] if isinstance(v, Param) else v


@frozen
class Operator:
    """One operator of the plan: its kind, stream name and scope, its arguments and schema as text, and a
    digest of everything that determines its output (`compiler.plan.Plan.digest`)."""

    kind: str
    name: Optional[str]
    scope: str
    detail: str
    digest: str
    at: tuple = field(default=(), eq=False)  # (line, col, end col) in the .flow file; () when unknown

    def __str__(self) -> str:
        """The signature a snapshot is checked against (and names in its refusal)."""
        return f"{self.kind}{' ' + self.name if self.name else ''} [{self.scope}]: {self.detail} #{self.digest}"

    def described(self) -> str:
        """The operator as the user wrote it, for messages: source `edges`, reduce `best`, join."""
        return f"{self.kind} `{self.name}`" if self.name else self.kind


@frozen
class Source:
    """One file source, `read FORMAT(PATH, ...)`: its format, its path (a constant or a `Param`), its declared
    schema (DDL, "" for none) and its options (constants or `Param`s). What a run checks before Spark starts
    (`preflight.check_inputs`) and the inputs a snapshot is checked against."""

    format: str
    path: object
    schema: str = ""
    options: dict = field(factory=dict)

    def options_in(self, params: dict) -> dict:
        """The options' values in this run (`Param`s resolved)."""
        return {k: value_of(v, params) for k, v in self.options.items()}


@frozen
class Stream:
    """One `stream` source: `files` (the files that appear in folder `path`, each read once, in the epoch after
    it appears) or `rate` (rows made by Spark: timestamp, value). Its schema (DDL) and options (constants or
    `Param`s). Each epoch runs the pipeline over its input so far (runtime/streaming.py)."""

    format: str  # files | rate
    path: object
    schema: str = ""
    options: dict = field(factory=dict)

    def options_in(self, params: dict) -> dict:
        return {k: value_of(v, params) for k, v in self.options.items()}


def streams(module) -> dict:
    """A generated module's `stream` sources, operator id -> `Stream` (none for a batch pipeline)."""
    return dict(getattr(module, "STREAMS", {}))


def sources(module) -> dict:
    """A generated module's file sources, operator id -> `Source` (a script generated before sources were
    listed with their format has only their paths)."""
    return {op: s if isinstance(s, Source) else Source("", s) for op, s in module.SOURCES.items()}


@frozen
class Sink:
    """One `sink` statement: the operator it writes, its format, its path (a constant or a `Param`; a table's
    name; None for `console`) and options, and where its path is in the .flow file. What a run checks before
    Spark starts (`preflight.check_sinks`)."""

    op: str
    format: str
    path: object
    options: dict = field(factory=dict)
    at: tuple = field(default=(), eq=False)

    def option(self, name: str, params: dict, default=None):
        """An option's value in this run (a `Param` resolved)."""
        return value_of(self.options.get(name, default), params)


@frozen
class Emit:
    name: Optional[str]  # None: the loop's single output
    mode: str  # all | last | state
    node: str  # the emitted body operator
    ddl: str = ""  # its schema (streaming pipelines: an epoch's run over the new input only builds empty outputs)


@frozen
class Seed:
    """A join of a loop body with an import that grows (compiler/incremental.py): in the first round of an
    incremental epoch the import's new records also meet the other side's records of earlier epochs, which
    the state of `state` stands for, or, for loop variable `var`, its entries so far and `states`."""

    join: str
    imported: str
    import_left: bool = False
    state: Optional[str] = None
    var: Optional[str] = None
    states: tuple = field(default=(), converter=tuple)


@frozen
class Strategy:
    """How a loop of a streaming pipeline may be evaluated across epochs (compiler/incremental.py): incremental
    (from the previous epoch's fixpoint) or always recomputed, and why."""

    incremental: bool
    why: str
    seeds: tuple = field(default=(), converter=tuple)  # Seed
    streams: tuple = field(default=(), converter=tuple)  # the stream sources its inputs grow with
    sources: tuple = field(default=(), converter=tuple)  # the bounded file sources its inputs read
    states: tuple = field(default=(), converter=tuple)  # its reduce and distinct operators
    growing: tuple = field(default=(), converter=tuple)  # the variables whose entries grow with a stream
    # (reduce, column): `double`s a `min` keeps that reach `+`/`-`: an incremental epoch is exact while none holds
    # -Infinity (runtime/incremental.py, `negative_infinity`)
    guards: tuple = field(default=(), converter=lambda g: tuple(tuple(x) for x in g))
    wraps: str = ""  # arithmetic of ints/longs on an ordered value: recomputed when an overflow wraps (no ANSI mode)


@frozen
class LoopSpec:
    """What the executor needs to know of one loop scope (its body is the generated function)."""

    scope: str
    kind: str  # loop | coloop
    vars: dict  # variable -> DDL schema (the variable's column order)
    imports: dict  # import name -> the columns the body joins it on (its partitioning), possibly none
    feedback: dict  # variable -> the operators fed back to it
    emits: tuple = field(converter=tuple)  # Emit
    operators: dict  # operator id -> (FlipType, name): what the termination protocol reports
    max_rounds: Count = 1000
    on_max: str = "fail"
    rounds: Optional[Count] = None
    until: Optional[str] = None  # the body operator of `until empty(S)`
    snapshot_every: Optional[Count] = None
    snapshot_recompute: bool = False
    var_nodes: dict = field(factory=dict)  # variable -> its operator id
    combine: dict = field(factory=dict)  # variable -> its only reader, a reduce or distinct (`loop.combine`)
    # variable -> the reduce/distinct operators its feedback is computed from: the next round's job may compute it
    # (`loop.LoopExecutor.defers`); `late`: the operators that then run in that job (their counters count there)
    defer: dict = field(factory=dict)
    late: frozenset = field(default=frozenset(), converter=frozenset)
    strategy: Optional[Strategy] = None  # a pipeline-level loop of a streaming pipeline: how epochs evaluate it

    @property
    def incremental(self) -> bool:
        """Its result can be reached from the previous epoch's (it may still be recomputed in an epoch)."""
        return self.strategy is not None and self.strategy.incremental

    @property
    def single_output(self) -> bool:
        """One unnamed emit: the loop's value is that stream (not a dict of named outputs)."""
        return len(self.emits) == 1 and self.emits[0].name is None


def ddl_columns(ddl: str) -> list[str]:
    """The column names of a DDL schema (`id bigint, tags array<string>` -> id, tags)."""
    return [c.split()[0] for c in split_top_level(ddl)]


def split_top_level(text: str) -> list[str]:
    """Split at the commas outside any <...> or (...): DDL fields (`m map<string,long>`), parameter lists."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<("
        depth -= ch in ">)"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def located(script: str, relative: str) -> str:
    """A file named relative to the generated script `script` (its `__file__`), as an absolute path."""
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(script)), relative))
