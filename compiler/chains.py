"""Chains: maximal runs of per-round operators of one scope that are fused into one function.

A chain never crosses a scope boundary (loop entry, feedback edge, emit): loop
heads, imports, loops and loop outputs are never chained. `reduce` and
`distinct` end a chain (their output is state, materialised per round), and a
`join` starts one (it is a shuffle boundary with two inputs). An operator whose
output feeds several consumers ends its chain, so nothing is computed twice.
"""
from __future__ import annotations

from collections import Counter

from scopeflow.compiler.plan import Chain, Plan

CHAINABLE = ("select", "derive", "drop", "where", "explode", "union", "join", "group", "reduce", "distinct", "apply",
             "sort", "limit")
ENDS_CHAIN = ("reduce", "distinct")
STARTS_CHAIN = ("join",)
DEFAULT_MAX_CHAIN = 8


def build_chains(plan: Plan, max_length: int = DEFAULT_MAX_CHAIN) -> Plan:
    chain_of: dict[str, Chain] = {}
    feedback_sources = {src for s in plan.scopes.values() for _, src in s.feedback}
    # Indexed once: `plan.consumers(id)` and `_named_and_reused` scan every edge / emit per call,
    # which made chaining quadratic in the plan size.
    n_consumers = Counter(e.src for e in plan.edges if e.kind in ("data", "entry", "import"))
    materialised = _emitted_or_sunk(plan)
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
            and n_consumers[prev.id] == 1
            and prev.id not in materialised
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


def _emitted_or_sunk(plan: Plan) -> set:
    """Emitted or sunk streams are materialisation points: each ends its chain."""
    return {e.node for s in plan.scopes.values() for e in s.emits} | {s.node for s in plan.sinks}
