"""Admissions that stand still, kept across sessions (``ClusterCache.derived``).

The requeue plugin (plugins/requeue) times every admitted PodGroup from its admission, or from
the last session in which it was ready or pipelined, and gives back an admission that stood
still too long: the PodGroup is Pending again, held out of admission for a while (``held``:
longer each time it gives its admission back without having moved in between) and then tried
after its queue's other pending PodGroups until it is admitted again. enqueue reads ``held``.
Without the plugin nothing is ever timed or held (Volcano's enqueue).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batch.api.timestamps import format_epoch
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.scheduler.framework.decisions import PendingReason

KEY: Final = "admissions"
_NONE: Final[Mapping[str, float]] = {}


class Admissions:
    """``since``: admitted PodGroup uid -> when it was admitted or last ready or pipelined;
    ``held``: uid of a PodGroup whose admission was given back -> until when enqueue may not
    admit it (then: after its queue's other pending PodGroups), until admitted again;
    ``given``: uid -> admissions given back since the PodGroup last moved;
    ``scanned``: the PodGroups admitted before the first session are timed from then on."""

    __slots__ = ("given", "held", "scanned", "since")

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self.held: dict[str, float] = {}
        self.given: dict[str, int] = {}
        self.scanned = False

    @classmethod
    def of(cls, cache: ClusterCache) -> Admissions:
        book = cache.derived.get(KEY)
        if not isinstance(book, cls):
            book = cache.derived[KEY] = cls()
        return book

    @classmethod
    def kept(cls, cache: ClusterCache) -> Admissions | None:
        """The book, if a session made one."""
        book = cache.derived.get(KEY)
        return book if isinstance(book, cls) else None

    def held_reason(self, job: JobInfo) -> PendingReason:
        """Why ``job`` is not put to admission now."""
        until = format_epoch(self.held[job.uid])
        return PendingReason(
            job.uid,
            "Requeued",
            f"admission given back {self.given.get(job.uid, 1)} time(s) with no pod placed; "
            f"not admitted again before {until}, then after queue {job.queue!r}'s other "
            "pending PodGroups",
            details={"held_until": self.held[job.uid]},
        )


def held_admissions(cache: ClusterCache) -> Mapping[str, float]:
    """PodGroup uid -> until when its admission, given back, is held (empty when no plugin
    gives admissions back)."""
    book = Admissions.kept(cache)
    return _NONE if book is None else book.held
