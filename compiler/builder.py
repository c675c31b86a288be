"""The plan under construction: lowering adds operators, scopes, edges and sinks here, then `freeze()`
makes the immutable `Plan` (`compiler/plan.py`)."""
from __future__ import annotations

from typing import Optional

import attrs
from attrs import define, field

from scopeflow.compiler import ops
from scopeflow.compiler.plan import Edge, Emit, LoopOptions, Plan, PythonModule, Scope, Sink
from scopeflow.compiler.types import Schema
from scopeflow.dsl.ast import Span


@define
class ScopeDraft:
    id: str
    kind: str
    name: str
    parent: Optional[str]
    depth: int
    span: Optional[Span] = None
    nodes: list = field(factory=list)
    children: list = field(factory=list)
    options: LoopOptions = LoopOptions()
    vars: list = field(factory=list)
    imports: list = field(factory=list)
    feedback: list = field(factory=list)
    emits: list = field(factory=list)  # Emit
    loop_node: Optional[str] = None

    def freeze(self) -> Scope:
        return Scope(self.id, self.kind, self.name, self.parent, self.depth, tuple(self.nodes), tuple(self.children),
                     self.options, tuple(self.vars), tuple(self.imports), tuple(self.feedback), tuple(self.emits),
                     self.loop_node, self.span)


@define
class PlanBuilder:
    pipeline: str
    file: str
    nodes: dict = field(factory=dict)
    scopes: dict = field(factory=dict)  # id -> ScopeDraft
    edges: list = field(factory=list)
    sinks: list = field(factory=list)
    streaming: bool = False

    def __attrs_post_init__(self):
        self.scopes["pipeline"] = ScopeDraft("pipeline", "pipeline", self.pipeline, None, 0)

    def add(self, cls: type[ops.Operator], scope: str, inputs, schema: Schema, span: Optional[Span],
            name: Optional[str] = None, edge_kind: str = "data", **args) -> str:
        """Add an operator of class `cls` owned by `scope`, reading `inputs`; return its id."""
        nid = f"n{len(self.nodes) + 1:03d}"
        self.nodes[nid] = cls(id=nid, scope=scope, inputs=tuple(inputs), schema=schema.unqualified(), name=name,
                              span=span, **args)
        self.scopes[scope].nodes.append(nid)
        for i in inputs:
            self.edge(i, nid, edge_kind)
        return nid

    def edge(self, src: str, dst: str, kind: str) -> None:
        self.edges.append(Edge(src, dst, kind))

    def rename(self, nid: str, name: str) -> None:
        self.nodes[nid] = attrs.evolve(self.nodes[nid], name=name)

    def add_scope(self, draft: ScopeDraft) -> None:
        self.scopes[draft.id] = draft
        self.scopes[draft.parent].children.append(draft.id)

    def add_emit(self, scope: str, emit: Emit) -> None:
        self.scopes[scope].emits.append(emit)

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def freeze(self, params: dict, config: dict, udfs: dict[str, PythonModule]) -> Plan:
        return Plan(self.pipeline, self.file, self.nodes, {k: s.freeze() for k, s in self.scopes.items()},
                    tuple(self.edges), tuple(self.sinks), (), params, config, udfs, self.streaming)
