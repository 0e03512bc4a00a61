"""The imperative shell: applies reconciler actions through the Kubernetes API.

What each action means (order, what a 404/409 leaves to do, what counts as a write, where a
batch stops) is `batch.controllers.interpreter`'s; this module supplies its store over the API
server (`ApiStore`) and the resources the kinds live at. A caller can ask to hear of each write
the API server took (the controllers count their metrics from those), and an ApplyError names
the action that failed, with the API's error as its cause.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from batch.api.events import event_body, object_reference
from batch.controllers import constants as c
from batch.controllers.effects import JSON, Action, EmitEvent, ObjectRef
from batch.controllers.interpreter import (
    MISSING,
    Answer,
    ApplyError,
    NotLeading,
    Refused,
    apply_async,
)
from batch.controllers.timeutil import format_time
from batch.kube.client import ApiError, KubeClient, Resource
from batch.kube.statuspath import status_paths

__all__ = [  # ApplyError and NotLeading are the interpreter's, re-exported for the controllers
    "BATCH_JOBS",
    "COMMANDS",
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "EVENTS",
    "JOBS",
    "NAMESPACES",
    "NETPOLS",
    "PODGROUPS",
    "PODS",
    "PRIORITY_CLASSES",
    "PVCS",
    "QUEUES",
    "RCS",
    "REPLICASETS",
    "SECRETS",
    "SERVICES",
    "STATEFULSETS",
    "ApiStore",
    "ApplyError",
    "NotLeading",
    "apply_actions",
    "get_or_none",
    "list_items",
    "register_kind",
    "resource_for",
]

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


class ApiStore:
    """The interpreter's store over the API server (`batch.controllers.interpreter`): each write
    is one call; 404 answers `missing` and 409 `conflict` (AlreadyExists, or a delete's uid
    precondition: another incarnation); a status patch goes through `/status` or the object, as
    the kind takes it (`batch.kube.statuspath`). Events are posted as core/v1 Events."""

    errors: tuple[type[Exception], ...] = (ApiError,)

    def __init__(self, client: KubeClient, *, component: str) -> None:
        self.client = client
        self.component = component

    async def create(self, ref: ObjectRef, body: JSON) -> Answer:
        res = resource_for(ref.api_version, ref.kind)
        return await _answer(self.client.create(res, body, namespace=_path_ns(res, ref)))

    async def patch(self, ref: ObjectRef, patch: JSON) -> Answer:
        res = resource_for(ref.api_version, ref.kind)
        return await _answer(self.client.patch(res, ref.name, patch, namespace=_path_ns(res, ref)))

    async def patch_status(self, ref: ObjectRef, status: JSON) -> Answer:
        res = resource_for(ref.api_version, ref.kind)
        ns = _path_ns(res, ref)
        written = await status_paths(self.client).patch(res, ref.name, status, namespace=ns)
        return MISSING if written is None else None

    async def delete(self, ref: ObjectRef) -> Answer:
        res = resource_for(ref.api_version, ref.kind)
        ns = _path_ns(res, ref)
        return await _answer(self.client.delete(res, ref.name, namespace=ns, uid=ref.uid))

    async def event(self, ev: EmitEvent) -> Answer:
        ref = ev.ref
        involved = object_reference(
            api_version=ref.api_version,
            kind=ref.kind,
            namespace=ref.namespace,
            name=ref.name,
            uid=ref.uid,
            resource_version=ref.resource_version,
        )
        body = event_body(
            involved,
            reason=ev.reason,
            message=ev.message,
            type=ev.type,
            component=self.component,
            stamp=format_time(datetime.now(UTC)),
        )
        await self.client.create(EVENTS, body, namespace=ref.namespace or "default")
        return None


async def _answer(call: Awaitable[Any]) -> Answer:
    """Await one API call: None when it succeeded, the refusal a 404 or 409 is; any other
    ApiError is raised."""
    try:
        await call
    except ApiError as exc:
        if exc.status == 404:
            return Refused("missing", exc)
        if exc.status == 409:
            return Refused("conflict", exc)
        raise
    return None


async def apply_actions(
    client: KubeClient,
    actions: Iterable[Action],
    *,
    component: str,
    applied: Callable[[Action], None] | None = None,
    fence: Callable[[], bool] | None = None,
) -> int:
    """Apply in order through the API server; returns the number of writes. Raises ApplyError
    on a real failure, NotLeading once `fence` says no (`batch.controllers.interpreter`)."""
    store = ApiStore(client, component=component)
    return await apply_async(store, actions, applied=applied, fence=fence)


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
