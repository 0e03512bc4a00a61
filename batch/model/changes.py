"""Which jobs changed, for state kept across sessions that follows only changed jobs.

Why this exists: the scheduler keeps per-queue sums, the session's job index and PodGroup
statuses across sessions. Deciding which jobs to recompute by comparing every job's version is
already a pass over all jobs in every session. ``ChangeLog`` records, as it happens, every job
whose ``JobInfo.version`` moved (tasks, statuses, PodGroup facts, a session's changes and their
rollback) or that left the cache, ordered by its last change; a consumer keeps a ``Cursor`` and
asks for the jobs changed since it last looked, in O(changed).

A consumer gets ``None`` instead of a list when it must recompute everything: on its first look,
after ``reset`` (a change that touches every job's standing, such as a Queue or a PriorityClass
event), or when the entries it needed were pruned.
"""

from __future__ import annotations

__all__ = ["ChangeLog", "Cursor"]


class ChangeLog:
    """Job uids ordered by their last change, each with the sequence number of that change."""

    __slots__ = ("_last", "floor", "seq")

    def __init__(self) -> None:
        self.seq = 0
        #: below this sequence number nothing is known any more (reset, pruned)
        self.floor = 0
        self._last: dict[str, int] = {}

    def mark(self, uid: str) -> None:
        self.seq += 1
        last = self._last
        last.pop(uid, None)
        last[uid] = self.seq

    def reset(self) -> None:
        """Every consumer recomputes everything at its next look."""
        self.seq += 1
        self.floor = self.seq
        self._last.clear()

    def since(self, cursor: int) -> list[str] | None:
        """Uids changed after ``cursor`` (most recent first), or None when unknown."""
        if cursor < self.floor:
            return None
        out: list[str] = []
        for uid, seq in reversed(self._last.items()):
            if seq <= cursor:
                break
            out.append(uid)
        return out

    def prune(self, keep: int) -> None:
        """Forget the oldest entries beyond ``keep`` (consumers that needed them recompute)."""
        last = self._last
        drop = len(last) - keep
        if drop <= 0:
            return
        for uid in list(last)[:drop]:
            self.floor = max(self.floor, last.pop(uid))

    def __len__(self) -> int:
        return len(self._last)


class Cursor:
    """One consumer's position in a ``ChangeLog``."""

    __slots__ = ("at", "log")

    def __init__(self, log: ChangeLog) -> None:
        self.log = log
        self.at = -1

    def changed(self) -> list[str] | None:
        """Jobs changed since the last call (None: recompute everything), and move on."""
        out = self.log.since(self.at) if self.at >= 0 else None
        self.at = self.log.seq
        return out
