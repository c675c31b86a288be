"""Chains: maximal runs of per-round operators of one scope that are fused into one function.

A chain never crosses a scope boundary (loop entry, feedback edge, emit): loop
heads, imports, loops and loop outputs are never chained. `reduce` and
`distinct` end a chain (their output is state, materialised per round), and a
`join` starts one (it is a shuffle boundary with two inputs). An operator whose
output feeds several consumers ends its chain, so nothing is computed twice.
"""
from __future__ import annotations

from scopeflow.compiler.plan import Chain, Plan

CHAINABLE = ("select", "derive", "drop", "where", "explode", "union", "join", "group", "reduce", "distinct", "apply",
             "sort", "limit")
ENDS_CHAIN = ("reduce", "distinct")
STARTS_CHAIN = ("join",)
DEFAULT_MAX_CHAIN = 8


def build_chains(plan: Plan, max_length: int = DEFAULT_MAX_CHAIN) -> Plan:
    chain_of: dict[str, Chain] = {}
    feedback_sources = {src for s in plan.scopes.values() for _, src in s.feedback}
    for node in plan.nodes.values():
        if node.op not in CHAINABLE:
            continue
        prev = plan.nodes.get(node.inputs[0]) if node.inputs else None
        chain = chain_of.get(prev.id) if prev is not None else None
        fusable = (
            chain is not None
            and chain.nodes[-1] == prev.id
            and prev.scope == node.scope
            and prev.op not in ENDS_CHAIN
            and node.op not in STARTS_CHAIN
            and prev.id not in feedback_sources
            and len(plan.consumers(prev.id)) == 1
            and not _named_and_reused(plan, prev.id)
            and len(chain.nodes) < max_length
        )
        if fusable:
            chain.nodes.append(node.id)
        else:
            chain = Chain(f"c{len(plan.chains) + 1:02d}", node.scope, [node.id])
            plan.chains.append(chain)
        chain_of[node.id] = chain
        node.chain = chain.id
    return plan


def _named_and_reused(plan: Plan, node_id: str) -> bool:
    """An emitted or sunk stream is a materialisation point: it ends its chain."""
    if any(e.node == node_id for s in plan.scopes.values() for e in s.emits):
        return True
    return any(s.node == node_id for s in plan.sinks)
