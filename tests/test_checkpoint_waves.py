"""How a round's checkpoints are grouped into jobs on a cluster (`checkpoints.wave_levels`), without Spark: the
lineages are the shape `RDD.toDebugString` prints. tests/cluster/test_cluster.py checks the jobs on a real
cluster."""
from __future__ import annotations

from scopeflow.runtime.checkpoints import wave_levels


def lineage(own: int, *reads: int) -> str:
    """A checkpoint RDD's `toDebugString`: itself, its plan's RDDs, and the stored RDDs it reads."""
    lines = [f"(4) MapPartitionsRDD[{own}] at localCheckpoint at NativeMethodAccessorImpl.java:0 []",
             f" |  SQLExecutionRDD[{own - 1}] at localCheckpoint at NativeMethodAccessorImpl.java:0 []",
             f" |  ShuffledRowRDD[{own - 2}] at localCheckpoint at NativeMethodAccessorImpl.java:0 []",
             f" +-(4) MapPartitionsRDD[{own - 3}] at localCheckpoint at NativeMethodAccessorImpl.java:0 []"]
    lines += [f"    |  MapPartitionsRDD[{r}] at localCheckpoint at NativeMethodAccessorImpl.java:0 "
              f"[Disk Memory Deserialized 1x Replicated]" for r in reads]
    return "\n".join(lines)


def test_checkpoints_that_read_none_of_the_round_share_one_job():
    assert wave_levels([10, 20, 30], [lineage(10, 3), lineage(20, 4), lineage(30)]) == [0, 0, 0]


def test_a_checkpoint_is_stored_after_the_ones_it_reads():
    # a reduce's new state (10), the feedback read from it (20), an emit read from the feedback (30), and a
    # shared stream read by nothing of the round (40)
    ids = [10, 20, 30, 40]
    assert wave_levels(ids, [lineage(10, 5), lineage(20, 10), lineage(30, 20, 10), lineage(40, 6)]) == [0, 1, 2, 0]


def test_its_job_follows_the_latest_of_those_it_reads():
    # 30 reads 10 (job 0) and 20 (job 1, as it reads 10): it goes after 20
    assert wave_levels([10, 20, 30], [lineage(10), lineage(20, 10), lineage(30, 10, 20)]) == [0, 1, 2]


def test_its_job_follows_the_jobs_of_those_it_reads_not_their_place_or_number():
    # 10 and 20 are both stored by the first job: 30, reading the second or both, by the next one
    assert wave_levels([10, 20, 30], [lineage(10), lineage(20), lineage(30, 20)]) == [0, 0, 1]
    assert wave_levels([10, 20, 30], [lineage(10), lineage(20), lineage(30, 10, 20)]) == [0, 0, 1]


def test_only_earlier_checkpoints_count_as_reads():
    # a later checkpoint's id and ids of no checkpoint of the round are no reads
    ids = [10, 20]
    assert wave_levels(ids, [lineage(10, 20, 99), lineage(20, 77)]) == [0, 0]


def test_partition_counts_and_storage_levels_are_no_rdd_ids():
    # "(10)" is a partition count and "[10]" alone no RDD: only "[id] at " names one
    text = "(10) MapPartitionsRDD[20] at localCheckpoint at X:0 [10]\n |  (10) [Memory Deserialized 1x Replicated]"
    assert wave_levels([10, 20], [lineage(10), text]) == [0, 0]
    read = text + "\n |  ParallelCollectionRDD[10] at parallelize at X:0 []"
    assert wave_levels([10, 20], [lineage(10), read]) == [0, 1]


def test_one_checkpoint_is_one_job():
    assert wave_levels([7], [lineage(7)]) == [0]
    assert wave_levels([], []) == []
