"""Defaulting and validation of built-in kinds that clients and the scheduler rely on.

A kube-apiserver fills many pod fields (schedulerName, restartPolicy, grace period, requests from
limits, default tolerations, QoS class, ...). Tephra's scheduler reads several of them, so the
sandbox fills the same ones with the same values.
"""

from __future__ import annotations

import re
from typing import Any

from batch.sandbox.errors import Cause

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


def default_pod(pod: dict[str, Any]) -> None:
    """Fill the fields kube-apiserver defaults on pod creation (in place, pod is private)."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for c in spec.get("containers") or []:
        if isinstance(c, dict):
            _default_container(c)
    for c in spec.get("initContainers") or []:
        if isinstance(c, dict):
            _default_container(c)
    tolerations = list(spec.get("tolerations") or [])
    keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in keys:
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    spec["tolerations"] = tolerations
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


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
    cap = status.get("capacity") or {}
    if cap and not status.get("allocatable"):
        status["allocatable"] = dict(cap)
    if "pods" not in (status.get("capacity") or {}) and cap:
        status["capacity"] = {**cap, "pods": "110"}
        status["allocatable"] = {"pods": "110", **status["allocatable"]}


def generate_suffix(rand: Any) -> str:
    return "".join(rand.choice(_GENERATE_ALPHABET) for _ in range(5))
