"""Applying a reconcile's actions: in order, fenced by leadership, retried with backoff.

A read or a write that fails (other than 404) is retried with backoff, never guessed around; a
job that keeps failing is terminated (Volcano's --max-requeue-num). A write the API server
forbids is told to the user in an event on the object. Metrics count the writes the API server
took, not the ones intended.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from batch.controllers import constants as c
from batch.controllers.effects import EmitEvent, ObjectRef, PatchStatus
from batch.controllers.job import pending_forbidden
from batch.controllers.jobspec import meta
from batch.controllers.metrics import ControllerMetrics
from batch.controllers.runtime.keys import Key, Keys
from batch.controllers.runtime.leadership import FENCE
from batch.controllers.shell import (
    COMMANDS,
    JOBS,
    ApplyError,
    NotLeading,
    apply_actions,
    get_or_none,
)
from batch.kube.client import ApiError, KubeClient

log = logging.getLogger(__name__)

#: how often a write the API server keeps forbidding is told again in an event (seconds)
FORBIDDEN_EVENT_SECONDS = 600.0

COMPONENT = "tephra-controllers"


class Writes:
    """Applies reconcile results for every controller, and keeps their failure counts."""

    def __init__(
        self, client: Callable[[], KubeClient], keys: Keys, metrics: ControllerMetrics
    ) -> None:
        self.client = client
        self.keys = keys
        self.metrics = metrics
        self.errors = 0
        self.max_requeue = 15
        self.failures: dict[Key, int] = {}
        #: the last Forbidden event posted per key: (message, monotonic time)
        self._forbidden: dict[Key, tuple[str, float]] = {}

    async def apply(
        self,
        key: Key,
        result: Any,
        *,
        applied: Callable[[Any], None] | None = None,
        owner: Mapping[str, Any] | None = None,
        refused: Callable[[ApplyError], EmitEvent | None] | None = None,
    ) -> bool:
        """Apply the reconcile's actions; False (and a retry with backoff) when one failed.
        A write the API server forbids is also told to the user on ``owner`` (its object), and
        a failure ``refused`` turns into an event is posted."""
        try:
            await apply_actions(
                self.client(),
                result.actions,
                component=COMPONENT,
                applied=applied,
                fence=FENCE.get(),
            )
        except NotLeading as exc:
            log.warning("%s: %s", "/".join(key), exc)
            self.metrics.dropped_writes.inc(exc.unsent)
            self.keys.enqueue_later(key, 1.0)  # no failure: the job is not to blame
            return False
        except ApplyError as exc:
            log.warning("%s: %s", "/".join(key), exc)
            if isinstance(exc.action, PatchStatus):
                self.metrics.status_write_failures.labels(kind=exc.action.ref.kind).inc()
            if owner is not None and isinstance(exc.__cause__, ApiError):
                await self._warn_forbidden(key, owner, exc, exc.__cause__)
            told = refused(exc) if refused is not None else None
            if told is not None:
                with contextlib.suppress(ApplyError, NotLeading):
                    await apply_actions(
                        self.client(), [told], component=COMPONENT, fence=FENCE.get()
                    )
            await self.failed(key)
            return False
        self.failures.pop(key, None)
        self._forbidden.pop(key, None)
        if result.requeue_after is not None:
            if result.requeue_after <= 0:
                self.keys.enqueue(key)
            else:
                self.keys.enqueue_later(key, result.requeue_after)
        return True

    async def _warn_forbidden(
        self, key: Key, owner: Mapping[str, Any], exc: ApplyError, cause: ApiError
    ) -> None:
        """A 403 is not transient: without an event the job only waits, and the reason is in
        the controller's log. The chart grants the job plugins' rights (Secrets, Services,
        ...) only in `controller.jobNamespaces`. One event per refusal (again after
        FORBIDDEN_EVENT_SECONDS while it lasts, not once per retry), and a new VCJob is
        Pending with the refusal in its state rather than phaseless."""
        if cause.status != 403:
            return
        message = (
            f"{exc}; the controller may not do this in namespace "
            f"{meta(owner).get('namespace')!r} (with the Helm chart: controller.jobNamespaces)"
        )
        now = time.monotonic()
        last = self._forbidden.get(key)
        actions: list[Any] = []
        if last is None or last[0] != message or now - last[1] >= FORBIDDEN_EVENT_SECONDS:
            self._forbidden[key] = (message, now)
            actions.append(EmitEvent(ObjectRef.of(owner), "Forbidden", message, type="Warning"))
        if key[0] == "job":
            actions += pending_forbidden(owner, message, datetime.now(UTC))
        with contextlib.suppress(ApplyError, NotLeading):
            await apply_actions(self.client(), actions, component=COMPONENT, fence=FENCE.get())

    async def failed(self, key: Key) -> None:
        """Retry with backoff; a job that keeps failing is terminated (Volcano's
        --max-requeue-num, default 15) through a TerminateJob Command."""
        self.errors += 1
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        if key[0] == "job" and n > self.max_requeue:
            self.failures.pop(key, None)
            with contextlib.suppress(Exception):
                await self._terminate(key[1], key[2])
        self.keys.enqueue_later(key, min(30.0, 0.5 * 2 ** min(n, 6)))

    async def _terminate(self, ns: str, name: str) -> None:
        client = self.client()
        job = await get_or_none(client, JOBS, name, ns)
        if job is None:
            return
        ref = {
            "apiVersion": c.BATCH_API,
            "kind": "Job",
            "name": name,
            "uid": job["metadata"].get("uid"),
            "controller": True,
        }
        body = {
            "apiVersion": c.BUS_API,
            "kind": "Command",
            "metadata": {
                "generateName": f"{name}-terminatejob-",
                "namespace": ns,
                "ownerReferences": [ref],
            },
            "action": c.TERMINATE_JOB,
            "target": ref,
            "reason": "MaxRequeueExceeded",
            "message": f"syncing the job failed more than {self.max_requeue} times",
        }
        fence = FENCE.get()
        if fence is not None and not fence():
            return
        log.warning("job %s/%s failed too often; terminating it", ns, name)
        await client.create(COMMANDS, body, namespace=ns)
