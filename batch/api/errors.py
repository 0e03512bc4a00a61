"""Errors a user causes, and how any error reads as one line.

Why this exists: the design's rule is that bad input (a broken file, an unknown queue, an
invalid quantity) gets one clear line, never a traceback. Each layer raises its own error type
(quantities, scheduler configuration, kubeconfig, ledger URL, trace input); they all derive from
`UserError`, so the `tephra` command can turn any of them, wherever it was raised, into one line
and exit status 1, while a programming error still shows its traceback.
"""

from __future__ import annotations

import yaml

__all__ = ["UserError", "one_line"]


class UserError(ValueError):
    """Input the user gave is wrong; the message says which and why, in one line."""


def one_line(exc: BaseException) -> str:
    """The message of `exc` on one line (files named, YAML errors summarised)."""
    from batch.api.yamlio import yaml_error_summary

    if isinstance(exc, yaml.YAMLError):
        return yaml_error_summary(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__
