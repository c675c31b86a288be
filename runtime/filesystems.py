"""File systems for the sinks' commit protocol (a rename of a staging folder): Hadoop's FileSystem API on a
classic session (local, file://, hdfs://, s3a://...), the local file system over Spark Connect (no JVM here)."""
from __future__ import annotations

import os
from urllib.parse import urlparse

from scopeflow.runtime.deployment import is_connect, not_supported


def filesystem(spark, path: str):
    """(file system, its path object) for `path`."""
    if is_connect(spark):
        return _LocalFS(), _LocalPath(local_path(path))
    hpath = spark._jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()), hpath


def fs_path(spark, path: str):
    """The path object of `path` for `filesystem(spark, ...)`'s file system."""
    if is_connect(spark):
        return _LocalPath(local_path(path))
    return spark._jvm.org.apache.hadoop.fs.Path(path)


class _LocalPath:
    def __init__(self, path: str):
        self.path = path

    def getParent(self):  # noqa: N802 - mirrors org.apache.hadoop.fs.Path
        parent = os.path.dirname(self.path.rstrip("/"))
        return _LocalPath(parent) if parent and parent != self.path else None

    def __str__(self):
        return self.path


class _LocalStatus:
    def __init__(self, path: _LocalPath):
        self.path = path

    def getPath(self) -> _LocalPath:  # noqa: N802
        return self.path


class _LocalFS:
    """The subset of Hadoop's FileSystem the sinks use, on the local filesystem (for Spark Connect)."""

    def exists(self, p: _LocalPath) -> bool:
        return os.path.exists(p.path)

    def mkdirs(self, p: _LocalPath) -> bool:
        os.makedirs(p.path, exist_ok=True)
        return True

    def rename(self, src: _LocalPath, dst: _LocalPath) -> bool:
        if os.path.exists(dst.path):
            return False
        os.rename(src.path, dst.path)
        return True

    def globStatus(self, p: _LocalPath) -> list:  # noqa: N802
        import glob

        return [_LocalStatus(_LocalPath(m)) for m in sorted(glob.glob(p.path))]

    def delete(self, p: _LocalPath, recursive: bool) -> bool:
        import shutil

        if os.path.isdir(p.path) and recursive:
            shutil.rmtree(p.path)
        elif os.path.exists(p.path):
            os.remove(p.path)
        else:
            return False
        return True


def local_path(path: str) -> str:
    """The local filesystem path of `path` (plain or file://); RuntimeFailure for other schemes."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme == "file" else path
    raise not_supported(f"committing a sink on `{parsed.scheme}://` (atomic rename through Hadoop's FileSystem)",
                        hint="over Spark Connect sinks commit by a local rename: use a local or file:// path on a "
                             "filesystem the client and the server share, or run with --master")
