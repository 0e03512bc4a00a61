"""Leader election over a `coordination.k8s.io/v1` Lease, as Kubernetes components do it.

Why this exists: two scheduler replicas must never bind at the same time, and when the leader
dies the other must take over quickly (within 15 s). The leader renews the Lease every
`renew_seconds`; a candidate takes the Lease when its `renewTime + leaseDurationSeconds` has
passed. Updates use the Lease's resourceVersion, so two candidates cannot both win: the loser
gets 409 Conflict and keeps waiting. A leader that cannot renew gives up at its *renew
deadline*, `2 * renew_seconds` before the Lease expires (Kubernetes' renewDeadline <
leaseDuration), so it has stopped acting before a standby may take over.
"""

from __future__ import annotations

import asyncio
import logging
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
    """Acquire and hold one Lease. `is_leader` flips off as soon as a renewal deadline passes."""

    client: KubeClient
    name: str
    namespace: str
    identity: str
    lease_seconds: int = 10
    renew_seconds: float = 2.0
    is_leader: bool = False
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    _last_renew: datetime | None = None

    @property
    def renew_deadline(self) -> float:
        """Seconds after the last successful renewal at which a leader gives up."""
        return max(self.lease_seconds - 2 * self.renew_seconds, self.renew_seconds)

    def _spec(self, now: datetime, *, acquire: datetime, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _micro_time(acquire),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One election round. Returns True when this identity holds the Lease afterwards."""
        now = datetime.now(UTC)
        try:
            lease = await self.client.get(_LEASE, self.name, self.namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, acquire=now, transitions=0),
            }
            try:
                await self.client.create(_LEASE, body, self.namespace)
            except ApiError as create_exc:
                if create_exc.status == 409:
                    return False
                raise
            self._last_renew = now
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
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
        self._last_renew = now
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

        A renewal that fails with an error is retried until the renew deadline; losing the
        Lease to another identity ends leadership at once.
        """
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                if await self.try_acquire_or_renew():
                    continue
                reason = "another replica holds it"
            except Exception as exc:
                now = datetime.now(UTC)
                last = self._last_renew or now
                if now < last + timedelta(seconds=self.renew_deadline - self.renew_seconds):
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
