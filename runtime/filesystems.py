"""The file systems sinks commit on, behind one small interface with string paths (`Files`): this machine's
for local paths (plain or file://, on every kind of session, and before Spark starts), Hadoop's FileSystem
API through the JVM for other URIs (hdfs://, s3a://...) on a classic session. Over Spark Connect there is no
JVM here: only local paths, on a file system the client and the server share.
"""
from __future__ import annotations

import glob as _glob
import os
import shutil

from scopeflow.runtime.deployment import is_connect, not_supported
from scopeflow.stdlib.paths import is_local, local_path


def files_for(spark, path: str) -> "Files":
    """The file system of `path` (a local path, or a URI on a classic session's Hadoop file systems)."""
    if is_local(path):
        return LOCAL
    if spark is None or is_connect(spark):
        scheme = path.split("://", 1)[0]
        raise not_supported(f"committing a sink on `{scheme}://` (atomic rename through Hadoop's FileSystem)",
                            hint="over Spark Connect sinks commit by a local rename: use a local or file:// path on "
                                 "a filesystem the client and the server share, or run with --master")
    return HadoopFiles(spark)


class Files:
    """What the sinks do with a file system. Paths are strings; `rename` never replaces an existing path."""

    def exists(self, p: str) -> bool: ...
    def is_dir(self, p: str) -> bool: ...
    def list_files(self, p: str) -> list[str]: ...  # the files under folder p, at any depth, relative to p
    def read_text(self, p: str) -> str: ...
    def write_text(self, p: str, text: str) -> None: ...
    def rename(self, src: str, dst: str) -> bool: ...
    def delete(self, p: str) -> None: ...  # a file, or a folder and everything in it; nothing if missing
    def mkdirs(self, p: str) -> None: ...
    def glob(self, pattern: str) -> list[str]: ...

    @staticmethod
    def join(p: str, rel: str) -> str:
        return p.rstrip("/") + "/" + rel

    @staticmethod
    def parent(p: str) -> str:
        return p.rstrip("/").rsplit("/", 1)[0]


def _checksum(p: str) -> str:
    """Hadoop's local checksum file of `p` (`.NAME.crc` beside it), which Spark writes with every file."""
    head, name = os.path.split(p)
    return os.path.join(head, f".{name}.crc")


class LocalFiles(Files):
    """This machine's file system. A file's Hadoop checksum file (`.NAME.crc`) moves and goes with it, as on
    Hadoop's LocalFileSystem."""

    @staticmethod
    def _p(p: str) -> str:
        return local_path(p)

    def exists(self, p: str) -> bool:
        return os.path.lexists(self._p(p))

    def is_dir(self, p: str) -> bool:
        return os.path.isdir(self._p(p))

    def list_files(self, p: str) -> list[str]:
        root = self._p(p)
        out = []
        for dirpath, _, names in os.walk(root):
            out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
        return sorted(out)

    def read_text(self, p: str) -> str:
        with open(self._p(p), encoding="utf-8") as fh:
            return fh.read()

    def write_text(self, p: str, text: str) -> None:
        with open(self._p(p), "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def rename(self, src: str, dst: str) -> bool:
        src, dst = self._p(src), self._p(dst)
        if os.path.lexists(dst):
            return False
        os.rename(src, dst)
        if os.path.isfile(dst) and os.path.exists(_checksum(src)) and not os.path.lexists(_checksum(dst)):
            os.rename(_checksum(src), _checksum(dst))
        return True

    def delete(self, p: str) -> None:
        p = self._p(p)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)
            if os.path.exists(_checksum(p)):
                os.remove(_checksum(p))

    def mkdirs(self, p: str) -> None:
        os.makedirs(self._p(p), exist_ok=True)

    def glob(self, pattern: str) -> list[str]:
        return sorted(_glob.glob(_glob.escape(self._p(pattern)[:-1]) + "*") if pattern.endswith("*")
                      else _glob.glob(_glob.escape(self._p(pattern))))

    @staticmethod
    def join(p: str, rel: str) -> str:
        return os.path.join(p, rel)

    @staticmethod
    def parent(p: str) -> str:
        return os.path.dirname(p.rstrip(os.sep))


LOCAL = LocalFiles()


class HadoopFiles(Files):
    """A classic session's Hadoop file systems (hdfs://, s3a://, ...), through py4j."""

    def __init__(self, spark):
        self.jvm = spark._jvm
        self.conf = spark._jsc.hadoopConfiguration()

    def _fs(self, p: str):
        hp = self.jvm.org.apache.hadoop.fs.Path(p)
        return hp.getFileSystem(self.conf), hp

    def exists(self, p: str) -> bool:
        fs, hp = self._fs(p)
        return bool(fs.exists(hp))

    def is_dir(self, p: str) -> bool:
        fs, hp = self._fs(p)
        return bool(fs.exists(hp)) and bool(fs.getFileStatus(hp).isDirectory())

    def list_files(self, p: str) -> list[str]:
        fs, hp = self._fs(p)
        root = fs.makeQualified(hp).toUri().getPath().rstrip("/") + "/"
        out, it = [], fs.listFiles(hp, True)
        while it.hasNext():
            full = it.next().getPath().toUri().getPath()
            out.append(full[len(root):] if full.startswith(root) else full)
        return sorted(out)

    def read_text(self, p: str) -> str:
        fs, hp = self._fs(p)
        stream = fs.open(hp)
        try:
            return str(self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, p: str, text: str) -> None:
        fs, hp = self._fs(p)
        out = fs.create(hp, False)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()

    def rename(self, src: str, dst: str) -> bool:
        fs, hsrc = self._fs(src)
        hdst = self.jvm.org.apache.hadoop.fs.Path(dst)
        if fs.exists(hdst):  # Hadoop would move src *into* an existing folder
            return False
        return bool(fs.rename(hsrc, hdst))

    def delete(self, p: str) -> None:
        fs, hp = self._fs(p)
        fs.delete(hp, True)

    def mkdirs(self, p: str) -> None:
        fs, hp = self._fs(p)
        fs.mkdirs(hp)

    def glob(self, pattern: str) -> list[str]:
        fs, hp = self._fs(pattern)
        return sorted(str(st.getPath()) for st in (fs.globStatus(hp) or []))
