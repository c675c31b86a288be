"""A class-data archive for the Spark driver JVM that scopeflow starts: faster starts after the first.

A Spark driver spends several seconds of CPU at start reading, parsing and verifying some 15,000
classes from Spark's jars. The JVM can map them from an archive instead (Class-Data Sharing,
`-XX:SharedArchiveFile`). Measured on 2 cores, a `scopeflow run` of the connected-components example:
13-15 s without, 9.6-11.6 s with (benchmarks/RESULTS.md). Results never change: the same classes
load, from a file the JVM checks against its own version and class path.

- The first run records which classes its JVM loads (`-XX:DumpLoadedClassList`: no measurable cost,
  where recording the archive itself as the JVM exits, `-XX:ArchiveClassesAtExit`, made the run ~6 s
  slower). As that process exits, it starts a helper process and closes the JVM's input (the driver
  exits on end of input, as always). Once the JVM is gone, the helper, at the lowest CPU priority,
  archives the listed classes (`-Xshare:dump`, ~30 s of one core, once, with checksums of the archive's
  regions), maps the archive in a JVM of its own (`-Xshare:on -XX:+VerifySharedSpaces`) and only then
  moves it into place. (A truncated *dynamic* archive crashed the JDK 17 JVM that mapped it, SIGBUS; a
  truncated static one is refused. Either way, only a whole, checked archive is ever at its path; what a
  killed helper leaves, a later run removes.)
- Later runs map it. A JVM that finds it unusable (damaged; settings it does not match, such as a heap of
  32 GB or more without compressed pointers) starts without it: scopeflow then removes it. If the JVM
  cannot start with the options at all, scopeflow starts it once more without them.
- One process records at a time (`<archive>.recording` holds its pid, then its helper's): runs started
  together before there is an archive do not each dump the same classes.
- Where an archive could not be made or was refused, a `<archive>.failed` note stops new recordings for
  FAILED_SECONDS (a day): no run pays for recording again and again what cannot be used.
- One archive per JDK and Spark installation and user, about 190 MB, in `~/.cache/scopeflow/jvm/`
  (`$XDG_CACHE_HOME` when set); archives unused for 14 days are removed.
- `SCOPEFLOW_JVM_ARCHIVE=off` turns it off; so does a SPARK_SUBMIT_OPTS or `spark.driver.extraJavaOptions`
  that already sets class-data sharing (`-XX:SharedArchiveFile`, `-XX:ArchiveClassesAtExit`,
  `-XX:DumpLoadedClassList`, `-Xshare`), such as the test suite's, and a cache path with spaces or quotes
  (SPARK_SUBMIT_OPTS is split on them).

Only the driver JVM of a process that starts one is concerned: not under spark-submit (its JVM is
already running), not over Spark Connect, not a cluster's executors.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

from scopeflow.runtime.cluster import alive

SWITCH = "SCOPEFLOW_JVM_ARCHIVE"  # "off": no archive
STALE_DAYS = 14  # an archive unused this long (another Spark, another JDK) is removed
MIN_FREE_BYTES = 1 << 30  # an archive takes ~190 MB: not on a nearly full disk
FAILED_SECONDS = 86400  # after a failed or refused archive, no recording for this long
PENDING_SECONDS = 1800  # a class list or archive still being written is older than this only if left behind
# the JVM prints its own warnings (e.g. "Unable to use shared archive") on stdout, which is the user's
# output (console sinks): send them to stderr, which scopeflow keeps in its JVM log
WARNINGS_TO_STDERR = ["-Xlog:disable", "-Xlog:all=warning:stderr", "-XX:+DisplayVMOutputToStderr"]
_OWN_OPTIONS = ("SharedArchiveFile", "ArchiveClassesAtExit", "DumpLoadedClassList", "-Xshare")
# a JVM that crashes writes its report in the temp folder, not in the user's working directory
_CRASH_REPORT = f"-XX:ErrorFile={os.path.join(tempfile.gettempdir(), 'scopeflow-jvm-crash-%p.log')}"
_FAILED = ".failed"  # `<archive>.failed`: the last archive could not be made or was refused (`FAILED_SECONDS`)
_PENDING = ".tmp-"  # `<archive>.tmp-<pid>`: being written for process <pid>
_RECORDING = ".recording"  # `<archive>.recording`: the pid of the one process recording it (then of its helper)


class Archive:
    """What this process does about the archive of the JVM it is about to start."""

    def __init__(self, path: str, java: str, record: bool):
        self.path = path
        self.java = java
        self.record = record  # no archive yet: record one as this process exits
        self.pending = f"{path}{_PENDING}{os.getpid()}"

    @property
    def classes(self) -> str:
        """The list of the classes the recording JVM loads (`-XX:DumpLoadedClassList`)."""
        return f"{self.pending}.classes"

    def options(self) -> list[str]:
        flags = ([f"-XX:DumpLoadedClassList={self.classes}"] if self.record
                 else [f"-XX:SharedArchiveFile={self.path}"])
        return [*flags, *WARNINGS_TO_STDERR, _CRASH_REPORT]

    def check_mapped(self, jvm) -> None:
        """Did JVM `jvm` (py4j's view of the driver started with `options()`) map the archive? A JVM that finds it
        unusable (damaged, settings it does not match) starts without class-data sharing, silently: then the
        archive is removed, and its failure noted (`FAILED_SECONDS`)."""
        try:
            bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
                jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
            mapped = bean.getVMOption("UseSharedSpaces").getValue() == "true"
        except Exception:  # noqa: BLE001 - (not a HotSpot JVM: nothing to say either way)
            return
        if not mapped:
            _remove(self.path)
            _note_failure(self.path)

    def refused(self) -> None:
        """The JVM did not start with the archive's options, and did without them: an archive it mapped goes."""
        if not self.record:
            _remove(self.path)
        _note_failure(self.path)


def plan(java: Optional[str], java_options: str = "") -> Optional[Archive]:
    """The archive for a driver JVM this process starts with `java` (and `spark.driver.extraJavaOptions`
    `java_options`): None when off, or when the JVM's options already say something about class-data
    sharing."""
    if java is None or os.environ.get(SWITCH, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    if any(opt in f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {java_options}" for opt in _OWN_OPTIONS):
        return None
    try:
        path = archive_path(java)
        if any(c.isspace() or c in "\"'\\" for c in path + _CRASH_REPORT):  # (options split on them)
            return None
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        _prune(folder, path)
        if os.path.exists(path):
            os.utime(path)  # (in use: not stale)
            return Archive(path, java, record=False)
        if (not os.access(folder, os.W_OK) or shutil.disk_usage(folder).free < MIN_FREE_BYTES
                or _failed_lately(path) or not _claim(path)):
            return None
    except OSError:  # no cache folder we can write: start the usual way
        return None
    return Archive(path, java, record=True)


def _claim(path: str) -> bool:
    """May this process record the archive at `path`? Only one process at a time does (with the helper it hands
    the recording to): runs started together before there is an archive would each spend a core for half a
    minute on the same file. A claim whose process is gone (killed, or ended without a helper) is taken over."""
    lock = path + _RECORDING
    mine = f"{lock}{_PENDING}{os.getpid()}"
    try:
        _write_pid(mine, os.getpid())
        for _ in range(2):
            try:
                os.link(mine, lock)  # (the claim appears whole, with its pid, or not at all)
                return True
            except FileExistsError:
                holder = _holder(lock)
                if holder == os.getpid():
                    return True
                if holder is not None and alive(holder):
                    return False
                _remove(lock)  # (a claim left behind: taken over, unless another run is quicker)
        return False
    except OSError:  # (a file system without hard links: record, as before the claim existed)
        return True
    finally:
        _remove(mine)


def _holder(lock: str) -> Optional[int]:
    try:
        with open(lock, encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _hand_over(path: str, pid: int) -> None:
    """The recording process's claim passes to its helper `pid` (`_claim`)."""
    lock = path + _RECORDING
    try:
        os.replace(_write_pid(f"{lock}{_PENDING}{os.getpid()}", pid), lock)
    except OSError:
        pass


def _write_pid(path: str, pid: int) -> str:
    """A claim's file, written beside the claim (`<archive>.recording.tmp-<pid>`) to be moved or linked in whole."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(str(pid))
    return path


def _failed_lately(path: str) -> bool:
    try:
        return time.time() - os.stat(path + _FAILED).st_mtime < FAILED_SECONDS
    except OSError:
        return False


def _note_failure(path: str) -> None:
    try:
        with open(path + _FAILED, "w", encoding="utf-8") as fh:
            fh.write(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    except OSError:
        pass


def archive_path(java: str) -> str:
    """One archive per JDK and Spark installation: the JVM only maps an archive of its own version and
    class path, and checks each jar's size and time."""
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    real = os.path.realpath(java)
    st = os.stat(real)
    stamps = [f"{real} {st.st_size} {st.st_mtime_ns}", jars]
    for name in sorted(os.listdir(jars)):
        jst = os.stat(os.path.join(jars, name))
        stamps.append(f"{name} {jst.st_size} {jst.st_mtime_ns}")
    key = hashlib.sha256("\n".join(stamps).encode()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "scopeflow", "jvm", f"{key}.jsa")


def finish_recording(archive: Archive, proc, class_path: str) -> None:
    """At the exit of the process that started JVM `proc` recording `archive`'s class list: hand the rest to a
    helper process of its own (`complete`), and end the JVM. This process exits at once."""
    if proc is None or proc.poll() is not None:  # (not ours to end, or gone already)
        return
    if not os.path.exists(archive.classes):  # (the JVM could not write its list: nothing to archive)
        _note_failure(archive.path)
        return
    try:
        helper = subprocess.Popen([sys.executable, "-m", "scopeflow.runtime.jvmarchive", str(proc.pid),
                                   archive.classes, archive.pending, archive.path, archive.java, class_path],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)  # (outlives this process, and a Ctrl-C in its terminal)
        _hand_over(archive.path, helper.pid)
        print("scopeflow: saving Spark's classes in the background, for faster starts (once; "
              f"{SWITCH}=off turns it off)", file=sys.stderr, flush=True)
    except OSError:
        return  # (no helper: a later run removes the class list)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the driver exits on end of input, as it does when this process ends


def complete(jvm_pid: int, classes: str, pending: str, path: str, java: str, class_path: str,
             timeout: float = 900) -> bool:
    """Once JVM `jvm_pid` is gone: archive the classes it listed at `classes` (into `pending`), check the
    archive and move it to `path`. True when the archive is in place."""
    try:
        deadline = time.monotonic() + timeout
        while alive(jvm_pid):  # (a zombie is gone: its archive is written)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        if not _lists_spark(classes):  # (a list cut short before Spark started: an archive of no use)
            return False
        dump = subprocess.run([java, "-Xshare:dump", f"-XX:SharedClassListFile={classes}",
                               f"-XX:SharedArchiveFile={pending}", "-XX:+VerifySharedSpaces", *WARNINGS_TO_STDERR,
                               _CRASH_REPORT, "-cp", class_path], capture_output=True,
                              timeout=max(1.0, deadline - time.monotonic()))
        if dump.returncode != 0 or not os.path.exists(pending) or not check(java, pending, class_path):
            _note_failure(path)
            return False
        os.replace(pending, path)
        return True
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        _remove(pending)
        _remove(classes)
        if _holder(path + _RECORDING) == os.getpid():
            _remove(path + _RECORDING)


def _lists_spark(classes: str) -> bool:
    try:
        with open(classes, encoding="utf-8", errors="replace") as fh:
            return any(line.split(" ", 1)[0].strip() == "org/apache/spark/SparkContext" for line in fh)
    except OSError:
        return False


def check(java: str, path: str, class_path: str) -> bool:
    """Does a JVM start with the archive mapped, every region of it whole (its checksums)? In a process of
    its own: a damaged archive can crash the JVM that maps it."""
    try:
        done = subprocess.run([java, f"-XX:SharedArchiveFile={path}", "-Xshare:on", "-XX:+VerifySharedSpaces",
                               *WARNINGS_TO_STDERR, _CRASH_REPORT, "-cp", class_path, "-version"],
                              capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _prune(folder: str, keep: str) -> None:
    """Remove archives unused for STALE_DAYS, and what JVMs killed while writing left half written."""
    now = time.time()
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if _PENDING in name:
                pid = name.rsplit(_PENDING, 1)[1].split(".", 1)[0]
                live = pid.isdigit() and alive(int(pid))  # (a long run's list, waiting for its exit)
                if not live and now - os.stat(path).st_mtime > PENDING_SECONDS:
                    _remove(path)
            elif path != keep and name.endswith(".jsa") and now - os.stat(path).st_atime > STALE_DAYS * 86400:
                _remove(path)
        except OSError:  # removed by another run first: nothing to do
            pass


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


if __name__ == "__main__":  # the helper `finish_recording` starts: in the background, below the user's runs
    os.nice(19)
    _pid, _classes, _pending, _path, _java, _class_path = sys.argv[1:7]
    sys.exit(0 if complete(int(_pid), _classes, _pending, _path, _java, _class_path) else 1)
