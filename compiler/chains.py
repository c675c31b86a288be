"""The chains pass: maximal runs of per-round operators of one scope, fused into one generated function.

A chain never crosses a scope boundary (loop entry, feedback edge, emit): loop
heads, imports, loops and loop outputs are never chained. A stateful operator
(`reduce`, `distinct`) ends a chain (its output is state, materialised per round),
and a `join` starts one (it is a shuffle boundary with two inputs). An operator
whose output feeds several consumers ends its chain, so nothing is computed twice.
"""
from __future__ import annotations

import attrs

from scopeflow.compiler.plan import Chain, Plan

MAX_CHAIN = 8  # operators per chain at most: a generated function stays readable


def build_chains(plan: Plan, diagnostics: list) -> Plan:
    chains: list[list] = []  # [chain id, scope, node ids]
    chain_of: dict[str, list] = {}
    feedback_sources = {src for s in plan.scopes.values() for _, src in s.feedback}
    # emitted, sunk and `until` streams are what a round or the pipeline returns: each ends its chain
    materialised = {e.node for s in plan.scopes.values() for e in s.emits} | {s.node for s in plan.sinks}
    materialised |= {s.options.until for s in plan.scopes.values() if s.options.until is not None}
    for node in plan.nodes.values():
        if not node.chainable:
            continue
        prev = plan.nodes.get(node.inputs[0]) if node.inputs else None
        chain = chain_of.get(prev.id) if prev is not None else None
        fusable = (
            chain is not None
            and chain[2][-1] == prev.id
            and prev.scope == node.scope
            and not prev.stateful
            and not node.starts_chain
            and prev.id not in feedback_sources
            and len(plan.consumers(prev.id)) == 1
            and prev.id not in materialised
            and len(chain[2]) < MAX_CHAIN
        )
        if fusable:
            chain[2].append(node.id)
        else:
            chain = [f"c{len(chains) + 1:02d}", node.scope, [node.id]]
            chains.append(chain)
        chain_of[node.id] = chain
    return attrs.evolve(plan, chains=tuple(Chain(cid, scope, tuple(nodes)) for cid, scope, nodes in chains))
