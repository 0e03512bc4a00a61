"""The controller process: kopf watches feed a work queue; workers run the pure reconcilers.

kopf handlers are deliberately thin (`runtime.kopfwiring`): they only turn an event into a key
(`job ns/name`, `queue name`, `pod ns/name`, `pg ns/name`) on a de-duplicating work queue
(`runtime.keys`), plus keep the watch's caches (`runtime.watch`). Workers take a key, read the
current objects fresh from the API, call the pure reconciler (`runtime.jobs`, `runtime.queues`,
`runtime.grouping`, `batch.controllers.cronshell`), and apply its actions in order
(`runtime.writes`); a read or a write that fails (other than 404) is retried with backoff,
never guessed around. A key is never processed by two workers at once; a key that arrives while
it is being processed is processed again afterwards. With leader election, only the holder of
the Lease works, and a reconcile's writes are fenced by the term it started in
(`runtime.leadership`). The ledger hook (`runtime.ledgerhook`) records what the watches see.

`ControllerManager` composes those parts and runs them: this module is its lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kopf

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.controllers import constants as c
from batch.controllers.cronshell import CRONJOB_KEY, CronJobSync
from batch.controllers.metrics import ControllerMetrics
from batch.controllers.runtime.adapters import load_workload_adapters
from batch.controllers.runtime.grouping import Grouping
from batch.controllers.runtime.jobs import Jobs
from batch.controllers.runtime.keys import Key, Keys, WorkQueue
from batch.controllers.runtime.kopfwiring import kopf_settings, registry
from batch.controllers.runtime.leadership import FENCE, Leadership, acquire
from batch.controllers.runtime.ledgerhook import LedgerHook
from batch.controllers.runtime.queues import Queues
from batch.controllers.runtime.settings import Settings
from batch.controllers.runtime.watch import Watched
from batch.controllers.runtime.writes import Writes
from batch.controllers.shell import JOBS, PODGROUPS, QUEUES, list_items
from batch.kube.client import ApiError, KubeClient
from batch.kube.config import load_access

if TYPE_CHECKING:
    from batch.kube.leader import LeaderElector

log = logging.getLogger(__name__)


class ControllerManager:
    """All of Tephra's controllers in one asyncio program."""

    def __init__(
        self,
        kubeconfig: Path | None,
        *,
        scheduler_names: Sequence[str] = c.DEFAULT_SCHEDULER_NAMES,
        workers: int = 4,
        adapters: Sequence[Any] | None = None,
        recorder: Any = None,
        leader_elect: bool = False,
        lease_name: str = "tephra-controllers",
        lease_namespace: str = "default",
        identity: str | None = None,
        pod_batch: int = c.POD_BATCH,
        limits: AdmissionLimits = DEFAULT_LIMITS,
        queue_command_namespace: str | None = None,
    ) -> None:
        import os
        import socket

        self.kubeconfig = kubeconfig
        self.workers = workers
        self.settings = Settings(
            scheduler_names=tuple(scheduler_names),
            adapters=list(adapters) if adapters is not None else load_workload_adapters(),
            pod_batch=pod_batch,
            limits=limits,
            queue_command_namespace=queue_command_namespace or None,
        )
        self.leadership = Leadership(
            leader_elect,
            lease_name,
            lease_namespace,
            identity or f"{socket.gethostname()}-{os.getpid()}",
        )
        self.client: KubeClient | None = None
        self.reconciles = 0
        self.metrics = ControllerMetrics()
        self.keys = Keys()
        self.watched = Watched(self.settings, self.keys)
        self.ledger = LedgerHook(self.settings, self.keys, self._client, recorder)
        self.writes = Writes(self._client, self.keys, self.metrics)
        parts = (self.settings, self._client, self.watched, self.writes)
        self.jobs = Jobs(*parts, self.metrics)
        self.queues = Queues(*parts, self.metrics)
        self.grouping = Grouping(*parts)
        self.cronjobs = CronJobSync()

    def _client(self) -> KubeClient:
        if self.client is None:
            raise RuntimeError("controller client not open")
        return self.client

    # -- workers --------------------------------------------------------------------------------
    async def _worker(self) -> None:
        queue = self.keys.queue
        assert queue is not None
        while True:
            key = await queue.get()
            FENCE.set(self.leadership.fence())
            try:
                await self.process(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("reconcile %s failed: %s", "/".join(key), exc)
                await self.writes.failed(key)
            finally:
                queue.done(key)

    async def process(self, key: Key) -> None:
        self.reconciles += 1
        kind, ns, name = key
        if kind == "job":
            await self.jobs.process(ns, name)
        elif kind == "queue":
            await self.queues.process(name)
        elif kind == "pod":
            await self.grouping.process_pod(ns, name)
        elif kind == "pg":
            await self.grouping.process_group(ns, name)
        elif kind == CRONJOB_KEY:
            result = await self.cronjobs.reconcile(self._client(), ns, name)
            told = self.cronjobs.refusal_event
            if result is not None and await self.writes.apply(key, result, refused=told):
                self.cronjobs.created(key)

    # -- lifecycle ------------------------------------------------------------------------------
    async def run(
        self,
        *,
        ready: threading.Event | None = None,
        stop: threading.Event | asyncio.Event | None = None,
        standby: threading.Event | None = None,
    ) -> None:
        """Run until `stop` is set (or forever).

        With leader election on, a replica waits (setting `standby`) until it holds the Lease,
        then works; losing the Lease ends `run` with LeadershipLost so the process restarts.
        """
        self.keys.queue = WorkQueue()
        self.client = KubeClient(load_access(self.kubeconfig))
        await self.client.open()
        elector: LeaderElector | None = None
        hold: asyncio.Task[None] | None = None
        if self.leadership.enabled:
            elector = self.leadership.elector(self.client)
            if not await acquire(elector, stop=stop, standby=standby):
                await self.client.close()
                return
            hold = asyncio.create_task(elector.hold())
            self.leadership.fence_of = elector.fence
        self.keys.start_timers()
        workers = [asyncio.create_task(self._worker()) for _ in range(self.workers)]
        kopf_stop = asyncio.Event()
        kopf_ready = asyncio.Event()
        operator = asyncio.create_task(
            kopf.operator(
                registry=registry(self.kubeconfig, self.watched, self.ledger.record),
                settings=kopf_settings(),
                standalone=True,
                clusterwide=True,
                stop_flag=kopf_stop,
                ready_flag=kopf_ready,
            )
        )
        workloads = self.ledger.workload_reflectors()
        if workloads is not None:
            workloads.start()
        lost = False
        try:
            lost = await self._serve(operator, kopf_ready, ready=ready, stop=stop, elector=elector)
        finally:
            kopf_stop.set()
            if workloads is not None:
                await workloads.stop()
            await self._shut_down(operator, workers, hold, release=None if lost else elector)
        if lost:
            raise self.leadership.lost()

    async def _serve(
        self,
        operator: asyncio.Task[Any],
        kopf_ready: asyncio.Event,
        *,
        ready: threading.Event | None,
        stop: threading.Event | asyncio.Event | None,
        elector: LeaderElector | None,
    ) -> bool:
        """Once kopf is up (raising what it failed with, if it ended), queue everything once,
        say `ready`, then work until `stop` is set or kopf ends (False) or the Lease is lost
        (True)."""
        await asyncio.wait(
            [asyncio.create_task(kopf_ready.wait()), operator],
            return_when=asyncio.FIRST_COMPLETED,
        )
        if operator.done():
            operator.result()
        await self._initial_sync()
        if ready is not None:
            ready.set()
        while not operator.done():
            if stop is not None and stop.is_set():
                return False
            if elector is not None and elector.lost.is_set():
                return True
            await asyncio.sleep(0.1)
        return False

    async def _shut_down(
        self,
        operator: asyncio.Task[Any],
        workers: Sequence[asyncio.Task[None]],
        hold: asyncio.Task[None] | None,
        *,
        release: LeaderElector | None,
    ) -> None:
        """Wait for kopf to stop (5 s at most), end the workers, the timers and the Lease
        renewal, give the Lease back (`release`, unless it was lost) and close the client."""
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(operator, timeout=5)
        for w in workers:
            w.cancel()
        for w in workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await w
        self.keys.stop_timers()
        if hold is not None:
            hold.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await hold
        if release is not None:
            await release.release()
        await self._client().close()

    async def _initial_sync(self) -> None:
        """Queue every existing object once (kopf also delivers them; this covers races), then
        reconcile the ledger with what exists."""
        client = self._client()
        jobs: list[dict[str, Any]] | None = None
        with contextlib.suppress(ApiError):
            jobs = await list_items(client, JOBS)
            for job in jobs:
                meta = job["metadata"]
                self.keys.enqueue(("job", str(meta["namespace"]), str(meta["name"])))
        with contextlib.suppress(ApiError):
            for q in await list_items(client, QUEUES):
                self.watched.on_queue_event("", q)
        with contextlib.suppress(ApiError):
            self.watched.seed_podgroups(await list_items(client, PODGROUPS))
        if jobs is not None:
            await self.ledger.reconcile_at_start(jobs)

    def idle(self) -> bool:
        return self.keys.idle()


def run_forever(
    kubeconfig: Path | None, *, scheduler_names: Iterable[str], recorder: Any = None
) -> None:
    """Blocking entry point of `tephra controller`."""
    manager = ControllerManager(
        kubeconfig, scheduler_names=tuple(scheduler_names), recorder=recorder
    )
    asyncio.run(manager.run())
