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

__all__ = ["SPACED", "gc_paused", "gc_spaced", "space_collections"]

#: collection thresholds for a process holding a large live model (a cluster cache, a sandbox
#: store) that allocates in bursts: the young generation after 50,000 net allocations (Python's
#: default: 700), the middle one after 20 young collections, the old one after 100 middle ones.
#: At the defaults, building a 5,000-node / 50,000-pod cache spent half its CPU in full
#: collections (docs/sim.md#speed-gc).
SPACED = (50_000, 20, 100)


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


def space_collections() -> None:
    """``SPACED`` thresholds for the rest of the process (a service: its model lives as long),
    unless they are spaced out further already."""
    if gc.get_threshold()[0] < SPACED[0]:
        gc.set_threshold(*SPACED)


@contextmanager
def gc_spaced(thresholds: tuple[int, int, int] = SPACED) -> Iterator[None]:
    """Collections spaced out inside the block (``SPACED``); the thresholds before are back
    after it."""
    before = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*before)
