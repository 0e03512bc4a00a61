"""Background dispatch of a session's decisions: requests in flight, statuses coalesced.

Why this exists: a session's binds, evictions and status writes are round trips to the API
server, and a session that waited for all of them before the next one could start made every
pod created meanwhile wait for the whole previous batch (pod-start p50 37.7 s against
kube-scheduler's 2.4 s on a real control plane). kube-scheduler's binding cycle runs after its
scheduling cycle has *assumed* the pod; Tephra's cache assumes binds and evictions before they
are sent, so the next session can run while they are in flight:

* `InFlight` sends binds and evictions from a FIFO queue with a fixed number of workers (the
  requests on the wire). A bound on outstanding requests (queued + on the wire) is the
  backpressure: the service starts no session while it is reached. Each answer is handed to a
  callback when it arrives. Each request carries a guard, checked just before it is sent (and
  by a sender between the writes it makes, raising `Dropped`): a request whose guard fails, say
  one decided before this replica's leadership lapsed, is dropped unsent, its assumption
  undone, and reported. `close` drops what was not sent yet and waits a grace period for what
  is on the wire, so a replica that stops or loses its lease sends no bind after it.
* `StatusQueue` keeps the latest desired status per object (PodGroup, Queue, pod status patch,
  a queue's fair-share annotation) and the events to post, and writes them from one background
  task, round by round: a key is never written by two rounds at once, so an older status is
  never written after a newer one. Pending pods' `PodScheduled` conditions
  (`batch.kube.podcond`) go at most `pod_conditions_per_second` a second (a token bucket
  as deep as one second's worth), the rest in later rounds, so a burst of new pending pods does
  not flood the API server.
  While binds wait for the wire (the API server is the bottleneck), a round makes a few
  writes at once (`busy_concurrency`), not the writer's full concurrency: the binds, which
  users wait for, get the API server first, and statuses trail them, coalesced, at a bounded
  rate. Events are not made in rounds: a lane of posters takes them oldest first as they are
  offered, with a share of its own while binds wait (`busy_event_concurrency`), so an event
  never waits for a round of thousands of PodGroup statuses; a pod's `Scheduled` event is
  posted by its bind's own worker (`post`), as kube-scheduler's binding cycle records it, so
  those events keep pace with the binds (45 s after the last of 20,000 binds, 0.05 a pod had
  been posted, issue 33). A PodGroup whose binds are on their way is not written until the watch
  shows them bound: the status a session computes at allocation (Inqueue) lasts one bind, and
  writing it for every single pod of a burst doubled the PodGroup writes and took the API
  server from the binds (issue 33). A PodGroup waiting for its turn in a round is written
  with the newest status offered for it by then, once, not the round's and then the newer one
  in the next round (a pod seen running meanwhile: one PodGroup write in six was such a second
  one, issue 33). A failed write stays pending and is made again in the
  next round (rounds follow sessions, so retries do not spin). `hold_running` keeps a pending
  PodGroup status computed before a bind of its gang failed from reporting the gang Running
  (Volcano #4383).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from batch.kube.status import EventSpec, StatusWriter

__all__ = ["Dropped", "InFlight", "StatusQueue"]

log = logging.getLogger(__name__)


def _always() -> bool:
    return True


class Dropped(Exception):
    """Raised by a request's sender when its guard failed before the sender's next write: the
    request is dropped as if it had never been sent."""


@dataclass(slots=True)
class _Work:
    send: Callable[[], Awaitable[None]]  # sends the request and applies its answer
    drop: Callable[[], None]  # undoes what was assumed when the request is never sent
    guard: Callable[[], bool]  # False: the request must not be sent (any more)
    kind: str  # what the request is, as counted when it is dropped


class InFlight:
    """Requests sent by `workers` background tasks; at most `limit` outstanding for `room`.

    `on_dropped` gets the count per kind of requests dropped because their guard failed.
    """

    def __init__(
        self,
        *,
        workers: int,
        limit: int,
        on_dropped: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        self.workers = max(1, workers)
        self.limit = max(1, limit)
        self._on_dropped = on_dropped
        self._queue: deque[_Work] = deque()
        self._sending = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._work = asyncio.Event()
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def outstanding(self) -> int:
        """Requests submitted and not answered yet (queued or on the wire)."""
        return len(self._queue) + self._sending

    def submit(
        self,
        send: Callable[[], Awaitable[None]],
        drop: Callable[[], None],
        *,
        guard: Callable[[], bool] = _always,
        kind: str = "request",
    ) -> None:
        if self._closed:
            drop()
            return
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.workers)]
        self._queue.append(_Work(send, drop, guard, kind))
        self._work.set()

    async def room(self, stop: asyncio.Event | None = None, timeout: float | None = None) -> bool:
        """Wait until fewer than `limit` requests are outstanding, `stop` is set or `timeout` s
        have passed; whether there is room.

        The deadline is this wait's own, never an outer `asyncio.wait_for`'s: on Python 3.11
        a cancellation that meets the inner wait just as an answer wakes it is swallowed, and
        with answers arriving all the time the outer timeout never took (issue 33: no session
        ran beside 20,000 binds)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.outstanding >= self.limit and not (stop is not None and stop.is_set()):
            wait = 0.1 if deadline is None else min(0.1, deadline - loop.time())
            if wait <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)
        return self.outstanding < self.limit

    async def drain(self) -> None:
        """Wait until every submitted request was answered."""
        while self.outstanding:
            self._changed.clear()
            await self._changed.wait()

    async def close(self, grace: float) -> None:
        """Drop the requests not sent yet; wait up to `grace` s for those on the wire."""
        self._closed = True
        self._drop_queued()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drain(), grace)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def _drop_queued(self) -> None:
        while self._queue:
            self._queue.popleft().drop()
        self._changed.set()

    def _drop_unguarded(self, first: _Work) -> None:
        """Drop `first`, and the queued requests after it whose guards fail too, and report
        them at once."""
        first.drop()
        dropped = Counter([first.kind])
        while self._queue and not self._queue[0].guard():
            work = self._queue.popleft()
            work.drop()
            dropped[work.kind] += 1
        self._changed.set()
        if self._on_dropped is not None:
            self._on_dropped(dropped)

    async def _worker(self) -> None:
        while True:
            while not self._queue:
                self._work.clear()
                await self._work.wait()
            work = self._queue.popleft()
            if not work.guard():
                self._drop_unguarded(work)
                continue
            self._sending += 1
            try:
                await work.send()
            except asyncio.CancelledError:
                work.drop()
                raise
            except Dropped:
                self._drop_unguarded(work)
            except Exception:
                log.exception("a dispatched request failed")
            finally:
                self._sending -= 1
                self._changed.set()


PodGroupKey = tuple[str, str]


class StatusQueue:
    """The latest desired statuses and the events to post, written in background rounds."""

    def __init__(
        self,
        writer: StatusWriter,
        *,
        allowed: Callable[[], bool] = _always,
        on_written: Callable[[int], None] | None = None,
        pod_conditions_per_second: int = 500,
        clock: Callable[[], float] = time.monotonic,
        busy: Callable[[], bool] = lambda: False,
        busy_concurrency: int = 4,
        busy_event_concurrency: int | None = None,
    ) -> None:
        self.writer = writer
        #: True while binds wait for the wire: then a round makes `busy_concurrency` writes at
        #: once, not the writer's full concurrency (binds first; statuses trail)
        self._busy = busy
        self.busy_concurrency = busy_concurrency
        #: events posted at once meanwhile (default: `busy_concurrency`): their own share, so
        #: that pods' `Scheduled` events keep pace with the binds they report
        self.busy_event_concurrency = (
            busy_concurrency if busy_event_concurrency is None else busy_event_concurrency
        )
        writer.limit = self._in_flight
        writer.on_event = self._offer_event
        self.pod_conditions_per_second = pod_conditions_per_second
        self._clock = clock
        self._tokens = float(pod_conditions_per_second)
        self._filled = clock()
        self._pod_conditions: dict[PodGroupKey, dict[str, Any]] = {}
        #: events posted once the condition of the pod they are about is written
        self._condition_events: dict[PodGroupKey, EventSpec] = {}
        self._allowed = allowed
        self._on_written = on_written
        self._podgroups: dict[PodGroupKey, Mapping[str, Any]] = {}
        self._queues: dict[str, Mapping[str, Any]] = {}
        self._fair_shares: dict[str, str | None] = {}
        self._pods: dict[PodGroupKey, dict[str, Any]] = {}
        #: oldest first: the event lane posts them in the order they were offered
        self._events: OrderedDict[tuple[str, ...], EventSpec] = OrderedDict()
        self._hold: set[PodGroupKey] = set()
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._event_wake = asyncio.Event()
        self._event_workers: list[asyncio.Task[None]] = []
        self._posting = 0  # events on the wire
        self.rounds = 0

    @property
    def pending(self) -> bool:
        return bool(self._statuses_pending or self._events)

    @property
    def _statuses_pending(self) -> bool:
        return bool(
            self._podgroups
            or self._queues
            or self._fair_shares
            or self._pods
            or self._pod_conditions
        )

    def offer(
        self,
        *,
        podgroups: Mapping[PodGroupKey, Mapping[str, Any]] | None = None,
        queues: Mapping[str, Mapping[str, Any]] | None = None,
        pods: Iterable[tuple[str, str, dict[str, Any]]] = (),
        events: Iterable[EventSpec] = (),
        fair_shares: Mapping[str, str | None] | None = None,
        pod_conditions: Iterable[tuple[str, str, dict[str, Any]]] = (),
        condition_events: Iterable[EventSpec] = (),
        binding: Collection[PodGroupKey] = (),
    ) -> None:
        """Statuses of a newer session replace pending ones of the same objects
        (`fair_shares`: queue -> its fair-share annotation, None for none).

        The status of a PodGroup in `binding` (binds of its pods sent or on their way and not
        yet seen bound) is not written: it describes a state that lasts one bind, and the
        session after the watch shows the pods bound (or a bind failed) offers it afresh. Any
        status of it still pending is dropped too, as older still."""
        if podgroups:
            if binding:
                for key in binding:
                    self._podgroups.pop(key, None)
                podgroups = {k: v for k, v in podgroups.items() if k not in binding}
            self._podgroups.update(podgroups)
            self._hold.difference_update(podgroups)  # computed after every failure so far
        if queues:
            self._queues.update(queues)
        if fair_shares:
            self._fair_shares.update(fair_shares)
        self._pods.update(((ns, name), patch) for ns, name, patch in pods)
        self._pod_conditions.update(((ns, name), patch) for ns, name, patch in pod_conditions)
        self._condition_events.update(((ev.namespace, ev.name), ev) for ev in condition_events)
        for ev in events:
            self._events[(ev.kind, ev.namespace, ev.name, ev.reason, ev.message)] = ev
        self.kick()

    async def post(self, ev: EventSpec) -> None:
        """Post `ev` now, on the caller's time (a bind's worker: its pod's `Scheduled` event);
        while this replica may not write, it waits in the event lane."""
        if self._allowed():
            await self.writer.post_event(ev)
        else:
            self._offer_event(ev)

    def _offer_event(self, ev: EventSpec) -> None:
        self._events[(ev.kind, ev.namespace, ev.name, ev.reason, ev.message)] = ev
        self._kick_events()

    def _in_flight(self) -> int:
        """The writes a round may have on the wire now: few while binds wait for it."""
        return self.busy_concurrency if self._busy() else self.writer.concurrency

    def _events_in_flight(self) -> int:
        """The events that may be on the wire now: their own share while binds wait for it."""
        return self.busy_event_concurrency if self._busy() else self.writer.concurrency

    def hold_running(self, job_id: str) -> None:
        """A bind of `job_id` failed: its pending status, computed before, must not say Running."""
        namespace, _, name = job_id.partition("/")
        if (namespace, name) in self._podgroups:
            self._hold.add((namespace, name))

    def kick(self) -> None:
        """Start a round if anything is pending (a failed write is retried so, once a session).
        Events have a lane of their own: they never wait for a round of statuses, which may
        be thousands of PodGroups long."""
        self._kick_events()
        if not self._statuses_pending:
            return
        if self._task is None:
            self._task = asyncio.create_task(self._loop())
        self._wake.set()

    def _kick_events(self) -> None:
        if not self._events:
            return
        if not self._event_workers:
            self._event_workers = [
                asyncio.create_task(self._event_worker(i)) for i in range(self.writer.concurrency)
            ]
        self._event_wake.set()

    async def _event_worker(self, i: int) -> None:
        """One of the event lane's posters: the oldest event pending, one at a time, while the
        lane's share (`_events_in_flight`) counts this worker in. The lane is not made of
        rounds: an event offered while others are on the wire goes as soon as a poster is
        free, not once the slowest of them has been answered."""
        while True:
            if not self._events or not self._allowed():
                self._event_wake.clear()
                await self._event_wake.wait()
            elif i >= self._events_in_flight():
                await asyncio.sleep(0.05)
            else:
                self._posting += 1
                try:
                    await self.writer.post_event(self._events.popitem(last=False)[1])
                except Exception:
                    log.exception("event post failed")
                finally:
                    self._posting -= 1

    async def flush(self) -> None:
        """One round now, after the round in progress (if any), and the events pending after it."""
        async with self._lock:
            await self._round()
        self._kick_events()
        while (self._events or self._posting) and self._allowed():
            await asyncio.sleep(0.01)  # the lane posts them

    async def close(self, flush_timeout: float) -> None:
        """Write what is pending for up to `flush_timeout` s (0: nothing), then stop."""
        if flush_timeout > 0 and self.pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), flush_timeout)
        tasks = [t for t in (self._task, *self._event_workers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task, self._event_workers = None, []

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                async with self._lock:
                    await self._round()
            except Exception:
                log.exception("status round failed")

    def _take_podgroups(self) -> dict[PodGroupKey, Mapping[str, Any]]:
        podgroups, self._podgroups = self._podgroups, {}
        for key in self._hold:
            status = podgroups.get(key)
            if status is not None:
                podgroups[key] = self._held_back(key, status)
        self._hold.clear()
        return podgroups

    def _held_back(self, key: PodGroupKey, status: Mapping[str, Any]) -> Mapping[str, Any]:
        """`status`, but not Running: a bind of its gang failed after it was computed."""
        if status.get("phase") != "Running":
            return status
        previous = self.writer.podgroups.get(key, {}).get("phase") or "Inqueue"
        return {**status, "phase": previous}

    def _newer_podgroup(
        self, taken: dict[PodGroupKey, Mapping[str, Any]]
    ) -> Callable[[PodGroupKey], Mapping[str, Any] | None]:
        """For a round that took `taken`: the status of a PodGroup offered since, taken now
        as its turn comes (and recorded in `taken`, which a failed round offers again)."""

        def newer(key: PodGroupKey) -> Mapping[str, Any] | None:
            status = self._podgroups.pop(key, None)
            if status is None:
                return None
            if key in self._hold:
                self._hold.discard(key)
                status = self._held_back(key, status)
            taken[key] = status
            return status

        return newer

    def _take_pod_conditions(self) -> dict[PodGroupKey, dict[str, Any]]:
        """The oldest condition patches the token bucket allows; the rest wait."""
        pending = self._pod_conditions
        if not pending:
            return {}
        rate = self.pod_conditions_per_second
        now = self._clock()
        self._tokens = min(float(rate), self._tokens + rate * max(now - self._filled, 0.0))
        self._filled = now
        n = int(self._tokens)
        self._tokens -= min(n, len(pending))
        if len(pending) <= n:
            self._pod_conditions = {}
            return pending
        return {k: pending.pop(k) for k in list(pending)[:n]}

    async def _round(self) -> None:
        if not self._statuses_pending or not self._allowed():
            return
        self.rounds += 1
        podgroups = self._take_podgroups()
        queues, self._queues = self._queues, {}
        fair_shares, self._fair_shares = self._fair_shares, {}
        pods, self._pods = self._pods, {}
        failed_before = self.writer.failed_writes
        writes = await self.writer.patch_pod_statuses([(*k, p) for k, p in pods.items()])
        conditions = self._take_pod_conditions()
        writes += await self.writer.patch_pod_conditions([(*k, p) for k, p in conditions.items()])
        for key in conditions:
            ev = self._condition_events.pop(key, None)
            if ev is not None:
                self._offer_event(ev)
        writes += await self.writer.write_podgroups(podgroups, self._newer_podgroup(podgroups))
        writes += await self.writer.write_queues(queues)
        writes += await self.writer.write_fair_shares(fair_shares)
        if self._on_written is not None:
            self._on_written(writes)
        if self.writer.failed_writes > failed_before:
            # Offer them again next round unless a newer status came meanwhile; those written
            # are no difference any more (pod patches are idempotent).
            for pg_key, status in podgroups.items():
                self._podgroups.setdefault(pg_key, status)
            for name, q_status in queues.items():
                self._queues.setdefault(name, q_status)
            for name, value in fair_shares.items():
                self._fair_shares.setdefault(name, value)
            for pod_key, patch in pods.items():
                self._pods.setdefault(pod_key, patch)
            for pod_key, patch in conditions.items():
                self._pod_conditions.setdefault(pod_key, patch)
