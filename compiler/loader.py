"""What lowering reads from outside the .flow text, behind one object passed in: imported .flow files
(the stdlib's and the user's), users' Python modules, Parquet footers, the fields an input's files name
(CSV headers, Parquet footers, JSON records), and whether an input exists.

`FileLoader` reads the file system. A test, or a tool that holds files elsewhere, passes its own.
"""
from __future__ import annotations

import os
from importlib import resources
from typing import Optional

from scopeflow.dsl.files import read_flow
from scopeflow.stdlib.inputs import arrow_type, file_fields, matches
from scopeflow.stdlib.python_modules import load_python_module, python_functions


class FileLoader:
    def stdlib_modules(self) -> list[str]:
        """The stdlib's .flow modules by name (`graph` for `stdlib:graph`)."""
        return sorted(p.name[:-5] for p in resources.files("scopeflow.stdlib").iterdir() if p.name.endswith(".flow"))

    def stdlib_path(self, module: str) -> Optional[str]:
        res = resources.files("scopeflow.stdlib").joinpath(f"{module}.flow")
        return str(res) if res.is_file() else None

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def exists(self, path: str) -> bool:
        """Whether an input path names anything: a file or folder, or what a glob matches (as Spark reads it)."""
        return bool(matches(path))

    def read_text(self, path: str) -> str:
        """An imported .flow file's text (`dsl.files.UnreadableFlow` when it cannot be read or is not UTF-8)."""
        return read_flow(path)

    def python_functions(self, path: str, alias: str) -> dict:
        """Import a user's module (raises what its import raises); name -> signature of its functions."""
        return python_functions(load_python_module(path, alias))

    def parquet_schema(self, path: str) -> list[tuple[str, str]]:
        """(name, .flow type) of the columns in a Parquet file's (or folder's) footer; raises if unreadable."""
        import pyarrow.dataset as ds

        return [(f.name, arrow_type(f.type)) for f in ds.dataset(path, format="parquet").schema]

    def file_fields(self, fmt: str, path: str, options: dict) -> list:
        """What the files of a local input say about their fields (`stdlib.inputs.Fields`: a CSV header, a
        Parquet footer, the keys of JSON records); raises if a file cannot be read."""
        return file_fields(fmt, path, options)
