"""A binary-heap priority queue ordered by a session order key (smallest key pops first)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """Items are keyed when pushed (Volcano re-pushes an item after it changed)."""

    __slots__ = ("_h", "_key", "_n")

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._h: list[tuple[Any, int, T]] = []
        self._key = key
        self._n = 0

    def push(self, item: T) -> None:
        heapq.heappush(self._h, (self._key(item), self._n, item))
        self._n += 1

    def pop(self) -> T:
        return heapq.heappop(self._h)[2]

    def __len__(self) -> int:
        return len(self._h)

    def __bool__(self) -> bool:
        return bool(self._h)

    def items(self) -> list[T]:
        return [entry[2] for entry in self._h]
