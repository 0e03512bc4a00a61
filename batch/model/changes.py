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

from collections.abc import Collection

__all__ = ["ChangeLog", "Cursor"]


class ChangeLog:
    """Job uids ordered by their last change, each with the sequence number of that change."""

    __slots__ = ("_held", "_held_read", "_last", "floor", "seq")

    def __init__(self) -> None:
        self.seq = 0
        #: below this sequence number nothing is known any more (reset, pruned)
        self.floor = 0
        self._last: dict[str, int] = {}
        #: while held (``hold``): the uids marked since, kept aside (in the order of their
        #: last mark)
        self._held: dict[str, None] | None = None
        #: a consumer was told of held uids (``since``)
        self._held_read = False

    def mark(self, uid: str) -> None:
        held = self._held
        if held is not None:
            held.pop(uid, None)
            held[uid] = None
            return
        self.seq += 1
        last = self._last
        last.pop(uid, None)
        last[uid] = self.seq

    def reset(self) -> None:
        """Every consumer recomputes everything at its next look."""
        self.seq += 1
        self.floor = self.seq
        self._last.clear()

    def hold(self) -> None:
        """Keep the uids marked from now on aside until ``release``: a scheduling session's
        changes, which its rollback undoes (a job back at the version a consumer summed it at
        needs no second look)."""
        if self._held is not None:  # a session that never rolled back: give up its changes
            self.release(())
        self._held = {}
        self._held_read = False

    def release(self, undone: Collection[str]) -> None:
        """End ``hold``: mark the held uids now, except those in ``undone`` (back at the very
        version and state they had when the hold began) unless a consumer was told of them
        in between (it may have kept what they were then)."""
        held, self._held = self._held, None
        if held:
            for uid in held:
                if self._held_read or uid not in undone:
                    self.mark(uid)

    def since(self, cursor: int, *, held: bool = True) -> list[str] | None:
        """Uids changed after ``cursor`` (most recent first), or None when unknown. With
        ``held`` (default) the uids held now come first (``hold``); without, they are left
        out, and the caller has to find the changes made under the hold itself."""
        if cursor < self.floor:
            return None
        out: list[str] = []
        kept = self._held
        if held and kept:
            self._held_read = True
            out.extend(reversed(kept))
        for uid, seq in reversed(self._last.items()):
            if seq <= cursor:
                break
            if not (held and kept and uid in kept):
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

    def changed(self, *, held: bool = True) -> list[str] | None:
        """Jobs changed since the last call (None: recompute everything), and move on
        (``held``: as ``ChangeLog.since``)."""
        out = self.log.since(self.at, held=held) if self.at >= 0 else None
        self.at = self.log.seq
        return out
