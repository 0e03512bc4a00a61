"""Per-queue sums of per-job vectors, kept across sessions and updated only for changed jobs.

Why this exists: fair-share and admission plugins (proportion, overcommit) need, at every session
open, the sum over each queue's jobs of some per-job vector (allocated, requested, the inqueue
part of minResources...). Recomputing it walks every job with a handful of numpy calls each,
which dominated sessions in which almost nothing changed (the simulator runs 140,000 of them on
the Philly trace). ``JobSums`` keeps each job's last contribution with the ``JobInfo.version``
it was computed at; a session recomputes only the jobs whose version moved (their tasks,
statuses or PodGroup changed, including inside the previous session and its rollback) and those
that left, and moves a sum only when a contribution changed (a pod that starts running changes
its job's version, not what the job adds to most sums). Sums are int64, so the incremental
result is exactly the recomputed one.

The instance lives in ``ClusterCache.derived`` under its owner's key, so it follows the cache
(one per scheduler, per simulated policy, per test cluster) and never outlives it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from batch.model.cache import ClusterCache
from batch.model.changes import Cursor
from batch.model.info import JobInfo

__all__ = ["JobSums"]

Vec = npt.NDArray[np.int64]

#: a job whose contribution changed within its queue moves the sums by the difference, in
#: place (False: its old contribution is taken out and the new one added as a new entry)
MOVE_IN_PLACE = True


@dataclass(slots=True)
class _Entry:
    version: int
    group: str
    value: Vec | None


class JobSums:
    """Σ ``contribution(job)`` per ``job.queue`` over a session's jobs (see module docstring)."""

    __slots__ = ("_cursor", "_entries", "counts", "grand", "shape", "stamps", "sums")

    def __init__(self, shape: tuple[int, ...], cursor: Cursor) -> None:
        self.shape = shape
        self._cursor = cursor
        self._entries: dict[str, _Entry] = {}
        #: queue -> Σ of its jobs' contributions (absent: no job contributed)
        self.sums: dict[str, Vec] = {}
        #: queue -> number of jobs (contributing or not)
        self.counts: dict[str, int] = {}
        #: Σ over every queue
        self.grand: Vec = np.zeros(shape, dtype=np.int64)
        #: queue -> a number that grows whenever its sum changes (never reset while this
        #: instance lives: a reader that kept a queue's sum with its stamp knows it is current)
        self.stamps: dict[str, int] = {}

    @classmethod
    def of(cls, cache: ClusterCache, key: str, shape: tuple[int, ...]) -> JobSums:
        """The instance kept in ``cache`` under ``key``; a new one when the shape changed."""
        kept = cache.derived.get(key)
        if not isinstance(kept, cls) or kept.shape != shape:
            kept = cache.derived[key] = cls(shape, Cursor(cache.changes))
        return kept

    def refresh(
        self,
        jobs: Mapping[str, JobInfo],
        contribution: Callable[[JobInfo], Vec | None],
        *,
        follow: bool = False,
    ) -> None:
        """Bring the sums up to date with ``jobs`` (exactly the jobs that take part now).

        With ``follow``, ``jobs`` must be the session's jobs (``Session.jobs``): only the jobs
        the cache's change log names since the last refresh are looked at; any doubt (the log
        cannot tell, or the job count does not match) falls back to looking at every job."""
        changed = self._cursor.changed()
        if follow and changed is not None:
            for uid in changed:
                job = jobs.get(uid)
                if job is None:
                    e = self._entries.pop(uid, None)
                    if e is not None:
                        self._drop(e)
                else:
                    self._update(uid, job, contribution)
            if len(self._entries) == len(jobs):
                return
        for uid, job in jobs.items():
            self._update(uid, job, contribution)
        entries = self._entries
        if len(entries) != len(jobs):
            for uid in [u for u in entries if u not in jobs]:
                self._drop(entries.pop(uid))

    def _update(
        self, uid: str, job: JobInfo, contribution: Callable[[JobInfo], Vec | None]
    ) -> None:
        entries = self._entries
        e = entries.get(uid)
        if e is not None and e.version == job.version:
            return
        value = contribution(job)
        if value is not None and value.shape != self.shape:
            raise ValueError(f"contribution of {uid} has shape {value.shape}, not {self.shape}")
        if e is not None:
            if e.group == job.queue:
                if _same(e.value, value):
                    e.version = job.version  # a new version, the same contribution: no sum moves
                    return
                if MOVE_IN_PLACE and self._move(e, job.version, value):
                    return
            self._drop(e)
        if value is not None:
            value = value.copy()  # kept for subtraction: never a vector the job mutates
        e = entries[uid] = _Entry(job.version, job.queue, value)
        self.counts[e.group] = self.counts.get(e.group, 0) + 1
        if value is not None:
            self.stamps[e.group] = self.stamps.get(e.group, 0) + 1
            np.add(self.grand, value, out=self.grand)
            acc = self.sums.get(e.group)
            if acc is None:
                self.sums[e.group] = value.copy()
            else:
                np.add(acc, value, out=acc)

    def _move(self, e: _Entry, version: int, value: Vec | None) -> bool:
        """Move ``e``'s queue from its kept contribution to ``value`` (another one, of the same
        type) by the difference: int64 sums, so exactly what taking one out and adding the
        other gives. False (nothing done) when either is None or the types differ."""
        old = e.value
        if old is None or value is None or old.dtype != value.dtype:
            return False
        delta = value - old
        np.add(old, delta, out=old)  # the entry's own copy (``_update``) becomes ``value``
        e.version = version
        self.stamps[e.group] = self.stamps.get(e.group, 0) + 1
        np.add(self.grand, delta, out=self.grand)
        acc = self.sums[e.group]
        np.add(acc, delta, out=acc)
        return True

    def _drop(self, e: _Entry) -> None:
        left = self.counts[e.group] - 1
        if left:
            self.counts[e.group] = left
        else:
            del self.counts[e.group]
        if e.value is not None:
            self.stamps[e.group] = self.stamps.get(e.group, 0) + 1
            np.subtract(self.grand, e.value, out=self.grand)
            acc = self.sums[e.group]
            np.subtract(acc, e.value, out=acc)
        if not left:
            self.sums.pop(e.group, None)


def _same(kept: Vec | None, value: Vec | None) -> bool:
    """Is ``value`` the contribution ``kept`` (both None, or equal vectors of one shape and
    type)?"""
    if kept is None or value is None:
        return kept is value
    return kept.dtype == value.dtype and kept.tobytes() == value.tobytes()
