"""Shipping the runtime to executors (a cluster, or a Spark Connect server's Python workers).

User modules are pickled by value: their functions travel inside the tasks, so
no worker needs the user's file. Off the local machine the scopeflow runtime
itself is shipped as a zip (`addPyFile`, or a Connect artifact), so workers need
pyspark and pyarrow but not scopeflow, and never the compiler or lark.
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import weakref
import zipfile

from scopeflow.runtime.deployment import is_connect, is_local
from scopeflow.stdlib.python_modules import is_user_module
from scopeflow.stdlib.settings import SHIP

# The zips already shipped to a SparkContext (or a Connect session): adding one twice is an error over Connect,
# and would make every task carry it twice. Weakly keyed: it goes with the session.
_SHIPPED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


# What executors import of scopeflow: the runtime, the stdlib's tables, and the package's two light
# modules (a job never needs the compiler, the parser or the CLI there, nor their dependencies).
SHIPPED = {"scopeflow": ("__init__.py", "version.py"), "scopeflow.runtime": None, "scopeflow.stdlib": None}
_DATA = (".py", ".flow")


def shipped_files() -> list[tuple[str, str]]:
    """(archive name, file path) of the scopeflow files executors need (`SHIPPED`: None = the whole folder)."""
    import importlib.util

    files = []
    for package, names in SHIPPED.items():
        folder = importlib.util.find_spec(package).submodule_search_locations[0]
        prefix = package.replace(".", "/")
        for f in sorted(os.listdir(folder)):
            if (f in names) if names is not None else f.endswith(_DATA):
                files.append((f"{prefix}/{f}", os.path.join(folder, f)))
    return files


def runtime_zip() -> str:
    """A zip of what executors need of scopeflow (`shipped_files`), cached by content, for their PYTHONPATH.

    Nothing else is shipped: on an executor the runtime imports only the standard library, pyspark
    and the Arrow stack (Python functions run in `runtime/udf.py`)."""
    entries = []
    for arc, path in shipped_files():
        with open(path, "rb") as fh:
            entries.append((arc, fh.read()))
    digest = hashlib.sha256()
    for arc, data in entries:
        digest.update(arc.encode() + b"\0" + data)
    folder = os.path.join(tempfile.gettempdir(), f"scopeflow-ship-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"scopeflow-runtime-{digest.hexdigest()[:12]}.zip")
    if not os.path.exists(path):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for arc, data in entries:
                info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(buf.getvalue())
        os.replace(tmp, path)
    return path


def _user_modules() -> list:
    """The user's `use python` modules loaded by this process (`stdlib.python_modules`)."""
    return [m for name, m in list(sys.modules.items()) if is_user_module(name) and m is not None]


def prepare(spark) -> None:
    """Make the session able to run this pipeline's Python code wherever its workers are.

    User modules are pickled by value: their functions travel inside the tasks,
    so no worker needs the user's file. Off the local machine (a cluster or a
    Connect server) the scopeflow runtime itself is shipped as a zip, so workers
    need pyspark and pyarrow but not scopeflow. Idempotent per session.
    """
    from pyspark import cloudpickle

    for module in _user_modules():
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:  # already registered, or not importable by name: pickled by value anyway
            pass
    connect = is_connect(spark)
    if not connect and is_local(spark):
        return
    if not connect and spark.sparkContext._conf.get(SHIP, "true").strip().lower() == "false":  # (checked as the run
        # started: `check_session_settings`; not getConf(), which copies every entry over py4j)
        return
    shipped = _SHIPPED.setdefault(spark if connect else spark.sparkContext, set())
    path = runtime_zip()
    if path in shipped:
        return
    if connect:
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)
    shipped.add(path)
