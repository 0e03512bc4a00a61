"""A priority queue ordered by a session order key (smallest key pops first)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """Items are keyed when pushed (Volcano re-pushes an item after it changed).

    Entries are (key, insertion number, item): insertion numbers are unique, so the order in
    which items pop is fixed by the keys and the insertion order alone (two entries never
    compare their items). ``extend`` sorts its items into a run popped from its end (one C
    sort of mostly ordered keys, then O(1) pops: actions fill a queue once with thousands of
    jobs and re-push few); ``push`` goes to a heap, and ``pop`` takes the smaller head.
    """

    __slots__ = ("_h", "_key", "_n", "_run")

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._h: list[tuple[Any, int, T]] = []
        self._run: list[tuple[Any, int, T]] = []  # sorted, largest first
        self._key = key
        self._n = 0

    def push(self, item: T) -> None:
        heapq.heappush(self._h, (self._key(item), self._n, item))
        self._n += 1

    def extend(self, items: Iterable[T]) -> None:
        """Push every item of ``items`` in order (same pops as pushing each)."""
        key, n = self._key, self._n
        entries = [(key(item), n + i, item) for i, item in enumerate(items)]
        self._n = n + len(entries)
        if self._run:
            entries.extend(self._run)
        entries.sort(reverse=True)
        self._run = entries

    def take_run(self, run: list[tuple[Any, int, T]]) -> None:
        """Make ``run`` (entries sorted largest first; the list becomes the queue's) the run of
        this empty queue: the pops of ``extend`` of its items when no two keys tie, which
        leaves the entries' second elements, not insertion numbers here, never deciding."""
        assert not self._run and not self._h
        self._run = run
        self._n = len(run)

    def _run_first(self) -> bool:
        """Does the run (not the heap) hold the next entry? (False when both are empty)"""
        run, h = self._run, self._h
        return bool(run) and not (h and h[0] < run[-1])

    def pop(self) -> T:
        run, h = self._run, self._h
        if run and not (h and h[0] < run[-1]):  # _run_first, inline: the hot path
            return run.pop()[2]
        return heapq.heappop(h)[2]

    def pops_next(self, item: T) -> bool:
        """Would ``item``, pushed now, be the next to pop? (its key now is smaller than every
        queued key: a tie goes to the item queued first)."""
        head = self._run[-1] if self._run_first() else (self._h[0] if self._h else None)
        return head is None or (self._key(item), self._n) < head[:2]

    def __len__(self) -> int:
        return len(self._h) + len(self._run)

    def __bool__(self) -> bool:
        return bool(self._h) or bool(self._run)

    def items(self) -> list[T]:
        return [entry[2] for entry in (*reversed(self._run), *self._h)]
