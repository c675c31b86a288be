"""Virtual environments for tests that need a Python with only some of this one's packages (linked, not
installed: no network): a Spark executor's Python, a driver with the runtime but not the compiler."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig


def linked_venv(folder, packages) -> str:
    """A venv in `folder` whose site-packages links `packages` (top-level names, `.py` files included) from
    this Python's; returns its python."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    python = os.path.join(str(folder), "bin", "python")
    site = subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()
    source = sysconfig.get_paths()["purelib"]
    for name in packages:
        if os.path.exists(os.path.join(source, name)):
            os.symlink(os.path.join(source, name), os.path.join(site, name))
    return python


def can_import(python: str, module: str) -> bool:
    # not from the checkout's root, where `import scopeflow` would find the ./scopeflow folder
    folder = os.path.dirname(os.path.dirname(python))
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True, cwd=folder).returncode == 0
