"""Each queue's jobs in JobOrder, kept across sessions for allocate's collect pass.

Why this exists: allocate orders the jobs it collects by JobOrder in every session; at 100,000
single-pod jobs that is the key of each job (kept by version already, ``framework/jobmemo.py``)
and a sort of 100,000 entries, although most jobs are where they were in the session before.
When the JobOrder keys are kept (every JobOrder callback is pure per job), ``KeptRuns`` keeps
each queue's collected jobs sorted by key, with the version each was keyed at, and brings them
up to date by the jobs that differ: collected now at another version or as another object (a
job re-created under its id), collected now and not before, or not collected now. A queue built
from a kept run pops in the very order of one built from its jobs: two jobs' keys never tie
(JobOrder's fallback ends in the uid), so neither the insertion order nor the second element
of an entry ever decides. A job kept at its version was collected in that very state, with
allocate's verdicts kept (pure per job, ``enqueue`` configured): it is valid and has pending
tasks again, so collect asks neither, and takes a single task as the job's worksheet. The runs
live with the kept answers (``JobMemos.derived``), so they start afresh whenever those do, and
when the key or verdict table they were built with is replaced.

``KEEP`` switches it off (tests compare both paths on random histories).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container
from typing import Any

from batch.model.info import JobInfo
from batch.scheduler.actionlib.pq import PriorityQueue
from batch.scheduler.framework.jobmemo import Table
from batch.scheduler.framework.session import Session

__all__ = ["KEEP", "KeptRuns"]

#: keep allocate's per-queue JobOrder across sessions (exact; tests switch it off to compare)
KEEP = True

KEY = "allocate-runs"

#: up to this many changes, entries are removed and inserted one at a time (a bisect and a move
#: of the list's tail each); beyond, the runs are filtered or sorted again as a whole
FEW = 64

#: (JobOrder key, the job's version when keyed, the job)
Entry = tuple[Any, int, JobInfo]


class KeptRuns:
    """Per queue, the jobs allocate collected in the last session, ascending by JobOrder key."""

    __slots__ = ("index", "runs", "table", "verdicts")

    def __init__(self, table: Table, verdicts: Table) -> None:
        self.table = table
        self.verdicts = verdicts
        #: job uid -> (its queue when keyed, its entry)
        self.index: dict[str, tuple[str, Entry]] = {}
        self.runs: dict[str, list[Entry]] = {}

    @classmethod
    def of(cls, ssn: Session, verdicts: Table) -> KeptRuns | None:
        """The runs kept for ``ssn``'s configuration and allocate's kept ``verdicts`` (None
        when its JobOrder keys are not kept, or the switch is off)."""
        dispatch = ssn.dispatch
        table = dispatch.job_order_table()
        if not KEEP or dispatch.memos is None or table is None:
            return None
        derived = dispatch.memos.derived
        got = derived.get(KEY)
        if not isinstance(got, cls) or got.table is not table or got.verdicts is not verdicts:
            got = derived[KEY] = cls(table, verdicts)
        return got

    def update(
        self,
        fresh: dict[str, list[JobInfo]],
        stale: list[tuple[str, Entry]],
        hits: int,
        collected: Container[str],
        key: Callable[[JobInfo], Any],
    ) -> None:
        """Bring the runs to this session's collected jobs: ``hits`` kept entries are still
        right, the ``stale`` ones are not, ``fresh`` jobs (per queue) have none; any other
        kept entry is of a job not ``collected`` now."""
        if len(self.index) - hits - len(stale) or len(stale) > FEW:
            self._filter(collected, {e[2].uid for _, e in stale})
        else:
            for name, e in stale:
                self._remove(name, e)
        few = sum(map(len, fresh.values())) <= FEW
        index, runs = self.index, self.runs
        for name, jobs in fresh.items():
            run = runs.get(name)
            if run is None:
                run = runs[name] = []
            entries = [(key(j), j.version, j) for j in jobs]
            for e in entries:
                index[e[2].uid] = (name, e)
            if few:
                for e in entries:
                    bisect.insort(run, e)
            else:
                run.extend(entries)
                run.sort()

    def queue(self, name: str, key: Callable[[JobInfo], Any]) -> PriorityQueue[JobInfo]:
        """A queue of the jobs kept for queue ``name`` (pops as ``extend`` of them would)."""
        pq: PriorityQueue[JobInfo] = PriorityQueue(key)
        pq.take_run(self.runs[name][::-1])
        return pq

    def _remove(self, name: str, e: Entry) -> None:
        run = self.runs[name]
        i = bisect.bisect_left(run, e[:2])  # (key, version) sorts just before its entry
        assert run[i] is e
        del run[i]
        del self.index[e[2].uid]

    def _filter(self, collected: Container[str], stale: set[str]) -> None:
        """Keep the entries of jobs collected now whose entry is not ``stale``."""
        runs: dict[str, list[Entry]] = {}
        for name, run in self.runs.items():
            kept = [e for e in run if (u := e[2].uid) in collected and u not in stale]
            if kept:
                runs[name] = kept
        self.runs = runs
        self.index = {e[2].uid: (name, e) for name, run in runs.items() for e in run}
