"""What a run can end with: the exit codes of `scopeflow` and of generated scripts, and the failures a
user can act on (exit code 4), distinct from scopeflow bugs."""
from __future__ import annotations

import enum
from typing import Optional


class ExitCode(enum.IntEnum):
    OK = 0
    COMPILE = 1  # the .flow file has errors
    USAGE = 2  # bad command-line arguments or files
    MAX = 3  # a loop hit `max` rounds
    RUNTIME = 4  # Spark, the file system or a user's function failed
    SNAPSHOT = 5  # `--resume` refused a snapshot


class RuntimeFailure(Exception):
    def __init__(self, message: str, hint: Optional[str] = None):
        self.message = message
        self.hint = hint
        super().__init__(message)

    def render(self) -> str:
        out = f"error: {self.message}"
        if self.hint:
            out += f"\n   = help: {self.hint}"
        return out
