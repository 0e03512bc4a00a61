"""Leader election over a `coordination.k8s.io/v1` Lease, as Kubernetes components do it.

Why this exists: two scheduler replicas must never bind at the same time, and when the leader
dies the other must take over quickly (within 15 s). The leader renews the Lease every
`renew_seconds`; a candidate takes the Lease when its `renewTime + leaseDurationSeconds` has
passed. Updates use the Lease's resourceVersion, so two candidates cannot both win: the loser
gets 409 Conflict and keeps waiting. A leader that cannot renew gives up at its *renew
deadline*, `2 * renew_seconds` before the Lease expires (Kubernetes' renewDeadline <
leaseDuration), so it has stopped acting before a standby may take over.

A failed call is not the only way to lose the Lease: a leader paused (SIGSTOP, a stalled VM, a
starved event loop) past the lease duration wakes up with no error to tell it that a standby
has led meanwhile. So leadership is *current* only while the last successful renewal, timed on
the monotonic clock from before its request was sent, is younger than the lease duration
(client-go's rule); a wall-clock jump cannot make an old renewal look fresh. Writes that depend
on leadership check `current()` just before they are sent. A renewal after leadership lapsed
starts a new *term*: work decided in an earlier term is dropped (`fence`), since leadership
could have been lost in between. Renewing never re-acquires: a Lease that another identity
held since this one's last renewal means another replica may have acted, and the leadership is
lost for good (the replica restarts with fresh state, as kube-scheduler does).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from batch.api.timestamps import parse_time
from batch.kube.client import RESOURCES, ApiError, KubeClient

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)
_LEASE = RESOURCES["Lease"]


def _micro_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    """Acquire and hold one Lease. `is_leader` flips off as soon as a renewal deadline passes;
    `current()` says whether writes that depend on leadership may be sent now."""

    client: KubeClient
    name: str
    namespace: str
    identity: str
    lease_seconds: int = 10
    renew_seconds: float = 2.0
    is_leader: bool = False
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    #: seconds on a monotonic clock (a fake one in tests)
    clock: Callable[[], float] = time.monotonic
    #: counts the leaderships that began: acquisitions and renewals after a lapse
    term: int = 0
    _renewed_at: float | None = None  # `clock()` before the last successful renewal was sent

    @property
    def renew_deadline(self) -> float:
        """Seconds after the last successful renewal at which a leader gives up."""
        return max(self.lease_seconds - 2 * self.renew_seconds, self.renew_seconds)

    def current(self, term: int | None = None) -> bool:
        """Whether this replica leads now (and still in `term`, when given): it holds the
        Lease and its last successful renewal is younger than the lease duration."""
        if not self.is_leader or self.lost.is_set() or self._renewed_at is None:
            return False
        if term is not None and term != self.term:
            return False
        return self.clock() < self._renewed_at + self.lease_seconds

    def fence(self) -> Callable[[], bool]:
        """A check that holds while the leadership current now lasts: False once it has lapsed
        or been lost, and also after a renewal that followed a lapse."""
        return functools.partial(self.current, self.term)

    def _renewed(self, started: float, *, acquired: bool) -> None:
        """Record a successful renewal whose request was sent at `started`."""
        previous, self._renewed_at = self._renewed_at, started
        lapsed_for = None if previous is None else started - previous - self.lease_seconds
        lapsed = lapsed_for is not None and lapsed_for >= 0
        if acquired or previous is None or lapsed:
            self.term += 1
        if lapsed and not acquired:
            log.warning(
                "renewed the lease %s/%s %.1fs after it lapsed: decisions made before are dropped",
                self.namespace,
                self.name,
                lapsed_for,
            )

    def _spec(self, now: datetime, *, acquire: datetime, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _micro_time(acquire),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self, *, renew_only: bool = False) -> bool:
        """One election round. Returns True when this identity holds the Lease afterwards.

        With `renew_only`, a Lease that is missing or not held by this identity is not taken
        (whether or not it expired): someone else may have led since this one's last renewal.
        """
        started = self.clock()
        now = datetime.now(UTC)
        try:
            lease = await self.client.get(_LEASE, self.name, self.namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
            return False if renew_only else await self._create(started, now)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if renew_only and holder != self.identity:
            return False
        renew = parse_time(spec.get("renewTime"))
        duration = int(spec.get("leaseDurationSeconds") or self.lease_seconds)
        expired = renew is None or renew + timedelta(seconds=duration) < now
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = parse_time(spec.get("acquireTime")) or now
        if holder != self.identity:
            transitions += 1
            acquire = now
        lease["spec"] = self._spec(now, acquire=acquire, transitions=transitions)
        try:
            await self.client.replace(_LEASE, lease)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        self._renewed(started, acquired=holder != self.identity)
        return True

    async def _create(self, started: float, now: datetime) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec(now, acquire=now, transitions=0),
        }
        try:
            await self.client.create(_LEASE, body, self.namespace)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        self._renewed(started, acquired=True)
        return True

    async def acquire(self) -> None:
        """Block until this identity is the leader."""
        while True:
            try:
                if await self.try_acquire_or_renew():
                    self.is_leader = True
                    log.info("became leader of lease %s/%s", self.namespace, self.name)
                    return
            except (TimeoutError, ApiError, OSError) as exc:
                log.warning("leader election round failed: %s", exc)
            except Exception as exc:  # aiohttp client errors
                log.warning("leader election round failed: %r", exc)
            await asyncio.sleep(self.renew_seconds)

    async def hold(self) -> None:
        """Renew until the Lease is lost, then set `lost`; run as a background task.

        A renewal that fails with an error is retried until the renew deadline; finding the
        Lease held by (or taken and given back by) another identity ends leadership at once.
        """
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                if await self.try_acquire_or_renew(renew_only=True):
                    continue
                reason = "another replica holds it, or held it since the last renewal"
            except Exception as exc:
                last = self.clock() if self._renewed_at is None else self._renewed_at
                if self.clock() < last + self.renew_deadline - self.renew_seconds:
                    log.warning("lease renewal failed, retrying: %r", exc)
                    continue
                reason = f"renewals failed until the renew deadline ({exc!r})"
            self.is_leader = False
            self.lost.set()
            log.error("lost the leader lease %s/%s: %s", self.namespace, self.name, reason)
            return

    async def release(self) -> None:
        """Give the Lease up on clean shutdown so a standby takes over at once."""
        if not self.is_leader:
            return
        try:
            lease = await self.client.get(_LEASE, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["renewTime"] = _micro_time(datetime(1970, 1, 1, tzinfo=UTC))
                lease["spec"]["holderIdentity"] = None
                await self.client.replace(_LEASE, lease)
        except Exception as exc:
            log.warning("could not release the lease: %r", exc)
        self.is_leader = False
