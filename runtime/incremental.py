"""Incremental loops across the epochs of a streaming pipeline (docs/language.md#incremental-loops).

The compiler marks a loop incremental when its result is the least fixpoint of a monotone body over inputs
that only grow (compiler/incremental.py, `Strategy`). Such a loop need not start from nothing each epoch: the
previous epoch's fixpoint is right for the input it saw, and only what the new records can change is missing.
An incremental epoch of the loop therefore

1. starts every `reduce`/`distinct` from its state at the end of the previous epoch (kept in the checkpoint
   with that epoch, `LoopStates`, and read back as the next epoch's start);
2. gives round 0 only the entries' new records, computed by running the pipeline over the epoch's new input
   alone (`DeltaRun`: the compiler allowed only operators whose new records come from new input alone);
3. joins the imports' new records, in round 0, with what the other side of each join held in earlier epochs
   (`Seed`: a state, or a variable's entries so far and the states that feed it back), so that what they would
   have met, had they been there all along, goes around the loop too;

then runs rounds as in batch until nothing is in flight. The result equals the batch result over all input so
far (the streaming contract): every value in the states it starts from is reachable from today's input, and
every derivation the previous fixpoint lacks uses a new record, which round 0 brings in.

Whether an epoch uses this is decided per loop and epoch (`EpochLoops.decide`): never without a state of the
previous epoch, never when a bounded source it reads changed (or is not on this machine's file system, where
its changes cannot be seen), and not when the epoch adds more than
`spark.scopeflow.incremental.maxChange` (a fraction, default `DEFAULT_MAX_CHANGE`) to the loop's input so far:
then recomputing from nothing is as cheap (benchmarks/RESULTS.md). `spark.scopeflow.incremental` = `auto`
(that rule), `off` (always recompute) or `always` (whenever there is a state, whatever the epoch adds).
"""
from __future__ import annotations

import os
from typing import Optional

import attrs
from attrs import define, field, frozen
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import failures
from scopeflow.runtime.arguments import read_setting
from scopeflow.runtime.context import RunContext
from scopeflow.runtime.parallelism import Parallelism
from scopeflow.runtime.round import Pieces, union_all
from scopeflow.runtime.sinks import fault
from scopeflow.runtime.spec import LoopSpec, ddl_columns, value_of
from scopeflow.runtime.spec import sources as file_sources
from scopeflow.stdlib.inputs import matches
from scopeflow.stdlib.paths import local_path
from scopeflow.stdlib.settings import INCREMENTAL, INCREMENTAL_MAX_CHANGE, INCREMENTAL_STATE_EVERY

# measured (benchmarks/RESULTS.md, "Where incremental stops paying"): connected components over 10^6 edges, an
# epoch adding 20 % costs 0.6 of a recompute incrementally, one adding 50 % about as much
DEFAULT_MAX_CHANGE = 0.25
# an incremental loop's states are written to the checkpoint at most this many epochs apart
# (`spark.scopeflow.incremental.stateEvery`); an epoch after a restart starts from the last ones written
DEFAULT_STATE_EVERY = 10
BROADCAST_ROWS = 100_000  # an epoch's new import records up to this many are broadcast to meet the history
MERGE_SHARE = 0.1  # a growing import's newer piece joins its base piece once it holds this share of its rows
ANSI = "spark.sql.ansi.enabled"  # on (Spark 4's default), an integer overflow fails the run; off, it wraps around
INFINITY_WHY = ("`-Infinity + Infinity` is NaN, which Spark orders above every number, so values an earlier "
                "epoch pushed can keep a result that a run over all input does not; every later epoch recomputes "
                "it too, as the state keeps -Infinity")


@frozen
class Decision:
    """How one epoch evaluates one loop, and why (the epoch's report and progress line say it)."""

    strategy: str  # incremental | recomputed
    why: str
    unchanged: bool = False  # incremental, and no new input reaches the loop: no round runs
    new_rows: int = 0  # the new records of the streams the loop reads
    rows: int = 0  # their records so far, this epoch's included
    sources: dict = field(factory=dict)  # the bounded sources' fingerprints, taken before the epoch read them
    since: Optional[int] = None  # incremental: the epoch whose fixpoint it starts from (`new_rows` came after it)


@define
class Carry:
    """What a loop's last epoch left in this process for the next one: its states (op -> `KeyedState.carried`:
    records, rows and the frames that hold them) and its growing imports, prepared (import -> `Pieces`)."""

    epoch: int
    states: dict
    pieces: dict
    rows: dict = field(factory=dict)  # import -> (rows of the streams in its base piece, in its newer piece)
    partitions: Optional[int] = None  # the partitions its states and pieces are in (`Start.partitions`)
    sources: dict = field(factory=dict)  # the bounded sources' fingerprints its fixpoint is over (`Decision`)
    strategy: str = "incremental"  # how its epoch ran it
    checked: bool = False  # its guarded states were found to hold no -Infinity (`negative_infinity`)


@define
class Start:
    """How an epoch starts one incremental-capable loop (`RunContext.loop`)."""

    owner: "EpochLoops"
    decision: Decision
    # op -> (its state at the end of the previous epoch, by key; its rows[; its frames, from this process])
    states: dict = field(factory=dict)
    entries: dict = field(factory=dict)  # variable -> the entry's new records
    new_imports: dict = field(factory=dict)  # import -> its new records
    carried: dict = field(factory=dict)  # growing import -> its `Pieces` of the previous epoch, in this process
    carried_rows: dict = field(factory=dict)  # growing import -> `Carry.rows` of the previous epoch
    pieces: dict = field(factory=dict)  # growing import -> the `Pieces` this epoch's loop read
    rows: dict = field(factory=dict)  # growing import -> `Carry.rows` after this epoch
    keys: dict = field(factory=dict)  # op -> its state's key columns
    kept_in: Optional[int] = None  # the partitions `states` and `carried` are in (None: states read back, in none)
    floor: Optional[int] = None  # the partitions the loop's last epoch ran in: an epoch never runs in fewer
    partitions: Optional[int] = None  # the partitions this epoch's loop runs in (`partitioned`)
    holds: Optional[str] = None  # the guarded state that holds -Infinity after the epoch (`negative_infinity`)
    checked: bool = False  # `holds` was looked for after the epoch
    clean: set = field(factory=set)  # ids of the frames of `states` known to hold no -Infinity (`Carry.checked`)

    @property
    def incremental(self) -> bool:
        return self.decision.strategy == "incremental"

    @property
    def unchanged(self) -> bool:
        return self.decision.unchanged

    def seeds(self, spec: LoopSpec, entries: dict) -> dict:
        """Round 0's seeded joins (`Round.join`): join -> (the other side's history, the import's new
        records, the import is the left side). `entries`: the variables' entries so far."""
        out = {}
        for seed in spec.strategy.seeds:
            if seed.state is not None:
                history = self.states[seed.state][0]
            else:
                columns = ddl_columns(spec.vars[seed.var])
                parts = [self.states[s][0].select(*columns) for s in seed.states]
                if entries.get(seed.var) is not None:
                    parts.insert(0, entries[seed.var].select(*columns))
                if not parts:
                    continue
                history = union_all(parts)
            new = self.new_imports[seed.imported]
            if self.decision.new_rows <= BROADCAST_ROWS:  # few: joined without a sort or shuffle of the history
                new = F.broadcast(new)
            out[seed.join] = (history, new, seed.import_left)
        return out

    def outputs(self, spec: LoopSpec) -> dict:
        """The loop's outputs (by emit name) when no round runs: its emitted states as they were."""
        return {e.name: self.states[e.node][0] for e in spec.emits}

    def parallelism(self, chosen: Parallelism, slots: Optional[int], full: int) -> Parallelism:
        """The partitions this epoch's loop runs in, given those its input so far would be given (`chosen`,
        runtime/parallelism.py), the tasks Spark runs at once (`slots`) and the session's count (`full`).

        - At least `slots` (up to `full`): the states a streaming loop carries grow with the stream, and the
          stream's stored input is Parquet, whose estimate (compressed) is below what the same records weigh as
          CSV: measured, a 100,000-edge stream was estimated into one partition, leaving a core idle in every
          round (benchmarks/RESULTS.md).
        - An incremental epoch keeps the count its states and imports' pieces are in unless its input outgrew
          it: a count that changes costs a shuffle of the states and the imports (`partitioned`), and one that
          followed every epoch's size would shuffle them back and forth, so it only grows (within `full`).

        A pinned count (`spark.scopeflow.loopPartitions`) or an unknown size gives `chosen` as it is."""
        if chosen.input_bytes is None:
            return chosen
        kept = min(self.floor, full) if self.incremental and self.floor else None
        least = max(1, min(slots or 1, full))
        n = max(chosen.partitions, least, kept or 0)
        if kept is not None and chosen.partitions > kept:
            why = f"its input so far outgrew the {kept} partitions its states and imports were kept in: {chosen.why}"
        elif kept is not None and n == kept:
            why = f"its states and imports carry across epochs in {kept} partitions (its input so far: {chosen.why})"
        elif n > chosen.partitions:
            why = (f"at least the {least} tasks Spark runs at once, as every loop that carries its states across "
                   f"epochs (its input so far: {chosen.why})")
        else:
            return chosen
        return Parallelism(n, why, chosen.input_bytes)

    def carried_frames(self) -> set:
        """The ids of the frames of `states` that the previous epoch left in this process (not read back)."""
        return {id(df) for held in self.states.values() if len(held) > 2 for df in _frames(held)}

    def redone(self, held: str, resumed: bool = False) -> None:
        """The epoch's incremental run left -Infinity in a state it guards: it runs again from nothing (`resumed`:
        it did, and was resumed from its snapshot after a restart)."""
        self.decision = attrs.evolve(
            self.decision, strategy="recomputed", unchanged=False, since=None,
            why=f"run incrementally, it left -Infinity in {held}, so it ran again from nothing"
                f"{' (resumed from its snapshot)' if resumed else ''}: {INFINITY_WHY}")

    def partitioned(self, run: RunContext, partitions: int) -> None:
        """Put the states an incremental epoch starts from in the partitions the loop runs in (by their keys, as a
        state is between rounds): states read back from the checkpoint always; states and imports' pieces kept in
        this process when their count is another (the imports are then prepared again, in one piece)."""
        self.partitions = partitions
        if not self.incremental or self.kept_in == partitions:
            return
        self.states = {op: (run.share(st[0].repartition(partitions, *self.keys[op]), op), st[1])
                       for op, st in self.states.items()}
        self.carried, self.carried_rows, self.kept_in = {}, {}, partitions


class _Captured(Exception):
    """Every loop whose new inputs were wanted has them: the rest of the pipeline need not be built."""


class DeltaRun(RunContext):
    """The pipeline built over the epoch's new records only (`stream` sources give their new part), up to the
    loops that run incrementally: what their entries and imports gain in this epoch. Nothing runs: the frames
    are lazy, loops are not run (an output is empty), sinks write nothing and nothing is cached."""

    def __init__(self, spark, module, params: dict, base_dir: str, new: dict, wanted: set):
        super().__init__(spark, module, params, base_dir=base_dir)
        self.module = module
        self.new = new
        self.wanted = set(wanted)
        self.captured: dict = {}  # loop scope -> (entries, imports)

    def capture(self) -> dict:
        if self.wanted:
            try:
                self.module.pipeline(self)
            except _Captured:
                pass
        return self.captured

    def stream(self, op: str) -> DataFrame:
        return self.new[op]

    def share(self, df: DataFrame, op: str) -> DataFrame:
        return df

    def count(self, df: DataFrame, op: str, same_as: Optional[str] = None) -> DataFrame:
        return df

    def loop(self, spec: LoopSpec, body, entries: dict, imports: dict):
        if spec.scope in self.wanted:
            self.captured[spec.scope] = (entries, imports)
            if set(self.captured) == self.wanted:
                raise _Captured()
        outs = {e.name: self.spark.createDataFrame([], e.ddl) for e in spec.emits}
        return outs[None] if spec.single_output else outs

    def sink(self, *args, **kwargs) -> None:
        return None


def loop_specs(module) -> list[LoopSpec]:
    """The pipeline-level loops of a streaming pipeline that have a strategy (in definition order)."""
    return [v for v in vars(module).values() if isinstance(v, LoopSpec) and v.strategy is not None]


def wrapping(spark) -> bool:
    """Does an integer overflow wrap around in this session (`spark.sql.ansi.enabled=false`) instead of failing?"""
    return str(spark.conf.get(ANSI)).strip().lower() == "false"


def settings(spark) -> tuple[str, float]:
    """`spark.scopeflow.incremental` and `spark.scopeflow.incremental.maxChange` (checked: `--conf` checks them
    before Spark starts, this a value set otherwise)."""
    return (read_setting(spark, INCREMENTAL, "auto").strip().lower(),
            read_setting(spark, INCREMENTAL_MAX_CHANGE, DEFAULT_MAX_CHANGE, float))


def state_every(spark) -> int:
    """`spark.scopeflow.incremental.stateEvery`: at most this many epochs between two writes of an incremental
    loop's states."""
    return read_setting(spark, INCREMENTAL_STATE_EVERY, DEFAULT_STATE_EVERY, int)


def part_epoch(part: dict) -> int:
    """The epoch a stream's part was written by (`e<epoch>`: that epoch's records; `c<epoch>`: a compaction
    of every part up to it)."""
    return int(part["name"][1:])


def merged(part: dict) -> bool:
    """Does a stream's part hold the records of several epochs (a compaction)?"""
    return not part["name"].startswith("e")


def parts_since(last: Optional[dict], new_parts: dict, ops, since: int) -> dict:
    """op -> the parts that hold exactly stream `op`'s records of the epochs after `since`, this one's (`new_parts`)
    included; None for a stream whose parts after `since` include a compaction, which holds older records too."""
    out = {}
    for op in ops:
        before = last["sources"][op]["parts"] if last is not None and op in last["sources"] else []
        after = [p for p in before if part_epoch(p) > since]
        out[op] = None if any(merged(p) for p in after) else \
            after + ([new_parts[op]] if new_parts.get(op) else [])
    return out


def bounded_fingerprint(path: str) -> Optional[dict]:
    """What tells a bounded source changed between epochs: the names, sizes and modification times of the files
    it reads (a folder's, a glob's matches; a stat each, no read). None for a path not on this machine's file
    system, whose changes it cannot see."""
    local = local_path(path)
    if local is None:
        return None
    files = []
    for found in matches(local):
        if os.path.isfile(found):
            files.append(found)
        else:
            files += sorted(os.path.join(d, f) for d, _, names in os.walk(found) for f in names
                            if not f.startswith((".", "_")))
    top = os.path.dirname(local)
    return {"path": path, "files": [[os.path.relpath(f, top), os.path.getsize(f), os.stat(f).st_mtime_ns]
                                    for f in files]}


class EpochLoops:
    """The incremental-capable loops of one streaming run: what each epoch decides for them, how it starts them,
    and what they leave for the next epoch: their states, in the checkpoint (`EpochStore`) and, with their
    growing imports, in this process (`Carry`), so that an epoch after another in the same run reads neither
    back."""

    def __init__(self, spark, module, params: dict, base_dir: str, store):
        self.spark = spark
        self.module = module
        self.params = params
        self.base_dir = base_dir
        self.store = store  # streaming.EpochStore
        self.strategies = {s.scope: s.strategy for s in loop_specs(module)}  # every pipeline-level loop's
        self.specs = {s.scope: s for s in loop_specs(module) if s.incremental}
        self.sources = file_sources(module)
        self.carried: dict = {}  # scope -> Carry of the last committed epoch
        self.pending: dict = {}  # scope -> Carry of the epoch running, once its loops ran (`keep`)
        self.made: list = []  # the import pieces the epoch running prepared

    # -- deciding --------------------------------------------------------------------------------------

    def decisions(self, last: Optional[dict], sources: dict, new: dict) -> dict:
        """How an epoch evaluates each pipeline-level loop (scope -> Decision)."""
        out = {scope: Decision("recomputed", s.why) for scope, s in self.strategies.items() if not s.incremental}
        out.update({scope: self.decide(spec, last, sources, new) for scope, spec in self.specs.items()})
        return out

    def decide(self, spec: LoopSpec, last: Optional[dict], sources: dict, new_parts: dict) -> Decision:
        """How an epoch evaluates incremental-capable loop `spec`, given the last committed epoch's manifest,
        the streams' state after this epoch's input (`sources`) and the parts of their new records."""
        strategy = spec.strategy
        mode, limit = settings(self.spark)
        new = sum(new_parts[op]["rows"] for op in strategy.streams if new_parts.get(op))
        rows = sum(sources[op]["rows"] for op in strategy.streams)  # (this epoch's included)

        prints = {op: self.fingerprint(op) for op in strategy.sources}

        def recomputed(why: str) -> Decision:
            return Decision("recomputed", why, new_rows=new, rows=rows, sources=prints)

        if mode == "off":
            return recomputed(f"incremental evaluation is off ({INCREMENTAL}=off)")
        unseen = [op for op, p in prints.items() if p is None]
        if unseen:
            return recomputed(f"{self._describe(unseen[0])} is not on this machine's file system: whether it "
                              "changed since the last epoch scopeflow cannot see")
        before = (last or {}).get("loops", {}).get(spec.scope)
        if before is None:
            return recomputed("no fixpoint of an earlier epoch to start from" if last is None else
                              f"epoch {last['epoch']} left no fixpoint of this loop to start from")
        changed = [op for op in strategy.sources if before.get("sources", {}).get(op) != prints[op]]
        if changed:
            return recomputed(f"{self._describe(changed[0])} changed since epoch {before['epoch']}: the fixpoint "
                              "it left is over the old input")
        since = self.since(spec.scope, last)
        if since < last["epoch"]:  # (after a restart: the states last written, and every record after them)
            parts = parts_since(last, new_parts, strategy.streams, since)
            merged = [op for op in strategy.streams if parts[op] is None]
            if merged:
                return recomputed(f"its fixpoint in the checkpoint is epoch {since}'s, and the stored input of "
                                  f"{self._describe(merged[0])} was compacted since: its records after epoch "
                                  f"{since} are no longer apart from the older ones")
            new = sum(p["rows"] for op in strategy.streams for p in parts[op])
        if strategy.wraps and before.get("wrapped") and not wrapping(self.spark):  # (even with no new input)
            return recomputed(f"epoch {before['epoch']}'s fixpoint was computed with {ANSI}=false, where an "
                              f"overflow of {strategy.wraps} wraps around; with it on, an overflow fails the run")
        if new == 0:
            return Decision("incremental", "no new input reaches it: its fixpoint carries over, no round runs",
                            unchanged=True, rows=rows, sources=prints, since=since)
        if before.get("infinite"):
            return recomputed(f"{before['infinite']} holds -Infinity: {INFINITY_WHY}")
        if strategy.wraps and wrapping(self.spark):
            return recomputed(f"{strategy.wraps} is arithmetic of integers, and with {ANSI}=false an overflow wraps "
                              "around to the lowest value instead of failing: a better value could give a worse "
                              "result")
        share = new / (rows - new) if rows > new else float("inf")
        adds = "the epoch adds" if since == last["epoch"] else f"the epochs since epoch {since}'s fixpoint add"
        if mode == "auto" and share > limit:
            return recomputed(f"{adds} {_percent(share)} to its input so far, more than "
                              f"{INCREMENTAL_MAX_CHANGE} = {_percent(limit)}")
        return Decision("incremental", f"{adds} {_percent(share)} to its input so far "
                        f"({new:,} {'record' if new == 1 else 'records'})",
                        new_rows=new, rows=rows, sources=prints, since=since)

    def since(self, scope: str, last: dict) -> int:
        """The epoch whose fixpoint an incremental epoch of loop `scope` starts from: the last committed one when
        this process holds what it left (`Carry`), else the one whose states the checkpoint holds (written at most
        `stateEvery` epochs apart: `keep`)."""
        carry = self.carried.get(scope)
        if carry is not None and carry.epoch == last["epoch"]:
            return last["epoch"]
        return last["loops"][scope]["epoch"]

    def _describe(self, op: str) -> str:
        return f"source `{self.module.OPERATORS[op].name}`" if op in self.module.OPERATORS else f"source {op}"

    def fingerprint(self, op: str) -> dict:
        from scopeflow.stdlib.paths import resolve

        return bounded_fingerprint(resolve(self.base_dir, value_of(self.sources[op].path, self.params)))

    # -- starting ----------------------------------------------------------------------------------------

    def starts(self, decisions: dict, last: Optional[dict], new_since) -> dict:
        """Every incremental-capable loop's `Start` in this epoch. One run incrementally starts from the states
        its last committed epoch left (kept in this process), else from those the checkpoint holds, with its
        entries' and imports' records since (`new_since(epoch)`: each stream's records after that epoch)."""
        starts = {scope: Start(self, d) for scope, d in decisions.items() if scope in self.specs}
        moving = set()
        for scope, start in starts.items():
            if not start.incremental:
                continue
            carry = self.carried.get(scope)
            kept = last["loops"][scope]
            start.keys = {op: doc["keys"] for op, doc in kept["states"].items()}
            start.floor = kept.get("partitions")
            if carry is not None and carry.epoch == last["epoch"]:
                start.states = dict(carry.states)
                start.carried, start.carried_rows = dict(carry.pieces), dict(carry.rows)
                start.kept_in = carry.partitions
                if carry.checked:
                    start.clean = start.carried_frames()
            else:
                start.states = self.load(scope, kept)
            if not start.unchanged:
                moving.add(scope)
        # one pipeline run over the new records builds the new input of every moving loop that starts from the
        # same epoch (all of them, but after a restart that found states of different epochs)
        for since in sorted({decisions[scope].since for scope in moving}):
            group = {scope for scope in moving if decisions[scope].since == since}
            captured = DeltaRun(self.spark, self.module, self.params, self.base_dir, new_since(since), group).capture()
            for scope, (entries, imports) in captured.items():
                starts[scope].entries = entries
                starts[scope].new_imports = imports
        return starts

    def load(self, scope: str, kept: dict) -> dict:
        """The states a loop left in an epoch, read back from the checkpoint (partitioned when the loop runs:
        `Start.partitioned`)."""
        return {op: (self.store.frame(self.spark, part_folder(scope, op), doc["ddl"], [doc["part"]]), doc["rows"])
                for op, doc in kept["states"].items()}

    def imports(self, run: RunContext, spec: LoopSpec, start: Start, imports: dict) -> dict:
        """The loop's growing imports, prepared as `Pieces` that outlive the epoch's run (each piece partitioned
        and sorted by the join keys, so that a round's join shuffles and sorts none of them). Recomputed: the
        import over all input so far, in one piece. Incremental: the previous epoch's base piece, unchanged, and
        a newer piece that takes in the epoch's new records (a small merge); once the newer piece holds
        `MERGE_SHARE` of the base's rows, both are merged into a new base (a sort within partitions, no
        shuffle). A round joins at most two pieces, and an epoch's merge costs what the newer piece weighs."""
        out = {}
        for name in dict.fromkeys(seed.imported for seed in spec.strategy.seeds):
            keys = spec.imports.get(name) or []
            carried = start.carried.get(name)
            if start.incremental and carried is not None:
                base_rows, newer_rows = start.carried_rows.get(name, (0, 0))
                newer_rows += start.decision.new_rows
                newer = self._prepare(run, start.new_imports[name], keys)
                if len(carried) > 1:
                    newer = self._merge(run, [carried[1], newer], keys)
                if newer_rows > MERGE_SHARE * base_rows:
                    pieces, rows = (self._merge(run, [carried[0], newer], keys),), (base_rows + newer_rows, 0)
                else:
                    pieces, rows = (carried[0], newer), (base_rows, newer_rows)
            else:
                pieces, rows = (self._prepare(run, imports[name], keys),), (start.decision.rows, 0)
            out[name] = start.pieces[name] = Pieces(pieces)
            start.rows[name] = rows
        return out

    def _prepare(self, run: RunContext, df: DataFrame, keys: list) -> DataFrame:
        df = run.prepare_import(df, keys, own=False)
        self.made.append(df)
        return df

    def _merge(self, run: RunContext, pieces: list, keys: list) -> DataFrame:
        """Pieces (partitioned alike: their union keeps it) as one, sorted within partitions, in a checkpoint:
        a cache would be dropped with the pieces it was made of, once they are freed."""
        df = union_all(pieces)
        df = run.checkpoints.make(df.sortWithinPartitions(*keys) if keys else df)
        self.made.append(df)
        return df

    # -- keeping ---------------------------------------------------------------------------------------------

    def keep(self, run: RunContext, number: int, last: Optional[dict], decisions: dict, sources: dict) -> dict:
        """The manifest's `loops` after epoch `number`: for every incremental-capable loop, the states the
        checkpoint holds for it. Hold what each loop ended the epoch with (its states and the imports' pieces)
        for the next epoch in this process (`committed`), and write its states to the checkpoint when they are
        due (`write_due`); else the manifest keeps listing the ones written before, which an epoch after a
        restart starts from (with every record since: `since`). A loop that left no states (e.g. restored
        whole from a snapshot) has none: its next epoch recomputes. `sources`: the streams' state after the
        epoch."""
        out = {}
        for scope, spec in self.specs.items():
            start = run.epoch.loops.get(scope)
            before = (last or {}).get("loops", {}).get(scope)
            if start is not None and start.unchanged:
                out[scope] = before
                carry = self.carried.get(scope)
                if carry is not None and carry.epoch == last["epoch"]:
                    self.pending[scope] = attrs.evolve(carry, epoch=number, sources=decisions[scope].sources)
                continue
            act = run.epoch.finished.get(scope)
            if act is None:
                continue
            write = self.write_due(spec, number, before, decisions[scope], sources)
            states, held = {}, {}
            for op in spec.strategy.states:
                state = act.states.get(op)
                if state is None or state.main is None:
                    break
                held[op] = state.carried()
                if not write:
                    continue
                df = state.full()
                with run.acting(failures.Action(f"the state of {run.describe(op)} of loop `{scope}`", run.where(op),
                                                doing="keeping")):
                    part = self._write_state(scope, op, df, number)
                states[op] = {"part": part, "rows": int(state.rows), "keys": list(state.keys),
                              "ddl": ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields)}
            else:
                out[scope] = {"epoch": number, "states": states, "sources": decisions[scope].sources,
                              "strategy": decisions[scope].strategy} if write else dict(before)
                out[scope].pop("infinite", None)
                out[scope].pop("wrapped", None)
                if start is not None and start.holds is not None:  # (`decide`: the next epochs recompute)
                    out[scope]["infinite"] = start.holds
                if spec.strategy.wraps and wrapping(self.spark):  # (`decide`: so does the next one with ANSI on)
                    out[scope]["wrapped"] = True
                if start is not None and start.partitions is not None:
                    out[scope]["partitions"] = start.partitions  # the next epoch's floor (`Start.parallelism`)
                if start is not None:
                    self.pending[scope] = Carry(number, held, dict(start.pieces), dict(start.rows), start.partitions,
                                                decisions[scope].sources, decisions[scope].strategy,
                                                start.checked and start.holds is None)
        return out

    def rows_held(self, scope: str, kept: dict) -> int:
        """The rows of the states loop `scope` ended the last committed epoch with: those this process holds for
        it, else those its entry in that epoch's manifest (`kept`) lists (the checkpoint's are still its
        fixpoint)."""
        carry = self.carried.get(scope)
        if carry is not None and carry.states:
            return sum(int(held[1]) for held in carry.states.values())
        return sum(doc["rows"] for doc in kept["states"].values())

    def write_due(self, spec: LoopSpec, number: int, before: Optional[dict], decision: Decision,
                  sources: dict) -> bool:
        """Does epoch `number` write loop `spec`'s states to the checkpoint? When the checkpoint holds none of it,
        when the epoch recomputed it (the fixpoint before may be over a bounded source that changed since), when
        the ones it holds are `stateEvery` epochs old, and when a stream's stored input was compacted since
        them (an epoch after a restart could not tell the records after them from the older ones)."""
        if before is None or decision.strategy != "incremental":
            return True
        if number - before["epoch"] >= state_every(self.spark):
            return True
        return any(merged(p) and part_epoch(p) > before["epoch"]
                   for op in spec.strategy.streams for p in sources[op]["parts"])

    def _write_state(self, scope: str, op: str, df: DataFrame, number: int) -> dict:
        """Write the state of operator `op` of loop `scope` as epoch `number` left it; its part's listing."""
        part = self.store.write_part(df, part_folder(scope, op), f"e{number:010d}")
        fault("stream-loop-state-written")
        return part

    def carry_over(self, number: int) -> None:
        """Epoch `number` ran no loop (no new record): what the loops held after the epoch before is theirs after
        this one (`committed`)."""
        self.pending = {scope: attrs.evolve(carry, epoch=number) for scope, carry in self.carried.items()
                        if carry.epoch == number - 1}

    def flush(self, manifest: dict) -> Optional[dict]:
        """The run ends after committing epoch `manifest`: write the states of every loop whose checkpoint copy
        is older (`write_due` did not write them), so that the next run starts from this epoch's fixpoint. The
        manifest's new `loops`, or None when nothing was written. (Only a run that stops cleanly gets here: one
        killed leaves the states written before, which the next run starts from, with every record since.)"""
        loops, wrote = dict(manifest.get("loops", {})), False
        for scope, carry in self.carried.items():
            entry = loops.get(scope)
            if (entry is None or carry.epoch != manifest["epoch"] or entry["epoch"] == carry.epoch
                    or set(carry.states) != set(entry["states"])):
                continue
            states = {}
            for op, held in carry.states.items():
                part = self._write_state(scope, op, held[0], carry.epoch)
                states[op] = {**entry["states"][op], "part": part, "rows": int(held[1])}
            loops[scope] = {**entry, "epoch": carry.epoch, "states": states, "sources": carry.sources,
                            "strategy": carry.strategy}
            wrote = True
        return loops if wrote else None

    def committed(self) -> None:
        """The epoch committed: what its loops left is the next epoch's start; free what it replaced."""
        self._settle(self.pending)

    def abandoned(self) -> None:
        """The epoch failed: the next attempt starts from the last committed epoch again; free what this one
        made."""
        self._settle(self.carried)

    def close(self) -> None:
        """The run ends: free everything the loops held across epochs."""
        self._settle({})

    def _settle(self, keep: dict) -> None:
        """Hold the carries `keep`; free the pieces and states nothing holds any more."""
        from scopeflow.runtime.checkpoints import checkpoint_rdd, is_checkpoint

        alive = {id(p) for c in keep.values() for pieces in c.pieces.values() for p in pieces}
        alive_states = {id(ck) for c in keep.values() for held in c.states.values() for ck in _frames(held)}
        old = [p for c in self.carried.values() for pieces in c.pieces.values() for p in pieces]
        for df in {id(d): d for d in self.made + old}.values():
            if id(df) not in alive:
                checkpoint_rdd(df).unpersist(False) if is_checkpoint(df) else df.unpersist()
        for c in (*self.carried.values(), *self.pending.values()):
            for ck in (ck for held in c.states.values() for ck in _frames(held)):
                if id(ck) not in alive_states and is_checkpoint(ck):
                    checkpoint_rdd(ck).unpersist(False)
        self.carried, self.pending, self.made = dict(keep), {}, []


def negative_infinity(run: RunContext, spec: LoopSpec, act, clean: set = frozenset()) -> Optional[str]:
    """Which state of the loop's guarded `min`s (`Strategy.guards`: `double`s that reach `+`/`-`) holds -Infinity
    at the end of activation `act` ("`dist` of reduce `best`"), or None: one aggregation over their frames but
    those known to hold none (`clean`: the previous epoch's, still in use). A key holds -Infinity in the merged
    state when its main or its overlay does: the overlay folds with `min`."""
    probes = []
    for i, (op, column) in enumerate(spec.strategy.guards):
        state = act.states.get(op)
        for df in state.parts() if state is not None else ():
            if id(df) not in clean:
                probes.append(df.where(F.col(column) == float("-inf")).select(F.lit(i).alias("guard")))
    found = union_all(probes).agg(F.min("guard")).collect()[0][0] if probes else None
    if found is None:
        return None
    op, column = spec.strategy.guards[found]
    return f"`{column}` of {run.describe(op)}"


def _frames(held: tuple) -> list:
    """The checkpoints a carried state holds (`KeyedState.carried`: its main and overlay)."""
    main, _, overlay = held[2][:3]
    return [df for df in (main, overlay) if df is not None]


def part_folder(scope: str, op: str) -> str:
    """The folder of a loop's state among the checkpoint's parts (`EpochStore.part_dir`)."""
    return f"loop-{scope}-{op}"


def _percent(x: float) -> str:
    if x == float("inf"):
        return "everything"
    return f"{x * 100:.3g} %"
