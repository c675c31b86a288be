"""Shared fixtures: one real local SparkSession for the whole test session."""
from __future__ import annotations

import csv
import glob
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, HERE)


def pytest_configure(config):
    import fast_jvm

    fast_jvm.configure(EXAMPLES)  # before the first JVM: the shared session and every subprocess's


def pytest_collection_modifyitems(config, items):
    """Tests marked `soak` (minutes each) run first: spread over the xdist workers from the start, none is left
    to run alone at the end. (A stable sort: every worker collects the same order, as xdist requires.)"""
    items.sort(key=lambda item: item.get_closest_marker("soak") is None)


@pytest.fixture(scope="session")
def spark():
    import fast_jvm
    from scopeflow.runtime.session import build_session

    with fast_jvm.long_running():
        # loops in the session's 2 partitions, however small their inputs (what a user's larger loops do):
        # the suite covers co-partitioned state, combiners and narrowing across partitions; scopeflow's own
        # choice for small inputs (runtime/parallelism.py) is tested with it set back, and every `scopeflow
        # run` the tests start makes it
        session = build_session("scopeflow-tests", conf={"spark.sql.shuffle.partitions": "2",
                                                         "spark.default.parallelism": "2",
                                                         "spark.scopeflow.loopPartitionBytes": "1"})
    yield session
    session.stop()


@pytest.fixture
def combine_above(spark):
    """Set `spark.scopeflow.combineAbove` (records fed back in a round above which the next round
    combines a reduce's feedback) for one test."""
    def set_to(records) -> None:
        spark.conf.set("spark.scopeflow.combineAbove", str(records))

    yield set_to
    spark.conf.unset("spark.scopeflow.combineAbove")


@pytest.fixture
def stored_feedback(spark):
    """Every round stores what it feeds back (`spark.scopeflow.deferFeedback=false`), for one test: one that
    tests how stored feedback is combined, counted or placed."""
    spark.conf.set("spark.scopeflow.deferFeedback", "false")
    yield
    spark.conf.unset("spark.scopeflow.deferFeedback")


@pytest.fixture
def plan_ahead(spark):
    """Set `spark.scopeflow.planAhead` for the runs of one test (each run reads it as it starts)."""
    def set_to(on) -> None:  # True, False or "auto"
        spark.conf.set("spark.scopeflow.planAhead", on if isinstance(on, str) else "true" if on else "false")

    yield set_to
    spark.conf.unset("spark.scopeflow.planAhead")


@pytest.fixture
def session_at(spark):
    """The shared session with other settings for one test (put back after it)."""
    saved = {}

    def set_to(**values):
        for key, value in values.items():
            saved.setdefault(key, spark.conf.get(key, None))
            spark.conf.set(key, str(value))

    yield set_to
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@pytest.fixture
def example_copy(tmp_path):
    """Copy an example (and the shared data folder) into tmp_path so its outputs land there."""

    def copy(name: str) -> str:
        shutil.copytree(os.path.join(EXAMPLES, "data"), tmp_path / "data", dirs_exist_ok=True)
        for extra in glob.glob(os.path.join(EXAMPLES, "*.py")):
            shutil.copy(extra, tmp_path)
        shutil.copy(os.path.join(EXAMPLES, name), tmp_path / name)
        return str(tmp_path / name)

    return copy


def write_csv(path, header: list, rows: list) -> None:
    """A CSV file (and its folder) of a header and rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def read_output(path: str, types=None) -> list[tuple]:
    """Rows of a Spark CSV output directory (all part files), converted with `types`."""
    rows = []
    for part in sorted(glob.glob(os.path.join(path, "part-*.csv"))):
        with open(part, newline="") as fh:
            reader = csv.reader(fh)
            next(reader, None)
            for r in reader:
                rows.append(tuple(t(v) for t, v in zip(types, r)) if types else tuple(r))
    return rows


def without_java() -> dict:
    """An environment in which Spark cannot start: a run that answers in it never started Spark (had it tried,
    it would have failed with exit 4: Java was not found)."""
    return dict(os.environ, JAVA_HOME="/nonexistent", PATH="/nonexistent")


def without_permission_override() -> list:
    """A command prefix under which root is refused reading or writing what its permission bits refuse (as any
    user is), or skip: root reads and writes anything unless it runs without CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH."""
    if os.geteuid() != 0:
        return []
    capsh = shutil.which("capsh")
    if capsh is None:
        pytest.skip("running as root, and capsh is missing to drop CAP_DAC_OVERRIDE: root can read and write anything")
    return [capsh, "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", 'exec "$0" "$@"']


@pytest.fixture
def run_cli():
    """Run the `scopeflow` CLI as a real subprocess."""
    import subprocess

    def run(*args, env=None, cwd=None, timeout=600):
        return subprocess.run([sys.executable, "-m", "scopeflow.cli", *args], capture_output=True, text=True,
                              env=env, cwd=cwd, timeout=timeout)

    return run


GOLDEN = os.path.join(HERE, "golden")


def check_golden(kind: str, name: str, text: str) -> None:
    """`text` must equal tests/golden/KIND/NAME. A missing golden file fails; `SCOPEFLOW_UPDATE_GOLDEN=1`
    (re)writes it, to be reviewed in the diff."""
    path = os.path.join(GOLDEN, kind, name)
    if os.environ.get("SCOPEFLOW_UPDATE_GOLDEN") == "1":
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    if not os.path.exists(path):
        pytest.fail(f"no golden file {path}: write it with SCOPEFLOW_UPDATE_GOLDEN=1 and review it")
    with open(path, encoding="utf-8") as fh:
        assert text == fh.read(), f"{kind}/{name} changed; review the diff, then SCOPEFLOW_UPDATE_GOLDEN=1"
