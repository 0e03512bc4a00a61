"""Run the controllers in a background thread: the sandbox component and test helper.

`ControllerComponent` follows the sandbox's Component protocol (`name`, `start(kubeconfig=...,
options=...)`, `wait_ready(timeout)`, `stop()`) without importing the sandbox (which sits above the
controllers); `start_controllers(kubeconfig, stop=...)` is the functional form.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.controllers import constants as c
from batch.controllers.operator import ControllerManager

log = logging.getLogger(__name__)


class ControllerComponent:
    """The job, queue, PodGroup and command controllers as one background component.

    `pod_batch` and `limits` (the job controller's pods per reconcile, the size limits of a job)
    default to the sandbox options' `pod_batch` and `admission_limits`, else to the defaults;
    `queue_command_namespace` (the one namespace queue Commands are taken from) to the options'.
    """

    name = "controllers"

    def __init__(
        self,
        options: Any = None,
        *,
        scheduler_names: Sequence[str] = c.DEFAULT_SCHEDULER_NAMES,
        adapters: Sequence[Any] | None = None,
        workers: int = 4,
        db_url: str | None = None,
        leader_elect: bool = False,
        lease_namespace: str = "default",
        lease_name: str = "tephra-controllers",
        identity: str | None = None,
        pod_batch: int | None = None,
        limits: AdmissionLimits | None = None,
        queue_command_namespace: str | None = None,
    ) -> None:
        self.queue_command_namespace = queue_command_namespace or getattr(
            options, "queue_command_namespace", None
        )
        self.pod_batch = pod_batch or getattr(options, "pod_batch", None) or c.POD_BATCH
        self.limits = limits or getattr(options, "admission_limits", None) or DEFAULT_LIMITS
        self.leader_elect = leader_elect
        self.lease_name = lease_name
        self.lease_namespace = lease_namespace
        self.identity = identity
        self.standby = threading.Event()
        self.options = options
        self.db_url = db_url or getattr(options, "db_url", None)
        self.recorder: Any = None
        self.scheduler_names = tuple(scheduler_names)
        self.adapters = adapters
        self.workers = workers
        self.manager: ControllerManager | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None

    def start(
        self, *, kubeconfig: Path | None, options: Any = None, stop: threading.Event | None = None
    ) -> None:
        if self._thread is not None:
            return
        if stop is not None:
            self._stop = stop
        db_url = self.db_url or getattr(options, "db_url", None)
        if db_url:
            from batch.ledger import Recorder

            # The ledger records; it never keeps the controllers from starting: the recorder
            # migrates the schema in its own thread and spills until the database answers.
            self.recorder = Recorder(db_url, migrate=True)
        self.manager = ControllerManager(
            kubeconfig,
            scheduler_names=self.scheduler_names,
            adapters=self.adapters,
            workers=self.workers,
            recorder=self.recorder,
            leader_elect=self.leader_elect,
            lease_namespace=self.lease_namespace,
            lease_name=self.lease_name,
            identity=self.identity,
            pod_batch=self.pod_batch,
            limits=self.limits,
            queue_command_namespace=self.queue_command_namespace,
        )
        manager = self.manager
        if self.recorder is not None:
            from batch.ledger.health import LedgerCollector

            manager.metrics.registry.register(LedgerCollector(self.recorder, self.name))

        def _main() -> None:
            try:
                asyncio.run(manager.run(ready=self._ready, stop=self._stop, standby=self.standby))
            except BaseException as exc:  # surfaced through wait_ready
                self._error = exc
                log.exception("controllers stopped with an error")

        self._thread = threading.Thread(target=_main, name="tephra-controllers", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> BaseException | None:
        """The error that ended the controllers' thread, if any (e.g. LeadershipLost)."""
        return self._error

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait_ready(self, timeout: float) -> bool:
        ok = self._ready.wait(timeout)
        return ok and self._error is None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
            self._thread = None
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None


def start_controllers(
    kubeconfig: Path, *, stop: threading.Event, **kwargs: Any
) -> ControllerComponent:
    """Start the controllers in a thread; returns a handle with `wait_ready()` and `stop()`."""
    component = ControllerComponent(**kwargs)
    component.start(kubeconfig=kubeconfig, stop=stop)
    return component
