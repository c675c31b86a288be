"""What a file sink may do to its target folder (docs/language.md "Sink modes"), decided the same way before
Spark starts (`preflight.check_sinks`, this machine's files) and again when the sink writes (`sinks.py`, any
file system).

Every folder scopeflow writes holds a marker, `_SCOPEFLOW` (written by a sink that replaces its target) or
`_SCOPEFLOW-<commit>` (one per `append`), a JSON file listing the files that write put there. Spark's readers
skip files whose names start with `_` or `.`, so the marker is never read as data. A target is scopeflow's
when every file in it is listed by one of its markers (or is one, or is a listed file's `.NAME.crc`); a sink
without `mode` replaces only such a target, and refuses one holding anything else (E0402).

One run writes a target at a time: a write holds `<target>.__lock` (its host, process and commit) from before
it puts the target in order (`sinks.recover`, which deletes staging folders) until it has committed. A target
whose lock a live process holds is refused (E0408); a lock whose process is gone (a run killed on this host)
or whose commit is the writer's own (the same run, resumed) is taken over. Whether a process on another host
is alive cannot be seen from here: its lock is refused until it is deleted.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from typing import Optional

from attrs import frozen

from scopeflow.runtime.filesystems import Files
from scopeflow.stdlib.sinks import SINK_MODES

MARKER = "_SCOPEFLOW"
STAGING = ".__staging-"  # `<target>.__staging-<hex>`: a write in progress, beside the target
BACKUP = ".__previous"  # `<target>.__previous`: the old target during a swap
LOCK = ".__lock"  # `<target>.__lock`: the run writing the target
SHOWN = 5  # foreign files named in a message


@frozen
class Problem:
    """Why a sink may not write its target: a docs/errors.md code, the message, a hint, notes."""

    code: str
    message: str
    hint: str
    notes: tuple = ()


def is_marker(name: str) -> bool:
    return name == MARKER or (name.startswith(MARKER + "-") and "." not in name)


def marker_doc(pipeline: str, fmt: str, mode: Optional[str], commit: str, files: list,
               extra: Optional[dict] = None) -> str:
    """The marker's JSON; `extra`: a streaming sink's query id and epoch."""
    return json.dumps({"written_by": "scopeflow", "pipeline": pipeline, "format": fmt, "mode": mode or "replace",
                       "commit": commit, **(extra or {}), "files": sorted(files)}, indent=1)


def sink_key(op: str, fmt: str, target: str) -> str:
    """A sink of a run, as the sink log (`sinks.json` in the checkpoint folder) names the ones committed:
    its operator, format and target path (resolved against the base folder, not normalised)."""
    return f"{op}:{fmt}:{target}"


def commit_id(token: str, key: str) -> str:
    """The commit id sink `key` writes into its marker: the same when the run is resumed (`token` is the
    run's, kept in the sink log), so a resumed run knows a target it committed before it was killed."""
    return hashlib.sha256(f"{token}:{key}".encode()).hexdigest()[:16]


def committed(fs: Files, target: str, commit: str) -> bool:
    """Commit `commit` is in `target`: its `_SCOPEFLOW` marker (a replace) or `_SCOPEFLOW-<commit>` (an
    append) says so. Only the run that made it (or that run resumed) has this commit id."""
    if not commit:
        return False
    if fs.exists(fs.join(target, f"{MARKER}-{commit}")):
        return True
    path = fs.join(target, MARKER)
    if not fs.exists(path):
        return False
    try:
        return json.loads(fs.read_text(path)).get("commit") == commit
    except (OSError, ValueError, AttributeError):
        return False


def listed(fs: Files, path: str) -> set:
    try:
        return set(json.loads(fs.read_text(path)).get("files", []))
    except (OSError, ValueError, AttributeError):
        return set()


def pending_appends(fs: Files, target: str) -> list[tuple[str, str]]:
    """(staging folder, marker name) of each append into `target` that was written but not committed (a crash
    between moving its files in and moving its marker in): the next write takes its files back out."""
    out = []
    for staging in fs.glob(f"{target}{STAGING}*"):
        for m in fs.glob(fs.join(staging, MARKER + "-*")):
            name = m.rstrip("/").rsplit("/", 1)[-1]
            if is_marker(name) and not fs.exists(fs.join(target, name)):
                out.append((staging, name))
    return out


def foreign_files(fs: Files, target: str) -> list[str]:
    """The files under folder `target` that no scopeflow marker lists, relative to it."""
    files = fs.list_files(target)
    owned = {f for f in files if "/" not in f and os.sep not in f and is_marker(f)}
    for m in list(owned):
        owned |= listed(fs, fs.join(target, m))
    for staging, name in pending_appends(fs, target):
        owned |= listed(fs, fs.join(staging, name))

    def mine(f: str) -> bool:
        head, name = os.path.split(f)
        crc_of = os.path.join(head, name[1:-4]) if name.startswith(".") and name.endswith(".crc") else None
        return f in owned or (crc_of is not None and crc_of in owned)

    return [f for f in files if not mine(f)]


def check(fs: Files, target: str, mode: Optional[str], commit: str = "") -> Optional[Problem]:
    """Why a sink with `mode` may not write `target`, or None. A target a crash left as its backup counts
    as the target (the next write restores it first). A target holding commit `commit` is this run's own,
    written before it was killed and resumed: the sink skips it (any mode)."""
    if mode is not None and mode not in SINK_MODES:  # (the checker allows no other: a job.py edited by hand)
        return Problem("E0405", f"sink mode \"{mode}\" is not one of {', '.join(SINK_MODES)}",
                       "give the sink one of them (docs/language.md \"Sink modes\"), or no mode")
    where = target if fs.exists(target) else f"{target}{BACKUP}" if fs.exists(f"{target}{BACKUP}") else None
    if where is None or mode == "overwrite" or (where == target and committed(fs, target, commit)):
        return None
    if mode == "error_if_exists":
        return Problem("E0403", f"sink target {target} exists and the sink says mode = \"error_if_exists\"",
                       "remove it or write elsewhere; or choose a mode: \"overwrite\" replaces it, \"append\" adds "
                       "to it, and without `mode` a sink replaces only what scopeflow wrote")
    if not fs.is_dir(where):
        return Problem("E0402", f"sink target {target} is a file, which scopeflow did not write",
                       "nothing was deleted. Write to another path, move the file away, or add mode = \"overwrite\" "
                       "to the sink to replace it")
    if mode == "append":
        return None  # adds files, deletes none
    foreign = foreign_files(fs, where)
    if not foreign:
        return None
    shown = ", ".join(foreign[:SHOWN]) + (f" (and {len(foreign) - SHOWN} more)" if len(foreign) > SHOWN else "")
    return Problem("E0402", f"sink target {target} holds files scopeflow did not write: {shown}",
                   "nothing was deleted. Write to another folder, move the files away, or add mode = \"overwrite\" "
                   "to the sink to replace the folder and everything in it",
                   (f"a folder scopeflow writes has a {MARKER} file listing what it wrote; the sink replaces only "
                    "such a folder (one written before scopeflow marked its output has none: delete it once)",))


def lock_holder(fs: Files, target: str) -> Optional[dict]:
    """What the lock of `target` says (host, pid, commit, since), or None when there is no lock. An unreadable
    lock (a write caught between creating and filling it) says nothing: {}."""
    path = f"{target}{LOCK}"
    if not fs.exists(path):
        return None
    try:
        doc = json.loads(fs.read_text(path))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _alive(holder: dict) -> bool:
    """The process holding a lock may still be writing: it runs on this host, or on one whose processes this
    one cannot see. A lock of this process is a leftover (a process writes one sink at a time)."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return True  # (an unreadable lock: its writer may be filling it in)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def busy(fs: Files, target: str, commit: str = "") -> Optional[Problem]:
    """Why `target` may not be written now: another run holds its lock and may be alive (E0408), or None.
    A lock of commit `commit` is the writer's own (the same run, resumed)."""
    holder = lock_holder(fs, target)
    if holder is None or (commit and holder.get("commit") == commit) or not _alive(holder):
        return None
    lock = f"{target}{LOCK}"
    since = holder.get("since")
    who = f"process {holder.get('pid', '?')} on {holder.get('host', '?')}" + (
        time.strftime(", since %Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, float) else "")
    if holder.get("host") == socket.gethostname():
        hint = "wait for it to end, or write elsewhere: two runs writing one target at once would delete " \
               f"each other's files (the lock {lock} goes when that run ends)"
    else:
        hint = f"wait for it to end, or write elsewhere; if no run is writing there any more (that process " \
               f"was killed), delete {lock}"
    return Problem("E0408", f"sink target {target} is being written by another scopeflow run ({who})", hint,
                   (f"the run holds {lock}; one run writes a target at a time",))


def lock(fs: Files, target: str, commit: str) -> Optional[Problem]:
    """Take the lock of `target` for this process (None), or say why not (E0408)."""
    problem = busy(fs, target, commit)
    if problem is not None:
        return problem
    path = f"{target}{LOCK}"
    fs.delete(path)  # a leftover of a run that is gone (or none)
    parent = fs.parent(target)
    if parent and not fs.exists(parent):
        fs.mkdirs(parent)
    doc = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "commit": commit, "since": time.time()})
    try:
        fs.write_text(path, doc)  # fails when the file exists: another run took it just now
    except Exception:
        if not fs.exists(path):
            raise
        return busy(fs, target, commit) or Problem(
            "E0408", f"sink target {target} is being written by another scopeflow run", "wait for it to end, or "
            "write elsewhere", (f"the run holds {path}; one run writes a target at a time",))
    return None


def unlock(fs: Files, target: str) -> None:
    fs.delete(f"{target}{LOCK}")


def writable(target: str) -> Optional[Problem]:
    """Why this machine's `target` cannot be written, or None: the sink creates `target` and a staging folder
    beside it (so the nearest existing folder above it must be writable), and replaces or adds to `target`."""
    if os.path.isdir(target) and not os.access(target, os.W_OK | os.X_OK):
        return _not_writable(target, target)
    above = os.path.dirname(target.rstrip(os.sep)) or os.sep
    while not os.path.lexists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        return Problem("E0404", f"sink target {target} cannot be written: {above} is not a folder",
                       f"write to a path that is not inside the file {above}")
    if not os.access(above, os.W_OK | os.X_OK):
        return _not_writable(target, above)
    return None


def _not_writable(target: str, folder: str) -> Problem:
    return Problem("E0404", f"sink target {target} cannot be written: no write access to {folder} (permission "
                            "denied, or a read-only file system)",
                   f"give this user write access (chmod u+w {folder}) or write elsewhere")
