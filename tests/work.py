"""Bounding work, not seconds: count the lines of Tephra's own code that a call runs.

A test that wants "this does not iterate over a hundred million replicas" should not time it (a
loaded machine is slow for no fault of the code; issue 31 item 6). The number of source lines
executed under `batch/` is the same on any machine, and the count stops the call as soon as it
passes the cap, so a runaway loop fails at once instead of running for minutes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

BATCH = str(Path(__file__).resolve().parent.parent / "batch")


class TooMuchWork(AssertionError):
    """More lines of `batch/` ran than the cap allows."""


@dataclass
class Lines:
    """Lines of `batch/` run so far."""

    cap: int
    count: int = 0


@contextmanager
def lines_run(cap: int) -> Iterator[Lines]:
    """Count the lines of `batch/` run in this thread; raise TooMuchWork past `cap`."""
    lines = Lines(cap)

    def local(frame: FrameType, event: str, _arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            lines.count += 1
            if lines.count > cap:
                raise TooMuchWork(f"more than {cap} lines of batch/ ran")
        return local

    def trace(frame: FrameType, _event: str, _arg: Any) -> Callable[..., Any] | None:
        return local if frame.f_code.co_filename.startswith(BATCH) else None

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield lines
    finally:
        sys.settrace(previous)
