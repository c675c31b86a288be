"""The chains pass: maximal runs of per-round operators of one scope, fused into one generated function.

A chain never crosses a scope boundary (loop entry, feedback edge, emit): loop
heads, imports, loops and loop outputs are never chained. A stateful operator
(`reduce`, `distinct`) ends a chain (its output is state, materialised per round),
and a `join` starts one (it is a shuffle boundary with two inputs). An operator
whose output is read by anything else than the next one ends its chain, so
nothing is computed twice and what a round returns is bound to a name.
"""
from __future__ import annotations

import attrs

from scopeflow.compiler.plan import Chain, Plan

MAX_CHAIN = 8  # operators per chain at most: a generated function stays readable


def build_chains(plan: Plan, diagnostics: list) -> Plan:
    chains: list[list] = []  # [chain id, scope, node ids]
    chain_of: dict[str, list] = {}
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
            # read by this operator alone: not fed back, emitted, sunk or watched by `until`, which take
            # what a round or the pipeline returns (`Plan.uses` counts them all)
            and plan.uses(prev.id) == 1
            and len(chain[2]) < MAX_CHAIN
        )
        if fusable:
            chain[2].append(node.id)
        else:
            chain = [f"c{len(chains) + 1:02d}", node.scope, [node.id]]
            chains.append(chain)
        chain_of[node.id] = chain
    return attrs.evolve(plan, chains=tuple(Chain(cid, scope, tuple(nodes)) for cid, scope, nodes in chains))
