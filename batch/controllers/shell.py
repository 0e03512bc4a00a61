"""The imperative shell: applies reconciler actions through the Kubernetes API.

Every create tolerates 409 AlreadyExists (names are deterministic, so "already there" means an
earlier attempt succeeded) and every delete/patch tolerates 404; a status patch only when the
object is gone, not when its kind lacks a status subresource (`batch.kube.statuspath`). Actions
are applied in order and the first real failure stops the batch: the next reconcile re-derives
what is left from the stored state, which is what makes a crash or an API error at any point
harmless. A caller can ask to hear of each write the API server took (the controllers count
their metrics from those), and an ApplyError names the action that failed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from batch.api.events import event_body, object_reference
from batch.controllers import constants as c
from batch.controllers.actions import (
    Action,
    CreateObject,
    EmitEvent,
    ObjectRef,
    PatchObject,
    PatchStatus,
)
from batch.controllers.timeutil import format_time
from batch.kube.client import ApiError, KubeClient, Resource
from batch.kube.statuspath import status_paths

log = logging.getLogger(__name__)

_KINDS: dict[tuple[str, str], Resource] = {}


def _reg(api_version: str, plural: str, kind: str, *, namespaced: bool = True) -> Resource:
    res = Resource(api_version, plural, kind, namespaced=namespaced)
    _KINDS[(api_version, kind)] = res
    return res


JOBS = _reg(c.BATCH_API, "jobs", "Job")
COMMANDS = _reg(c.BUS_API, "commands", "Command")
PODGROUPS = _reg(c.SCHED_API, "podgroups", "PodGroup")
QUEUES = _reg(c.SCHED_API, "queues", "Queue", namespaced=False)
PODS = _reg("v1", "pods", "Pod")
CONFIGMAPS = _reg("v1", "configmaps", "ConfigMap")
SERVICES = _reg("v1", "services", "Service")
SECRETS = _reg("v1", "secrets", "Secret")
PVCS = _reg("v1", "persistentvolumeclaims", "PersistentVolumeClaim")
EVENTS = _reg("v1", "events", "Event")
NAMESPACES = _reg("v1", "namespaces", "Namespace", namespaced=False)
NETPOLS = _reg("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy")
PRIORITY_CLASSES = _reg(
    "scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", namespaced=False
)
REPLICASETS = _reg("apps/v1", "replicasets", "ReplicaSet")
STATEFULSETS = _reg("apps/v1", "statefulsets", "StatefulSet")
DEPLOYMENTS = _reg("apps/v1", "deployments", "Deployment")
BATCH_JOBS = _reg("batch/v1", "jobs", "Job")
RCS = _reg("v1", "replicationcontrollers", "ReplicationController")


def resource_for(api_version: str, kind: str, *, plural: str | None = None) -> Resource:
    """The API resource of (apiVersion, kind); unknown kinds are guessed (lowercase + s)."""
    found = _KINDS.get((api_version, kind))
    if found is not None:
        return found
    return Resource(api_version, plural or kind.lower() + "s", kind)


def register_kind(api_version: str, kind: str, plural: str, *, namespaced: bool = True) -> None:
    """Teach the shell a workload kind (adapters' CRDs)."""
    _reg(api_version, plural, kind, namespaced=namespaced)


def _path_ns(res: Resource, ref: ObjectRef) -> str | None:
    return ref.namespace if res.namespaced else None


class ApplyError(RuntimeError):
    """An action failed with a real (not 404/409) error."""

    def __init__(self, message: str, action: Action) -> None:
        super().__init__(message)
        self.action = action


class NotLeading(RuntimeError):
    """The controllers' leadership is not current: the rest of a reconcile's actions were
    dropped unsent (it is reconciled again once leadership is back, or by the new leader)."""

    def __init__(self, unsent: int) -> None:
        super().__init__(f"leadership not current: {unsent} writes dropped unsent")
        self.unsent = unsent


async def apply_actions(
    client: KubeClient,
    actions: Iterable[Action],
    *,
    component: str,
    applied: Callable[[Action], None] | None = None,
    fence: Callable[[], bool] | None = None,
) -> int:
    """Apply in order; returns the number of writes. Raises ApplyError on a real failure.

    `applied` is called with each action the API server took (not for a tolerated 404/409), as
    soon as it is taken: what is counted (metrics) is what was really written. `fence` is asked
    before each write: once it says no (a leader whose last renewal is older than the lease,
    paused or cut off), the remaining actions are dropped and NotLeading is raised.
    """
    writes = 0
    pending = list(actions)
    for i, action in enumerate(pending):
        if fence is not None and not fence():
            raise NotLeading(len(pending) - i)
        try:
            taken = await _apply_one(client, action, component=component)
        except ApiError as exc:
            raise ApplyError(f"{type(action).__name__} {_describe(action)}: {exc}", action) from exc
        if taken:
            writes += 1
            if applied is not None:
                applied(action)
    return writes


async def _apply_one(client: KubeClient, action: Action, *, component: str) -> bool:
    """Apply one action; True when the API server took a write. A create that finds the object
    there (409), a patch that finds it gone (404) and a delete of one gone or replaced (404,
    409) are no writes; an event is best effort and never counts."""
    if isinstance(action, EmitEvent):
        await _post_event(client, action, component=component)
        return False
    ref = action.ref
    res = resource_for(ref.api_version, ref.kind)
    ns = _path_ns(res, ref)
    if isinstance(action, CreateObject):
        return await _taken(client.create(res, action.body, namespace=ns), 409)
    if isinstance(action, PatchObject):
        return await _taken(client.patch(res, ref.name, action.patch, namespace=ns), 404)
    if isinstance(action, PatchStatus):
        # through /status or the object, as the kind takes it; None: the object is gone
        written = await status_paths(client).patch(res, ref.name, action.status, namespace=ns)
        return written is not None
    # what is left of an Action is a DeleteObject
    return await _taken(client.delete(res, ref.name, namespace=ns, uid=ref.uid), 404, 409)


async def _taken(call: Awaitable[Any], *tolerated: int) -> bool:
    """Await one API call: True when it succeeded, False when it failed with a tolerated
    status; any other ApiError is raised."""
    try:
        await call
    except ApiError as exc:
        if exc.status in tolerated:
            return False
        raise
    return True


def _describe(action: Action) -> str:
    ref = action.ref
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    return f"{ref.kind} {where}"


async def _post_event(client: KubeClient, ev: EmitEvent, *, component: str) -> None:
    ref = ev.ref
    involved = object_reference(
        api_version=ref.api_version,
        kind=ref.kind,
        namespace=ref.namespace,
        name=ref.name,
        uid=ref.uid,
        resource_version=ref.resource_version,
    )
    stamp = format_time(datetime.now(UTC))
    body = event_body(
        involved,
        reason=ev.reason,
        message=ev.message,
        type=ev.type,
        component=component,
        stamp=stamp,
    )
    ns = ref.namespace or "default"
    try:
        await client.create(EVENTS, body, namespace=ns)
    except ApiError as exc:  # events are best effort
        log.debug("event for %s not posted: %s", ev.ref.name, exc)


async def get_or_none(
    client: KubeClient, res: Resource, name: str, namespace: str | None = None
) -> dict[str, Any] | None:
    try:
        return await client.get(res, name, namespace if res.namespaced else None)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


async def list_items(
    client: KubeClient, res: Resource, *, namespace: str | None = None, **params: str
) -> list[dict[str, Any]]:
    try:
        page = await client.list(res, namespace=namespace if res.namespaced else None, **params)
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise
    items = list(page.get("items") or [])
    for it in items:  # LIST items may carry no kind/apiVersion
        it.setdefault("kind", res.kind)
        it.setdefault("apiVersion", res.api_version)
    return items
