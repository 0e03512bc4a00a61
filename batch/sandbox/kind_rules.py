"""Each kind's own rules on a write: the built-in kinds' defaulting and validation (pods, Secrets
and ConfigMaps, Services, Namespaces, Nodes, PriorityClasses, CRDs) and a status write's checks.
"""

from __future__ import annotations

import base64
import copy

from batch.sandbox import admission, defaults, schema, validation
from batch.sandbox.clock import Clock
from batch.sandbox.errors import ApiError, Cause, invalid
from batch.sandbox.meta import ResourceType
from batch.sandbox.store import Obj, Store

#: the phases of a pod that has finished
TERMINAL = ("Succeeded", "Failed")


def prepare_kind(
    rt: ResourceType, obj: Obj, old: Obj | None, op: str, *, store: Store, clock: Clock
) -> None:
    """The built-in kind's own defaulting and validation, in place."""
    kind, group = rt.kind, rt.group
    if group == "" and kind == "Pod":
        _prepare_pod(obj, old, op, store)
    elif group == "" and kind in ("Secret", "ConfigMap"):
        _prepare_data(kind, obj)
    elif group == "" and kind == "Service":
        obj["spec"] = copy.deepcopy(obj.get("spec") or {})
        defaults.service_defaults(obj)
    elif group == "" and kind == "Namespace":
        _prepare_namespace(obj, op)
    elif group == "" and kind == "Node":
        if op == "CREATE":
            obj["status"] = copy.deepcopy(obj.get("status") or {})
            defaults.node_defaults(obj)
    elif group == "scheduling.k8s.io" and kind == "PriorityClass":
        _check_priority_class(obj, old)
    elif group == "apiextensions.k8s.io" and kind == "CustomResourceDefinition":
        _validate_crd(obj, old, clock)
    elif (group, kind) in validation.MICRO_TIME_FIELDS:
        validation.check_micro_times(group, kind, rt.api_version, obj)


def _merge_string_data(secret: Obj) -> None:
    """A Secret's `stringData` is write-only: its values replace `data`'s, base64-encoded, as
    the apiserver's conversion does, and it is never stored."""
    string_data = secret.pop("stringData", None)
    if not isinstance(string_data, dict):
        return
    data = dict(secret.get("data") or {})
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    secret["data"] = data


def _prepare_data(kind: str, obj: Obj) -> None:
    """A Secret's stringData folded into data, then the size limit of either kind."""
    if kind == "Secret":
        _merge_string_data(obj)
    causes = defaults.data_size_causes(kind, obj)
    if causes:
        raise invalid(kind, "", obj["metadata"]["name"], causes)


def _prepare_namespace(obj: Obj, op: str) -> None:
    meta = obj["metadata"]
    labels = dict(meta.get("labels") or {})
    labels["kubernetes.io/metadata.name"] = meta["name"]
    meta["labels"] = labels
    if op == "CREATE":
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}


def _check_priority_class(obj: Obj, old: Obj | None) -> None:
    """A PriorityClass needs a value, and the value is immutable."""
    if "value" not in obj:
        cause = Cause("value", "FieldValueRequired", "Required value")
    elif old is not None and old.get("value") != obj.get("value"):
        cause = Cause("value", "FieldValueForbidden", "Forbidden: may not be changed in an update.")
    else:
        return
    raise invalid("PriorityClass", "scheduling.k8s.io", obj["metadata"]["name"], [cause])


def _prepare_pod(obj: Obj, old: Obj | None, op: str, store: Store) -> None:
    if op == "CREATE":
        # create() owns its body (decoded JSON or a fresh copy made by the caller)
        obj["spec"] = dict(obj.get("spec") or {})
        defaults.default_pod(obj)
        ns_obj = store.get("namespaces", "", obj["metadata"].get("namespace", ""))
        admission.inject_gang(obj, ns_obj)
        _resolve_priority(obj, store)
    causes = defaults.validate_pod(obj)
    if causes:
        raise invalid("Pod", "", obj["metadata"]["name"], causes)
    if old is not None:
        _pod_update(obj, old)


def _resolve_priority(pod: Obj, store: Store) -> None:
    spec = pod["spec"]
    pcname = spec.get("priorityClassName")
    pcs = store.buckets["priorityclasses.scheduling.k8s.io"]
    if pcname:
        pc = pcs.objects.get("", {}).get(pcname)
        if pc is None:
            raise ApiError(
                403,
                f'pods "{pod["metadata"]["name"]}" is forbidden: no '
                f"PriorityClass with name {pcname} was found",
            )
    else:
        pc = next((p for p in pcs.iter(None) if p.get("globalDefault")), None)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = int(pc.get("value", 0)) if pc is not None else 0
    if "priority" in spec and spec["priority"] != value and pcname:
        raise ApiError(
            403,
            "the integer value of priority must not be provided in pod spec; "
            "priority admission controller computed "
            f"{value} from the given PriorityClass name",
        )
    spec["priority"] = value
    if pc is not None and pc.get("preemptionPolicy"):
        spec["preemptionPolicy"] = pc["preemptionPolicy"]


def _pod_update(pod: Obj, old: Obj) -> None:
    """Defaulting and ValidatePodUpdate for a write of the pod itself (the binding and
    status subresources do not come here): the spec is immutable but for a few fields."""
    old_spec = old.get("spec") or {}
    spec = pod.get("spec")
    if spec is old_spec or spec == old_spec:
        return
    spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    defaults.default_pod_spec(spec)
    defaults.default_tolerations(spec)
    # the Priority admission plugin keeps what it set on create
    for key in ("priority", "preemptionPolicy"):
        if key not in spec and key in old_spec:
            spec[key] = old_spec[key]
    pod["spec"] = spec
    causes = defaults.pod_update_causes(spec, old_spec)
    if causes:
        raise invalid("Pod", "", pod["metadata"]["name"], causes)


def _validate_crd(crd: Obj, old: Obj | None, clock: Clock) -> None:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    name = crd["metadata"]["name"]
    causes: list[Cause] = []
    if not group:
        causes.append(Cause("spec.group", "FieldValueRequired", "Required value"))
    if not names.get("plural"):
        causes.append(Cause("spec.names.plural", "FieldValueRequired", "Required value"))
    if not names.get("kind"):
        causes.append(Cause("spec.names.kind", "FieldValueRequired", "Required value"))
    if not spec.get("versions"):
        causes.append(Cause("spec.versions", "FieldValueRequired", "Required value"))
    if names.get("plural") and group and name != f"{names['plural']}.{group}":
        causes.append(
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            )
        )
    if causes:
        raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)
    # A CRD is established at once: the sandbox has no separate naming controller.
    conds = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": clock.stamp(),
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": clock.stamp(),
        },
    ]
    crd["status"] = {
        "conditions": conds,
        "acceptedNames": copy.deepcopy(names),
        "storedVersions": [v.get("name") for v in spec.get("versions") or [] if v.get("storage")],
    }


def checked_status(rt: ResourceType, obj: Obj) -> Obj:
    """Validation of a write through /status: a pod's status rules, a CRD's schema."""
    if rt.group == "" and rt.kind == "Pod":
        causes = defaults.pod_status_causes(obj.get("status") or {})
        if causes:
            raise invalid(rt.kind, rt.group, obj["metadata"]["name"], causes)
    elif rt.crd and rt.schema:
        obj = copy.deepcopy(obj)
        schema.prune_and_default(obj, rt.schema)
        causes = schema.validate(obj, rt.schema)
        if causes:
            raise invalid(rt.kind, rt.group, obj["metadata"]["name"], causes)
    return obj
