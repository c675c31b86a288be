"""The paths of a pipeline, one set of rules for the checker and the runtime: which are on this machine
(`local_path`), how a relative one resolves (`resolve`), which files a folder's readers skip (`hidden`),
and how two paths relate (a sink may not be, contain or be inside the project folder, an input, another
sink or the checkpoint).

Pure string work: no file system access, symbolic links are not followed.
"""
from __future__ import annotations

import os
from typing import Optional

SAME, INSIDE, CONTAINS = "is", "is inside", "contains"


def local_path(path: str) -> Optional[str]:
    """The path on this machine's file system of `path`: a plain path as it is, a `file:` URI without its
    scheme (`file:///x`, `file://localhost/x` and `file:/x` are `/x`); None for a path on another file system
    (`hdfs://`, `s3a://`, ...)."""
    if path.startswith("file:"):
        rest = path[len("file:"):]
        if rest.startswith("//"):  # file://AUTHORITY/PATH: the authority names this machine
            rest = "/" + rest[2:].partition("/")[2]
        return rest
    return None if "://" in path else path


def is_local(path: str) -> bool:
    """A path on this machine's file system: plain, or a `file:` URI (not hdfs://, s3a://...)."""
    return local_path(path) is not None


def resolve(base_dir: str, path: str) -> str:
    """A path as Spark is to read or write it: relative to `base_dir` (the .flow file's folder) when it is a
    relative plain path; an absolute path or a URI (`file:` included) stays as it is."""
    if path.startswith("file:") or not is_local(path) or os.path.isabs(path):
        return path
    return os.path.join(base_dir, path)


def normalized(path: str, base_dir: str = "") -> str:
    """The absolute, normalised local path of a local `path` (`file:` stripped); a relative path is relative
    to `base_dir` (default: the working folder). ValueError for a path on another file system."""
    local = local_path(path)
    if local is None:
        raise ValueError(f"not a local path: {path}")
    return os.path.normpath(os.path.join(base_dir, local) if base_dir else os.path.abspath(local))


def hidden(path: str) -> bool:
    """Not data: a file or folder whose name starts with `_` or `.`, which Spark's readers skip in a folder
    (`_SUCCESS`, `.part-0.crc`, scopeflow's `_SCOPEFLOW` markers)."""
    return os.path.basename(path.rstrip("/" + os.sep)).startswith(("_", "."))


def relation(path: str, other: str) -> Optional[str]:
    """How normalised path `path` relates to `other`: SAME, INSIDE (path is under other), CONTAINS (other is
    under path), or None when neither holds."""
    if path == other:
        return SAME
    if other == os.sep or path.startswith(other.rstrip(os.sep) + os.sep):
        return INSIDE
    if path == os.sep or other.startswith(path.rstrip(os.sep) + os.sep):
        return CONTAINS
    return None
