"""Defaulting and validation of built-in kinds that clients and the scheduler rely on.

A kube-apiserver fills many pod fields (schedulerName, restartPolicy, grace period, requests from
limits, default tolerations, QoS class, ...). Tephra's scheduler reads several of them, so the
sandbox fills the same ones with the same values, on create and (scheme defaults, default
tolerations) on update. `pod_update_causes` is ValidatePodUpdate's spec rule: a pod's spec only
changes in its images, activeDeadlineSeconds, added tolerations, removed schedulingGates (and, while
gated, added nodeSelector entries and node affinity requirements).
"""

from __future__ import annotations

import json
import re
from typing import Any

from batch.api.quantity import Quantity, QuantityError
from batch.sandbox.errors import ApiError, Cause

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def name_causes(name: str, rule: str) -> list[Cause]:
    if rule == "label":
        if len(name) > 63 or not _LABEL.match(name):
            return [
                Cause(
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of '
                    "lower case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character",
                )
            ]
        return []
    if rule == "path":
        if name in (".", "..") or "/" in name or "%" in name:
            return [Cause("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}"')]
        return []
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return [
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        ]
    return []


def _image_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


_QUANTITY_RE = r"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def canonical_quantities(values: Any, kind: str) -> Any:
    """A resource list with every quantity in canonical string form, as kube-apiserver decodes
    and re-encodes a Quantity: a JSON number is a valid quantity (`gpu: 1` is "1", `cpu: 0.5`
    is "500m") and "1024Mi" is "1Gi"; anything else is its decoding error (400)."""
    if not isinstance(values, dict):
        return values
    out: dict[str, Any] = {}
    for name, value in values.items():
        try:
            out[name] = str(Quantity.parse(value))
        except QuantityError:
            raise ApiError(
                400,
                f'{kind} in version "v1" cannot be handled as a {kind}: quantities must match '
                f"the regular expression {_QUANTITY_RE}",
            ) from None
    return out


def _default_container(c: dict[str, Any]) -> None:
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("imagePullPolicy", _image_policy(str(c.get("image", ""))))
    res = c.setdefault("resources", {})
    limits = res.get("limits") or {}
    if limits:
        req = dict(res.get("requests") or {})
        for k, v in limits.items():
            req.setdefault(k, v)
        res["requests"] = req
    if isinstance(res, dict):
        for key in ("requests", "limits"):
            if key in res:
                res[key] = canonical_quantities(res[key], "Pod")
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def qos_class(spec: dict[str, Any]) -> str:
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim.get(r))) != str(lim.get(r)):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod_spec(spec: dict[str, Any]) -> None:
    """The scheme defaults of a PodSpec and its containers (applied on create and update, as
    decoding does; fields already set are kept)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for c in spec.get("containers") or []:
        if isinstance(c, dict):
            _default_container(c)
    for c in spec.get("initContainers") or []:
        if isinstance(c, dict):
            _default_container(c)


def default_tolerations(spec: dict[str, Any]) -> None:
    """The DefaultTolerationSeconds admission plugin (create and update): tolerate not-ready and
    unreachable nodes for 300 s unless a toleration already covers them."""
    tolerations = list(spec.get("tolerations") or [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        covered = any(
            isinstance(t, dict)
            and t.get("key") in (key, "", None)
            and t.get("effect") in ("NoExecute", "", None)
            for t in tolerations
        )
        if not covered:
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    spec["tolerations"] = tolerations


def default_pod(pod: dict[str, Any]) -> None:
    """Fill the fields kube-apiserver defaults on pod creation (in place, pod is private)."""
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    default_tolerations(spec)
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)
_MAX_INT32 = 2**31 - 1


def _semantic(value: Any) -> Any:
    """A value as apiequality.Semantic compares it: null, [] and {} are all "unset"."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None} or None
    if isinstance(value, list):
        return [_semantic(v) for v in value] or None
    return value


def _same(a: Any, b: Any) -> bool:
    return bool(_semantic(a) == _semantic(b))


def _only_added_tolerations(new: list[Any], old: list[Any]) -> bool:
    """validateOnlyAddedTolerations: every old toleration is still there (its tolerationSeconds
    may change)."""
    for o in old:
        if not isinstance(o, dict):
            continue
        if not any(
            isinstance(n, dict)
            and _same({**o, "tolerationSeconds": None}, {**n, "tolerationSeconds": None})
            for n in new
        ):
            return False
    return True


def _node_selector_term_only_additions(new: Any, old: Any) -> bool:
    new, old = new if isinstance(new, dict) else {}, old if isinstance(old, dict) else {}
    for key in ("matchExpressions", "matchFields"):
        added = [_semantic(r) for r in new.get(key) or []]
        if any(_semantic(r) not in added for r in old.get(key) or []):
            return False
    return True


def _gated_mutation_causes(munged: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """Pods with schedulingGates may gain nodeSelector entries and required node affinity
    requirements (additions only); munged takes the old values so the spec compares equal."""
    causes: list[Cause] = []
    new_sel = munged.get("nodeSelector") or {}
    old_sel = old.get("nodeSelector") or {}
    if not _same(new_sel, old_sel):
        if any(new_sel.get(k) != v for k, v in old_sel.items()):
            shown = json.dumps(new_sel, separators=(",", ":"), sort_keys=True)
            causes.append(
                Cause(
                    "spec.nodeSelector",
                    "FieldValueInvalid",
                    f"Invalid value: {shown}: only additions to spec.nodeSelector are allowed "
                    "(no mutations or deletions)",
                )
            )
        munged["nodeSelector"] = old.get("nodeSelector")
    new_aff = dict(munged.get("affinity") or {})
    old_aff = old.get("affinity") or {}
    new_na, old_na = new_aff.get("nodeAffinity"), old_aff.get("nodeAffinity")
    if not _same(new_na, old_na):
        old_req = (old_na or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        old_terms = (old_req or {}).get("nodeSelectorTerms") or []
        new_req = (new_na or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        new_terms = (new_req or {}).get("nodeSelectorTerms") or []
        path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        if old_terms and len(old_terms) != len(new_terms):
            causes.append(
                Cause(
                    f"{path}.nodeSelectorTerms",
                    "FieldValueInvalid",
                    "Invalid value: []core.NodeSelectorTerm: no additions/deletions to non-empty "
                    "NodeSelectorTerms list are allowed",
                )
            )
        elif old_terms:
            for i, (n, o) in enumerate(zip(new_terms, old_terms, strict=True)):
                if not _node_selector_term_only_additions(n, o):
                    causes.append(
                        Cause(
                            f"{path}.nodeSelectorTerms[{i}]",
                            "FieldValueInvalid",
                            "Invalid value: core.NodeSelectorTerm: only additions are allowed "
                            "(no mutations or deletions)",
                        )
                    )
        new_aff["nodeAffinity"] = old_na
        munged["affinity"] = new_aff
    return causes


def _spec_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if not _same(old.get(k), new.get(k)))
    return "\n".join(f"  spec.{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys)


def pod_update_causes(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidatePodUpdate's spec rules: what an update (PUT or PATCH of the pod, not of its
    binding or status) may change. new is the defaulted new spec, old the stored one."""
    count = _container_count_cause(new, old)
    if count is not None:
        return [count]
    causes = _image_causes(new, "containers") + _image_causes(new, "initContainers")
    causes += _active_deadline_causes(
        new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    )
    if not _only_added_tolerations(
        list(new.get("tolerations") or []), list(old.get("tolerations") or [])
    ):
        causes.append(
            Cause(
                "spec.tolerations",
                "FieldValueForbidden",
                "Forbidden: existing toleration can not be modified except its tolerationSeconds",
            )
        )
    causes += _new_gate_causes(new, old)
    munged = _with_updatable_fields(new, old)
    if old.get("schedulingGates"):
        causes += _gated_mutation_causes(munged, old)
    if not _same(munged, old):
        causes.append(
            Cause(
                "spec",
                "FieldValueForbidden",
                f"Forbidden: {POD_UPDATE_FORBIDDEN}\n{_spec_diff(old, munged)}",
            )
        )
    return causes


def _container_count_cause(new: dict[str, Any], old: dict[str, Any]) -> Cause | None:
    """An update may not add or remove containers (the first list that does is named)."""
    for field in ("containers", "initContainers"):
        if len(new.get(field) or []) != len(old.get(field) or []):
            return Cause(
                f"spec.{field}",
                "FieldValueForbidden",
                "Forbidden: pod updates may not add or remove containers",
            )
    return None


def _image_causes(spec: dict[str, Any], field: str) -> list[Cause]:
    """Each container of the list needs an image, without surrounding white space."""
    causes: list[Cause] = []
    for i, c in enumerate(spec.get(field) or []):
        image = c.get("image") if isinstance(c, dict) else None
        if not image:
            causes.append(Cause(f"spec.{field}[{i}].image", "FieldValueRequired", "Required value"))
        elif str(image).strip() != image:
            causes.append(
                Cause(
                    f"spec.{field}[{i}].image",
                    "FieldValueInvalid",
                    f'Invalid value: "{image}": must not have leading or trailing whitespace',
                )
            )
    return causes


def _active_deadline_causes(new_ads: Any, old_ads: Any) -> list[Cause]:
    """activeDeadlineSeconds may be set or lowered, not raised or unset."""
    path = "spec.activeDeadlineSeconds"
    if new_ads is None:
        if old_ads is None:
            return []
        message = 'Invalid value: "null": must not update from a positive integer to nil value'
    elif not isinstance(new_ads, int) or not 0 <= new_ads <= _MAX_INT32:
        message = f"Invalid value: {new_ads}: must be between 0 and 2147483647, inclusive"
    elif old_ads is not None and new_ads > old_ads:
        message = f"Invalid value: {new_ads}: must be less than or equal to previous value"
    else:
        return []
    return [Cause(path, "FieldValueInvalid", message)]


def _new_gate_causes(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """Scheduling gates may only be removed."""
    old_gates = {g.get("name") for g in old.get("schedulingGates") or [] if isinstance(g, dict)}
    causes: list[Cause] = []
    for i, g in enumerate(new.get("schedulingGates") or []):
        gname = g.get("name") if isinstance(g, dict) else None
        if gname not in old_gates:
            causes.append(
                Cause(
                    f"spec.schedulingGates[{i}].name",
                    "FieldValueForbidden",
                    f"Forbidden: only deletion is allowed, but found new scheduling gate '{gname}'",
                )
            )
    return causes


def _with_updatable_fields(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """new with the fields an update may change set to their old values: anything else that
    still differs from old is a forbidden change."""
    munged = dict(new)
    for field in ("containers", "initContainers"):
        if field in new:
            munged[field] = [
                {**c, "image": o.get("image")} if isinstance(c, dict) and isinstance(o, dict) else c
                for c, o in zip(new[field] or [], old.get(field) or [], strict=False)
            ]
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        munged[field] = old.get(field)
    old_tgps = old.get("terminationGracePeriodSeconds")
    if (
        isinstance(old_tgps, int)
        and old_tgps < 0
        and munged.get("terminationGracePeriodSeconds") == 1
    ):
        munged["terminationGracePeriodSeconds"] = old_tgps
    return munged


def validate_pod(pod: dict[str, Any]) -> list[Cause]:
    spec = pod.get("spec")
    causes: list[Cause] = []
    if not isinstance(spec, dict):
        return [Cause("spec", "FieldValueRequired", "Required value")]
    containers = spec.get("containers")
    if not containers or not isinstance(containers, list):
        causes.append(Cause("spec.containers", "FieldValueRequired", "Required value"))
        return causes
    seen: set[str] = set()
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            causes.append(Cause(f"spec.containers[{i}]", "FieldValueInvalid", "must be an object"))
            continue
        name = c.get("name")
        if not name:
            causes.append(
                Cause(f"spec.containers[{i}].name", "FieldValueRequired", "Required value")
            )
        elif name in seen:
            causes.append(
                Cause(
                    f"spec.containers[{i}].name",
                    "FieldValueDuplicate",
                    f'Duplicate value: "{name}"',
                )
            )
        else:
            seen.add(str(name))
        if not c.get("image"):
            causes.append(
                Cause(f"spec.containers[{i}].image", "FieldValueRequired", "Required value")
            )
    if spec.get("nodeName") and spec.get("schedulingGates"):
        causes.append(
            Cause(
                "spec.nodeName",
                "FieldValueForbidden",
                "Forbidden: cannot be set until all schedulingGates have been cleared",
            )
        )
    rp = spec.get("restartPolicy")
    if rp not in (None, "Always", "OnFailure", "Never"):
        causes.append(
            Cause(
                "spec.restartPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{rp}": supported values: "Always", "OnFailure", "Never"',
            )
        )
    return causes


def node_defaults(node: dict[str, Any]) -> None:
    status = node.setdefault("status", {})
    for key in ("capacity", "allocatable"):
        if key in status:
            status[key] = canonical_quantities(status[key], "Node")
    cap = status.get("capacity") or {}
    if cap and not status.get("allocatable"):
        status["allocatable"] = dict(cap)
    if "pods" not in (status.get("capacity") or {}) and cap:
        status["capacity"] = {**cap, "pods": "110"}
        status["allocatable"] = {"pods": "110", **status["allocatable"]}


def generate_suffix(rand: Any) -> str:
    return "".join(rand.choice(_GENERATE_ALPHABET) for _ in range(5))


MAX_DATA_BYTES = 1024 * 1024  # core validation's MaxSecretSize, also ConfigMaps' limit


def _decoded_len(b64: str) -> int:
    return len(b64) * 3 // 4 - b64[-2:].count("=")


def data_size_causes(kind: str, obj: dict[str, Any]) -> list[Cause]:
    """ValidateConfigMap / ValidateSecret: the values together at most 1 MiB (a ConfigMap's
    binaryData and a Secret's data counted decoded). The field paths are kube-apiserver's."""
    if kind == "ConfigMap":
        size = sum(len(str(v).encode()) for v in (obj.get("data") or {}).values())
        size += sum(_decoded_len(str(v)) for v in (obj.get("binaryData") or {}).values())
    else:
        size = sum(_decoded_len(str(v)) for v in (obj.get("data") or {}).values())
    if size <= MAX_DATA_BYTES:
        return []
    field = "[]" if kind == "ConfigMap" else "data"
    return [
        Cause(field, "FieldValueTooLong", f"Too long: may not be more than {MAX_DATA_BYTES} bytes")
    ]


def service_defaults(svc: dict[str, Any]) -> None:
    """SetDefaults_Service for what does not need an allocator (no clusterIP, no ipFamilies):
    type, sessionAffinity, internalTrafficPolicy and each port's protocol and targetPort."""
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    ports = spec.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))


def pod_status_causes(status: dict[str, Any]) -> list[Cause]:
    """ValidatePodStatusUpdate's host IP rule: the first of `hostIPs` is `hostIP`."""
    host_ips = status.get("hostIPs")
    if not isinstance(host_ips, list) or not host_ips or not isinstance(host_ips[0], dict):
        return []
    first = str(host_ips[0].get("ip", ""))
    if first == str(status.get("hostIP") or ""):
        return []
    msg = f'Invalid value: "{first}": must be equal to `hostIP`'
    return [Cause("status.hostIPs[0].ip", "FieldValueInvalid", msg)]
