"""requeue: an admission that cannot be used is given back (Tephra's; Volcano has none).

Volcano's enqueue admits a gang on its queue's share and the cluster's overcommit budget, not on
the shape of the free capacity: a 2 x 8-GPU gang is admitted beside 12 free GPUs split 6 + 6
over two nodes. If no queue is above its share, reclaim finds nothing for it either, and the
gang stays Inqueue for ever while its minResources hold the budget that keeps every later
PodGroup, its own queue's small gangs too, out of admission: GPUs idle while work waits.

The plugin times every admitted PodGroup from its admission, or from the last session that found it
ready or pipelined. Once it has stood still for ``admissionTimeout`` in a session that refused
admission to a PodGroup its admission may keep out (one that overcommit's cluster budget refused,
or one of its own queue) and that could start on the idle nodes as they are, it is put back to
Pending (event and pending reason ``Requeued``). A waiter that could not start either gains nothing
from it (on a full cluster every waiter is such a one). enqueue then holds it out of admission for
the timeout, twice that after a second give-back without having moved in between, and so on up to
``maxAdmissionHold`` (as Kueue's requeue backoff), unless it could start on the idle nodes as they
are; afterwards it is tried after its queue's other pending PodGroups until it is admitted again
(framework/admissions.py). The hold lets the PodGroups it kept out in, whichever queue goes first.
Its pods stay (the job controller creates pods once, at the first admission).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import KeysView

from batch.api.durations import format_duration
from batch.model.cache import ClusterCache
from batch.model.info import JobInfo
from batch.scheduler.framework.admissions import Admissions
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.feasibility import start_shape, starts_now
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.pluginlib.durations import parse_duration

DEFAULT_TIMEOUT = "5m"
DEFAULT_MAX_HOLD = "4h"


def _duration(arguments: Arguments, key: str, default: str) -> float:
    try:
        return parse_duration(arguments.get_str(key, default))
    except ValueError as exc:
        raise ConfigError(f"plugin requeue: argument {key!r}: {exc}") from None


def _timeout(arguments: Arguments) -> float:
    return _duration(arguments, "admissionTimeout", DEFAULT_TIMEOUT)


class RequeuePlugin(Plugin):
    name = "requeue"
    ARGUMENTS = (
        Arg(
            "admissionTimeout",
            "duration",
            DEFAULT_TIMEOUT,
            "an admitted PodGroup with no pod placed or pipelined for this long, while another "
            "that could start waits for admission, goes back to Pending behind its queue's "
            "other pending ones",
        ),
        Arg(
            "maxAdmissionHold",
            "duration",
            DEFAULT_MAX_HOLD,
            "the longest a PodGroup whose admission was given back is held out of admission "
            "(the hold starts at admissionTimeout and doubles at each give-back)",
        ),
    )
    time_dependent = True  # an admission's time runs out
    keeps_callbacks = True

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.timeout = _timeout(arguments)
        self.max_hold = _duration(arguments, "maxAdmissionHold", DEFAULT_MAX_HOLD)

    @classmethod
    def next_change(cls, cache: ClusterCache, arguments: Arguments, since: float) -> float | None:
        """The first admission's time running out, or hold ending, after ``since``."""
        book = Admissions.kept(cache)
        if book is None:
            return None
        timeout = _timeout(arguments)
        ends = [t + timeout for t in book.since.values()]
        ends.extend(book.held.values())
        return min((t for t in ends if t > since), default=None)

    def register_kept(self, hooks: Hooks) -> None:
        def enqueued(job: JobInfo) -> None:
            self.book.since[job.uid] = self.ssn.now
            self.book.held.pop(job.uid, None)

        hooks.add_job_enqueued_fn(enqueued)

    def on_session_open(self, ssn: Session) -> None:
        self.book = book = Admissions.of(ssn.cache)
        if not book.scanned:  # admitted before this scheduler started: timed from now
            book.scanned = True
            for job in ssn.jobs.values():
                if job.phase == "Inqueue":
                    book.since.setdefault(job.uid, ssn.now)

    def on_session_close(self, ssn: Session) -> None:
        book, jobs, now = self.book, ssn.jobs, ssn.now
        overdue: list[JobInfo] = []
        for uid, since in list(book.since.items()):
            job = jobs.get(uid)
            if job is None or job.phase != "Inqueue":
                del book.since[uid]
            elif job.is_pipelined():  # ready counts: it moved
                book.since[uid] = now
                book.given.pop(uid, None)
            elif now - since >= self.timeout:
                overdue.append(job)
        if overdue:
            kept_out = _KeptOut(ssn)
            for job in overdue:
                if kept_out.keeps(job):
                    self._give_back(ssn, job, now - book.since.pop(job.uid))
        if len(book.held) + len(book.given) > 64 + len(jobs):
            _forget_departed(book, jobs.keys())

    def _give_back(self, ssn: Session, job: JobInfo, waited: float) -> None:
        book = self.book
        n = book.given[job.uid] = book.given.get(job.uid, 0) + 1
        book.held[job.uid] = ssn.now + min(self.timeout * 2 ** min(n - 1, 32), self.max_hold)
        message = (
            f"admission given back after {format_duration(waited)} with no pod placed or "
            "pipelined while PodGroups it may keep out wait for admission"
        )
        last = ssn.reasons.get(job.uid)
        if last is not None:
            message += f" (last: {last.message})"
        ssn.set_phase(job, "Pending")
        ssn.set_reason(
            PendingReason(
                job.uid,
                "Requeued",
                f"{message}; {book.held_reason(job).message}",
                details={"waited": waited, "held_until": book.held[job.uid]},
            )
        )
        ssn.event(job, "Warning", "Requeued", message)


class _KeptOut:
    """The PodGroups refused admission this session that could start on the idle nodes as
    they are: the ones a standing admission keeps out to no purpose. A refused PodGroup that
    could not start either gains nothing from a give-back, and the admitted gang would lose
    its place (on a full cluster every refused PodGroup is such a one). Each verdict is made
    once a session: per start shape, and per list of refused PodGroups (the budget's, and each
    queue's), so thousands of refused single pods cost one ``starts_now`` a shape."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.by_budget: list[JobInfo] = []
        self.by_queue: dict[str, list[JobInfo]] = defaultdict(list)
        for uid, reason in ssn.reasons.items():
            job = ssn.jobs.get(uid)
            if reason.kind == "NotEnqueued" and job is not None:
                self.by_queue[job.queue].append(job)
                if reason.details.get("rejected_by") == "overcommit":
                    self.by_budget.append(job)
        self._lists: dict[str | None, bool] = {}
        self._shapes: dict[object, bool] = {}

    def keeps(self, admitted: JobInfo) -> bool:
        """Does ``admitted``'s admission keep out one that could start now: one refused by
        overcommit's cluster budget, or one of its own queue?"""
        return self._some_start(None, self.by_budget) or self._some_start(
            admitted.queue, self.by_queue.get(admitted.queue, [])
        )

    def _some_start(self, key: str | None, jobs: list[JobInfo]) -> bool:
        verdict = self._lists.get(key)
        if verdict is None:
            verdict = self._lists[key] = any(map(self._starts, jobs))
        return verdict

    def _starts(self, job: JobInfo) -> bool:
        shape = start_shape(job)
        starts = self._shapes.get(shape)
        if starts is None:
            starts = self._shapes[shape] = starts_now(self.ssn, job)
        return starts


def _forget_departed(book: Admissions, present: KeysView[str]) -> None:
    for table in (book.held, book.given):
        for uid in [u for u in table if u not in present]:
            del table[uid]
