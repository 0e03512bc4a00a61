"""Python's cyclic garbage collector paused around a burst of short-lived objects.

Why this exists: a scheduling session and a month's ledger report each allocate some 10^5
short-lived objects (tuples, rows, entries) beside a large live heap. Those allocations set off
collections that walk every tracked object, which cost more than the work itself. Neither
burst leaves reference cycles behind, so reference counting frees it all; the collector resumes
(if it ran before) when the burst ends. A long run of such bursts (a simulator replay) keeps
the collector on but spaces its collections out instead, so that cycles are still found.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "gc_spaced"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off inside the block, back on after it if it was on before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def gc_spaced(young: int = 50_000, middle: int = 20, old: int = 100) -> Iterator[None]:
    """Collections spaced out inside the block: the young generation after ``young`` net
    allocations (Python's default is 700), the middle one after ``middle`` young collections,
    the old one after ``old`` middle ones; the thresholds before are back after it."""
    before = gc.get_threshold()
    gc.set_threshold(young, middle, old)
    try:
        yield
    finally:
        gc.set_threshold(*before)
