"""Leadership: the controllers' Lease, and the fence each reconcile's writes are checked by."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batch.kube.client import KubeClient
    from batch.kube.leader import LeaderElector

#: the leadership check of the reconcile a worker runs: taken when the reconcile starts, so
#: what it decided in one term is never written in another (None: no leader election)
FENCE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "tephra_controller_fence", default=None
)


class LeadershipLost(RuntimeError):
    """Another replica took the controllers' Lease."""


@dataclass
class Leadership:
    """Whether the replicas elect a leader, the Lease they elect it with, and once elected the
    maker of the check a reconcile about to start takes (`fence`)."""

    enabled: bool
    name: str
    namespace: str
    identity: str
    fence_of: Callable[[], Callable[[], bool]] | None = None

    def elector(self, client: KubeClient) -> LeaderElector:
        from batch.kube.leader import LeaderElector

        return LeaderElector(
            client, name=self.name, namespace=self.namespace, identity=self.identity
        )

    def fence(self) -> Callable[[], bool] | None:
        """The leadership check of a reconcile about to start (None: no election)."""
        return None if self.fence_of is None else self.fence_of()

    def lost(self) -> LeadershipLost:
        return LeadershipLost(f"lost the lease {self.namespace}/{self.name}")


async def acquire(
    elector: LeaderElector,
    *,
    stop: threading.Event | asyncio.Event | None,
    standby: threading.Event | None,
) -> bool:
    """Wait as a standby (`standby` set) until `elector` holds the Lease; False when `stop` is
    set first."""
    if standby is not None:
        standby.set()
    task = asyncio.create_task(elector.acquire())
    while not task.done():
        if stop is not None and stop.is_set():
            task.cancel()
            return False
        await asyncio.sleep(0.1)
    return True
