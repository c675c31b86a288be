"""State of `reduce` and `distinct` inside a loop activation, updated from each round's delta.

The state is never recomputed from the history: each round folds only the
round's delta into it. The state is one frame, hash-partitioned by its key
columns, with a flag column `_sf_ch` that marks the keys the round changed:

    state'  =  (state UNION delta) GROUP BY keys, folded, flagged if new or changed

The state and the round's aggregated delta are both partitioned by the keys,
so the union keeps that partitioning and the group needs no shuffle of the
state (only the delta's own shuffle); null keys group like any other key. The
state keeps its flag column in the union and the round's rows get a null flag,
so the flag also tells the two sides apart (no re-projection of the state).
`state'` is the round's ONE checkpoint for the operator (materialised by the
round's single Spark job); the operator's output — the new or changed keys —
is a filter on it (`_sf_ch`), not a second copy.

Column expressions depend only on the keys and aggregates, so they are built
once per state and reused every round: each Column call is a JVM round trip.
"""
from __future__ import annotations

from functools import reduce
from typing import Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from scopeflow.stdlib.functions import AGGREGATES

FLAG = "_sf_ch"  # the round changed (or added) this key; null on the round's side of the fold's union


def _fold(fn: str, old: Column, new: Column) -> Column:
    """Merge two partial results of aggregate `fn` (stdlib's table) for one key. A null partial result
    holds no value (the aggregate skipped nulls, or saw only nulls): the other side is the result, so
    `sum` over only nulls stays null and `any(false, null)` is false, as in one aggregate over all
    records."""
    return F.when(old.isNull(), new).when(new.isNull(), old).otherwise(AGGREGATES[fn].fold(F, old, new))


class KeyedState:
    """The state frame of one operator and the bookkeeping around the round's job."""

    def __init__(self, op: str, keys: list[str], columns: list[str]):
        self.op = op
        self.keys = keys
        self.columns = columns  # every output column, keys first
        self.main: Optional[DataFrame] = None  # the state: `columns` + `_sf_ch` (never null here)
        self.main_rows = 0
        self._next: Optional[DataFrame] = None  # the new state, pending the round's job
        self._cols: dict = {}

    @property
    def key(self) -> str:
        return f"{self.op}/state"

    def full(self) -> Optional[DataFrame]:
        """The state's records, without the round flag (`emit state`)."""
        if self.main is None:
            return None
        return self.main.select(*self._c("plain"))

    def _c(self, name: str):
        cols = self._cols.get("common")
        if cols is None:
            plain = [F.col(c) for c in self.columns]
            flag = F.col(FLAG)
            cols = self._cols["common"] = {"plain": plain, "new": [*plain, F.lit(True).alias(FLAG)],
                                           "flagged": flag,
                                           # the round's side of the fold's union: its records, flag null
                                           "incoming": [*plain, F.lit(None).cast("boolean").alias(FLAG)],
                                           "is_old": flag.isNotNull(), "is_new": flag.isNull()}
        return cols[name]

    def _with_state(self, df: DataFrame) -> DataFrame:
        """The state (`columns` + flag, as checkpointed) and the round's records `df` (flag null) in one frame."""
        return self.main.union(df.select(*self._c("incoming")))

    def _adopt(self, rnd, new_state: DataFrame) -> DataFrame:
        """Checkpoint the new state in the round's job; return the round's output (the flagged keys)."""
        ck = rnd.checkpoint(self.key, new_state)
        self._next = ck
        return ck.where(self._c("flagged")).select(*self._c("plain"))

    def commit(self, counts: dict) -> None:
        """Adopt the state materialised by the round's job (called after the job)."""
        if self._next is None:
            return
        self.main = self._next
        self.main_rows = counts.get(self.key, self.main_rows)
        self._next = None

    def parts(self) -> list[DataFrame]:
        return [self.main] if self.main is not None else []

    def preload(self, start) -> None:
        """Start from an earlier epoch's state (`incremental.Start`: its records, partitioned by the keys, and
        their count) instead of from nothing: a key is new or changed only against it."""
        if start is not None:
            frame, rows = start
            self.main = frame.select(*self._c("plain"), F.lit(False).alias(FLAG))
            self.main_rows = rows


class ReduceState(KeyedState):
    def __init__(self, op: str, keys: list[str], aggs: list[tuple[str, str]]):
        super().__init__(op, keys, keys + [a for a, _ in aggs])
        self.aggs = aggs  # (output column, aggregate function)
        self.delta_aggs: Optional[list] = None  # the round's aggregate Columns (Round.reduce)

    def _fold_columns(self) -> dict:
        cols = self._cols.get("fold")
        if cols is None:
            is_old, is_new = self._c("is_old"), self._c("is_new")
            has_old, has_new = F.max(is_old), F.max(is_new)
            # each side holds at most one row per key; Spark computes each distinct aggregate once
            old = {a: F.first(F.when(is_old, F.col(a)), ignorenulls=True) for a, _ in self.aggs}
            inc = {a: F.first(F.when(is_new, F.col(a)), ignorenulls=True) for a, _ in self.aggs}
            new = {a: F.when(~has_old, inc[a]).when(~has_new, old[a]).otherwise(_fold(fn, old[a], inc[a]))
                   for a, fn in self.aggs}
            changed = reduce(lambda x, y: x | y, [~new[a].eqNullSafe(old[a]) for a, _ in self.aggs], ~has_old)
            cols = self._cols["fold"] = [*(new[a].alias(a) for a, _ in self.aggs), changed.alias(FLAG)]
        return cols

    def step(self, rnd, delta: DataFrame) -> DataFrame:
        """Fold the round's aggregated delta in; return the keys that are new or changed.

        The state and the delta (both partitioned by the keys, at most one row per key each) are
        unioned and grouped by the keys: a keyed fold without a join, without a shuffle of the
        state, and null keys fold like any other key."""
        if self.main is None:
            return self._adopt(rnd, delta.select(*self._c("new")))
        return self._adopt(rnd, self._with_state(delta).groupBy(*self.keys).agg(*self._fold_columns()))


class DistinctState(KeyedState):
    def __init__(self, op: str, columns: list[str]):
        super().__init__(op, list(columns), list(columns))

    def step(self, rnd, df: DataFrame) -> DataFrame:
        """The round's distinct records that no earlier round of the activation output.

        Like `ReduceState.step`: state and the round's records unioned and grouped by every column
        (the state is already partitioned that way), so records with nulls are deduplicated too."""
        if self.main is None:
            return self._adopt(rnd, df.select(*self._c("plain")).distinct().select(*self._c("new")))
        return self._adopt(rnd, self._with_state(df).groupBy(*self.columns).agg(self._first_seen()))

    def _first_seen(self) -> Column:
        """Flag: the record is not in the state (only the round's side holds it)."""
        flag = self._cols.get("first_seen")
        if flag is None:
            flag = self._cols["first_seen"] = (~F.max(self._c("is_old"))).alias(FLAG)
        return flag
