"""The session's job set, kept across sessions and updated only for jobs that changed.

Why this exists: every session starts from the jobs it schedules (a PodGroup in an existing
queue, in the cache's order), each job's priority, and which jobs are not settled (the ones
``Session.active_jobs`` visits). Building that from every job of the cache was one of the
per-job passes that made a session cost grow with the number of running jobs. ``JobIndex``
lives in ``ClusterCache.derived`` and follows the cache's ``ChangeLog``: a changed job is
updated in place, a departed one removed, a new one appended (the cache's order is the order
in which jobs were created, ``JobInfo.ordinal``). Anything else — a job joining out of that
order (its PodGroup came after its pods), a job whose queue does not exist, a Queue or
PriorityClass event (the log resets) — rebuilds the index from every job, as every session
did before.
"""

from __future__ import annotations

from batch.model.cache import ClusterCache
from batch.model.changes import Cursor
from batch.model.info import JobInfo
from batch.model.status import TaskStatus
from batch.scheduler.framework.decisions import PendingReason

__all__ = ["JobIndex"]

KEY = "session-jobs"


def unsettled(job: JobInfo) -> bool:
    """Work left: not admitted, pending or pipelined tasks, or fewer ready than minAvailable."""
    c = job.counts
    return bool(
        c[TaskStatus.PENDING]
        or c[TaskStatus.PIPELINED]
        or job.phase in ("Pending", "")
        or not job.is_ready()
    )


class JobIndex:
    """Jobs of the next session, those whose queue is missing, and the unsettled ones."""

    __slots__ = ("_last", "_open", "_open_list", "cursor", "jobs", "missing")

    def __init__(self, cache: ClusterCache) -> None:
        self.cursor = Cursor(cache.changes)
        self.jobs: dict[str, JobInfo] = {}
        #: jobs whose queue does not exist -> that queue
        self.missing: dict[str, str] = {}
        self._open: dict[str, JobInfo] = {}
        self._open_list: list[JobInfo] | None = None
        self._last = 0  # the highest ordinal appended

    @classmethod
    def of(cls, cache: ClusterCache) -> JobIndex:
        kept = cache.derived.get(KEY)
        if not isinstance(kept, cls):
            kept = cache.derived[KEY] = cls(cache)
        return kept

    def refresh(self, cache: ClusterCache, *, full: bool = False) -> bool:
        """Bring the index up to date; True when it was rebuilt from every job."""
        changed = self.cursor.changed()
        if full or changed is None or not self._apply(cache, changed):
            self._rebuild(cache)
            return True
        return False

    def missing_reasons(self) -> dict[str, PendingReason]:
        """A new reason for every job whose queue does not exist (sessions may change them)."""
        return {
            uid: PendingReason(uid, "QueueMissing", f"queue {queue!r} does not exist")
            for uid, queue in self.missing.items()
        }

    def open_list(self) -> list[JobInfo]:
        """The unsettled jobs in the index's order (callers must not change the list)."""
        if self._open_list is None:
            self._open_list = sorted(self._open.values(), key=lambda j: j.ordinal)
        return self._open_list

    def _rebuild(self, cache: ClusterCache) -> None:
        self.jobs, self.missing, self._open = {}, {}, {}
        self._open_list = None
        queues = cache.queues
        for job in cache.jobs.values():
            if job.podgroup is None:
                continue
            if job.queue not in queues:
                self.missing[job.uid] = job.queue
                continue
            self._take(cache, job)
            self._last = job.ordinal

    def _take(self, cache: ClusterCache, job: JobInfo) -> None:
        job.priority = cache.job_priority(job)
        self.jobs[job.uid] = job  # in place when it is there already
        was, now = job.uid in self._open, unsettled(job)
        if was != now:
            self._open_list = None
            if now:
                self._open[job.uid] = job
            else:
                del self._open[job.uid]

    def _drop(self, uid: str) -> None:
        del self.jobs[uid]
        if self._open.pop(uid, None) is not None:
            self._open_list = None

    def _apply(self, cache: ClusterCache, changed: list[str]) -> bool:
        """Follow ``changed``; False when only a rebuild can keep the cache's order."""
        if self.missing and any(uid in self.missing for uid in changed):
            return False
        queues, kept = cache.queues, self.jobs
        joins: list[JobInfo] = []
        for uid in changed:
            job = cache.jobs.get(uid)
            old = kept.get(uid)
            if old is not None and old is not job:
                self._drop(uid)  # gone, or re-created under the same id
                old = None
            if job is None or job.podgroup is None:
                if old is not None:
                    self._drop(uid)
                continue
            if job.queue not in queues:
                return False
            if old is None:
                joins.append(job)
            else:
                self._take(cache, job)
        joins.sort(key=lambda j: j.ordinal)
        for job in joins:
            if job.ordinal <= self._last:
                return False
            self._take(cache, job)
            self._last = job.ordinal
        return True
