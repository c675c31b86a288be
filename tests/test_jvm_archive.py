"""The driver JVM's class-data archive (runtime/jvmarchive.py), with real `scopeflow run`s.

The suite's own JVMs map the suite's archive (tests/fast_jvm.py), which turns scopeflow's off: these runs
start from the user's environment, with a cache folder of their own."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time

import pytest

import fast_jvm
import reference
from conftest import EXAMPLES, read_output

pytestmark = pytest.mark.spark


def _env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", "SCOPEFLOW_JVM_ARCHIVE")}
    original = fast_jvm._settings.get("original")  # (SPARK_SUBMIT_OPTS as the suite found it)
    if original:
        env["SPARK_SUBMIT_OPTS"] = original
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def _run(tmp_path, env, name: str):
    work = tmp_path / name
    shutil.copytree(os.path.join(EXAMPLES, "data"), work / "data")
    shutil.copy(os.path.join(EXAMPLES, "connected_components.flow"), work)
    done = subprocess.run([sys.executable, "-m", "scopeflow.cli", "run", "connected_components.flow", "--quiet"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "graph.csv"), (int, int))
    got = dict(read_output(str(work / "out" / "components"), (int, int)))
    assert got == reference.connected_components(edges)
    assert not glob.glob(str(work / "hs_err_pid*.log"))  # (a JVM crash never writes into the user's folder)
    return done


def _folder(tmp_path) -> str:
    return str(tmp_path / "cache" / "scopeflow" / "jvm")


def _recorded(tmp_path) -> str:
    """The archive, once the helper a recording run started has put it in place (it writes in the background,
    after the run's exit)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        names = os.listdir(_folder(tmp_path))
        if len(names) == 1 and names[0].endswith(".jsa"):  # (in place, and no half-written file left)
            return os.path.join(_folder(tmp_path), names[0])
        time.sleep(0.5)
    pytest.fail(f"no archive in place after 300 s: {os.listdir(_folder(tmp_path))}")


def _maps(tmp_path, env, name: str):
    """A run whose JVM loads Spark's classes from the archive (the JDK's own archive holds none of them)."""
    loaded = tmp_path / f"{name}-class-load.txt"
    done = _run(tmp_path, dict(env, SPARK_SUBMIT_OPTS=f"-Xlog:class+load=info:file={loaded}"), name)
    assert "saving" not in done.stderr
    spark_classes = [line for line in loaded.read_text().splitlines() if " org.apache.spark.SparkContext " in line]
    assert spark_classes and spark_classes[0].endswith("source: shared objects file"), spark_classes


@pytest.mark.soak  # (four runs, and two archives written in the background: ~2.5 minutes)
def test_a_first_run_records_the_archive_and_later_runs_map_it(tmp_path):
    env = _env(tmp_path)
    first = _run(tmp_path, env, "first")
    assert "saving Spark's classes" in first.stderr
    archive = _recorded(tmp_path)
    size = os.path.getsize(archive)
    assert size > 10_000_000

    _maps(tmp_path, env, "second")
    assert _recorded(tmp_path) == archive

    # a damaged archive: the run goes on without it, removes it, and notes the failure; for a while no run
    # records again (what a JVM refuses once, such as a heap of 32 GB or more, it refuses every time)
    os.chmod(archive, 0o600)
    with open(archive, "r+b") as fh:
        fh.truncate(size // 2)
    third = _run(tmp_path, env, "third")
    assert "saving" not in third.stderr
    assert not os.path.exists(archive) and os.path.exists(archive + ".failed")
    fourth = _run(tmp_path, env, "fourth")
    assert "saving" not in fourth.stderr
    assert os.listdir(_folder(tmp_path)) == [os.path.basename(archive) + ".failed"]


def test_when_scopeflow_records_maps_or_leaves_the_archive_alone(tmp_path, monkeypatch):
    from scopeflow.runtime import jvmarchive
    from scopeflow.runtime.session import java_executable

    java = java_executable()
    for name in ("SPARK_SUBMIT_OPTS", "SCOPEFLOW_JVM_ARCHIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = jvmarchive.plan(java)
    assert first is not None and first.record
    assert any(o.startswith("-XX:DumpLoadedClassList=") for o in first.options())
    path = first.path
    assert jvmarchive.plan(java, "-Xshare:off") is None  # (spark.driver.extraJavaOptions)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xmx1g -XX:SharedArchiveFile=/elsewhere.jsa")
    assert jvmarchive.plan(java) is None
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    monkeypatch.setenv("SCOPEFLOW_JVM_ARCHIVE", "off")
    assert jvmarchive.plan(java) is None
    monkeypatch.delenv("SCOPEFLOW_JVM_ARCHIVE")

    with open(path, "wb") as fh:  # an archive in place: mapped
        fh.write(b"x")
    mapped = jvmarchive.plan(java)
    assert not mapped.record and f"-XX:SharedArchiveFile={path}" in mapped.options()
    mapped.refused()  # a JVM that could not start with it: it goes, and no run records for a while
    assert not os.path.exists(path) and jvmarchive.plan(java) is None
    os.utime(path + ".failed", (0, 0))  # (a day later)
    assert jvmarchive.plan(java).record

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "my cache"))  # (SPARK_SUBMIT_OPTS splits on spaces)
    assert jvmarchive.plan(java) is None


def test_one_process_at_a_time_records(tmp_path, monkeypatch):
    """Runs started together before there is an archive: the first claims the recording (its pid in
    `<archive>.recording`), the others run without recording while that process lives; a claim whose process is
    gone is taken over; the helper the recording process hands its claim to removes it when done."""
    import subprocess
    import sys

    from scopeflow.runtime import jvmarchive
    from scopeflow.runtime.session import java_executable

    java = java_executable()
    for name in ("SPARK_SUBMIT_OPTS", "SCOPEFLOW_JVM_ARCHIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = jvmarchive.plan(java)
    lock = first.path + ".recording"
    assert first.record and open(lock).read() == str(os.getpid())
    assert jvmarchive.plan(java).record  # (this process holds the claim: a second session may record)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(lock, "w") as fh:  # another run, alive, is recording
            fh.write(str(other.pid))
        assert jvmarchive.plan(java) is None
    finally:
        other.kill()
        other.wait()
    assert jvmarchive.plan(java).record  # its process is gone: taken over
    assert open(lock).read() == str(os.getpid())
    # the helper, handed the claim, removes it when it is done (here: no class list, so no archive)
    helper = subprocess.run([sys.executable, "-c", f"""
import os
from scopeflow.runtime import jvmarchive
jvmarchive._hand_over({first.path!r}, os.getpid())
assert not jvmarchive.complete(2 ** 22 + 7, {str(tmp_path / 'none.classes')!r}, {first.pending!r},
                               {first.path!r}, {java!r}, "")
"""], capture_output=True, text=True)
    assert helper.returncode == 0, helper.stderr
    assert not os.path.exists(lock) and not os.path.exists(first.path)


def test_only_a_whole_archive_of_spark_s_classes_is_moved_into_place(tmp_path, spark):
    """The helper's checks: a damaged archive does not map, and a class list cut short before Spark's classes
    (its JVM killed early) makes no archive."""
    from scopeflow.runtime import jvmarchive
    from scopeflow.runtime.session import java_executable

    java = java_executable()
    # (the class path of a driver pyspark starts: the shared session's is the same as a `scopeflow run`'s)
    class_path = spark.sparkContext._jvm.System.getProperty("java.class.path")
    _run(tmp_path, _env(tmp_path), "first")
    archive = _recorded(tmp_path)
    assert jvmarchive.check(java, archive, class_path)
    damaged = str(tmp_path / "damaged.jsa")
    shutil.copy(archive, damaged)
    os.chmod(damaged, 0o600)
    with open(damaged, "r+b") as fh:
        fh.truncate(os.path.getsize(damaged) * 3 // 4)
    assert not jvmarchive.check(java, damaged, class_path)

    classes, pending, path = (str(tmp_path / name) for name in ("short.classes", "short.pending", "short.jsa"))
    with open(classes, "w") as fh:  # the first classes any JVM loads, and no more
        fh.write("java/lang/Object id: 0\njava/lang/String id: 1\n")
    # (the JVM that wrote the list has ended)
    assert not jvmarchive.complete(_ended_pid(), classes, pending, path, java, class_path, timeout=60)
    assert not os.path.exists(path) and not os.path.exists(classes)
    assert not os.path.exists(path + ".failed")  # (a run killed early: the next one records, as usual)


def _ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_off_switch_records_nothing(tmp_path):
    done = _run(tmp_path, _env(tmp_path, SCOPEFLOW_JVM_ARCHIVE="off"), "off")
    assert "saving" not in done.stderr
    assert not os.path.exists(_folder(tmp_path)) or not os.listdir(_folder(tmp_path))
