"""What the sandbox serves: the resource types of built-in Kubernetes groups and of CRDs.

A `ResourceType` is one (group, version, plural) as discovery announces it. All versions of a
group/plural share one storage bucket (`storage_key`), as in a real API server, so a CRD served in
two versions shows the same objects under both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

# Field selectors every resource supports, plus the per-kind ones a real API server accepts.
COMMON_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(slots=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = True
    scale: tuple[str, str, str] | None = None  # specReplicasPath, statusReplicasPath, selector
    extra_subresources: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    crd: bool = False
    # CRD only: structural schema, printer columns, selectable fields (json paths).
    schema: dict[str, Any] | None = None
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    allow_create_on_update: bool = False
    # Name validation: "subdomain" (default) or "label" (DNS-1123 label, e.g. namespaces).
    name_rule: str = "subdomain"
    # Create-only review resources (access reviews): answered, never stored.
    virtual: bool = False
    # Validation of built-in kinds beyond metadata (raises ApiError on rejection).
    validator: Callable[[dict[str, Any]], None] | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def storage_key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def allowed_fields(self) -> tuple[str, ...]:
        return COMMON_FIELDS + self.fields


_POD_FIELDS = (
    "spec.nodeName",
    "spec.schedulerName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
_NEW_EVENT_FIELDS = (
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "reason",
    "reportingController",
    "type",
)


def _rt(
    group: str, version: str, kind: str, plural: str, namespaced: bool, **kw: Any
) -> ResourceType:
    return ResourceType(group, version, kind, plural, namespaced, **kw)


def builtin_types() -> list[ResourceType]:
    """The built-in resource types the sandbox serves (storage only unless noted elsewhere)."""
    replicas = ("spec.replicas", "status.replicas", "status.selector")
    return [
        _rt(
            "",
            "v1",
            "Namespace",
            "namespaces",
            False,
            short_names=("ns",),
            extra_subresources=("finalize",),
            fields=("status.phase",),
            name_rule="label",
        ),
        _rt(
            "",
            "v1",
            "Pod",
            "pods",
            True,
            short_names=("po",),
            categories=("all",),
            extra_subresources=("binding", "eviction", "log"),
            fields=_POD_FIELDS,
        ),
        _rt("", "v1", "Binding", "bindings", True, status_subresource=False, verbs=("create",)),
        _rt("", "v1", "Node", "nodes", False, short_names=("no",), fields=("spec.unschedulable",)),
        _rt(
            "",
            "v1",
            "Event",
            "events",
            True,
            short_names=("ev",),
            status_subresource=False,
            fields=_EVENT_FIELDS,
            allow_create_on_update=True,
        ),
        _rt(
            "", "v1", "ConfigMap", "configmaps", True, short_names=("cm",), status_subresource=False
        ),
        _rt("", "v1", "Secret", "secrets", True, status_subresource=False, fields=("type",)),
        _rt(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            True,
            short_names=("sa",),
            status_subresource=False,
        ),
        _rt("", "v1", "Service", "services", True, short_names=("svc",), categories=("all",)),
        _rt(
            "", "v1", "Endpoints", "endpoints", True, short_names=("ep",), status_subresource=False
        ),
        _rt(
            "", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, short_names=("pvc",)
        ),
        _rt("", "v1", "PersistentVolume", "persistentvolumes", False, short_names=("pv",)),
        _rt("", "v1", "ResourceQuota", "resourcequotas", True, short_names=("quota",)),
        _rt(
            "",
            "v1",
            "LimitRange",
            "limitranges",
            True,
            short_names=("limits",),
            status_subresource=False,
        ),
        _rt(
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            True,
            short_names=("rc",),
            categories=("all",),
            scale=replicas,
        ),
        _rt(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            True,
            short_names=("deploy",),
            categories=("all",),
            scale=replicas,
        ),
        _rt(
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
            True,
            short_names=("rs",),
            categories=("all",),
            scale=replicas,
        ),
        _rt(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            True,
            short_names=("sts",),
            categories=("all",),
            scale=replicas,
        ),
        _rt(
            "apps", "v1", "DaemonSet", "daemonsets", True, short_names=("ds",), categories=("all",)
        ),
        _rt(
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            True,
            status_subresource=False,
        ),
        _rt("batch", "v1", "Job", "jobs", True, categories=("all",)),
        _rt("batch", "v1", "CronJob", "cronjobs", True, short_names=("cj",), categories=("all",)),
        _rt(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            True,
            status_subresource=False,
            allow_create_on_update=True,
        ),
        _rt(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            True,
            short_names=("ev",),
            status_subresource=False,
            fields=_NEW_EVENT_FIELDS,
        ),
        _rt(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            False,
            short_names=("pc",),
            status_subresource=False,
        ),
        _rt(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            True,
            short_names=("pdb",),
        ),
        _rt(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            False,
            short_names=("crd", "crds"),
        ),
        _rt("rbac.authorization.k8s.io", "v1", "Role", "roles", True, status_subresource=False),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            True,
            status_subresource=False,
        ),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            False,
            status_subresource=False,
        ),
        _rt(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            False,
            status_subresource=False,
        ),
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            False,
            status_subresource=False,
        ),
        _rt(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            False,
            status_subresource=False,
        ),
        _rt(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            True,
            short_names=("netpol",),
            status_subresource=False,
        ),
        _rt(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            False,
            short_names=("sc",),
            status_subresource=False,
        ),
        _rt(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            True,
            status_subresource=False,
        ),
        *(
            _rt(
                "authorization.k8s.io",
                "v1",
                kind,
                plural,
                namespaced,
                verbs=("create",),
                status_subresource=False,
                virtual=True,
            )
            for kind, plural, namespaced in (
                ("SelfSubjectAccessReview", "selfsubjectaccessreviews", False),
                ("SelfSubjectRulesReview", "selfsubjectrulesreviews", False),
                ("SubjectAccessReview", "subjectaccessreviews", False),
                ("LocalSubjectAccessReview", "localsubjectaccessreviews", True),
            )
        ),
        _rt(
            "authentication.k8s.io",
            "v1",
            "SelfSubjectReview",
            "selfsubjectreviews",
            False,
            verbs=("create",),
            status_subresource=False,
            virtual=True,
        ),
    ]


def crd_types(crd: dict[str, Any]) -> list[ResourceType]:
    """The served resource types of a CustomResourceDefinition object."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    out: list[ResourceType] = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = ver.get("subresources") or {}
        scale = subs.get("scale")
        scale_paths = None
        if isinstance(scale, dict):
            scale_paths = (
                str(scale.get("specReplicasPath", ".spec.replicas")).lstrip("."),
                str(scale.get("statusReplicasPath", ".status.replicas")).lstrip("."),
                str(scale.get("labelSelectorPath", "") or "").lstrip("."),
            )
        selectable = tuple(
            str(f.get("jsonPath", "")).lstrip(".") for f in ver.get("selectableFields") or []
        )
        out.append(
            ResourceType(
                group=group,
                version=ver.get("name", "v1"),
                kind=names.get("kind", ""),
                plural=names.get("plural", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status_subresource="status" in subs,
                scale=scale_paths,
                fields=selectable,
                crd=True,
                schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
                printer_columns=list(ver.get("additionalPrinterColumns") or []),
            )
        )
    return out
