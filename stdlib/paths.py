"""How two paths of a pipeline relate: the one rule the checker and the runtime both apply to sink paths
(a sink may not be, contain or be inside the project folder, an input, another sink or the checkpoint).

Pure string work on normalised absolute paths: no file system access, symbolic links are not followed.
"""
from __future__ import annotations

import os
from typing import Optional

SAME, INSIDE, CONTAINS = "is", "is inside", "contains"


def is_local(path: str) -> bool:
    """A path on this machine's file system: plain, or a file:// URI (not hdfs://, s3a://...)."""
    return "://" not in path or path.startswith("file://")


def normalized(path: str, base_dir: str = "") -> str:
    """An absolute, normalised local path; a relative path is relative to `base_dir` (file:// stripped)."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    return os.path.normpath(os.path.join(base_dir, path) if base_dir else os.path.abspath(path))


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
