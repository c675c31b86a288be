"""State of `reduce` and `distinct` inside a loop activation, updated from each round's delta.

The state is never recomputed from the history: each round folds only the round's delta into it. It is kept
in two frames, both hash-partitioned by the key columns (so nothing below shuffles either of them):

- `main`: one record per key, as of the last *compaction*;
- `overlay`: the keys that changed or appeared since then, with their current values (None right after one).

A key's value is the overlay's if the overlay holds it, else main's. A round folds its delta (one record per
key) in one of two ways, chosen before the round from the records in flight (`OVERLAY_SHARE`):

    small delta:  overlay' = (main ⋉ delta  ∪  overlay  ∪  delta) GROUP BY keys, keeping overlay keys and changes
    otherwise:    main'    = (main  ∪  overlay  ∪  delta) GROUP BY keys                    (a compaction)

The first reads main only where the delta's keys meet it (a hash semi-join of the scan with the delta's keys,
no aggregation or copy of main) and writes only the keys changed since the last compaction: a round costs what
its delta and the changes so far weigh plus one scan, not a rewrite of the whole state. Once the overlay or the
delta holds more than `OVERLAY_SHARE` of main's keys, the round compacts (the state as one frame again).

Each side of the fold's union carries a flag column `_sf_ch`: false for main's records, true for the
overlay's, null for the round's; the group's result carries in it whether the round changed (or added) the
key. A fold of main and the round's records alone (no overlay) takes main as stored: its flag (whether its
round changed the key) is never null, the round's records' is, so main needs no projection and the group no
overlay terms (measured: chain SSSP, 360 small rounds, 0.87x the time). The union keeps the key partitioning,
so the group shuffles nothing (in one partition: every side is single-partition, `Checkpoints.detach_statistics`).
The result is the round's ONE
checkpoint for the operator (materialised by the round's single Spark job); the operator's output — the new or
changed keys — is a filter on it (`_sf_ch`), not a second copy. Null keys fold like any other key (an equi-join never
matches them: main's records with one join the first fold into an overlay, which keeps them).

Column expressions depend only on the keys and aggregates, so they are built once per state and reused every
round: each Column call is a JVM round trip. So are their lists' conversions to the JVM (runtime/columns.py).
"""
from __future__ import annotations

from functools import reduce
from typing import Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scopeflow.runtime import columns as jcols
from scopeflow.runtime.counters import NEW_KEYS_COUNTER
from scopeflow.stdlib.functions import AGGREGATES

FLAG = "_sf_ch"  # the round changed (or added) this key; in the fold's union: false main, true overlay, null round
NEW_KEY = "_sf_nk"  # (overlay) the key is not in main: the state's size is main's plus these
KEEP = "_sf_keep"  # (the fold into the overlay) the overlay keeps the key: it held it, the round changed it, or a null
# a round folds into the overlay while the records in flight and the overlay each hold at most this share of
# main's keys; beyond, it compacts (`spark.scopeflow.stateOverlay`). A state of fewer keys than OVERLAY_MIN_KEYS
# is rewritten every round (`spark.scopeflow.stateOverlayMinKeys`): measured (benchmarks/bench_state.py, 2
# cores), a round into the overlay cost 1.07x a rewrite at 200,000 keys (its bigger plan: planning and one scan
# of main), 0.69x at 600,000, 0.39x at 2,000,000
OVERLAY_SHARE = 0.25
OVERLAY_MIN_KEYS = 300_000


def _fold(fn: str, old: Column, new: Column) -> Column:
    """Merge two partial results of aggregate `fn` (stdlib's table) for one key. A null partial result
    holds no value (the aggregate skipped nulls, or saw only nulls): the other side is the result, so
    `sum` over only nulls stays null and `any(false, null)` is false, as in one aggregate over all
    records."""
    return F.when(old.isNull(), new).when(new.isNull(), old).otherwise(AGGREGATES[fn].fold(F, old, new))


class KeyedState:
    """The state frames of one operator and the bookkeeping around the round's job."""

    def __init__(self, op: str, keys: list[str], columns: list[str]):
        self.op = op
        self.keys = keys
        self.columns = columns  # every output column, keys first
        self.main: Optional[DataFrame] = None  # `columns` + `_sf_ch` (never null here)
        self.main_rows = 0
        self.overlay: Optional[DataFrame] = None  # `columns` + `_sf_ch` + `_sf_nk`
        self.overlay_rows = 0
        self.overlay_new = 0  # overlay records whose key is not in main
        self._next: Optional[DataFrame] = None  # the new main or overlay, pending the round's job
        self._small = False  # the pending frame is an overlay
        self._pending: Optional[str] = None  # how the round adopted (`adopt`) folds: its counts are not read yet
        self._cols: dict = {}
        self._seqs = jcols.ColumnSeqs()  # their JVM Seqs (runtime/columns.py)
        self._stored = False  # main is a round checkpoint (not a plan over files: read back, restored)

    @property
    def key(self) -> str:
        return f"{self.op}/state"

    @property
    def rows(self) -> int:
        """The state's records (keys)."""
        return self.main_rows + self.overlay_new

    def full(self) -> Optional[DataFrame]:
        """The state's records, without the round flag (`emit state`, snapshots, an incremental epoch's end)."""
        if self.main is None:
            return None
        if self.overlay is None:
            return self._select(self.main, "plain")
        return self._select(self._merged(), "plain")

    def _c(self, name: str):
        cols = self._cols.get("common")
        if cols is None:
            plain = [F.col(c) for c in self.columns]
            flag, unknown = F.col(FLAG), F.lit(None).cast("boolean")
            cols = self._cols["common"] = {
                "plain": plain, "new": [*plain, F.lit(True).alias(FLAG)], "flagged": flag,
                # the three sides of the fold's union (`_sf_nk` is the overlay's alone)
                "as_main": [*plain, F.lit(False).alias(FLAG), unknown.alias(NEW_KEY)],
                "as_overlay": [*plain, F.lit(True).alias(FLAG), F.col(NEW_KEY)],
                "incoming": [*plain, unknown.alias(FLAG), unknown.alias(NEW_KEY)],
                "stored": [*plain, F.lit(False).alias(FLAG)], "incoming_plain": [*plain, unknown.alias(FLAG)],
                "is_main": F.coalesce(~flag, F.lit(False)), "is_overlay": F.coalesce(flag, F.lit(False)),
                "is_new": flag.isNull(), "is_stored": flag.isNotNull(), "overlay_out": [*plain, flag, F.col(NEW_KEY)],
                "new_keys": F.col(NEW_KEY), "keep": F.col(KEEP), "changed": flag,  # (what their counters count)
                "keys": [F.col(k) for k in self.keys]}
        return cols[name]

    def _list(self, name: str) -> list:
        """A column list by name: `_c`'s, the fold's (`fold` into main, `fold_small` into the overlay, `fold_plain`:
        main and the round's records alone) or the round's aggregates (`delta`)."""
        if name == "delta":
            return self.delta_aggs
        if name == "fold_plain":
            return self._fold_plain_columns()
        if name.startswith("fold"):
            return self._fold_columns(name == "fold_small")
        return self._c(name)

    def _select(self, df: DataFrame, name: str) -> DataFrame:
        """`df.select(*self._c(name))`, the list converted to the JVM once."""
        cols = self._c(name)
        return jcols.select(df, cols, self._seqs.get(df.sparkSession, name, cols))

    def group(self, df: DataFrame, aggs: str) -> DataFrame:
        """`df.groupBy(*keys).agg(*self._list(aggs))`, the lists converted to the JVM once."""
        spark, keys, cols = df.sparkSession, self._c("keys"), self._list(aggs)
        return jcols.group(df, keys, cols, self._seqs.get(spark, "keys", keys), self._seqs.get(spark, aggs, cols, 1))

    def _sides(self, delta: Optional[DataFrame], small: bool) -> DataFrame:
        """The fold's union: main (all of it, or where `delta`'s keys meet it), the overlay and the round's
        records."""
        main = self._select(self.main, "as_main")
        if small:
            met = main.join(delta.select(*self.keys).hint("shuffle_hash"), self.keys, "left_semi")
            if self.overlay is None:
                # an equi-join never matches a null key: main's records with one join the first fold into an
                # overlay, which then keeps them (`_sf_keep`), so later folds scan main once
                met = met.union(main.where(self._null_key()))
            main = met
        parts = [main]
        if self.overlay is not None:
            parts.append(self._select(self.overlay, "as_overlay"))
        if delta is not None:
            parts.append(self._select(delta, "incoming"))
        return reduce(lambda a, b: a.union(b), parts)

    def _null_key(self) -> Column:
        """True for a key with a null in it. (Every key column is taken as nullable: a later round's records may
        hold nulls where the first round's schema said none could.)"""
        null_key = self._cols.get("null_key")
        if null_key is None:
            null_key = self._cols["null_key"] = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in self.keys])
        return null_key

    def _merged(self) -> DataFrame:
        """main with the overlay applied (a plan: the group shuffles nothing)."""
        return self.group(self._sides(None, False), "fold")

    def step(self, rnd, delta: DataFrame, once: bool = False) -> DataFrame:
        """Fold the round's delta (one record per key) in; return the keys that are new or changed. `once`: the
        delta is a plan to compute once (a deferred feedback's, runtime/loop.py): the round rewrites the state,
        as a fold into the overlay reads the delta twice."""
        if self.main is None:
            self._small = False
            return self._adopt(rnd, self._first(delta))
        estimate = rnd.in_flight_estimate()
        share, min_keys = rnd.run.overlay()
        limit = share * self.main_rows
        # (main read back from files, or restored, is first rewritten into a round checkpoint: an overlay
        # round reads main, and those files may go before the overlay does)
        small = (self.may_overlay(share, min_keys) and estimate is not None and estimate <= limit
                 and self.overlay_rows <= limit and limit > 0 and self._stored and not once)
        if small or self.overlay is not None:
            new = self.group(self._sides(delta, small), "fold_small" if small else "fold")
        else:  # main and the round's records: main as stored (its flag is never null), no overlay terms
            new = self.group(self.main.union(self._select(delta, "incoming_plain")), "fold_plain")
        self._small = small
        if small:
            # the overlay keeps its keys and gains the round's changes; main's unchanged keys stay out of it
            new = rnd.run.counters.observe(self._select(new.where(self._c("keep")), "overlay_out"),
                                           NEW_KEYS_COUNTER + self.key, self._c("new_keys"))
        return self._adopt(rnd, new)

    def _first(self, delta: DataFrame) -> DataFrame:
        raise NotImplementedError

    def may_overlay(self, share: float, min_keys: int) -> bool:
        """Is the state large enough for a round to fold into its overlay (`step`; `loop.LoopExecutor.defers`)?"""
        return share > 0 and self.main is not None and self.main_rows >= min_keys

    def _fold_columns(self, small: bool) -> list:
        """The group's result columns: every aggregate column and `_sf_ch`; into the overlay (`small`) also
        `_sf_keep` (the overlay keeps the key) and `_sf_nk` (the key is not in main)."""
        cols = self._cols.get("fold")
        if cols is None:
            has_main, has_overlay = F.max(self._c("is_main")), F.max(self._c("is_overlay"))
            values, changed = self._values(self._c("is_main"), self._c("is_overlay"))
            not_in_main = F.when(has_overlay, F.first(F.when(self._c("is_overlay"), F.col(NEW_KEY)), ignorenulls=True))
            keep = has_overlay | changed | self._null_key()
            cols = self._cols["fold"] = [*values, changed.alias(FLAG), keep.alias(KEEP),
                                         not_in_main.otherwise(~has_main).alias(NEW_KEY)]
            self._cols["fold_main"] = cols[:-2]
        return cols if small else self._cols["fold_main"]

    def _fold_plain_columns(self) -> list:
        """The group's result columns when main and the round's records are all it folds (no overlay): main's
        records are those with a flag (whether their round changed the key: never null), the round's have none.
        Fewer aggregates than `fold`'s, and main needs no projection."""
        cols = self._cols.get("fold_plain")
        if cols is None:
            values, changed = self._values(self._c("is_stored"), None)
            cols = self._cols["fold_plain"] = [*values, changed.alias(FLAG)]
        return cols

    def _values(self, is_main: Column, is_overlay: Optional[Column]) -> tuple[list, Column]:
        """The aggregate columns of the folded key and whether the round changed (or added) it, from which of the
        union's records are main's and which the overlay's (None: there is no overlay)."""
        raise NotImplementedError

    def _adopt(self, rnd, new_state: DataFrame) -> DataFrame:
        """Checkpoint the new main or overlay in the round's job; return the round's output (the flagged keys)."""
        # the operator's counter: the keys the round changed, counted where the round's job computes them (its
        # output, a filter on the checkpoint, may be computed by a later job: a deferred feedback)
        ck = rnd.checkpoint(self.key, rnd.run.counters.observe(new_state, self.op, self._c("changed")))
        self._next = ck
        return self._select(ck.where(self._c("flagged")), "plain")

    def adopt(self) -> None:
        """Make the frame the round's job materialises the state: the next round is planned over it (its blocks
        exist by the time that round's job runs). Its counts come with `commit`. A loop that plans a round
        during the previous round's job (`LoopExecutor`) adopts before planning, else after the job."""
        if self._next is None:
            self._pending = None
            return
        self._pending = "overlay" if self._small else "rewrite" if self.main is not None else "first"
        if self._small:
            self.overlay = self._next
        else:
            self.main, self._stored = self._next, True
            self.overlay, self.overlay_rows, self.overlay_new = None, 0, 0
        self._next = None

    def discard(self) -> None:
        """Forget the frame of a round that was planned and will not run (the loop ended the round before)."""
        self._next = None

    def commit(self, counts: dict, observed: dict) -> Optional[str]:
        """The counts of the frame `adopt` took, after the round's job; return how the round folded (`first`:
        the state's first records; `overlay`; `rewrite`: into main, a compaction), None if it did not."""
        if self._pending is None:
            return None
        how, self._pending = self._pending, None
        rows, new_keys = counts.get(self.key), observed.pop(NEW_KEYS_COUNTER + self.key, None)
        if how == "overlay":
            # (no counter read back, or one that read high after a stage ran again: at most every overlay key is new)
            self.overlay_rows = rows
            self.overlay_new = rows if new_keys is None else min(new_keys, rows)
        else:
            self.main_rows = rows if rows is not None else self.main_rows
        return how

    def parts(self) -> list[DataFrame]:
        return [df for df in (self.main, self.overlay) if df is not None]

    def carried(self) -> tuple:
        """What an incremental epoch's next epoch starts this state from, in this process (`preload`)."""
        return (self.full(), self.rows,
                (self.main, self.main_rows, self.overlay, self.overlay_rows, self.overlay_new, self._stored))

    def restore(self, frame: DataFrame, rows: int) -> None:
        """Start from `frame` (the state's records, partitioned by the keys: read back from the checkpoint or a
        snapshot) and its count."""
        self.main, self.main_rows = frame.select(*self._c("stored")), rows
        self.overlay, self.overlay_rows, self.overlay_new, self._stored = None, 0, 0, False

    def preload(self, start) -> None:
        """Start from an earlier epoch's state (`incremental.Start`: its records, partitioned by the keys, and
        their count; from an epoch of this process also its frames as they were) instead of from nothing: a key
        is new or changed only against it."""
        if start is None:
            return
        if len(start) > 2:
            self.main, self.main_rows, self.overlay, self.overlay_rows, self.overlay_new, self._stored = start[2]
        else:
            self.restore(*start)


class ReduceState(KeyedState):
    def __init__(self, op: str, keys: list[str], aggs: list[tuple[str, str]]):
        super().__init__(op, keys, keys + [a for a, _ in aggs])
        self.aggs = aggs  # (output column, aggregate function)
        self.delta_aggs: Optional[list] = None  # the round's aggregate Columns (Round.reduce)

    def _first(self, delta: DataFrame) -> DataFrame:
        return delta.select(*self._c("new"))

    def _values(self, is_main: Column, is_overlay: Optional[Column]) -> tuple[list, Column]:
        is_new = self._c("is_new")
        has_main, has_new = F.max(is_main), F.max(is_new)

        def side(which, a):  # each side holds at most one record per key
            return F.first(F.when(which, F.col(a)), ignorenulls=True)

        if is_overlay is None:
            has_old, old = has_main, {a: side(is_main, a) for a, _ in self.aggs}
        else:  # the overlay's value supersedes main's: the fold is right for every aggregate, not only idempotent ones
            has_overlay = F.max(is_overlay)
            has_old = has_main | has_overlay
            old = {a: F.when(has_overlay, side(is_overlay, a)).otherwise(side(is_main, a)) for a, _ in self.aggs}
        new = {a: F.when(~has_old, side(is_new, a)).when(~has_new, old[a]).otherwise(_fold(fn, old[a], side(is_new, a)))
               for a, fn in self.aggs}
        changed = reduce(lambda x, y: x | y, [~new[a].eqNullSafe(old[a]) for a, _ in self.aggs], ~has_old)
        return [new[a].alias(a) for a, _ in self.aggs], changed


class DistinctState(KeyedState):
    """A round's output: its distinct records that no earlier round of the activation output (the state and the
    round's records grouped by every column, so records with nulls are deduplicated too)."""

    def __init__(self, op: str, columns: list[str]):
        super().__init__(op, list(columns), list(columns))

    def _first(self, df: DataFrame) -> DataFrame:
        return df.select(*self._c("plain")).distinct().select(*self._c("new"))

    def _values(self, is_main: Column, is_overlay: Optional[Column]) -> tuple[list, Column]:
        held = F.max(is_main) if is_overlay is None else F.max(is_main) | F.max(is_overlay)
        return [], ~held  # a record is new when neither main nor the overlay holds it
