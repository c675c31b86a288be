"""The Plan IR: operators with schemas and owning scope, typed edges, scopes, chains.

Node ids are deterministic (`n001`, `n002`, ... in definition order), so the
generated code, `explain` and the DOT graph are stable.
"""
from __future__ import annotations

import hashlib
import json
from typing import Optional

from attrs import define, field

from scopeflow.compiler.types import Schema
from scopeflow.dsl.ast import Span

# Operators that exist once per round inside a loop and can be fused into chains.
PER_ROUND = ("select", "derive", "drop", "where", "explode", "union", "join", "group", "apply")
STATEFUL = ("reduce", "distinct")
# FLIP-15 operator types for the termination protocol.
TYPE_HEAD, TYPE_FEEDBACK, TYPE_OTHER = 1, 2, 3


@define
class Node:
    id: str
    op: str  # source values var import select derive drop where explode union join group reduce distinct apply sort limit loop loop_out
    scope: str
    inputs: list[str]
    schema: Schema
    args: dict = field(factory=dict)
    name: Optional[str] = None  # the user's stream name, when the node ends a definition
    span: Optional[Span] = None
    chain: Optional[str] = None

    def label(self) -> str:
        return self.name or f"{self.op}#{self.id}"


@define
class EmitInfo:
    name: Optional[str]  # None for a single unnamed emit
    mode: str  # all | last | state
    node: str  # the emitted stream (body node)
    out: str = ""  # the loop_out node in the parent scope
    span: Optional[Span] = None


@define
class Scope:
    id: str
    kind: str  # pipeline | loop | coloop
    name: str
    parent: Optional[str]
    depth: int
    options: dict = field(factory=dict)
    vars: list[str] = field(factory=list)  # var node ids (loop heads)
    imports: list[str] = field(factory=list)  # import node ids
    feedback: list[tuple[str, str]] = field(factory=list)  # (var node id, source node id)
    emits: list[EmitInfo] = field(factory=list)
    loop_node: Optional[str] = None  # the `loop` node in the parent scope
    nodes: list[str] = field(factory=list)  # nodes owned, in definition order
    children: list[str] = field(factory=list)
    span: Optional[Span] = None


@define
class Edge:
    src: str
    dst: str
    kind: str  # data | import | entry | feedback | emit


@define
class Chain:
    id: str
    scope: str
    nodes: list[str]


@define
class Sink:
    node: str
    format: str
    args: dict
    span: Optional[Span] = None


@define
class Plan:
    pipeline: str
    file: str
    params: dict = field(factory=dict)  # name -> (type, default)
    config: dict = field(factory=dict)
    udfs: dict = field(factory=dict)  # alias -> {"path": abs path, "functions": {name: (arg types, ret)}, "line": n}
    nodes: dict = field(factory=dict)  # id -> Node, in definition order
    scopes: dict = field(factory=dict)  # id -> Scope
    edges: list[Edge] = field(factory=list)
    chains: list[Chain] = field(factory=list)
    sinks: list[Sink] = field(factory=list)
    streaming: bool = False

    def consumers(self, node_id: str) -> list[str]:
        return [e.dst for e in self.edges if e.src == node_id and e.kind in ("data", "entry", "import")]

    def scope_of(self, node_id: str) -> Scope:
        return self.scopes[self.nodes[node_id].scope]

    def loop_scopes(self) -> list[Scope]:
        return [s for s in self.scopes.values() if s.kind != "pipeline"]

    def op_type(self, node_id: str) -> int:
        """FLIP-15 operator type: 1 loop head, 2 feeds back, 3 any other."""
        node = self.nodes[node_id]
        if node.op == "var":
            return TYPE_HEAD
        if any(src == node_id for s in self.scopes.values() for _, src in s.feedback):
            return TYPE_FEEDBACK
        return TYPE_OTHER

    def uses(self, node_id: str) -> int:
        """How many times a node's records are read: by operators and loops of any scope, feedback
        edges, emits, sinks and `until`."""
        n = len(self.consumers(node_id))
        n += sum(1 for s in self.scopes.values() for _, src in s.feedback if src == node_id)
        n += sum(1 for s in self.scopes.values() for em in s.emits if em.node == node_id)
        n += sum(1 for s in self.sinks if s.node == node_id)
        n += sum(1 for s in self.scopes.values() if s.options.get("until") == node_id)
        return n

    def feedback_combiner(self, var_id: str) -> Optional[str]:
        """The `reduce` or `distinct` that may combine the records fed back to loop variable `var_id`
        before they are stored between rounds (a combiner, as in Pregel or Flink's combinable reduce).

        When that operator is the variable's only reader, the records are needed for nothing else:
        the executor runs the operator's per-round step (the reduce's aggregation by key, the
        distinct's deduplication) in the round that feeds them back, and stores its result instead
        (one record per key, partitioned like the operator's state). The operator's output is the
        same. A reduce must take the variable's columns as its keys (no computed key): it then
        receives the stored aggregates as they are."""
        from scopeflow.compiler import expr as X

        var = self.nodes[var_id]
        consumers = self.consumers(var_id)
        if var.op != "var" or self.uses(var_id) != 1 or len(consumers) != 1:
            return None
        op = self.nodes[consumers[0]]
        if op.scope != var.scope or op.inputs != [var_id]:
            return None
        if op.op == "distinct":
            return op.id
        if op.op == "reduce" and all(isinstance(t, X.TCol) and t.name == n for n, t in op.args["keys"]):
            return op.id
        return None

    def fingerprint(self) -> str:
        """A hash of everything that determines the results: operators, schemas, wiring, options."""
        doc = {
            "nodes": [[n.id, n.op, n.scope, n.inputs, str(n.schema), repr(sorted(n.args.items(), key=str))]
                      for n in self.nodes.values()],
            "scopes": [[s.id, s.kind, sorted(s.options.items(), key=str), s.feedback,
                        [(e.name, e.mode, e.node) for e in s.emits]] for s in self.scopes.values()],
            "sinks": [[s.node, s.format, sorted(s.args.items(), key=str)] for s in self.sinks],
        }
        return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()[:16]
