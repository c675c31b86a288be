"""What a run can end with: the exit codes of `scopeflow` and of generated scripts, and the failures a
user can act on, distinct from scopeflow bugs.

A failure names where in the `.flow` file it happened (`Position`: the operator's, source's or sink's
span, carried by the generated code) and renders like the checker's diagnostics: code, `file:line:col`,
the line with a caret under the span, and a hint. The runtime cannot use `dsl/` (it runs without it),
so the excerpt is rendered here, from the `.flow` file when it is still there.
"""
from __future__ import annotations

import enum
import os
from contextlib import contextmanager
from typing import Callable, Optional

from attrs import frozen


class ExitCode(enum.IntEnum):
    OK = 0
    COMPILE = 1  # the .flow file has errors
    USAGE = 2  # bad command-line arguments or files, or a run refused before it starts
    MAX = 3  # a loop hit `max` rounds
    RUNTIME = 4  # Spark, the file system or a user's function failed
    SNAPSHOT = 5  # `--resume` refused a snapshot
    VALIDATION = 6  # `scopeflow graphalytics --validate`: the output differs from the expected one
    INTERRUPTED = 130  # Ctrl-C (SIGINT); snapshots taken so far stay resumable


EXIT_CODES = {
    ExitCode.OK: "ok",
    ExitCode.COMPILE: "the .flow file has errors",
    ExitCode.USAGE: "bad usage, or a run refused before it started (its inputs, its sink paths)",
    ExitCode.MAX: "a loop hit its `max` rounds (`on max fail`)",
    ExitCode.RUNTIME: "a run-time failure: Spark, the file system or a Python function (or a bug of scopeflow)",
    ExitCode.SNAPSHOT: "a snapshot or checkpoint was refused (`--resume`, or a streaming checkpoint: changed plan "
                       "or inputs, another pipeline's)",
    ExitCode.VALIDATION: "`graphalytics --validate`: the output differs from the expected output (LDBC's rules)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C); the snapshots taken so far stay resumable",
}


def exit_codes_help() -> str:
    """The exit codes, as `--help` lists them."""
    return "exit codes:\n" + "\n".join(f"  {int(c):<4} {text}" for c, text in EXIT_CODES.items())


@frozen
class Position:
    """Where an operator, source or sink is in its `.flow` file (1-based line and columns)."""

    file: str
    line: int
    col: int = 1
    end_col: int = 0  # 0: to the end of the line

    @classmethod
    def of(cls, file: str, at: tuple) -> Optional["Position"]:
        """The position `at` ((line, col, end col), as a generated job records it; () when unknown) in `file`."""
        return cls(file, *at) if at else None

    def __str__(self) -> str:
        return f"{shown_path(self.file)}:{self.line}:{self.col}"

    def excerpt(self, label: str = "") -> list[str]:
        out = [f"  --> {self}"]
        try:
            with open(self.file, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError):
            return out
        if not 1 <= self.line <= len(lines):
            return out
        text = lines[self.line - 1]
        gutter = " " * len(str(self.line))
        end = self.end_col if self.end_col > self.col else len(text) + 1
        return out + [f" {gutter} |", f" {self.line} | {text}",
                      f" {gutter} | {' ' * (self.col - 1)}{'^' * max(1, end - self.col)} {label}".rstrip()]


def shown_path(path: str) -> str:
    """A path as the user typed it, more or less: relative to the working folder when under it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


@contextmanager
def put_back_after(undo: Callable[[], None], what: str):
    """Run `undo` (which puts `what` back) after the block, also when the block fails. When the failure broke the
    session (its JVM or Connect server gone) nothing can be put back, and the failure is what the user must see:
    the undo's own error is added to it as a note, and the failure propagates."""
    try:
        yield
    except BaseException as failure:
        try:
            undo()
        except Exception as exc:  # recorded on the failure that propagates
            if hasattr(failure, "add_note"):
                failure.add_note(f"({what} could not be put back: {type(exc).__name__}: {exc})")
        raise
    undo()


class RuntimeFailure(Exception):
    """A failure the user can act on. `code` is one of docs/errors.md's; `at` where in the .flow file."""

    exit_code = ExitCode.RUNTIME

    def __init__(self, message: str, hint: Optional[str] = None, code: Optional[str] = None,
                 at: Optional[Position] = None, label: str = "", notes: tuple = (), detail: str = ""):
        self.message = message
        self.hint = hint
        self.code = code
        self.at = at
        self.label = label
        self.notes = tuple(notes)
        self.detail = detail  # lines shown as they are after the position (a Python traceback)
        super().__init__(message)

    def render(self) -> str:
        out = [f"error[{self.code}]: {self.message}" if self.code else f"error: {self.message}"]
        if self.at is not None:
            out += self.at.excerpt(self.label)
        if self.detail:
            out.append(self.detail)
        out += [f"   = note: {n}" for n in self.notes]
        if self.hint:
            out.append(f"   = help: {self.hint}")
        return "\n".join(out)


class RunRefused(RuntimeFailure):
    """A run refused before it starts (bad inputs, unsafe sink paths): nothing was computed or written."""

    exit_code = ExitCode.USAGE
