"""Deleting: preconditions, the finalizers a propagation policy adds, and the objects that are
marked rather than removed (a pod on its node terminating gracefully, a namespace, an object
with finalizers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from batch.sandbox.clock import Clock
from batch.sandbox.errors import conflict
from batch.sandbox.kind_rules import TERMINAL
from batch.sandbox.meta import ResourceType
from batch.sandbox.store import Obj, Store

# Kinds whose DELETE without a propagationPolicy orphans dependents (for back compatibility).
ORPHAN_BY_DEFAULT = frozenset({("batch", "v1", "Job"), ("", "v1", "ReplicationController")})


def check_delete_preconditions(
    rt: ResourceType, name: str, meta: Obj, preconditions: dict[str, Any]
) -> None:
    if preconditions.get("uid") and preconditions["uid"] != meta.get("uid"):
        raise conflict(
            rt.group,
            rt.plural,
            name,
            f"Precondition failed: UID in precondition: "
            f"{preconditions['uid']}, UID in object meta: {meta.get('uid')}",
        )
    want = preconditions.get("resourceVersion")
    if want and want != meta.get("resourceVersion"):
        raise conflict(
            rt.group,
            rt.plural,
            name,
            f"Precondition failed: ResourceVersion in precondition: {want}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def deletion_finalizers(meta: Obj, propagation: str | None) -> list[str]:
    """The object's finalizers plus the one the propagation policy asks for."""
    finalizers = list(meta.get("finalizers") or [])
    if propagation == "Foreground" and "foregroundDeletion" not in finalizers:
        finalizers.append("foregroundDeletion")
    elif propagation == "Orphan" and "orphan" not in finalizers:
        finalizers.append("orphan")
    return finalizers


def deletion_generation(meta: Obj, new_meta: Obj) -> None:
    """rest.BeforeDelete / markAsDeleting: an object that starts its deletion and stays (graceful
    deletion, finalizers) gets a new generation, when it has one."""
    if not meta.get("deletionTimestamp") and int(meta.get("generation") or 0) > 0:
        new_meta["generation"] = int(meta["generation"]) + 1


def terminate_pod(
    store: Store,
    clock: Clock,
    rt: ResourceType,
    old: Obj,
    grace: int | None,
    finalizers: Sequence[str],
) -> Obj | None:
    """A graceful delete of a pod bound to a node: it is marked, not removed (the kubelet
    finishes it). None when the grace comes to 0 and the pod goes as any object."""
    spec = old.get("spec") or {}
    if grace is None:
        grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
    if not spec.get("nodeName") or (old.get("status") or {}).get("phase") in TERMINAL:
        grace = 0
    if grace <= 0:
        return None
    meta = old["metadata"]
    current = meta.get("deletionGracePeriodSeconds")
    if current is not None and int(current) <= grace:
        return old  # already terminating with a shorter grace
    new_meta = dict(meta)
    deletion_generation(meta, new_meta)
    new_meta["deletionTimestamp"] = clock.stamp(clock.now() + grace)
    new_meta["deletionGracePeriodSeconds"] = grace
    if finalizers:
        new_meta["finalizers"] = finalizers
    return store.commit(rt.storage_key, {**old, "metadata": new_meta}, old)


def terminate_namespace(store: Store, clock: Clock, rt: ResourceType, old: Obj) -> Obj:
    """A namespace is marked Terminating; finish_namespace removes it once empty."""
    meta = old["metadata"]
    if meta.get("deletionTimestamp"):
        return old
    new_meta = dict(meta)
    new_meta["deletionTimestamp"] = clock.stamp()
    new_meta["deletionGracePeriodSeconds"] = 0
    obj = {**old, "metadata": new_meta, "status": {"phase": "Terminating"}}
    return store.commit(rt.storage_key, obj, old)


def finalize(
    store: Store, clock: Clock, rt: ResourceType, old: Obj, finalizers: Sequence[str]
) -> Obj:
    """An object with finalizers is marked deleted and kept until they are removed."""
    meta = old["metadata"]
    unchanged = finalizers == list(meta.get("finalizers") or [])
    if (
        meta.get("deletionTimestamp")
        and unchanged
        and meta.get("deletionGracePeriodSeconds") in (None, 0)
    ):
        return old
    new_meta = dict(meta)
    deletion_generation(meta, new_meta)
    new_meta.setdefault("deletionTimestamp", clock.stamp())
    new_meta["deletionGracePeriodSeconds"] = 0
    new_meta["finalizers"] = finalizers
    return store.commit(rt.storage_key, {**old, "metadata": new_meta}, old)
