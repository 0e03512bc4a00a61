"""The controller process: kopf watches feed a work queue; workers run the pure reconcilers.

kopf handlers here are deliberately thin: `on.event` handlers for Jobs, Pods, PodGroups, Queues,
Commands and workload owners only turn an event into a key (`job ns/name`, `queue name`,
`pod ns/name`, `pg ns/name`) on a de-duplicating work queue, plus remember pods that vanished
without the controller deleting them (they raise PodEvicted; forgotten only once a reconcile that
saw them has been applied). Workers take a key, read the current objects fresh from the API, call
the pure reconciler, and apply its actions in order (`batch.controllers.shell`); a read or a write
that fails (other than 404) is retried with backoff, never guessed around. A key is never
processed by two workers at once; a key that arrives while it is being processed is processed
again afterwards. Delayed work (policy timeouts, `ttlSecondsAfterFinished`, retries) is
scheduled with APScheduler, whose jobs put the key back on the queue from the event loop.
A job's pods are created in batches (`pod_batch`), one reconcile each, the key requeued at once:
between batches the job is read again (a deleted job stops there) and other keys get their turn,
and within one every create awaits the API, so shutdown is never held up by a big job.
Metrics count the writes the API server took, not the ones intended.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kopf

from batch.api.admission import DEFAULT_LIMITS, AdmissionLimits
from batch.api.bus import queue_target
from batch.controllers import constants as c
from batch.controllers.actions import CreateObject, EmitEvent, ObjectRef, PatchStatus
from batch.controllers.cronshell import CRONJOB_KEY, CronJobSync, owner_key
from batch.controllers.job import pending_forbidden, plugin_object_keys, reconcile_job
from batch.controllers.jobspec import job_volumes, meta, podgroup_name, tasks_of
from batch.controllers.kopflogin import connection_info
from batch.controllers.metrics import ControllerMetrics
from batch.controllers.podgroup import (
    CREATED_BY,
    CREATED_BY_CONTROLLER,
    controller_owner,
    is_vcjob_pod,
    plain_podgroup_name,
    reconcile_adapter_pod,
    reconcile_group,
    reconcile_plain_pod,
    wants_group,
)
from batch.controllers.priorities import PriorityClassList, priority_class_names
from batch.controllers.queue import oldest_pending, parent_of, podgroup_counts, reconcile_queue
from batch.controllers.shell import (
    COMMANDS,
    JOBS,
    NAMESPACES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    QUEUES,
    ApplyError,
    NotLeading,
    apply_actions,
    get_or_none,
    list_items,
    register_kind,
    resource_for,
)
from batch.controllers.timeutil import parse_time
from batch.kube.client import ApiError, KubeClient, Resource
from batch.kube.config import load_access
from batch.kube.informer import Reflector, ReflectorSet

if TYPE_CHECKING:
    from batch.kube.leader import LeaderElector

log = logging.getLogger(__name__)

#: how often a write the API server keeps forbidding is told again in an event (seconds)
FORBIDDEN_EVENT_SECONDS = 600.0

#: first and longest wait before the start's ledger reconcile is tried again (seconds)
LEDGER_RETRY_SECONDS = (1.0, 30.0)

Key = tuple[str, str, str]  # (kind, namespace, name)

#: the leadership check of the reconcile a worker runs: taken when the reconcile starts, so
#: what it decided in one term is never written in another (None: no leader election)
_FENCE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "tephra_controller_fence", default=None
)


def load_workload_adapters() -> list[Any]:
    """Framework adapters published under the `tephra.integrations` entry points."""
    try:
        from batch.api.integration import load_adapters

        return list(load_adapters())
    except Exception:  # an adapter that fails to load must not stop the controllers
        log.exception("loading tephra.integrations adapters failed")
        return []


def _finished(workload: Mapping[str, Any], adapter: object) -> bool:
    """Whether ``adapter`` observes ``workload`` as finished (no pod of it starts again)."""
    from batch.api.integration import observe_workload

    seen = observe_workload(workload, [adapter])
    return seen is not None and seen.finished


class LeadershipLost(RuntimeError):
    """Another replica took the controllers' Lease."""


class WorkQueue:
    """De-duplicating keyed queue; one in-flight run per key."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._running: set[Key] = set()
        self._again: set[Key] = set()

    def add(self, key: Key) -> None:
        if key in self._running:
            self._again.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    async def get(self) -> Key:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            if key in self._running:
                self._again.add(key)
                continue
            self._running.add(key)
            return key

    def done(self, key: Key) -> None:
        self._running.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def idle(self) -> bool:
        return not self._queued and not self._running and not self._again


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
        self.leader_elect = leader_elect
        self.lease_name = lease_name
        self.lease_namespace = lease_namespace
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.scheduler_names = tuple(scheduler_names)
        self.workers = workers
        self.pod_batch = pod_batch
        self.limits = limits
        # The one namespace queue Commands are taken from (None: any; the webhook checks who).
        self.queue_command_namespace = queue_command_namespace or None
        self.adapters = list(adapters) if adapters is not None else load_workload_adapters()
        self.recorder = recorder
        #: makes the leadership check of a reconcile about to start (None: no election)
        self._fence_of: Callable[[], Callable[[], bool]] | None = None
        self.client: KubeClient | None = None
        self.queue: WorkQueue | None = None
        self.deleted_pods: dict[str, list[dict[str, Any]]] = {}
        # Watch-fed caches of the objects the PodGroup controller reads (as an informer's):
        # pods not of VCJobs by (namespace, name) and by (namespace, group), and the PodGroups
        # it created. Reading them instead of the API server is what lets it group bare pods at
        # hundreds per second (issue 19.5: 11 per second).
        self.pod_cache: dict[tuple[str, str], dict[str, Any]] = {}
        self.group_pods: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._pod_group: dict[str, tuple[str, str]] = {}  # pod uid -> the group it is filed under
        self.pg_cache: dict[tuple[str, str], dict[str, Any]] = {}
        self._pg_cache_seeded = False  # pg_cache holds every such PodGroup (listed at start)
        self.queue_parents: dict[str, str | None] = {}
        self._priorities = PriorityClassList()
        self._scheduler: Any = None
        self.reconciles = 0
        self.errors = 0
        self.max_requeue = 15
        self._failures: dict[Key, int] = {}
        #: the last Forbidden event posted per key: (message, monotonic time)
        self._forbidden: dict[Key, tuple[str, float]] = {}
        self._last_seen: dict[str, dict[str, Any]] = {}
        self._job_owners: Any = None  # batch.ledger.owners.JobOwners, made on first record
        self.metrics = ControllerMetrics()
        self.cronjobs = CronJobSync()

    # -- keys -----------------------------------------------------------------------------------
    def enqueue(self, key: Key) -> None:
        if self.queue is not None:
            self.queue.add(key)

    async def _enqueue_due(self, key: Key) -> None:
        # A coroutine, so APScheduler's AsyncIOExecutor runs it on the event loop: the work
        # queue (an asyncio.Queue and plain sets) must never be touched from its thread pool.
        self.enqueue(key)

    def enqueue_later(self, key: Key, seconds: float) -> None:
        if self._scheduler is None:
            return
        run_date = datetime.now(UTC) + timedelta(seconds=max(0.05, seconds))
        self._scheduler.add_job(
            self._enqueue_due,
            "date",
            run_date=run_date,
            args=[key],
            id="/".join(key),
            replace_existing=True,
            misfire_grace_time=None,
        )

    # -- ledger -------------------------------------------------------------------------------
    def record(self, kind: str, etype: str, body: Mapping[str, Any]) -> None:
        """Hand the object change to the ledger recorder (idempotent facts; never raises)."""
        if self.recorder is None:
            return
        try:
            from batch.ledger import events_from_pod, events_from_queue
            from batch.ledger.owners import JobOwners

            uid = str((body.get("metadata") or {}).get("uid") or "")
            old = self._last_seen.get(uid)
            new: dict[str, Any] | None = None if etype == "DELETED" else dict(body)
            if new is None:
                self._last_seen.pop(uid, None)
            else:
                self._last_seen[uid] = new
            if self._job_owners is None:  # the manager's adapters (tests inject theirs)
                self._job_owners = JobOwners(self.adapters, self.observed_kinds)
            if kind == "job":
                events = self._job_owners.job_events(old, new)
            elif kind == "pod":
                events = events_from_pod(old, new, adapters=self.adapters)
            elif kind == "podgroup":
                events = self._job_owners.podgroup_events(old, new)
            else:
                events = events_from_queue(old, new)
            if events:
                self.recorder.record(events)
        except Exception:
            log.exception("ledger: recording a %s change failed", kind)

    @property
    def observed_kinds(self) -> frozenset[tuple[str, str]]:
        """(apiVersion, kind) of the framework workloads the ledger follows themselves (their
        adapter observes them): their PodGroups' phases do not stand in for theirs."""
        return frozenset((r.api_version, r.kind) for r in self._workload_resources())

    def _workload_resources(self) -> list[Resource]:
        from batch.api.integration import ObservingAdapter, WorkloadKind

        out: dict[tuple[str, str], Resource] = {}
        for adapter in self.adapters:
            if not isinstance(adapter, ObservingAdapter):
                continue
            kinds: Sequence[WorkloadKind] = getattr(adapter, "kinds", ())
            for k in kinds:
                if "/" in k.api_version and k.label_selector is None:
                    out[(k.api_version, k.kind)] = Resource(k.api_version, k.plural, k.kind)
        return list(out.values())

    def _workload_reflectors(self) -> ReflectorSet | None:
        """With a ledger, watch every framework workload kind an adapter observes, so the
        ledger records their own phases, finish and deletion (a kind not installed is
        watched once it is)."""
        if self.recorder is None:
            return None

        def sink(_: str, etype: str, obj: dict[str, Any]) -> None:
            self.record("job", etype, obj)

        return ReflectorSet(
            [Reflector(self._client(), r, sink) for r in self._workload_resources()]
        )

    # -- kopf -----------------------------------------------------------------------------------
    def registry(self) -> kopf.OperatorRegistry:
        reg = kopf.OperatorRegistry()
        kubeconfig = self.kubeconfig

        @kopf.on.login(registry=reg)
        def _login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(kubeconfig)

        @kopf.on.event(c.BATCH_GROUP, c.BATCH_VERSION, "jobs", registry=reg)
        def _job(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
            self.record("job", str(event.get("type") or ""), body)
            m = body.get("metadata") or {}
            self.enqueue(("job", str(m.get("namespace")), str(m.get("name"))))
            cron = owner_key(body)
            if cron is not None:
                self.enqueue(cron)

        @kopf.on.event(c.BATCH_GROUP, c.BATCH_VERSION, "cronjobs", registry=reg)
        def _cronjob(body: Mapping[str, Any], **_: Any) -> None:
            m = body.get("metadata") or {}
            self.enqueue((CRONJOB_KEY, str(m.get("namespace")), str(m.get("name"))))

        @kopf.on.event("v1", "pods", registry=reg)
        def _pod(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
            self.record("pod", str(event.get("type") or ""), body)
            self.on_pod_event(str(event.get("type") or ""), body)

        @kopf.on.event(c.SCHED_GROUP, c.SCHED_VERSION, "podgroups", registry=reg)
        def _pg(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
            self.record("podgroup", str(event.get("type") or ""), body)
            self.on_podgroup_event(body, str(event.get("type") or ""))

        @kopf.on.event(c.SCHED_GROUP, c.SCHED_VERSION, "queues", registry=reg)
        def _queue(event: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
            self.record("queue", str(event.get("type") or ""), body)
            self.on_queue_event(str(event.get("type") or ""), body)

        @kopf.on.event(c.BUS_GROUP, c.BUS_VERSION, "commands", registry=reg)
        def _command(body: Mapping[str, Any], **_: Any) -> None:
            self.on_command_event(body)

        for group, version, plural in (
            ("apps", "v1", "replicasets"),
            ("apps", "v1", "statefulsets"),
            ("batch", "v1", "jobs"),
        ):

            @kopf.on.event(group, version, plural, registry=reg)
            def _owner(body: Mapping[str, Any], **_: Any) -> None:
                m = body.get("metadata") or {}
                self.enqueue(("pg", str(m.get("namespace")), f"podgroup-{m.get('uid')}"))

        return reg

    def on_pod_event(self, etype: str, pod: Mapping[str, Any]) -> None:
        m = pod.get("metadata") or {}
        ns = str(m.get("namespace"))
        labels = m.get("labels") or {}
        ann = m.get("annotations") or {}
        if is_vcjob_pod(pod):
            owner = controller_owner(pod) or {}
            job_name = str(labels.get(c.JOB_NAME) or owner.get("name"))
            if etype == "DELETED" and ann.get(c.OUT_OF_SYNC_ANNOTATION) != "true":
                bucket = self.deleted_pods.setdefault(str(owner.get("uid")), [])
                bucket.append(dict(pod))
                del bucket[:-100]
            self.enqueue(("job", ns, job_name))
            return
        group = ann.get(c.GROUP_NAME_ANNOTATION)
        self._file_pod(etype, ns, str(group) if group else None, pod)
        if group:
            self.enqueue(("pg", ns, str(group)))
        ours = str((pod.get("spec") or {}).get("schedulerName") or "") in self.scheduler_names
        if (
            etype != "DELETED"
            and ours
            and (wants_group(pod, scheduler_names=self.scheduler_names) or self.adapters)
        ):
            self.enqueue(("pod", ns, str(m.get("name"))))

    def _file_pod(self, etype: str, ns: str, group: str | None, pod: Mapping[str, Any]) -> None:
        """Keep `group_pods` in step with the watch, so a PodGroup's reconcile reads its pods
        from memory instead of listing the namespace (one list per group made creating
        PodGroups for N bare pods O(N^2): 11 per second, issue 19.5)."""
        m = pod.get("metadata") or {}
        uid = str(m.get("uid") or "")
        if not uid:
            return
        if etype == "DELETED":
            self.pod_cache.pop((ns, str(m.get("name"))), None)
        else:
            self.pod_cache[(ns, str(m.get("name")))] = dict(pod)
        before = self._pod_group.pop(uid, None)
        if before is not None:
            members = self.group_pods.get(before, {})
            members.pop(uid, None)
            if not members:
                self.group_pods.pop(before, None)
        if etype != "DELETED" and group:
            self.group_pods.setdefault((ns, group), {})[uid] = dict(pod)
            self._pod_group[uid] = (ns, group)

    def on_podgroup_event(self, pg: Mapping[str, Any], etype: str = "") -> None:
        m = pg.get("metadata") or {}
        ns = str(m.get("namespace"))
        if (m.get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
            if etype == "DELETED":
                self.pg_cache.pop((ns, str(m.get("name"))), None)
            else:
                self.pg_cache[(ns, str(m.get("name")))] = dict(pg)
        owner = controller_owner(pg)
        if (
            owner
            and owner.get("kind") == "Job"
            and str(owner.get("apiVersion", "")).startswith(c.BATCH_GROUP)
        ):
            self.enqueue(("job", ns, str(owner.get("name"))))
        elif (m.get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
            self.enqueue(("pg", ns, str(m.get("name"))))
        queue = str((pg.get("spec") or {}).get("queue") or c.DEFAULT_QUEUE)
        self.enqueue(("queue", "", queue))

    def on_queue_event(self, etype: str, q: Mapping[str, Any]) -> None:
        name = str((q.get("metadata") or {}).get("name"))
        if etype == "DELETED":
            self.queue_parents.pop(name, None)
        else:
            self.queue_parents[name] = parent_of(q)
        self.enqueue(("queue", "", name))
        for child, parent in list(self.queue_parents.items()):
            if parent == name:
                self.enqueue(("queue", "", child))

    def on_command_event(self, cmd: Mapping[str, Any]) -> None:
        m = cmd.get("metadata") or {}
        target = cmd.get("target") or {}
        queue = queue_target(cmd)
        if queue is not None:
            self.enqueue(("queue", "", queue))
        else:
            self.enqueue(("job", str(m.get("namespace")), str(target.get("name"))))

    # -- workers --------------------------------------------------------------------------------
    async def _worker(self) -> None:
        assert self.queue is not None
        while True:
            key = await self.queue.get()
            _FENCE.set(None if self._fence_of is None else self._fence_of())
            try:
                await self.process(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("reconcile %s failed: %s", "/".join(key), exc)
                await self._failed(key)
            finally:
                self.queue.done(key)

    async def process(self, key: Key) -> None:
        self.reconciles += 1
        kind, ns, name = key
        if kind == "job":
            await self.process_job(ns, name)
        elif kind == "queue":
            await self.process_queue(name)
        elif kind == "pod":
            await self.process_pod(ns, name)
        elif kind == "pg":
            await self.process_group(ns, name)
        elif kind == CRONJOB_KEY:
            result = await self.cronjobs.reconcile(self._client(), ns, name)
            told = self.cronjobs.refusal_event
            if result is not None and await self._apply(key, result, refused=told):
                self.cronjobs.created(key)

    def _client(self) -> KubeClient:
        if self.client is None:
            raise RuntimeError("controller client not open")
        return self.client

    async def _priority_values(self, wanted: Collection[str]) -> dict[str, int] | None:
        """PriorityClass values by name for a job whose pods name ``wanted``: read again when
        30 s old, or when one of ``wanted`` is missing and the last read is 5 s old (see
        batch.controllers.priorities); None while never read."""
        if self._priorities.due(time.monotonic(), wanted):
            try:
                items = await list_items(self._client(), PRIORITY_CLASSES)
            except ApiError:
                self._priorities.read(time.monotonic(), None)
            else:
                values = {str(i["metadata"]["name"]): int(i.get("value") or 0) for i in items}
                self._priorities.read(time.monotonic(), values)
        return self._priorities.known()

    async def _apply(
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
                self._client(),
                result.actions,
                component="tephra-controllers",
                applied=applied,
                fence=_FENCE.get(),
            )
        except NotLeading as exc:
            log.warning("%s: %s", "/".join(key), exc)
            self.metrics.dropped_writes.inc(exc.unsent)
            self.enqueue_later(key, 1.0)  # no failure: the job is not to blame
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
                        self._client(), [told], component="tephra-controllers", fence=_FENCE.get()
                    )
            await self._failed(key)
            return False
        self._failures.pop(key, None)
        self._forbidden.pop(key, None)
        if result.requeue_after is not None:
            if result.requeue_after <= 0:
                self.enqueue(key)
            else:
                self.enqueue_later(key, result.requeue_after)
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
            await apply_actions(
                self._client(), actions, component="tephra-controllers", fence=_FENCE.get()
            )

    async def _failed(self, key: Key) -> None:
        """Retry with backoff; a job that keeps failing is terminated (Volcano's
        --max-requeue-num, default 15) through a TerminateJob Command."""
        self.errors += 1
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        if key[0] == "job" and n > self.max_requeue:
            self._failures.pop(key, None)
            with contextlib.suppress(Exception):
                await self._terminate(key[1], key[2])
        self.enqueue_later(key, min(30.0, 0.5 * 2 ** min(n, 6)))

    async def _terminate(self, ns: str, name: str) -> None:
        client = self._client()
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
        fence = _FENCE.get()
        if fence is not None and not fence():
            return
        log.warning("job %s/%s failed too often; terminating it", ns, name)
        await client.create(COMMANDS, body, namespace=ns)

    async def process_job(self, ns: str, name: str) -> None:
        client = self._client()
        job = await get_or_none(client, JOBS, name, ns)
        if job is None:
            return
        job.setdefault("kind", "Job")
        job.setdefault("apiVersion", c.BATCH_API)
        uid = str(job["metadata"].get("uid"))
        pods = [
            p
            for p in await list_items(
                client, PODS, namespace=ns, labelSelector=f"{c.JOB_NAME}={name}"
            )
            if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]
        pg = await get_or_none(client, PODGROUPS, podgroup_name(job), ns)
        commands = [
            cmd
            for cmd in await list_items(client, COMMANDS, namespace=ns)
            if (cmd.get("target") or {}).get("kind", "Job") == "Job"
            and (
                (cmd.get("target") or {}).get("uid") == uid
                or (
                    not (cmd.get("target") or {}).get("uid")
                    and (cmd.get("target") or {}).get("name") == name
                )
            )
        ]
        # Deleted pods are forgotten only once a reconcile that saw them was applied: a failed
        # apply must not lose the eviction they name (RestartPod could not act on it then).
        deleted = list(self.deleted_pods.get(uid, []))
        missing = set()
        for claim, _mount, claim_spec in job_volumes(job):
            if claim_spec is None and await get_or_none(client, PVCS, claim, ns) is None:
                missing.add(claim)
        result = reconcile_job(
            job,
            pods,
            pg,
            now=datetime.now(UTC),
            commands=commands,
            deleted_pods=deleted,
            priority_values=await self._priority_values(priority_class_names(job, tasks_of(job))),
            missing_claims=missing,
            pod_batch=self.pod_batch,
            limits=self.limits,
            plugin_objects=await self._plugin_objects(client, job, ns),
        )
        ok = await self._apply(
            ("job", ns, name),
            result,
            applied=lambda action: self._job_metrics(job, action),
            owner=job,
        )
        if ok and deleted:
            bucket = self.deleted_pods.get(uid, [])
            bucket[:] = [p for p in bucket if not any(p is d for d in deleted)]
            if not bucket:
                self.deleted_pods.pop(uid, None)

    @staticmethod
    async def _plugin_objects(
        client: KubeClient, job: Mapping[str, Any], ns: str
    ) -> list[dict[str, Any]]:
        """The objects the job's plugins would create or rewrite that exist (the reconciler
        never writes one the job does not control). A kind the controller may not read (the
        chart grants only `create` on Secrets and NetworkPolicies) it may not rewrite either:
        an existing one is left as it is by the create, so it is not looked up."""
        found = []
        for api, kind, name in plugin_object_keys(job):
            try:
                obj = await get_or_none(client, resource_for(api, kind), name, ns)
            except ApiError as exc:
                if exc.status != 403:
                    raise
                continue
            if obj is not None:
                obj.setdefault("apiVersion", api)
                obj.setdefault("kind", kind)
                found.append(obj)
        return found

    def _job_metrics(self, job: Mapping[str, Any], action: Any) -> None:
        """Count one action the API server took (never an intended write that failed)."""
        if isinstance(action, PatchStatus) and action.ref.kind == "Job":
            queue = str((job.get("spec") or {}).get("queue") or c.DEFAULT_QUEUE)
            name = str(job["metadata"].get("name"))
            phase = (action.status.get("state") or {}).get("phase")
            if phase == c.COMPLETED:
                self.metrics.job_completed.labels(name, queue).inc()
            elif phase == c.FAILED:
                self.metrics.job_failed.labels(name, queue).inc()
        elif isinstance(action, CreateObject) and action.ref.kind == "Pod":
            created = parse_time(job["metadata"].get("creationTimestamp"))
            if created is not None:
                ms = (datetime.now(UTC) - created).total_seconds() * 1000
                self.metrics.pod_creation_latency.observe(ms)

    async def process_queue(self, name: str) -> None:
        client = self._client()
        queue = await get_or_none(client, QUEUES, name)
        if queue is None:
            return
        queue.setdefault("kind", "Queue")
        queue.setdefault("apiVersion", c.SCHED_API)
        queues = await list_items(client, QUEUES)
        for q in queues:
            self.queue_parents[str(q["metadata"]["name"])] = parent_of(q)
        groups = [
            g
            for g in await list_items(client, PODGROUPS)
            if str((g.get("spec") or {}).get("queue") or c.DEFAULT_QUEUE) == name
        ]
        commands = [cmd for cmd in await list_items(client, COMMANDS) if queue_target(cmd) == name]
        result = reconcile_queue(
            queue,
            queues=queues,
            podgroups=groups,
            commands=commands,
            command_namespace=self.queue_command_namespace,
        )
        await self._apply(("queue", "", name), result)
        for phase, count in podgroup_counts(groups).items():
            self.metrics.queue_podgroups[phase].labels(name).set(count)
        self.metrics.oldest_pending.labels(name).set(oldest_pending(groups) or 0)
        for child, parent in list(self.queue_parents.items()):
            if parent == name and result.actions:
                self.enqueue(("queue", "", child))

    async def process_pod(self, ns: str, name: str) -> None:
        client = self._client()
        cached = self.pod_cache.get((ns, name))
        pod = copy.deepcopy(cached) if cached else await get_or_none(client, PODS, name, ns)
        if pod is None or is_vcjob_pod(pod):
            return
        pod.setdefault("kind", "Pod")
        pod.setdefault("apiVersion", "v1")
        if str((pod.get("spec") or {}).get("schedulerName") or "") not in self.scheduler_names:
            return
        if self.adapters:
            from batch.api.integration import adapter_for_pod

            claimed = adapter_for_pod(pod, self.adapters)
            if claimed is not None and await self._process_adapter_pod(pod, *claimed):
                return
            # The adapter has no gang for the pod's workload (e.g. Spark executors whose driver
            # is an ordinary notebook pod): Volcano's default path below, as for any other pod.
        if not wants_group(pod, scheduler_names=self.scheduler_names):
            return
        owner_ref = controller_owner(pod)
        owner_obj = None
        if owner_ref is not None:
            res = resource_for(str(owner_ref.get("apiVersion")), str(owner_ref.get("kind")))
            try:
                owner_obj = await get_or_none(client, res, str(owner_ref.get("name")), ns)
            except ApiError as exc:
                # Only a missing owner (404) means "no group-min-member annotation": a group
                # built or refreshed from an owner that could not be read would lose its gang
                # size (minMember 1). Retry later instead.
                log.warning(
                    "pod %s/%s: reading its owner %s %s failed: %s",
                    ns,
                    name,
                    owner_ref.get("kind"),
                    owner_ref.get("name"),
                    exc,
                )
                await self._failed(("pod", ns, name))
                return
        pg_name = plain_podgroup_name(pod)
        pg = self.pg_cache.get((ns, pg_name))
        if pg is None and not self._pg_cache_seeded:
            pg = await get_or_none(client, PODGROUPS, pg_name, ns)
        result = reconcile_plain_pod(
            pod, owner_obj=owner_obj, podgroup=pg, scheduler_names=self.scheduler_names
        )
        await self._apply(("pod", ns, name), result)

    async def _process_adapter_pod(self, pod: dict[str, Any], adapter: Any, ref: Any) -> bool:
        """Reconcile a pod an adapter claimed. False when the adapter has no gang for the pod's
        workload (`gang_for_workload` returned None): the caller then takes the default path."""
        client = self._client()
        ns = str(pod["metadata"].get("namespace"))
        plural = None
        for k in adapter.kinds:
            if getattr(k, "kind", None) == ref.kind:
                plural = getattr(k, "plural", None)
                if plural:
                    register_kind(ref.api_version, ref.kind, str(plural))
        res = resource_for(ref.api_version, ref.kind, plural=plural)
        workload = await get_or_none(client, res, ref.name, ref.namespace or ns)
        if workload is None:
            return True  # no workload object to derive a gang from: leave the pod alone
        workload.setdefault("apiVersion", ref.api_version)
        workload.setdefault("kind", ref.kind)
        gang = adapter.gang_for_workload(workload)
        if gang is None:
            return False
        existing = await get_or_none(client, PODGROUPS, gang.name, gang.namespace)
        namespace_obj = await get_or_none(client, NAMESPACES, gang.namespace)
        leader_is_running = False
        if gang.leader_role is not None:
            # Only this gang's own pods count: another application's running driver in the
            # same namespace is not this gang's leader.
            from batch.api.integration import leader_running

            pods = await list_items(client, PODS, namespace=ns)
            leader_is_running = leader_running(gang, pods, adapter)
        result = reconcile_adapter_pod(
            pod,
            adapter=adapter,
            gang=gang,
            podgroup=existing,
            now=datetime.now(UTC),
            workload=workload,
            namespace_obj=namespace_obj,
            leader_running=leader_is_running,
            workload_finished=_finished(workload, adapter),
        )
        await self._apply(("pod", ns, str(pod["metadata"].get("name"))), result)
        return True

    async def process_group(self, ns: str, name: str) -> None:
        client = self._client()
        cached = self.pg_cache.get((ns, name))
        pg = copy.deepcopy(cached) if cached else await get_or_none(client, PODGROUPS, name, ns)
        if pg is None:
            return
        pg.setdefault("kind", "PodGroup")
        pg.setdefault("apiVersion", c.SCHED_API)
        if (pg["metadata"].get("annotations") or {}).get(CREATED_BY) != CREATED_BY_CONTROLLER:
            return
        owners: dict[str, Mapping[str, Any] | None] = {}
        for o in pg["metadata"].get("ownerReferences") or []:
            res = resource_for(str(o.get("apiVersion")), str(o.get("kind")))
            is_pod = (o.get("apiVersion"), o.get("kind")) == ("v1", "Pod")
            known = self.pod_cache.get((ns, str(o.get("name")))) if is_pod else None
            obj = dict(known) if known is not None else None
            if obj is None:
                obj = await get_or_none(client, res, str(o.get("name")), ns)
            if obj is not None and obj["metadata"].get("uid") != o.get("uid"):
                obj = None
            if obj is not None:
                obj.setdefault("apiVersion", o.get("apiVersion"))
                obj.setdefault("kind", o.get("kind"))
            owners[str(o.get("uid"))] = obj
        filed = self.group_pods.get((ns, name))
        bare = [dict(p) for p in owners.values() if p is not None and p.get("kind") == "Pod"]
        if filed is not None:
            pods = list(filed.values())
        elif bare:  # a bare pod's group, made before the watch saw the pod annotated
            pods = bare
        else:  # not seen by the watch (yet): ask the API server
            pods = [
                p
                for p in await list_items(client, PODS, namespace=ns)
                if (p["metadata"].get("annotations") or {}).get(c.GROUP_NAME_ANNOTATION) == name
            ]
        result = reconcile_group(pg, owners=owners, pods=pods)
        await self._apply(("pg", ns, name), result)

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
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self.queue = WorkQueue()
        access = load_access(self.kubeconfig)
        self.client = KubeClient(access)
        await self.client.open()
        elector: LeaderElector | None = None
        hold: asyncio.Task[None] | None = None
        if self.leader_elect:
            elector = self._elector(self.client)
            if not await _acquire(elector, stop=stop, standby=standby):
                await self.client.close()
                return
            hold = asyncio.create_task(elector.hold())
            self._fence_of = elector.fence
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._scheduler.start()
        workers = [asyncio.create_task(self._worker()) for _ in range(self.workers)]
        kopf_stop = asyncio.Event()
        kopf_ready = asyncio.Event()
        operator = asyncio.create_task(
            kopf.operator(
                registry=self.registry(),
                settings=_kopf_settings(),
                standalone=True,
                clusterwide=True,
                stop_flag=kopf_stop,
                ready_flag=kopf_ready,
            )
        )
        workloads = self._workload_reflectors()
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
            raise LeadershipLost(f"lost the lease {self.lease_namespace}/{self.lease_name}")

    def _elector(self, client: KubeClient) -> LeaderElector:
        from batch.kube.leader import LeaderElector

        return LeaderElector(
            client, name=self.lease_name, namespace=self.lease_namespace, identity=self.identity
        )

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
        with contextlib.suppress(Exception):
            self._scheduler.shutdown(wait=False)
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
                self.enqueue(
                    ("job", str(job["metadata"]["namespace"]), str(job["metadata"]["name"]))
                )
        with contextlib.suppress(ApiError):
            for q in await list_items(client, QUEUES):
                self.on_queue_event("", q)
        with contextlib.suppress(ApiError):
            for g in await list_items(client, PODGROUPS):
                m = g["metadata"]
                if (m.get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
                    self.pg_cache.setdefault((str(m.get("namespace")), str(m.get("name"))), g)
            self._pg_cache_seeded = True  # from now on the watch keeps it complete
        if jobs is not None and self.recorder is not None:
            try:
                if not await self._reconcile_ledger(jobs):
                    log.info("ledger: reconciling with the API once the ledger can be read")
                    self._reconcile_ledger_later(LEDGER_RETRY_SECONDS[0])
            except Exception:  # the ledger never stops the controller
                log.exception("ledger: reconciling with the API failed")

    def _reconcile_ledger_later(self, seconds: float) -> None:
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            self._reconcile_ledger_again,
            "date",
            run_date=datetime.now(UTC) + timedelta(seconds=seconds),
            args=[seconds],
            id="ledger-reconcile",
            replace_existing=True,
            misfire_grace_time=None,
        )

    async def _reconcile_ledger_again(self, waited: float) -> None:
        """The start's reconcile, which the ledger could not take (down, or its schema not
        checked yet): once the recorder has written everything that waited (so a job that
        finished meanwhile is not taken for lost), list again and reconcile; else later."""
        flush = getattr(self.recorder, "flush", None)
        try:
            caught_up = flush is not None and await asyncio.to_thread(flush, 10.0)
            if caught_up and await self._reconcile_ledger(await list_items(self._client(), JOBS)):
                return
        except Exception:  # the ledger never stops the controller
            log.exception("ledger: reconciling with the API failed")
        low, high = LEDGER_RETRY_SECONDS
        self._reconcile_ledger_later(min(max(waited, low) * 2, high))

    async def _reconcile_ledger(self, jobs: list[dict[str, Any]]) -> bool:
        """Jobs and pods the ledger holds open but the API no longer has get a final `Deleted`
        transition with reason `Lost` (they went while no controller recorded them); each is
        looked up once more first, so one created since the list is never taken for lost.
        False when the ledger cannot be read now."""
        client = self._client()
        lister = getattr(self.recorder, "lost_candidates", None)
        if lister is None:
            return True
        pods = await list_items(client, PODS)
        candidates = await asyncio.to_thread(
            lister,
            live_jobs={str(j["metadata"].get("uid")) for j in jobs},
            live_pods={str(p["metadata"].get("uid")) for p in pods},
        )
        if candidates is None:
            return False
        gone = []
        for event in candidates:
            is_job = getattr(event, "TYPE", "") == "JobPhaseChanged"
            uid = event.job_uid if is_job else event.pod_uid
            found = await get_or_none(client, JOBS if is_job else PODS, event.name, event.namespace)
            if found is None or str(found["metadata"].get("uid")) != uid:
                gone.append(event)
        if gone:
            log.info("ledger: %d jobs and pods are gone since they were recorded", len(gone))
            self.recorder.record(gone)
        return True

    def idle(self) -> bool:
        return self.queue is None or self.queue.idle()


def _kopf_settings() -> kopf.OperatorSettings:
    """kopf as the controllers use it: no events or peering of its own, watches renewed each
    minute and reconnected quickly."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.scanning.disabled = True
    settings.watching.server_timeout = 60
    settings.watching.reconnect_backoff = 0.5
    settings.networking.error_backoffs = [0.5, 1, 2, 5]
    return settings


async def _acquire(
    elector: LeaderElector,
    *,
    stop: threading.Event | asyncio.Event | None,
    standby: threading.Event | None,
) -> bool:
    """Wait as a standby (`standby` set) until `elector` holds the Lease; False when `stop` is
    set first."""
    if standby is not None:
        standby.set()
    acquire = asyncio.create_task(elector.acquire())
    while not acquire.done():
        if stop is not None and stop.is_set():
            acquire.cancel()
            return False
        await asyncio.sleep(0.1)
    return True


def run_forever(
    kubeconfig: Path | None, *, scheduler_names: Iterable[str], recorder: Any = None
) -> None:
    """Blocking entry point of `tephra controller`."""
    manager = ControllerManager(
        kubeconfig, scheduler_names=tuple(scheduler_names), recorder=recorder
    )
    asyncio.run(manager.run())
