"""The Spark settings scopeflow reads (`spark.scopeflow.*`): their names and what a value must be.

One table for every place a setting can come from: `--conf` checks it before Spark starts
(runtime/arguments.py), the compiler checks a `config` line of a .flow file (E0120), and the runtime checks
the session's Spark configuration as a run starts and what it reads from the session (docs/cli.md). A key under `spark.scopeflow.` that is not
in the table is a mistake, not a setting of some other tool: it is refused with the close matches, since a
misspelled `spark.scopeflow.incremental=off` would otherwise change nothing, silently."""
from __future__ import annotations

import difflib
from typing import Callable, Optional

PREFIX = "spark.scopeflow."

SHIP = "spark.scopeflow.ship"  # true | false: ship the runtime zip to executors (runtime/shipping.py)
CHECKPOINT = "spark.scopeflow.checkpoint"  # auto | local | replicated | reliable (runtime/checkpoints.py)
CHECKPOINT_DIR = "spark.scopeflow.checkpointDir"
CONNECT_RESET = "spark.scopeflow.connect.statsResetEvery"
CONNECT_SCRATCH = "spark.scopeflow.connect.scratchDir"
COMBINE_ABOVE = "spark.scopeflow.combineAbove"  # combine a reduce's feedback after rounds that fed back this many
DEFER_FEEDBACK = "spark.scopeflow.deferFeedback"  # true | false: leave a feedback's computation to the next round
INCREMENTAL = "spark.scopeflow.incremental"  # auto | off | always (runtime/incremental.py)
INCREMENTAL_MAX_CHANGE = "spark.scopeflow.incremental.maxChange"  # a fraction of the input so far
INCREMENTAL_STATE_EVERY = "spark.scopeflow.incremental.stateEvery"  # epochs between an incremental loop's state writes
JVM_FUNCTIONS = "spark.scopeflow.jvmFunctions"  # true | false: rounds' checkpoints and jobs with scopeflow's JVM functions
LOOP_PARTITIONS = "spark.scopeflow.loopPartitions"  # auto | a number of partitions (runtime/parallelism.py)
PARTITION_BYTES = "spark.scopeflow.loopPartitionBytes"  # input bytes per partition, for auto
PLAN_AHEAD = "spark.scopeflow.planAhead"  # auto | true | false: plan a round while the previous round's job runs
STATE_OVERLAY = "spark.scopeflow.stateOverlay"  # a share of a state's keys; 0: every round rewrites it (runtime/state.py)
STATE_OVERLAY_MIN_KEYS = "spark.scopeflow.stateOverlayMinKeys"  # states smaller than this are rewritten every round


def _within(text: str, kind, low, high=None) -> bool:
    """`text` is a `kind` (int or float) from `low` to `high` (no upper bound when None)."""
    try:
        value = kind(text)
    except ValueError:
        return False
    return low <= value and (high is None or value <= high)


def _one_of(*words: str) -> Callable[[str], bool]:
    return lambda text: text.strip().lower() in words


def _any(text: str) -> bool:
    return True


# key -> (is the value right, what it must be: the message when it is not)
SETTINGS: dict[str, tuple[Callable[[str], bool], str]] = {
    SHIP: (_one_of("true", "false"), "expected true or false (false: the executors already have scopeflow)"),
    CHECKPOINT: (_one_of("auto", "local", "replicated", "reliable"),
                 "expected auto, local, replicated or reliable (e.g. reliable: round checkpoints in files)"),
    CHECKPOINT_DIR: (_any, ""),
    CONNECT_RESET: (lambda t: _within(t, int, 0),
                    "expected a number of rounds, at least 0 (e.g. 8: a Parquet copy every 8 rounds; 0: never)"),
    CONNECT_SCRATCH: (_any, ""),
    COMBINE_ABOVE: (lambda t: _within(t, int, 0),
                    "expected a number of records, at least 0 (e.g. 0: always combine a reduce's feedback)"),
    DEFER_FEEDBACK: (_one_of("true", "false"),
                     "expected true or false (false: every round stores what it feeds back)"),
    INCREMENTAL: (_one_of("auto", "off", "always"),
                  "expected auto, off or always (e.g. off: every epoch recomputes every loop)"),
    INCREMENTAL_MAX_CHANGE: (lambda t: _within(t, float, 0),
                             "expected a fraction of the input so far, at least 0 (e.g. 0.25: incremental while an "
                             "epoch adds at most 25 %)"),
    INCREMENTAL_STATE_EVERY: (lambda t: _within(t, int, 1),
                              "expected a positive number of epochs (e.g. 1: every epoch writes the states of its "
                              "incremental loops)"),
    JVM_FUNCTIONS: (_one_of("true", "false"),
                    "expected true or false (false: round checkpoints and jobs through Spark's own API only)"),
    LOOP_PARTITIONS: (lambda t: t.strip().lower() == "auto" or _within(t, int, 1),
                      "expected auto or a positive number of partitions (e.g. 1: every loop in one partition)"),
    PARTITION_BYTES: (lambda t: _within(t, int, 1),
                      "expected a positive number of bytes (e.g. 4194304: one partition per 4 MiB of a loop's "
                      "inputs)"),
    PLAN_AHEAD: (_one_of("auto", "true", "false"),
                 "expected auto, true or false (auto: while a round's Spark job takes at most twice as long as "
                 "planning one; false: a loop plans each round after the previous round's Spark job)"),
    STATE_OVERLAY: (lambda t: _within(t, float, 0, 1),
                    "expected a share of a state's keys from 0 to 1 (e.g. 0: every round rewrites the whole state)"),
    STATE_OVERLAY_MIN_KEYS: (lambda t: _within(t, int, 0),
                             "expected a number of keys, at least 0 (e.g. 0: a state of any size may have an overlay)"),
}


def setting_problem(key: str, value: str) -> Optional[str]:
    """What is wrong with a setting: a bad value of one scopeflow reads, or a `spark.scopeflow.` key it does not
    know (None: nothing, or a setting of Spark's or another tool's)."""
    if key in SETTINGS:
        right, expected = SETTINGS[key]
        return None if right(value) else expected
    if key.startswith(PREFIX):
        names = {k[len(PREFIX):]: k for k in SETTINGS}  # (compared without the prefix every key shares)
        close = difflib.get_close_matches(key[len(PREFIX):], names, n=1, cutoff=0.6)
        return "not a scopeflow setting" + (f" (did you mean {names[close[0]]}?)" if close else
                                            f"; scopeflow reads {', '.join(sorted(SETTINGS))}")
    return None
