"""The scale subresource: a kind's replicas read and written as an autoscaling/v1 Scale."""

from __future__ import annotations

import copy

from batch.sandbox.errors import ApiError
from batch.sandbox.meta import ResourceType
from batch.sandbox.selectors import get_path
from batch.sandbox.store import Obj


def no_scale() -> ApiError:
    return ApiError(404, "the server could not find the requested resource")


def scale_of(rt: ResourceType, obj: Obj) -> Obj:
    """The autoscaling/v1 Scale of ``obj`` (of a kind with a scale subresource)."""
    assert rt.scale is not None
    spec_path, status_path, sel_path = rt.scale
    replicas = get_path(obj, spec_path) or 0
    out: Obj = {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: obj["metadata"][k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in obj["metadata"]
        },
        "spec": {"replicas": replicas},
        "status": {"replicas": get_path(obj, status_path) or 0},
    }
    selector = get_path(obj, sel_path) if sel_path else None
    if not selector and isinstance(get_path(obj, "spec.selector"), dict):
        sel = get_path(obj, "spec.selector") or {}
        ml = sel.get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(ml.items()))
    if selector:
        out["status"]["selector"] = selector
    return out


def scaled(rt: ResourceType, old: Obj, replicas: int) -> Obj:
    """A copy of ``old`` with ``replicas`` where its scale subresource keeps them."""
    assert rt.scale is not None
    new = copy.deepcopy(old)
    parts = rt.scale[0].split(".")
    cur = new
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = int(replicas)
    return new
