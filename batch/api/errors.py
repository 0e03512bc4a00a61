"""Errors a user causes, and how any error reads as one line.

Why this exists: the design's rule is that bad input (a broken file, an unknown queue, an
invalid quantity) gets one clear line, never a traceback. Each layer raises its own error type
(quantities, scheduler configuration, kubeconfig, ledger URL, trace input); they all derive from
`UserError`, so the `tephra` command can turn any of them, wherever it was raised, into one line
and exit status 1, while a programming error still shows its traceback.
"""

from __future__ import annotations

import yaml

__all__ = ["UserError", "one_line", "yaml_error_summary"]


class UserError(ValueError):
    """Input the user gave is wrong; the message says which and why, in one line."""


def one_line(exc: BaseException) -> str:
    """The message of `exc` on one line (files named, YAML errors summarised)."""
    if isinstance(exc, yaml.YAMLError):
        return yaml_error_summary(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def yaml_error_summary(exc: yaml.YAMLError) -> str:
    """One line describing a YAML error and where it is."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "syntax error"
        return f"{what}{where}"
    return " ".join(str(exc).split())
