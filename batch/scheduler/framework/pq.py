"""A binary-heap priority queue ordered by a session order key (smallest key pops first)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """Items are keyed when pushed (Volcano re-pushes an item after it changed).

    Entries are (key, insertion number, item): insertion numbers are unique, so the order in
    which items pop is fixed by the keys and the insertion order alone, whatever the heap's
    layout (``extend`` heapifies once instead of pushing one by one, with the same result).
    """

    __slots__ = ("_h", "_key", "_n")

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._h: list[tuple[Any, int, T]] = []
        self._key = key
        self._n = 0

    def push(self, item: T) -> None:
        heapq.heappush(self._h, (self._key(item), self._n, item))
        self._n += 1

    def extend(self, items: Iterable[T]) -> None:
        """Push every item of ``items`` in order (one heapify: same pops as pushing each)."""
        key, n = self._key, self._n
        entries = [(key(item), n + i, item) for i, item in enumerate(items)]
        self._n = n + len(entries)
        self._h.extend(entries)
        heapq.heapify(self._h)

    def pop(self) -> T:
        return heapq.heappop(self._h)[2]

    def pops_next(self, item: T) -> bool:
        """Would ``item``, pushed now, be the next to pop? (its key now is smaller than every
        queued key: a tie goes to the item queued first)."""
        return not self._h or (self._key(item), self._n) < self._h[0][:2]

    def __len__(self) -> int:
        return len(self._h)

    def __bool__(self) -> bool:
        return bool(self._h)

    def items(self) -> list[T]:
        return [entry[2] for entry in self._h]
