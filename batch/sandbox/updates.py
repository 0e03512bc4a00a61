"""An update's body: server-owned metadata and /status-owned status kept from the old object,
the generation's bump, and when a write removes a deleted object."""

from __future__ import annotations

from batch.sandbox.errors import Cause, invalid
from batch.sandbox.kind_rules import TERMINAL
from batch.sandbox.meta import ResourceType
from batch.sandbox.store import Obj


def check_uid_kept(rt: ResourceType, obj: Obj, old_meta: Obj) -> None:
    """A write naming another uid fails (through /status too: it must not land there)."""
    uid = (obj.get("metadata") or {}).get("uid")
    if uid and uid != old_meta.get("uid"):
        raise invalid(
            rt.kind,
            rt.group,
            old_meta["name"],
            [
                Cause(
                    "metadata.uid",
                    "FieldValueInvalid",
                    f'Invalid value: "{uid}": field is immutable',
                )
            ],
        )


_SERVER_META = (
    "uid",
    "creationTimestamp",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def status_body(old: Obj, obj: Obj) -> Obj:
    """Through /status only the status stanza changes: the rest, metadata too, is old's."""
    new = {k: v for k, v in old.items() if k != "status"}
    if "status" in obj:
        new["status"] = obj["status"]
    new["metadata"] = dict(old["metadata"])
    return new


def update_body(rt: ResourceType, old: Obj, obj: Obj) -> Obj:
    """obj with old's server-owned metadata, and old's status where /status owns it."""
    old_meta = old["metadata"]
    meta = dict(obj.get("metadata") or {})
    for k in _SERVER_META:
        if k in old_meta:
            meta[k] = old_meta[k]
        else:
            meta.pop(k, None)
    if rt.status_subresource:
        if "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)
    obj["metadata"] = meta
    return obj


def spec_changed(rt: ResourceType, new: Obj, old: Obj) -> bool:
    skip = ("metadata", "status") if rt.status_subresource else ("metadata",)
    keys = (set(new) | set(old)) - set(skip) - {"apiVersion", "kind"}
    return any(new.get(k) != old.get(k) for k in keys)


def removes_now(rt: ResourceType, obj: Obj) -> bool:
    """A write that leaves a deleted object without finalizers removes it, but for a
    pod still running on its node and a namespace (its controller finishes it)."""
    meta = obj["metadata"]
    return bool(
        meta.get("deletionTimestamp")
        and not meta.get("finalizers")
        and not (rt.kind == "Pod" and rt.group == "" and _pod_running(obj))
        and rt.kind != "Namespace"
    )


def _pod_running(pod: Obj) -> bool:
    return (
        bool((pod.get("spec") or {}).get("nodeName"))
        and ((pod.get("status") or {}).get("phase") not in TERMINAL)
        and int(pod["metadata"].get("deletionGracePeriodSeconds") or 0) > 0
    )
