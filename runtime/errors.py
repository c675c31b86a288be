"""Runtime failures the user can act on (exit code 4), distinct from scopeflow bugs."""
from __future__ import annotations

from typing import Optional


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
