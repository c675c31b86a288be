"""State of `reduce` and `distinct` inside a loop activation, updated from each round's delta.

The state is never recomputed from the history: each round joins only the
round's delta against it. To keep that join free of a full shuffle, the
state lives in two parts:

- ``main``: hash-partitioned by the key columns (the same partitioning as the
  round's aggregated delta), so the delta joins it partition-by-partition;
- ``extra``: keys first seen after ``main`` was built — small, unpartitioned.

When ``extra`` grows past a fraction of ``main`` the two are compacted into a
new ``main`` inside the round's own job. Every DataFrame produced here is a
lazy checkpoint of the round (`Round.checkpoint`), materialised by the round's
single Spark job.
"""
from __future__ import annotations

from functools import reduce as _fold
from typing import Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

COMPACT_FRACTION = 0.25
COMPACT_MIN_ROWS = 50_000

_IN_MAIN, _IN_EXTRA, _NEW = 1, 2, 0


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
    """Shared bookkeeping of the two-part state."""

    def __init__(self, op: str, keys: list[str], columns: list[str]):
        self.op = op
        self.keys = keys
        self.columns = columns  # every output column, keys first
        self.main: Optional[DataFrame] = None
        self.extra: Optional[DataFrame] = None
        self.main_rows = 0
        self.extra_rows = 0
        self._next: Optional[tuple] = None  # (main, extra, main_key, extra_key) pending the round's job

    def full(self) -> Optional[DataFrame]:
        if self.main is None:
            return None
        return self.main if self.extra is None else self.main.unionByName(self.extra)

    def _compacted(self, partitions: int) -> tuple[DataFrame, Optional[DataFrame]]:
        if self.extra is not None and self.extra_rows > max(COMPACT_MIN_ROWS, COMPACT_FRACTION * self.main_rows):
            merged = self.main.unionByName(self.extra).repartition(partitions, *self.keys)
            return merged, None
        return self.main, self.extra

    def commit(self, counts: dict) -> None:
        """Adopt the state materialised by the round's job (called after the job)."""
        if self._next is None:
            return
        main, extra, main_key, extra_key = self._next
        self.main, self.extra = main, extra
        self.main_rows = counts.get(main_key, self.main_rows)
        self.extra_rows = counts.get(extra_key, 0) if extra is not None else 0
        if self.extra_rows == 0:  # nothing outside main: later rounds skip the extra join
            self.extra = None
        self._next = None

    def parts(self) -> list[DataFrame]:
        return [df for df in (self.main, self.extra) if df is not None]


class ReduceState(KeyedState):
    def __init__(self, op: str, keys: list[str], aggs: list[tuple[str, str]]):
        super().__init__(op, keys, keys + [a for a, _ in aggs])
        self.aggs = aggs  # (output column, aggregate function)

    def step(self, rnd, delta: DataFrame) -> DataFrame:
        """Fold the round's aggregated delta in; return the keys that are new or changed."""
        keys = self.keys
        if self.main is None:
            changed = rnd.checkpoint(f"{self.op}/changed", delta.select(*self.columns))
            self._next = (changed, None, f"{self.op}/changed", None)
            return changed
        main, extra = self._compacted(rnd.partitions)
        j = delta.alias("d").join(main.withColumn("_sf_in", F.lit(_IN_MAIN)).alias("m"), keys, "left")
        if extra is not None:
            j = j.join(extra.withColumn("_sf_in", F.lit(_IN_EXTRA)).alias("x"), keys, "left")
            where = F.coalesce(F.col("m._sf_in"), F.col("x._sf_in"), F.lit(_NEW))
            old = {a: F.when(F.col("m._sf_in").isNotNull(), F.col(f"m.{a}")).otherwise(F.col(f"x.{a}"))
                   for a, _ in self.aggs}
        else:
            where = F.coalesce(F.col("m._sf_in"), F.lit(_NEW))
            old = {a: F.col(f"m.{a}") for a, _ in self.aggs}
        new = {a: _combine(fn, old[a], F.col(f"d.{a}")) for a, fn in self.aggs}
        differs = _fold(lambda x, y: x | y, [~new[a].eqNullSafe(old[a]) for a, _ in self.aggs])
        merged = j.select(*[F.col(k) for k in keys], *[new[a].alias(a) for a, _ in self.aggs], where.alias("_sf_in"))
        changed_all = rnd.checkpoint(f"{self.op}/changed", merged.where((F.col("_sf_in") == _NEW) | differs))
        upd = changed_all.where(F.col("_sf_in") == _IN_MAIN).select(
            *keys, *[F.col(a).alias(f"_sf_new_{a}") for a, _ in self.aggs])
        new_main = main.join(upd, keys, "left").select(
            *keys, *[F.coalesce(F.col(f"_sf_new_{a}"), F.col(a)).alias(a) for a, _ in self.aggs])
        main_ck = rnd.checkpoint(f"{self.op}/main", new_main)
        fresh = changed_all.where(F.col("_sf_in") == _NEW).select(*self.columns)
        if extra is not None:
            upd_x = changed_all.where(F.col("_sf_in") == _IN_EXTRA).select(
                *keys, *[F.col(a).alias(f"_sf_new_{a}") for a, _ in self.aggs])
            kept = extra.join(upd_x, keys, "left").select(
                *keys, *[F.coalesce(F.col(f"_sf_new_{a}"), F.col(a)).alias(a) for a, _ in self.aggs])
            fresh = kept.unionByName(fresh)
        extra_ck = rnd.checkpoint(f"{self.op}/extra", fresh)
        self._next = (main_ck, extra_ck, f"{self.op}/main", f"{self.op}/extra")
        return changed_all.select(*self.columns)


class DistinctState(KeyedState):
    def __init__(self, op: str, columns: list[str]):
        super().__init__(op, list(columns), list(columns))

    def step(self, rnd, df: DataFrame) -> DataFrame:
        """The round's distinct records that no earlier round of the activation output."""
        d = df.select(*self.columns).distinct()
        if self.main is None:
            new = rnd.checkpoint(f"{self.op}/new", d)
            self._next = (new, None, f"{self.op}/new", None)
            return new
        main, extra = self._compacted(rnd.partitions)
        fresh = d.join(main, self.columns, "left_anti")
        if extra is not None:
            fresh = fresh.join(extra, self.columns, "left_anti")
        new = rnd.checkpoint(f"{self.op}/new", fresh)
        extra_next = new if extra is None else rnd.checkpoint(f"{self.op}/extra", extra.unionByName(new))
        extra_key = f"{self.op}/new" if extra is None else f"{self.op}/extra"
        if main is not self.main:  # compacted this round: the new main must be materialised too
            main = rnd.checkpoint(f"{self.op}/main", main)
        self._next = (main, extra_next, f"{self.op}/main", extra_key)
        return new
