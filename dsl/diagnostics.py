"""One diagnostic type for every user-facing problem: code, severity, span, hints."""
from __future__ import annotations

import difflib
from typing import Iterable, Optional

from attrs import field, frozen

from scopeflow.dsl.ast import Span


@frozen
class Diagnostic:
    code: str
    message: str
    span: Optional[Span]
    severity: str = "error"  # "error" | "warning"
    label: str = ""  # text under the caret
    hints: tuple[str, ...] = ()
    notes: tuple["Diagnostic", ...] = field(default=(), eq=False)  # secondary locations

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def render(self, source: Optional[str] = None) -> str:
        lines = [f"{self.severity}[{self.code}]: {self.message}"]
        lines += _excerpt(self.span, source, self.label)
        for note in self.notes:
            lines.append(f"   = note: {note.message}")
            lines += _excerpt(note.span, None, note.label)
        lines += [f"   = help: {h}" for h in self.hints]
        return "\n".join(lines)


def _excerpt(span: Optional[Span], source: Optional[str], label: str) -> list[str]:
    if span is None:
        return []
    out = [f"  --> {span}"]
    text = source if source is not None else _read(span.file)
    if text is None:
        return out
    all_lines = text.splitlines()
    if not 1 <= span.line <= len(all_lines):
        return out
    line = all_lines[span.line - 1]
    gutter = " " * len(str(span.line))
    end_col = span.end_col if span.end_line == span.line else len(line) + 1
    width = max(1, end_col - span.col)
    out += [
        f" {gutter} |",
        f" {span.line} | {line}",
        f" {gutter} | {' ' * (span.col - 1)}{'^' * width} {label}".rstrip(),
    ]
    return out


_SOURCES: dict[str, str] = {}


def register_source(file: str, text: str) -> None:
    """Remember a file's text so excerpts can be rendered for it later."""
    _SOURCES[file] = text


def _read(file: str) -> Optional[str]:
    if file in _SOURCES:
        return _SOURCES[file]
    try:
        with open(file, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def did_you_mean(name: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """Close-match hint(s) for an unknown name, and the alternatives when few."""
    cands = sorted(set(candidates))
    close = difflib.get_close_matches(name, cands, n=3, cutoff=0.6)
    if close:
        return (f"did you mean {', '.join(f'`{c}`' for c in close)}?",)
    if cands and len(cands) <= 12:
        return (f"available: {', '.join(f'`{c}`' for c in cands)}",)
    return ()


class FlowError(Exception):
    """Raised when a stage found user errors; carries every diagnostic of the file."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n\n".join(d.render() for d in diagnostics))


class InternalError(Exception):
    """A bug in scopeflow, never the user's fault; rendered differently from FlowError."""
