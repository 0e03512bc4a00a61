"""Answers about a job kept across sessions by job version, where the plugins say they may be.

Why this exists: a session asks every job it considers whether it is valid (JobValid), its
JobOrder key and, in the evicting actions, whether it is starving — 100,000 jobs of a backlog
in each session, and most of them in the same state as in the session before. A plugin that
registers such a callback may declare it pure per job (``hooks.Pure``): the answer reads only
the job in the state its ``JobInfo.version`` names (versions are never reused) and its
``priority``, plus a token it gives once a session (drf: the cluster total). When every
callback of an extension point is so declared, ``Dispatch`` keeps each job's answer here,
under the job's uid with its version, and asks the plugins again only for a job whose version
moved since (the change log's jobs, and the ones the session changed). Anything that may
change answers without a version — a Queue or PriorityClass event (the job index is then
rebuilt), another configuration, other callbacks, a new token — starts the point's table
afresh. A point with an undeclared callback is asked every time, as before.

``KEEP`` switches it off (tests compare both paths on random histories).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from batch.model.info import JobInfo
from batch.scheduler.framework.hooks import Point

__all__ = ["KEEP", "JobMemos", "answer"]

T = TypeVar("T")

#: keep pure per-job answers across sessions (exact; tests switch it off to compare)
KEEP = True

KEY = "job-memos"

#: uid -> (the job's version, the answer)
Table = dict[str, tuple[int, Any]]


def answer(table: Table, compute: Callable[[JobInfo], T], job: JobInfo) -> T:
    """``compute(job)``, from ``table`` when it was kept at the job's version, else computed
    and kept (``functools.partial(answer, table, compute)`` is a kept form of ``compute``)."""
    hit = table.get(job.uid)
    v = job.version
    if hit is not None and hit[0] == v:
        got: T = hit[1]
        return got
    got = compute(job)
    table[job.uid] = (v, got)
    return got


class _Table:
    __slots__ = ("data", "purity")

    def __init__(self, purity: tuple[object, ...]) -> None:
        self.purity = purity
        self.data: Table = {}


class JobMemos:
    """Per extension point, the kept answers of one configuration (in ``cache.derived``)."""

    __slots__ = ("config", "derived", "tables")

    def __init__(self, config: object) -> None:
        self.config = config
        self.tables: dict[str, _Table] = {}
        #: what actions build from these answers and keep as long as them, by name (each
        #: checks that the tables it read are still the ones it was built from)
        self.derived: dict[str, Any] = {}

    @classmethod
    def of(cls, derived: dict[str, Any], config: object, *, rebuilt: bool, jobs: int) -> JobMemos:
        """The memos of ``config`` kept in ``derived`` (emptied when the session's jobs were
        ``rebuilt``: priorities and queues may have moved without a version); tables grown
        well beyond the ``jobs`` the session holds are emptied too (departed jobs' answers)."""
        kept = derived.get(KEY)
        if not isinstance(kept, cls) or kept.config is not config or rebuilt:
            kept = derived[KEY] = cls(config)
        else:
            limit = 2 * jobs + 1024
            for table in kept.tables.values():
                if len(table.data) > limit:
                    table.data = {}
        return kept

    def table(self, name: str, points: Sequence[Point[Any]]) -> Table | None:
        """The kept answers ``name``, which read ``points`` and the job (None when one of
        their callbacks is not pure)."""
        purities = []
        for point in points:
            purity = point.purity()
            if purity is None:
                return None
            purities.append(purity)
        key = tuple(purities)
        got = self.tables.get(name)
        if got is None or got.purity != key:
            got = self.tables[name] = _Table(key)
        return got.data
