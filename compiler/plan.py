"""The Plan IR: operators (`compiler/ops.py`) with schemas and their owning scope, typed edges, scopes,
sinks and chains. Immutable: a pass that changes a plan returns a new one (`attrs.evolve`).

Operator ids are deterministic (`n001`, `n002`, ... in definition order), so the
generated code, `explain` and the DOT graph are stable.
"""
from __future__ import annotations

import functools
import hashlib
from collections import Counter
from types import MappingProxyType
from typing import Mapping, Optional

import attrs
from attrs import field, frozen

from scopeflow.compiler import expr as X
from scopeflow.compiler import ops
from scopeflow.compiler.ops import Count, Location
from scopeflow.compiler.types import Schema
from scopeflow.dsl.ast import Span


@frozen
class LoopOptions:
    max: Count = 1000  # at most this many rounds
    on_max: str = "fail"  # fail | stop
    rounds: Optional[Count] = None  # exactly this many rounds
    until: Optional[str] = None  # `until empty(S)`: the id of body stream S
    snapshot_every: Optional[Count] = None
    snapshot_recompute: bool = False

    def text(self, plan: "Plan") -> str:
        """The options as written in .flow (`explain`, the graph)."""
        parts = []
        if self.rounds is not None:
            parts.append(f"rounds {self.rounds}")
        if self.until is not None:
            parts.append(f"until empty({plan.nodes[self.until].label()})")
        parts += [f"max {self.max}", f"on max {self.on_max}"]
        if self.snapshot_every is not None:
            parts.append(f"snapshot every {self.snapshot_every}")
        if self.snapshot_recompute:
            parts.append("snapshot recompute")
        return ", ".join(parts)


@frozen
class Emit:
    name: Optional[str]  # None for a single unnamed emit
    mode: str  # all | last | state
    node: str  # the emitted stream (a body operator)
    out: str  # the LoopOutput in the parent scope
    span: Optional[Span] = field(default=None, eq=False, repr=False)


@frozen
class Scope:
    """The pipeline or one loop: the operators it owns and, for a loop, its wiring."""

    id: str  # "pipeline", "cc", "kcore.peel" (a nested loop's id is its parent's, a dot, its name)
    kind: str  # pipeline | loop | coloop
    name: str
    parent: Optional[str]
    depth: int
    nodes: tuple[str, ...] = ()  # owned, in definition order
    children: tuple[str, ...] = ()
    options: LoopOptions = LoopOptions()
    vars: tuple[str, ...] = ()  # LoopVar ids
    imports: tuple[str, ...] = ()  # LoopImport ids
    feedback: tuple[tuple[str, str], ...] = ()  # (LoopVar id, fed-back operator id)
    emits: tuple[Emit, ...] = ()
    loop_node: Optional[str] = None  # the Loop operator in the parent scope
    span: Optional[Span] = field(default=None, eq=False, repr=False)


@frozen
class Edge:
    src: str
    dst: str
    kind: str  # data | import | entry | feedback | emit


@frozen
class Chain:
    """Consecutive operators of one scope fused into one generated function (`compiler/chains.py`)."""

    id: str
    scope: str
    nodes: tuple[str, ...]


@frozen
class Sink:
    node: str
    format: str  # csv json parquet table console
    path: Optional[Location]
    options: tuple[tuple[str, object], ...] = ()
    span: Optional[Span] = field(default=None, eq=False, repr=False)
    path_span: Optional[Span] = field(default=None, eq=False, repr=False)  # its path's (or its own) span


@frozen
class PythonModule:
    """A `use python` module: its file and its functions' signatures (name -> (arg types, return type),
    or ("bad", why) for one that cannot be called from an expression)."""

    alias: str
    path: str
    functions: Mapping[str, tuple] = field(converter=lambda d: MappingProxyType(dict(d)))


def _frozen_map(d) -> Mapping:
    return MappingProxyType(dict(d))


@frozen
class Plan:
    pipeline: str
    file: str
    nodes: Mapping[str, ops.Operator] = field(converter=_frozen_map)  # id -> operator, in definition order
    scopes: Mapping[str, Scope] = field(converter=_frozen_map)  # id -> scope, parents before children
    edges: tuple[Edge, ...] = ()
    sinks: tuple[Sink, ...] = ()
    chains: tuple[Chain, ...] = ()
    params: Mapping[str, tuple[str, object]] = field(factory=dict, converter=_frozen_map)  # name -> (type, default)
    config: Mapping[str, str] = field(factory=dict, converter=_frozen_map)
    udfs: Mapping[str, PythonModule] = field(factory=dict, converter=_frozen_map)
    streaming: bool = False

    # ---- wiring ----------------------------------------------------------------------------------

    @functools.cached_property
    def _consumers(self) -> dict:
        """Indexed once: a scan of every edge per question made chaining and codegen quadratic."""
        out: dict = {}
        for e in self.edges:
            if e.kind in ("data", "entry", "import"):
                out.setdefault(e.src, []).append(e.dst)
        return out

    def consumers(self, node_id: str) -> list[str]:
        """The operators and loops that read `node_id` (in any scope)."""
        return list(self._consumers.get(node_id, ()))

    def scope_of(self, node_id: str) -> Scope:
        return self.scopes[self.nodes[node_id].scope]

    def loop_scopes(self) -> list[Scope]:
        return [s for s in self.scopes.values() if s.kind != "pipeline"]

    def chain_of(self, node_id: str) -> Optional[Chain]:
        return self._chain_index.get(node_id)

    @functools.cached_property
    def _chain_index(self) -> dict:
        return {n: c for c in self.chains for n in c.nodes}

    def flip_type(self, node_id: str) -> str:
        """FLIP-15's operator type, by the runtime's name for it (`runtime.spec.FlipType`): HEAD (a loop
        variable), FEEDBACK (its output is fed back) or OTHER."""
        if isinstance(self.nodes[node_id], ops.LoopVar):
            return "HEAD"
        if any(src == node_id for s in self.scopes.values() for _, src in s.feedback):
            return "FEEDBACK"
        return "OTHER"

    def uses(self, node_id: str) -> int:
        """How many times a node's records are read: by operators and loops of any scope, feedback
        edges, emits, sinks and `until`."""
        return len(self._consumers.get(node_id, ())) + self._other_uses[node_id]

    @functools.cached_property
    def _other_uses(self) -> Counter:
        out: Counter = Counter()
        for s in self.scopes.values():
            out.update(src for _, src in s.feedback)
            out.update(e.node for e in s.emits)
            if s.options.until is not None:
                out[s.options.until] += 1
        out.update(s.node for s in self.sinks)
        return out

    def feedback_combiner(self, var_id: str) -> Optional[str]:
        """The `reduce` or `distinct` that may combine the records fed back to loop variable `var_id`
        before they are stored between rounds (a combiner, as in Pregel or Flink's combinable reduce).

        When that operator is the variable's only reader, the records are needed for nothing else:
        the executor runs the operator's per-round step (the reduce's aggregation by key, the
        distinct's deduplication) in the round that feeds them back, and stores its result instead
        (one record per key, partitioned like the operator's state). The operator's output is the
        same. A reduce must take the variable's columns as its keys (no computed key): it then
        receives the stored aggregates as they are."""
        consumers = self.consumers(var_id)
        if not isinstance(self.nodes[var_id], ops.LoopVar) or self.uses(var_id) != 1 or len(consumers) != 1:
            return None
        reader = self.nodes[consumers[0]]
        if reader.scope != self.nodes[var_id].scope or reader.inputs != (var_id,):
            return None
        if isinstance(reader, ops.Distinct) or (isinstance(reader, ops.Reduce) and reader.plain_keys()):
            return reader.id
        return None

    def deferred_feedback(self, scope: Scope) -> tuple[dict, tuple]:
        """The loop variables whose fed-back records the executor may leave to the next round's job to compute
        (`runtime/loop.py`, deferred feedback), and the operators that then run in that job; ({}, ()) if none.

        A round stores what the next round reads (a checkpoint per fed-back stream). A stream computed from the
        round's own stored results alone — the outputs of its `reduce`s and `distinct`s (filters on their state
        checkpoints) and the imports, never a loop variable but through one of them — can instead be handed to
        the next round as its plan: the next round's job computes it where it reads it, and the round stores one
        frame less. Its lineage still ends at this round's checkpoints, so a round's plan does not grow.

        What the executor then does not know after the round is how many records are in flight: it knows only
        that there are none when every `reduce`/`distinct` the stream is computed from (its *anchors*, each
        mapped to below) output nothing, because the stream is strict in them (empty when they are; `_anchors`).
        Otherwise it runs the next round, which counts them. When that count is zero, that round was one the loop
        would not have run: every variable empty. It must then change nothing: so every fed-back and emitted
        stream of the body must be empty when all variables are (`_strict`), and the loop has no `until` and no
        `emit last` (whose stream would be the extra round's, empty) and no nested loop; and every `reduce` and
        `distinct` of the body must receive nothing then (a `count` would count again what it received).

        The variable's one reader must be a `reduce` or `distinct` that could combine it (`feedback_combiner`):
        the plan is computed once, all of it (an aggregation reads every record, so the counters in the plan
        count every record fed back). Every operator the plan runs (below the anchors) must have one reader, in
        the plan (or be the fed-back stream, read by its feedback edge alone): those run in the next round's job
        alone, and their counters count there (`late`)."""
        nodes = self.nodes
        if (scope.kind == "pipeline" or scope.options.until is not None or any(e.mode == "last" for e in scope.emits)
                or any(isinstance(nodes[n], ops.Loop) for n in scope.nodes)):
            return {}, ()
        # (a state folds what it receives: in a round that receives nothing, each must receive nothing too)
        states = [n for n in scope.nodes if isinstance(nodes[n], (ops.Reduce, ops.Distinct))]
        outputs = [src for _, src in scope.feedback] + [e.node for e in scope.emits if e.mode == "all"] + states
        if not all(self._strict(n, scope.id, {}) for n in outputs):
            return {}, ()
        defer, late = {}, []
        for var in scope.vars:
            sources = [src for v, src in scope.feedback if v == var]
            if not sources or self.feedback_combiner(var) is None:
                continue
            anchors = [self._anchors(src, scope.id, {}) for src in sources]
            if any(a is None for a in anchors):
                continue
            region = self._late_region(sources, scope.id)
            if region is None or any(self.uses(n) != 1 for n in region):
                continue
            defer[var] = tuple(sorted(set().union(*anchors)))
            late += [n for n in scope.nodes if n in region]
        return defer, tuple(late)

    _ROW_WISE = (ops.Select, ops.Derive, ops.Drop, ops.Where, ops.Explode, ops.Top, ops.Sort, ops.Limit)

    def _passes_empty(self, n: ops.Operator) -> bool:
        """`n` outputs nothing when its (only) input is empty: a row-wise operator or a keyed group."""
        return isinstance(n, self._ROW_WISE) or (isinstance(n, ops.Group) and bool(n.keys))

    def _strict_sides(self, n: ops.Operator) -> list[int]:
        """The inputs of a join or union of which one empty (any of them) or all empty (`union`) empties it."""
        if isinstance(n, ops.Join):
            return {"inner": [0, 1], "semi": [0, 1], "left": [0], "anti": [0], "right": [1]}.get(n.how, [])
        return []

    def _strict(self, node_id: str, scope: str, memo: dict) -> bool:
        """Is `node_id` empty in a round whose loop variables are all empty?"""
        if node_id not in memo:
            memo[node_id] = False  # (no cycles within a round; a guard all the same)
            n = self.nodes[node_id]
            if n.scope != scope or isinstance(n, (ops.LoopImport, ops.Values)):
                out = False
            elif isinstance(n, ops.LoopVar):
                out = True
            elif isinstance(n, (ops.Reduce, ops.Distinct)) or self._passes_empty(n):
                out = self._strict(n.inputs[0], scope, memo)
            elif isinstance(n, ops.Union):
                out = all(self._strict(i, scope, memo) for i in n.inputs)
            else:
                out = any(self._strict(n.inputs[i], scope, memo) for i in self._strict_sides(n))
            memo[node_id] = out
        return memo[node_id]

    def _anchors(self, node_id: str, scope: str, memo: dict) -> Optional[frozenset]:
        """The `reduce`s and `distinct`s of `scope` that `node_id` is computed from, when it is empty whenever
        they output nothing and reads no loop variable but through them; None otherwise."""
        if node_id not in memo:
            memo[node_id] = None
            n = self.nodes[node_id]
            out = None
            if n.scope != scope or isinstance(n, (ops.LoopImport, ops.Values, ops.LoopVar)):
                out = None
            elif isinstance(n, (ops.Reduce, ops.Distinct)):
                out = frozenset({node_id})
            elif self._passes_empty(n):
                out = self._anchors(n.inputs[0], scope, memo)
            elif isinstance(n, ops.Union):
                sides = [self._anchors(i, scope, memo) for i in n.inputs]
                out = None if any(s is None for s in sides) else frozenset().union(*sides)
            elif isinstance(n, ops.Join) and all(self._fixed(i, scope) for i in n.inputs):
                sides = [self._anchors(n.inputs[i], scope, memo) for i in self._strict_sides(n)]
                out = next((s for s in sides if s is not None), None)
            memo[node_id] = out
        return memo[node_id]

    def _fixed(self, node_id: str, scope: str) -> bool:
        """Does `node_id` read no loop variable of `scope` but through a `reduce` or `distinct` (its records are
        known once the round's states are stored)?"""
        n = self.nodes[node_id]
        if n.scope != scope or isinstance(n, (ops.Reduce, ops.Distinct)):
            return True
        if isinstance(n, (ops.LoopVar, ops.Loop)):
            return False
        return all(self._fixed(i, scope) for i in n.inputs)

    def _late_region(self, sources: list, scope: str) -> Optional[set]:
        """The operators of `scope` a deferred plan of `sources` runs: theirs and their inputs', down to (not
        with) the `reduce`s, `distinct`s and imports. None if one of them is read by an operator outside it."""
        region, todo = set(), list(sources)
        while todo:
            n = self.nodes[todo.pop()]
            if n.id in region or n.scope != scope or isinstance(n, (ops.Reduce, ops.Distinct, ops.LoopImport)):
                continue
            region.add(n.id)
            todo += n.inputs
        if any(c not in region for n in region for c in self.consumers(n)):
            return None
        return region

    # ---- identity ----------------------------------------------------------------------------------

    def fingerprint(self) -> str:
        """A hash of everything that determines the results: operators, schemas, wiring, options."""
        doc = repr((list(self.nodes.values()), list(self.scopes.values()), self.sinks))
        return hashlib.sha256(doc.encode()).hexdigest()[:16]

    def digest(self, node_id: str) -> str:
        """A hash of everything that determines an operator's output (a loop's: its options too): a
        snapshot is refused when it changed."""
        n = self.nodes[node_id]
        extra = self.scopes[n.body].options if isinstance(n, ops.Loop) else None
        return hashlib.sha256(repr((n, extra)).encode()).hexdigest()[:8]



# ---- the plan as text (golden snapshots of lowering) ---------------------------------------------------


def plan_to_text(plan: Plan) -> str:
    """Every field of every operator, scope, chain and sink, one line each: a change to lowering shows as a
    readable diff (tests/golden/plan/). Expressions are written `fn(args):type`, columns `name:type`."""
    out = [f"plan {plan.pipeline}{' (streaming)' if plan.streaming else ''}"]
    out += [f"param {name}: {t} = {default!r}" for name, (t, default) in plan.params.items()]
    out += [f"config {k} = {v!r}" for k, v in plan.config.items()]
    out += [f"python {u.alias}: {', '.join(sorted(u.functions))}" for u in plan.udfs.values()]
    for scope in plan.scopes.values():
        out.append(f"scope {scope.id}: {_fields(scope, skip=('id', 'nodes', 'span'))}")
        out += [f"  {nid} {type(plan.nodes[nid]).__name__}({_fields(plan.nodes[nid], skip=('id', 'scope', 'span'))})"
                for nid in scope.nodes]
    out += [f"chain {c.id} [{c.scope}]: {' '.join(c.nodes)}" for c in plan.chains]
    out += [f"sink {_fields(s, skip=('span', 'path_span'))}" for s in plan.sinks]
    return "\n".join(out) + "\n"


def _fields(obj, skip=()) -> str:
    return ", ".join(f"{f.name}={_text(getattr(obj, f.name))}" for f in attrs.fields(type(obj)) if f.name not in skip)


def _text(v) -> str:
    if isinstance(v, X.TCol):
        return f"{v.side + '.' if v.side else ''}{v.name}:{v.type}"
    if isinstance(v, X.TLit):
        return f"{v.value!r}:{v.type}"
    if isinstance(v, X.TParam):
        return f"${v.name}:{v.type}"
    if isinstance(v, X.TCall):
        extra = f"[{v.extra[0]}.{v.extra[1]}]" if v.extra else ""
        return f"{v.fn}{extra}({', '.join(_text(a) for a in v.args)}):{v.type}"
    if isinstance(v, (Schema, ops.ParamRef, ops.Path)):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_text(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if attrs.has(type(v)):
        return f"{type(v).__name__}({_fields(v, skip=('span',))})"
    return repr(v)
