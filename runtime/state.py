"""State of `reduce` and `distinct` inside a loop activation, updated from each round's delta.

The state is never recomputed from the history: each round folds only the
round's delta into it. The state is one frame, hash-partitioned by its key
columns, with a flag column `_sf_ch` that marks the keys the round changed:

    state'  =  (state UNION delta) GROUP BY keys, folded, flagged if new or changed

The state and the round's aggregated delta are both partitioned by the keys,
so the union keeps that partitioning and the group needs no shuffle of the
state (only the delta's own shuffle); null keys group like any other key.
`state'` is the round's ONE checkpoint for the operator (materialised by the
round's single Spark job); the operator's output — the new or changed keys —
is a filter on it (`_sf_ch`), not a second copy.

Column expressions depend only on the keys and aggregates, so they are built
once per state and reused every round: each Column call is a JVM round trip.
"""
from __future__ import annotations

from functools import reduce as _fold
from typing import Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

FLAG = "_sf_ch"  # the round changed (or added) this key
SIDE = "_sf_side"
_OLD, _NEW = 1, 2


def _combine(fn: str, old: Column, new: Column) -> Column:
    if fn == "min":
        return F.least(old, new)
    if fn == "max":
        return F.greatest(old, new)
    if fn in ("sum", "count"):
        return F.coalesce(old, F.lit(0)) + F.coalesce(new, F.lit(0))
    if fn == "any":
        return F.coalesce(old, F.lit(False)) | F.coalesce(new, F.lit(False))
    if fn == "all":
        return F.coalesce(old, F.lit(True)) & F.coalesce(new, F.lit(True))
    raise ValueError(f"`{fn}` cannot be folded incrementally")


class KeyedState:
    """The state frame of one operator and the bookkeeping around the round's job."""

    def __init__(self, op: str, keys: list[str], columns: list[str]):
        self.op = op
        self.keys = keys
        self.columns = columns  # every output column, keys first
        self.main: Optional[DataFrame] = None  # the state: `columns` (+ `_sf_ch` when it is a round checkpoint)
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
            cols = self._cols["common"] = {"plain": plain, "new": [*plain, F.lit(True).alias(FLAG)],
                                           "flagged": F.col(FLAG),
                                           # the two sides of the round's union: the state and the round's records
                                           "side_old": [*plain, F.lit(_OLD).alias(SIDE)],
                                           "side_new": [*plain, F.lit(_NEW).alias(SIDE)]}
        return cols[name]

    def _with_state(self, df: DataFrame) -> DataFrame:
        """The state and the round's records `df` in one frame, each row tagged with its side."""
        return self.main.select(*self._c("side_old")).unionByName(df.select(*self._c("side_new")))

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


class ReduceState(KeyedState):
    def __init__(self, op: str, keys: list[str], aggs: list[tuple[str, str]]):
        super().__init__(op, keys, keys + [a for a, _ in aggs])
        self.aggs = aggs  # (output column, aggregate function)
        self.delta_aggs: Optional[list] = None  # the round's aggregate Columns (Round.reduce)

    def _fold_columns(self) -> dict:
        cols = self._cols.get("fold")
        if cols is None:
            side = F.col(SIDE)
            has_old, has_new = F.col("_sf_has_old"), F.col("_sf_has_new")
            per_key = [F.max(side == _OLD).alias("_sf_has_old"), F.max(side == _NEW).alias("_sf_has_new")]
            for a, _ in self.aggs:  # each side holds at most one row per key
                per_key += [F.first(F.when(side == _OLD, F.col(a)), ignorenulls=True).alias(f"_sf_old_{a}"),
                            F.first(F.when(side == _NEW, F.col(a)), ignorenulls=True).alias(f"_sf_new_{a}")]
            old = {a: F.col(f"_sf_old_{a}") for a, _ in self.aggs}
            new = {a: F.when(~has_old, F.col(f"_sf_new_{a}")).when(~has_new, old[a])
                   .otherwise(_combine(fn, old[a], F.col(f"_sf_new_{a}"))) for a, fn in self.aggs}
            changed = _fold(lambda x, y: x | y, [~new[a].eqNullSafe(old[a]) for a, _ in self.aggs], ~has_old)
            cols = self._cols["fold"] = {
                "per_key": per_key,
                "folded": [*(F.col(k) for k in self.keys), *(new[a].alias(a) for a, _ in self.aggs),
                           changed.alias(FLAG)]}
        return cols

    def step(self, rnd, delta: DataFrame) -> DataFrame:
        """Fold the round's aggregated delta in; return the keys that are new or changed.

        The state and the delta (both partitioned by the keys, at most one row per key each) are
        unioned and grouped by the keys: a keyed fold without a join, without a shuffle of the
        state, and null keys fold like any other key."""
        if self.main is None:
            return self._adopt(rnd, delta.select(*self._c("new")))
        c = self._fold_columns()
        return self._adopt(rnd, self._with_state(delta).groupBy(*self.keys).agg(*c["per_key"]).select(*c["folded"]))


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
            flag = self._cols["first_seen"] = (~F.max(F.col(SIDE) == _OLD)).alias(FLAG)
        return flag
