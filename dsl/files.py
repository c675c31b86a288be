"""Reading a `.flow` file's text. A `.flow` file is UTF-8; one that cannot be read (permission denied, a
folder) or decoded raises `UnreadableFlow`, which names the file and the reason (for a decode error, the
byte, its offset, and the line and column it is on, with a caret under it) instead of a Python traceback.
"""
from __future__ import annotations

from typing import Optional

from scopeflow.dsl.ast import Span
from scopeflow.dsl.diagnostics import _excerpt


class UnreadableFlow(Exception):
    """A `.flow` file that cannot be read or is not UTF-8 text."""

    def __init__(self, path: str, reason: str, hint: str, span: Optional[Span] = None, text: str = ""):
        self.path = path
        self.reason = reason
        self.hint = hint
        self.span = span  # where the first byte that is not UTF-8 is
        self.text = text  # the file decoded with that byte replaced, to show the line
        super().__init__(f"{path}: {reason}")

    def render(self, label: str = "not UTF-8") -> str:
        lines = [f"error: cannot read {self.path}: {self.reason}"]
        lines += _excerpt(self.span, self.text, label) if self.span is not None else []
        return "\n".join(lines + [f"   = help: {self.hint}"])


def read_flow(path: str) -> str:
    """The text of the `.flow` file at `path`; UnreadableFlow when it cannot be read or is not UTF-8."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
        raise UnreadableFlow(path, reason, "check the path and that this user may read the file "
                                           f"(ls -l {path})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        start = data.rfind(b"\n", 0, err.start) + 1
        line = data.count(b"\n", 0, err.start) + 1
        col = len(data[start:err.start].decode("utf-8", errors="replace")) + 1
        span = Span(path, line, col, line, col + 1)
        bad = " ".join(f"0x{b:02x}" for b in data[err.start:err.end])
        raise UnreadableFlow(
            path, f"it is not UTF-8 text: byte {bad} at offset {err.start} (line {line}, column {col}): {err.reason}",
            f"save the file as UTF-8 (from Latin-1: iconv -f latin1 -t utf-8 {path} -o {path}.utf8)", span,
            data.decode("utf-8", errors="replace")) from None
