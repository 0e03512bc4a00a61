"""The contract between Tephra's PodGroup controller and framework adapters.

Why this exists: framework operators (Kubeflow training-operator, mpi-operator, KubeRay,
spark-operator, spark-submit) create pods that Tephra must gang-schedule, but ``batch`` never
imports ``integrations``. So the interface both sides agree on lives here, in the bottom layer:

* an adapter (any object satisfying :class:`WorkloadAdapter`) is published under the
  entry-point group ``tephra.integrations`` and found with :func:`load_adapters`;
* for a workload object (a PyTorchJob, RayCluster, ...) the adapter returns a :class:`GangSpec`
  (PodGroup name, minMember, minTaskMember, minResources, queue, priority, owner, adoption);
* for a pod it returns a :class:`WorkloadRef` naming the workload and the gang the pod joins,
  and the pod's role (``volcano.sh/task-spec``);
* :func:`mutate_pod_for_gang` (JSON patch for the opt-in mutating pod webhook) carries the
  rules the webhook applies; what the PodGroup controller does with a gang (create / update /
  adopt / wait) is the controller's own, in ``batch.controllers.gang``;
* an adapter may also ``observe`` a workload for the ledger (:class:`ObservingAdapter`).

Adoption rule (volcano-semantics.md#framework-integrations): when an operator already makes a
Volcano PodGroup
(Kubeflow ``<job>``, KubeRay ``ray-<cluster>-pg``, spark-operator ``spark-<app>-pg``) Tephra uses
that very name for its gang, never creates a second one and never writes to a PodGroup it did not
create. A PodGroup Tephra created carries :data:`GANG_HASH_ANNOTATION`; if anybody else changes
its spec afterwards, Tephra treats it as handed over and stops correcting it.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from batch.api import pods
from batch.api.errors import UserError
from batch.api.owners import WORKLOAD_KIND_LABEL, WORKLOAD_NAME_LABEL
from batch.api.pods import PodResourceError
from batch.api.resources import Resource

__all__ = [
    "CREATED_BY_ANNOTATION",
    "DEFAULT_QUEUE",
    "ENTRY_POINT_GROUP",
    "FINAL_WORKLOAD_PHASES",
    "GANG_HASH_ANNOTATION",
    "GANG_INJECTION_DISABLED",
    "GANG_INJECTION_ENABLED",
    "GANG_INJECTION_LABEL",
    "GROUP_MIN_MEMBER_ANNOTATION",
    "GROUP_NAME_ANNOTATION",
    "PODGROUP_API_VERSION",
    "QUEUE_NAME_ANNOTATION",
    "TASK_SPEC_ANNOTATION",
    "WORKLOAD_KIND_LABEL",
    "WORKLOAD_NAME_LABEL",
    "GangError",
    "GangSpec",
    "ObservingAdapter",
    "OwnerRef",
    "WorkloadAdapter",
    "WorkloadKind",
    "WorkloadObservation",
    "WorkloadRef",
    "adapter_for_pod",
    "adapter_for_workload",
    "annotations_of",
    "apply_gang_injection",
    "default_adapters",
    "gang_injection_enabled",
    "gang_pods",
    "labels_of",
    "leader_running",
    "load_adapters",
    "mutate_pod_for_gang",
    "observe_workload",
    "owner_ref_of",
    "pod_requests",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tephra.integrations"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
DEFAULT_QUEUE = "default"

# Pod / namespace / workload annotation keys (volcano-semantics.md#pod-to-podgroup).
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
GROUP_MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"

# Tephra's own keys.
#: Namespace label that opts the namespace into gang injection by the mutating pod webhook.
GANG_INJECTION_LABEL = "tephra.io/gang-injection"
GANG_INJECTION_ENABLED = "enabled"
#: Value of GANG_INJECTION_LABEL that opts out even when the namespace names a queue.
GANG_INJECTION_DISABLED = "disabled"
#: On PodGroups Tephra created: fingerprint of the spec Tephra last wrote (see spec_fingerprint).
GANG_HASH_ANNOTATION = "tephra.io/gang-spec-hash"
#: On PodGroups Tephra created: the adapter name that derived the gang.
CREATED_BY_ANNOTATION = "tephra.io/created-by"
#: A job's expected run time on its PodGroup (or pod), a duration: the Job controller copies
#: ``Job.spec.runningEstimate`` into it; reservation and sjf read it, the ledger records it.
RUNNING_ESTIMATE_ANNOTATION = "tephra.io/running-estimate"


class GangError(UserError):
    """A workload the user wrote cannot be turned into a gang.

    The message is one line naming the object, the field path and the rule, e.g.
    ``PyTorchJob ns/job: spec.pytorchReplicaSpecs.Worker.replicas: must be an integer >= 0``.
    The controller reports it (event / log) instead of a traceback.
    """


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """A workload resource an adapter handles; the controller watches it.

    ``label_selector`` narrows the watch (used for ``v1`` Pods acting as workloads, e.g. the
    driver pod of a spark-submit application: ``spark-role=driver``).
    """

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True
    label_selector: str | None = None

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (a Kubernetes object dict) is of this kind (ignores the selector)."""
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """Which workload a pod belongs to and which PodGroup (gang) it joins.

    ``gang_name`` is the PodGroup name when the pod's labels alone determine it (then the webhook
    can annotate the pod at creation); None when only the workload object does (e.g. the pods of
    a RayCluster that a RayJob made carry no RayJob label), when the workload may have no gang
    at all (a Spark executor owned by an ordinary notebook pod), or when a name on the pod would
    be read as the operator announcing its own PodGroup (a spark-submit driver): the controller
    then takes the name from ``gang_for_workload`` of the referenced workload and patches the
    pod afterwards. Never give a name whose PodGroup might never be created.
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    gang_name: str | None
    uid: str | None = None


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """The ownerReference Tephra puts on a PodGroup it creates (the workload)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = True
    block_owner_deletion: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": self.controller,
            "blockOwnerDeletion": self.block_owner_deletion,
        }


@dataclass(frozen=True)
class GangSpec:
    """The gang (Volcano PodGroup) a workload needs, as an adapter derives it.

    Fields:
      name, namespace: the PodGroup's name — the operator's own convention so that Tephra and a
        Volcano-configured operator can never make two groups for one workload.
      min_member: pods that must be placed together.
      min_task_member: per role (``volcano.sh/task-spec`` value) minimum; empty = none.
      min_resources: ResourceList (canonical quantity strings) admitted at enqueue; None = unset.
      queue: the queue the workload names; None = it names none (see :func:`resolve_queue`).
      priority_class_name: None = unset.
      owner: ownerReference for a PodGroup Tephra creates (None if the workload has no uid yet).
      labels, annotations: put on a PodGroup Tephra creates.
      adopt_existing: the workload itself says its operator makes the PodGroup (e.g. a
        SparkApplication with ``batchScheduler: volcano``): wait for it instead of creating one,
        for at most ``adopt_grace_seconds`` (after that the operator is evidently not configured
        for Volcano and Tephra creates the group itself).
      existing_podgroup_name: the name the operator uses when it makes the PodGroup (normally
        equal to ``name``).
      leader_role: role whose pods create the other members (the Spark driver creates its
        executors). Until a pod of that role runs, the effective minMember/minTaskMember cover the
        leader only, while minResources still reserves the whole gang at enqueue; once it runs,
        the rest are placed all-or-nothing (fixes spark-operator#1343 without a deadlock).
      workload: the workload this gang is for.
      adapter: name of the adapter that derived it.
    """

    name: str
    namespace: str
    min_member: int
    workload: WorkloadRef
    adapter: str
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    min_resources: Mapping[str, str] | None = None
    queue: str | None = None
    priority_class_name: str | None = None
    owner: OwnerRef | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    adopt_existing: bool = False
    existing_podgroup_name: str | None = None
    adopt_grace_seconds: float = 30.0
    leader_role: str | None = None

    def __post_init__(self) -> None:
        if self.min_member < 0:
            raise ValueError(f"gang {self.namespace}/{self.name}: minMember must be >= 0")
        if self.leader_role is not None and self.leader_role not in self.min_task_member:
            raise ValueError(
                f"gang {self.namespace}/{self.name}: leader_role {self.leader_role!r} "
                "must be a key of min_task_member"
            )


@runtime_checkable
class WorkloadAdapter(Protocol):
    """What a framework adapter provides (published under the ``tephra.integrations`` group).

    All methods are pure functions of the given objects (plain dicts as the API returns them);
    they never call the API server. A method returns None for an object it does not handle.
    """

    @property
    def name(self) -> str:
        """Short unique adapter name (``pytorch``, ``ray``, ...)."""
        ...

    @property
    def kinds(self) -> Sequence[WorkloadKind]:
        """Workload kinds to watch and pass to :meth:`gang_for_workload`."""
        ...

    def gang_for_workload(self, workload: Mapping[str, Any]) -> GangSpec | None:
        """The gang ``workload`` needs, or None (not handled / not gang-scheduled)."""
        ...

    def workload_ref_for_pod(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        """Which workload (and gang) ``pod`` belongs to, from its operator's labels."""
        ...

    def existing_podgroup_name(self, workload: Mapping[str, Any]) -> str | None:
        """Name of the PodGroup the operator makes for ``workload`` when set up for Volcano."""
        ...

    def role_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        """The pod's role in the gang (value for ``volcano.sh/task-spec``)."""
        ...


#: the observed phases after which a workload starts no pod again
FINAL_WORKLOAD_PHASES = frozenset({"Completed", "Failed", "Terminated"})


@dataclass(frozen=True)
class WorkloadObservation:
    """What the ledger records about a workload, as the workload's adapter reads it.

    Fields:
      replicas: pods per role as the workload asks for them (``{"master": 1, "worker": 4}``).
      requests: the total requests of those pods, internal amounts (:mod:`batch.api.resources`).
      queue, priority_class, min_available: as the workload names them (None = unnamed; the
        ledger then reads the queue from the Volcano queue label/annotation).
      phases: ``(phase, when)`` the workload has been through, in the ledger's vocabulary
        (``Pending``, ``Running``, ``Restarting``, ``Completing``, ``Completed``, ``Failed``,
        ``Terminating``, ``Terminated``, ``Unknown``), times taken from the object so that
        observing it again gives the same history.
      part_of: the workload whose job this one is part of (a RayCluster that a RayJob or
        RayService created): the ledger keeps no job row for this one, and its PodGroup's
        facts go to that owner's row. None: a job of its own.
    """

    replicas: Mapping[str, int] = field(default_factory=dict)
    requests: Mapping[str, int] = field(default_factory=dict)
    queue: str | None = None
    priority_class: str | None = None
    min_available: int | None = None
    phases: Sequence[tuple[str, dt.datetime]] = ()
    part_of: OwnerRef | None = None

    @property
    def finished(self) -> bool:
        """Whether the workload's latest phase is a final one (it will start no pod again)."""
        if not self.phases:
            return False
        latest = max(self.phases, key=lambda p: p[1])[0]
        return latest in FINAL_WORKLOAD_PHASES


@runtime_checkable
class ObservingAdapter(Protocol):
    """The optional part of the adapter protocol the ledger uses (``observe``).

    An adapter without it still gets its gangs scheduled; its workloads are then recorded
    from their PodGroups only. ``observe`` is pure and must not raise for a workload of its
    kinds, however malformed (return what can be read); None = not this adapter's kind.
    """

    def observe(self, workload: Mapping[str, Any]) -> WorkloadObservation | None:
        """What the ledger keeps about ``workload`` (None: not handled)."""
        ...


# --------------------------------------------------------------------------- discovery


def load_adapters(*, group: str = ENTRY_POINT_GROUP) -> list[WorkloadAdapter]:
    """Load every adapter published under the entry-point group, sorted by adapter name.

    An entry point may name an adapter instance, a class or a zero-argument factory. One that
    fails to load or does not satisfy :class:`WorkloadAdapter` is logged and skipped, so one
    broken third-party plugin cannot stop the controller.
    """
    found: dict[str, WorkloadAdapter] = {}
    for ep in entry_points(group=group):
        try:
            obj: Any = ep.load()
            if isinstance(obj, type) or (callable(obj) and not isinstance(obj, WorkloadAdapter)):
                obj = obj()
        except Exception:
            log.exception("integration entry point %s (%s) failed to load", ep.name, ep.value)
            continue
        if not isinstance(obj, WorkloadAdapter):
            log.error("integration entry point %s does not provide a WorkloadAdapter", ep.name)
            continue
        if obj.name in found:
            log.error("integration %r published twice; keeping the first", obj.name)
            continue
        found[obj.name] = obj
    return [found[k] for k in sorted(found)]


@functools.cache
def default_adapters() -> tuple[WorkloadAdapter, ...]:
    """:func:`load_adapters` of the default group, loaded once per process (for hot paths such
    as pod admission)."""
    return tuple(load_adapters())


def adapter_for_workload(
    workload: Mapping[str, Any], adapters: Iterable[WorkloadAdapter]
) -> WorkloadAdapter | None:
    """The first adapter that lists ``workload``'s apiVersion/kind."""
    for adapter in adapters:
        if any(k.matches(workload) for k in adapter.kinds):
            return adapter
    return None


def adapter_for_pod(
    pod: Mapping[str, Any], adapters: Iterable[WorkloadAdapter]
) -> tuple[WorkloadAdapter, WorkloadRef] | None:
    """The first adapter that claims ``pod``, with the workload it maps the pod to."""
    for adapter in adapters:
        ref = adapter.workload_ref_for_pod(pod)
        if ref is not None:
            return adapter, ref
    return None


def observe_workload(
    workload: Mapping[str, Any], adapters: Iterable[object]
) -> WorkloadObservation | None:
    """The first observation an :class:`ObservingAdapter` among ``adapters`` gives for
    ``workload``. An adapter that raises is logged and passed over (history must not stop)."""
    for adapter in adapters:
        if not isinstance(adapter, ObservingAdapter):
            continue
        try:
            seen = adapter.observe(workload)
        except Exception:
            log.exception("integration %r failed to observe a workload", adapter)
            continue
        if seen is not None:
            return seen
    return None


def gang_pods(
    gang: GangSpec, pods: Iterable[Mapping[str, Any]], adapter: WorkloadAdapter
) -> list[Mapping[str, Any]]:
    """The pods among ``pods`` that belong to ``gang``: they name its PodGroup, or ``adapter``
    maps them to the gang's workload (same kind, namespace and name)."""
    want = (gang.workload.kind, gang.workload.namespace, gang.workload.name)
    out = []
    for pod in pods:
        named = _meta(pod, "annotations").get(GROUP_NAME_ANNOTATION)
        if named:
            if named == gang.name and _pod_namespace(pod) == gang.namespace:
                out.append(pod)
            continue
        ref = adapter.workload_ref_for_pod(pod)
        if ref is not None and (ref.kind, ref.namespace, ref.name) == want:
            out.append(pod)
    return out


def leader_running(
    gang: GangSpec, pods: Iterable[Mapping[str, Any]], adapter: WorkloadAdapter
) -> bool:
    """Whether a pod of the gang's ``leader_role`` runs (False when the gang has no leader).

    ``pods`` may be every pod of the namespace; only the gang's own are considered.
    """
    if gang.leader_role is None:
        return False
    for pod in gang_pods(gang, pods, adapter):
        if (
            adapter.role_of_pod(pod) == gang.leader_role
            and (pod.get("status") or {}).get("phase") == "Running"
        ):
            return True
    return False


# --------------------------------------------------------------------------- PodGroup rules


# --------------------------------------------------------------------------- pod webhook


def gang_injection_enabled(namespace_obj: Mapping[str, Any] | None) -> bool:
    """Whether a namespace opted into gang injection.

    Opt in with the label ``tephra.io/gang-injection: enabled`` or by naming a queue with the
    annotation ``scheduling.volcano.sh/queue-name``; ``tephra.io/gang-injection: disabled``
    opts out in either case.
    """
    if namespace_obj is None:
        return False
    value = _meta(namespace_obj, "labels").get(GANG_INJECTION_LABEL)
    if value == GANG_INJECTION_DISABLED:
        return False
    if value == GANG_INJECTION_ENABLED:
        return True
    return bool(_meta(namespace_obj, "annotations").get(QUEUE_NAME_ANNOTATION))


def mutate_pod_for_gang(
    pod: Mapping[str, Any],
    *,
    namespace_obj: Mapping[str, Any] | None,
    adapters: Iterable[WorkloadAdapter],
    scheduler_name: str = "volcano",
) -> list[dict[str, Any]]:
    """JSON-patch operations (RFC 6902) the opt-in mutating pod webhook applies on pod CREATE.

    For a pod an adapter claims, in a namespace that opted in (:func:`gang_injection_enabled`):
    set ``spec.schedulerName`` (only when empty or ``default-scheduler``; a pod that names
    another scheduler is left alone entirely), the annotation ``scheduling.k8s.io/group-name``
    = the gang name (when the pod's labels determine it, see :class:`WorkloadRef`; else the
    controller adds it later) and ``volcano.sh/task-spec`` = the pod's role. A pod that
    already names a group (an operator configured for Volcano did it) is left untouched.
    Returns ``[]`` when nothing is to change.
    """
    if not gang_injection_enabled(namespace_obj):
        return []
    annotations = _meta(pod, "annotations")
    if annotations.get(GROUP_NAME_ANNOTATION):
        return []
    adapters = list(adapters)
    claimed = adapter_for_pod(pod, adapters)
    if claimed is None:
        return []
    adapter, ref = claimed
    ops: list[dict[str, Any]] = []
    spec = pod.get("spec") or {}
    current_scheduler = spec.get("schedulerName")
    if current_scheduler in (None, "", "default-scheduler"):
        op = "replace" if "schedulerName" in spec else "add"
        ops.append({"op": op, "path": "/spec/schedulerName", "value": scheduler_name})
    elif current_scheduler != scheduler_name:
        return []  # the user picked another scheduler for this pod: not ours to gang
    wanted: dict[str, str] = {}
    if ref.gang_name:
        wanted[GROUP_NAME_ANNOTATION] = ref.gang_name
    role = annotations.get(TASK_SPEC_ANNOTATION) or adapter.role_of_pod(pod)
    if role and TASK_SPEC_ANNOTATION not in annotations:
        wanted[TASK_SPEC_ANNOTATION] = role
    metadata = pod.get("metadata") or {}
    if wanted and not isinstance(metadata.get("annotations"), Mapping):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": wanted})
    elif wanted:
        for key, value in wanted.items():
            ops.append(
                {"op": "add", "path": "/metadata/annotations/" + _escape(key), "value": value}
            )
    return ops


def apply_gang_injection(
    pod: dict[str, Any],
    *,
    namespace_obj: Mapping[str, Any] | None,
    adapters: Iterable[WorkloadAdapter],
    scheduler_name: str = "volcano",
) -> bool:
    """Apply :func:`mutate_pod_for_gang` to ``pod`` in place (for in-process admission, e.g.
    the sandbox, which mutates objects rather than sending patches). True if it changed."""
    ops = mutate_pod_for_gang(
        pod, namespace_obj=namespace_obj, adapters=adapters, scheduler_name=scheduler_name
    )
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node: dict[str, Any] = pod
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = copy.deepcopy(op["value"])
    return bool(ops)


# --------------------------------------------------------------------------- object helpers


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.labels`` of a Kubernetes object dict (empty when absent)."""
    return _meta(obj, "labels")


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.annotations`` of a Kubernetes object dict (empty when absent)."""
    return _meta(obj, "annotations")


def owner_ref_of(workload: Mapping[str, Any]) -> OwnerRef | None:
    """The ownerReference pointing at ``workload`` (None while it has no uid)."""
    metadata = workload.get("metadata") or {}
    uid, name = metadata.get("uid"), metadata.get("name")
    if not uid or not name:
        return None
    return OwnerRef(str(workload.get("apiVersion", "")), str(workload.get("kind", "")), name, uid)


def pod_requests(pod_spec: Mapping[str, Any] | None) -> Resource:
    """A pod's effective requests (:func:`batch.api.pods.pod_requests`, kube-scheduler's rule)
    as a :class:`Resource`; a malformed quantity is a :class:`GangError` naming the field.
    ``pod_spec`` is a PodSpec dict (``template.spec`` of a workload)."""
    try:
        return Resource(pods.pod_requests(pod_spec))
    except PodResourceError as exc:
        raise GangError(str(exc)) from None


# --------------------------------------------------------------------------- helpers


def _meta(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    metadata = obj.get("metadata") or {}
    value = metadata.get(key) or {}
    return value if isinstance(value, Mapping) else {}


def _pod_namespace(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def _escape(key: str) -> str:
    """JSON-pointer escape (RFC 6901) of one path segment."""
    return key.replace("~", "~0").replace("/", "~1")
