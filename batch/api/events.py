"""core/v1 Events and the object references in them, built as Kubernetes' recorders build them.

Why this exists: `kubectl describe KIND NAME` finds an object's events by involvedObject kind,
name, namespace *and uid*, so an event posted without the uid is never shown (PodGroups once
showed `Events: <none>` for that). client-go's recorders (kube-scheduler, controllers, kubelet)
fill the reference from the object itself: apiVersion, kind, namespace, name, uid and
resourceVersion. The scheduler, the controllers and the sandbox's kubelet all build theirs here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_MESSAGE", "event_body", "identity", "object_reference", "reference_of"]

#: longest message kept (the API server refuses events whose message is over 1 KiB)
MAX_MESSAGE = 1024


def object_reference(
    *,
    api_version: str,
    kind: str,
    namespace: str,
    name: str,
    uid: str | None = None,
    resource_version: str | None = None,
) -> dict[str, str]:
    """A core/v1 ObjectReference; empty fields are left out, as Kubernetes serialises them."""
    fields = {
        "apiVersion": api_version,
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "resourceVersion": resource_version,
    }
    return {k: str(v) for k, v in fields.items() if v}


def identity(obj: Mapping[str, Any] | None) -> tuple[str, str]:
    """The uid and resourceVersion of an observed object ("" for what is unknown)."""
    meta = (obj or {}).get("metadata") or {}
    return str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")


def reference_of(obj: Mapping[str, Any], *, kind: str, api_version: str) -> dict[str, str]:
    """The reference to an observed object (its kind and apiVersion given: LIST items and
    watch objects do not always carry them)."""
    meta = obj.get("metadata") or {}
    uid, version = identity(obj)
    return object_reference(
        api_version=str(obj.get("apiVersion") or api_version),
        kind=str(obj.get("kind") or kind),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=uid,
        resource_version=version,
    )


def event_body(
    involved: Mapping[str, str],
    *,
    reason: str,
    message: str,
    type: str,
    component: str,
    stamp: str,
    host: str = "",
) -> dict[str, Any]:
    """A new Event (count 1, first seen `stamp`) about `involved`, posted by `component`."""
    namespace = involved.get("namespace") or "default"
    source = {"component": component, **({"host": host} if host else {})}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved.get('name', '')}.", "namespace": namespace},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "type": type,
        "source": source,
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    if host:
        body["reportingInstance"] = host
    return body
