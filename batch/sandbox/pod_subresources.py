"""A pod's binding and eviction subresources: the node a binding assigns, the disruption budget
an eviction must keep."""

from __future__ import annotations

from typing import Any

from batch.sandbox.errors import ApiError, Cause, conflict, invalid
from batch.sandbox.selectors import Matcher, selector_from_label_selector
from batch.sandbox.store import Obj, Store


def bound(pod: Obj, name: str, binding: Obj, stamp: str) -> Obj:
    """``pod`` bound as ``binding`` says (its node, PodScheduled, annotations)."""
    target = (binding.get("target") or {}).get("name")
    if not target:
        raise invalid(
            "Binding", "", name, [Cause("target.name", "FieldValueRequired", "Required value")]
        )
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        raise conflict(
            "", "pods", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
        )
    if pod["metadata"].get("deletionTimestamp"):
        raise conflict(
            "", "pods", name, f"pod {name} is being deleted, cannot be assigned to a host"
        )
    want_uid = (binding.get("metadata") or {}).get("uid")
    if want_uid and want_uid != pod["metadata"].get("uid"):
        raise conflict("", "pods", name, "Precondition failed: UID mismatch")
    status = dict(pod.get("status") or {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
    )
    status["conditions"] = conds
    status.pop("nominatedNodeName", None)
    new = {**pod, "spec": {**spec, "nodeName": target}, "status": status}
    annotations = (binding.get("metadata") or {}).get("annotations")
    if annotations:
        meta = dict(pod["metadata"])
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        new["metadata"] = meta
    return new


def check_pdb(store: Store, ns: str, pod: Obj) -> None:
    """Refuse (429) an eviction that would leave a PodDisruptionBudget short."""
    bucket = store.buckets["poddisruptionbudgets.policy"]
    labels = pod["metadata"].get("labels") or {}
    matching: list[tuple[Obj, Matcher]] = []
    for pdb in bucket.iter(ns):
        raw = (pdb.get("spec") or {}).get("selector")
        if raw is None:
            continue  # policy/v1: a null selector selects no pod
        # ... and an empty one every pod of the namespace
        sel = selector_from_label_selector(raw) or _everything
        if sel(labels):
            matching.append((pdb, sel))
    if len(matching) > 1:
        raise ApiError(  # a plain error in kube-apiserver's eviction REST: 500, no reason
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction "
            "subresource does not support.",
            reason="",
        )
    for pdb, sel in matching:
        spec = pdb.get("spec") or {}
        members = [
            p for p in store.buckets["pods"].iter(ns) if sel(p["metadata"].get("labels") or {})
        ]
        healthy = sum(
            1 for p in members if _pod_ready(p) and not p["metadata"].get("deletionTimestamp")
        )
        expected = len(members)
        if "minAvailable" in spec:
            need = _int_or_percent(spec["minAvailable"], expected, round_up=True)
        else:
            need = expected - _int_or_percent(
                spec.get("maxUnavailable", 0), expected, round_up=True
            )
        if healthy - (1 if _pod_ready(pod) else 0) < need:
            raise ApiError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                reason="TooManyRequests",
                details={
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget "
                            f"{pdb['metadata']['name']} needs {need} "
                            f"healthy pods and has {healthy} currently",
                        }
                    ]
                },
            )


def _everything(_labels: Any) -> bool:
    return True


def _pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        q, r = divmod(pct * total, 100)
        return q + (1 if r and round_up else 0)
    return int(value)
