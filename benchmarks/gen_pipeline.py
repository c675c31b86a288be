"""Generate a large, valid synthetic .flow pipeline for the compiler benchmark.

The pipeline has ~2,000 operators (plan nodes, as counted by `scopeflow check`)
and 50 loops arranged as several nested chains (default: 5 chains of depth 6,
4 of depth 5 = 50 loops; the deepest loop is 6 levels down). Every loop body
joins its variable with an import, runs a few per-round operator chains, runs
its nested loop (if any), folds everything into a `reduce` or `distinct`, and
feeds back. Loop kinds vary: plain `loop` with `max N on max stop`, `until
empty(S)`, `rounds N`, and `coloop` with two variables of different schemas.
The program checks clean (no errors, no warnings): its two input CSVs are
written next to it.

Deterministic: the same arguments always give the same file.

    python benchmarks/gen_pipeline.py [--out benchmarks/data/big_pipeline.flow]
                                      [--operators 2000] [--depths 6,6,6,6,6,5,5,5,5]
"""
from __future__ import annotations

import argparse
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "data", "big_pipeline.flow")
DEFAULT_DEPTHS = (6, 6, 6, 6, 6, 5, 5, 5, 5)  # 50 loops

# Nodes one filler statement adds (see _filler): 4 operators.
_FILLER_NODES = 4


class Gen:
    def __init__(self, fillers_per_loop: int, seed: int = 7):
        self.rng = random.Random(seed)
        self.fillers = fillers_per_loop
        self.n_loops = 0
        self.lines: list[str] = []

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def filler(self, indent: int, prefix: str, src: str, k: int) -> str:
        """k statements of per-round operators over a stream (id: long, x: long); returns the last name."""
        cur = src
        for i in range(k):
            name = f"{prefix}_f{i}"
            c = self.rng.randint(1, 97)
            form = i % 4
            if form == 0:
                body = f"{cur} | derive(y = x * {c} + id) | where(y % 3 != {c % 3}) | select(id, x = y % 1000) | where(x >= 0)"
            elif form == 1:
                body = f"{cur} | select(id, x, z = x + {c}) | where(z > x) | derive(x = least(x, z)) | drop(z)"
            elif form == 2:
                body = f"{cur} | derive(w = if(x > {c}, x - {c}, x)) | select(id, x = w) | where(x is not null) | derive(x = abs(x))"
            else:
                body = f"{cur} | group(by id, x = min(x)) | derive(x = x + 0) | where(id >= 0) | select(id, x)"
            self.emit(indent, f"{name} = {body}")
            cur = name
        return cur

    def loop(self, indent: int, out: str, entry: str, edges: str, level: int, depth: int, chain: int) -> None:
        """`out = loop ...` with a nested chain of `depth - level` more loops inside."""
        self.n_loops += 1
        lname = f"l{chain}_{level}"
        p = f"c{chain}l{level}"
        kind = (chain + level) % 4  # 0 max/stop + reduce, 1 until empty, 2 rounds + distinct, 3 coloop
        ei = f"e{p}"
        if kind == 3:
            self.emit(indent, f"{out} = coloop {lname}(v = {entry}, q: (id: long, flag: boolean)) with ({ei} = {edges}) "
                              f"max 40 on max stop {{")
        elif kind == 1:
            self.emit(indent, f"{out} = loop {lname}(v = {entry}) with ({ei} = {edges}) until empty({p}_next) {{")
        elif kind == 2:
            self.emit(indent, f"{out} = loop {lname}(v = {entry}) with ({ei} = {edges}) rounds {3 + level} {{")
        else:
            self.emit(indent, f"{out} = loop {lname}(v = {entry}) with ({ei} = {edges}) max 50 on max stop {{")
        b = indent + 1
        self.emit(b, f"{p}_step = v | join({ei}, on v.id == {ei}.src) | select(id = {ei}.dst, x = v.x + 1)")
        cur = self.filler(b, p, f"{p}_step", self.fillers)
        if level < depth:
            inner = f"{p}_in"
            self.loop(b, inner, cur, ei, level + 1, depth, chain)
            self.emit(b, f"{p}_all = {cur} | union({inner}) | where(x >= 0)")
            cur = f"{p}_all"
        if kind == 2:
            self.emit(b, f"{p}_new = {cur} | select(id, x = x % 50) | distinct")
            self.emit(b, f"{p}_next = {p}_new | where(x < 1000)")
            self.emit(b, f"feedback v <- {p}_next")
            self.emit(b, f"emit {p}_new")
        else:
            self.emit(b, f"{p}_best = {cur} | reduce(by id, x = min(x))")
            self.emit(b, f"{p}_next = {p}_best | where(x < 1000)")
            self.emit(b, f"feedback v <- {p}_next")
            if kind == 3:
                self.emit(b, f"{p}_flags = q | join(v, on q.id == v.id, kind = semi) | select(id, flag = not flag)")
                self.emit(b, f"feedback q <- {p}_best | select(id, flag = x > 10) | union({p}_flags)")
            self.emit(b, f"emit state {p}_best")
        self.emit(indent, "}")


def generate(n_operators: int = 2000, depths=DEFAULT_DEPTHS, seed: int = 7) -> tuple[str, int]:
    """The .flow text and its number of loops."""
    n_loops = sum(depths)
    # Per loop: var, import, loop, loop_out, step (join, select), fillers, (union+where if nested),
    # reduce/distinct + select/where + feedback/emit... ~10 fixed nodes; the pipeline level ~10/chain.
    fixed = n_loops * 10 + len(depths) * 10 + 10
    fillers = max(1, round((n_operators - fixed) / (n_loops * _FILLER_NODES)))
    g = Gen(fillers, seed)
    g.emit(0, "# Generated by benchmarks/gen_pipeline.py: a synthetic pipeline for the compiler benchmark.")
    g.emit(0, "pipeline big_pipeline")
    g.emit(0, "param limit: long = 1000")
    g.emit(0, 'source edges = read csv("big_pipeline_edges.csv", header = true) schema (src: long, dst: long)')
    g.emit(0, 'source vals = read csv("big_pipeline_vals.csv", header = true) schema (id: long, x: long)')
    g.emit(0, "both = edges | union(edges | select(src = dst, dst = src)) | where(src != dst)")
    g.emit(0, "start = vals | where(x < limit) | derive(x = x % 100)")
    outs = []
    for chain, depth in enumerate(depths):
        entry = f"start{chain}"
        g.emit(0, "")
        g.emit(0, f"{entry} = start | where(id % {len(depths)} == {chain}) | select(id, x = x + {chain})")
        g.loop(0, f"res{chain}", entry, "both", 1, depth, chain)
        g.emit(0, f"out{chain} = res{chain} | group(by id, x = min(x)) | derive(chain = {chain})")
        outs.append(f"out{chain}")
    g.emit(0, "")
    g.emit(0, f"everything = {outs[0]} | union({', '.join(outs[1:])})")
    g.emit(0, "summary = everything | group(by chain, n = count(), lo = min(x), hi = max(x))")
    g.emit(0, 'sink everything -> csv("out/everything", header = true)')
    g.emit(0, 'sink summary | sort(by chain) -> csv("out/summary", header = true)')
    assert g.n_loops == n_loops
    return "\n".join(g.lines) + "\n", n_loops


def write(out: str = DEFAULT_OUT, n_operators: int = 2000, depths=DEFAULT_DEPTHS) -> str:
    text, _ = generate(n_operators, depths)
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    with open(os.path.join(folder, "big_pipeline_edges.csv"), "w", encoding="utf-8") as fh:
        fh.write("src,dst\n" + "".join(f"{i},{(i * 7 + 1) % 50}\n" for i in range(50)))
    with open(os.path.join(folder, "big_pipeline_vals.csv"), "w", encoding="utf-8") as fh:
        fh.write("id,x\n" + "".join(f"{i},{i * 3}\n" for i in range(50)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--operators", type=int, default=2000, help="approximate number of plan nodes")
    ap.add_argument("--depths", default=",".join(map(str, DEFAULT_DEPTHS)),
                    help="nesting depth of each chain of loops (their sum is the number of loops)")
    args = ap.parse_args()
    depths = tuple(int(d) for d in args.depths.split(","))
    path = write(args.out, args.operators, depths)
    print(f"wrote {path} ({sum(depths)} loops, max depth {max(depths)})")


if __name__ == "__main__":
    main()
