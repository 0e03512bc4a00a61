"""An in-memory object store that applies reconciler actions: the controllers without an API server.

Used by the unit tests: it keeps objects as dicts keyed by (kind, namespace, name), assigns uids,
and is a store of the one action interpreter (`batch.controllers.interpreter`, which the API
shell and the simulator apply actions through too): a create of an existing name conflicts, a
patch or delete of a missing object (or of another incarnation, by uid) finds it missing, patches
are merge patches, and pods are deleted either at once or by setting a deletionTimestamp
(`graceful=True`) so Terminating states can be observed. `step_job` runs the
job reconciler until it asks for nothing more.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from batch.api.mergepatch import apply_merge_patch
from batch.controllers import constants as c
from batch.controllers.effects import Action, EmitEvent, ObjectRef, ReconcileResult
from batch.controllers.interpreter import CONFLICT, MISSING, Answer, apply_sync
from batch.controllers.job import plugin_object_keys, reconcile_job
from batch.controllers.jobspec import meta, podgroup_name
from batch.controllers.timeutil import format_time

JSON = dict[str, Any]
Key = tuple[str, str, str]


class MemoryCluster:
    """A dict-backed stand-in for the API server (no schema, no watch)."""

    def __init__(self, *, graceful: bool = False) -> None:
        self.objects: dict[Key, JSON] = {}
        self.events: list[EmitEvent] = []
        #: PriorityClass values by name as the job controller is given them (None: unknown)
        self.priority_values: dict[str, int] | None = None
        self.log: list[Action] = []
        self.created: list[Key] = []
        self.graceful = graceful
        self._uid = itertools.count(1)
        self.now: datetime | None = None

    # -- store ----------------------------------------------------------------------------------
    @staticmethod
    def key(kind: str, namespace: str, name: str) -> Key:
        return (kind, namespace or "", name)

    def get(self, kind: str, namespace: str, name: str) -> JSON | None:
        return self.objects.get(self.key(kind, namespace, name))

    def objects_of(self, kind: str, namespace: str | None = None) -> list[JSON]:
        return [
            o
            for (k, ns, _n), o in sorted(self.objects.items())
            if k == kind and (namespace is None or ns == (namespace or ""))
        ]

    def add(self, obj: Mapping[str, Any]) -> JSON:
        body = copy.deepcopy(dict(obj))
        m = body.setdefault("metadata", {})
        m.setdefault("uid", f"uid-{next(self._uid)}")
        if self.now is not None:
            m.setdefault("creationTimestamp", format_time(self.now))
        k = self.key(str(body.get("kind")), str(m.get("namespace") or ""), str(m.get("name")))
        self.objects[k] = body
        return body

    # -- actions: the interpreter's store (batch.controllers.interpreter) ----------------------
    errors: tuple[type[Exception], ...] = ()

    def apply(self, actions: Iterable[Action]) -> int:
        """Apply actions in order; returns how many changed something."""
        pending = list(actions)
        self.log.extend(pending)
        return apply_sync(self, pending)

    def create(self, ref: ObjectRef, body: JSON) -> Answer:
        k = self.key(ref.kind, ref.namespace, ref.name)
        if k in self.objects:
            return CONFLICT
        self.add(body)
        self.created.append(k)
        return None

    def patch(self, ref: ObjectRef, patch: JSON) -> Answer:
        obj = self._find(ref)
        if obj is None:
            return MISSING
        merged = apply_merge_patch(obj, patch)
        obj.clear()
        obj.update(merged)
        return None

    def patch_status(self, ref: ObjectRef, status: JSON) -> Answer:
        obj = self._find(ref)
        if obj is None:
            return MISSING
        obj["status"] = apply_merge_patch(obj.get("status") or {}, status)
        return None

    def delete(self, ref: ObjectRef) -> Answer:
        """Delete at once, or (`graceful`) mark a pod Terminating: a pod already going is
        missing, as it is to the API server's controllers."""
        obj = self._find(ref)
        if obj is None:
            return MISSING
        if self.graceful and ref.kind == "Pod" and self.now is not None:
            if obj["metadata"].get("deletionTimestamp"):
                return MISSING
            obj["metadata"]["deletionTimestamp"] = format_time(self.now)
        else:
            del self.objects[self.key(ref.kind, ref.namespace, ref.name)]
        return None

    def event(self, ev: EmitEvent) -> Answer:
        self.events.append(ev)
        return None

    def _find(self, ref: ObjectRef) -> JSON | None:
        obj = self.objects.get(self.key(ref.kind, ref.namespace, ref.name))
        if obj is None:
            return None
        if ref.uid and meta(obj).get("uid") and meta(obj).get("uid") != ref.uid:
            return None
        return obj

    def finish_deletions(self) -> None:
        """Let every gracefully deleted pod go away."""
        for k, o in list(self.objects.items()):
            if k[0] == "Pod" and o["metadata"].get("deletionTimestamp"):
                del self.objects[k]

    # -- job helpers ----------------------------------------------------------------------------
    def job_pods(self, job: Mapping[str, Any]) -> list[JSON]:
        uid = meta(job).get("uid")
        return [
            p
            for p in self.objects_of("Pod", str(meta(job).get("namespace") or ""))
            if any(o.get("uid") == uid for o in meta(p).get("ownerReferences") or [])
        ]

    def job_podgroup(self, job: Mapping[str, Any]) -> JSON | None:
        return self.get("PodGroup", str(meta(job).get("namespace") or ""), podgroup_name(job))

    def job_commands(self, job: Mapping[str, Any]) -> list[JSON]:
        uid = meta(job).get("uid")
        return [
            cmd
            for cmd in self.objects_of("Command", str(meta(job).get("namespace") or ""))
            if (cmd.get("target") or {}).get("uid") == uid
            or any(o.get("uid") == uid for o in meta(cmd).get("ownerReferences") or [])
        ]

    def plugin_objects(self, job: Mapping[str, Any]) -> list[JSON]:
        ns = str(meta(job).get("namespace") or "")
        found = (self.get(kind, ns, name) for _api, kind, name in plugin_object_keys(job))
        return [o for o in found if o is not None]

    def reconcile(
        self,
        namespace: str,
        name: str,
        *,
        now: datetime,
        deleted_pods: Sequence[Mapping[str, Any]] = (),
    ) -> ReconcileResult:
        self.now = now
        job = self.get("Job", namespace, name)
        if job is None:
            return ReconcileResult()
        result = reconcile_job(
            copy.deepcopy(job),
            copy.deepcopy(self.job_pods(job)),
            copy.deepcopy(self.job_podgroup(job)),
            now=now,
            commands=copy.deepcopy(self.job_commands(job)),
            deleted_pods=deleted_pods,
            priority_values=self.priority_values,
            plugin_objects=copy.deepcopy(self.plugin_objects(job)),
        )
        self.apply(result.actions)
        return result

    def step_job(
        self, namespace: str, name: str, *, now: datetime, limit: int = 50
    ) -> ReconcileResult:
        """Reconcile until nothing more is asked now; returns the last result."""
        result = ReconcileResult()
        for _ in range(limit):
            result = self.reconcile(namespace, name, now=now)
            if result.requeue_after != 0 or not result.actions:
                return result
        raise RuntimeError(f"job {namespace}/{name} did not settle in {limit} reconciles")

    # -- playing the scheduler and the kubelet ---------------------------------------------------
    def set_podgroup_phase(self, job: Mapping[str, Any], phase: str) -> None:
        pg = self.job_podgroup(job)
        if pg is not None:
            pg.setdefault("status", {})["phase"] = phase

    def set_pod_phase(
        self,
        namespace: str,
        name: str,
        phase: str,
        *,
        exit_code: int | None = None,
        restarts: int = 0,
        ready: bool = True,
    ) -> None:
        pod = self.get("Pod", namespace, name)
        if pod is None:
            raise KeyError(name)
        state: JSON
        if phase in ("Succeeded", "Failed"):
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            finished: JSON = {"exitCode": code}
            if self.now is not None:
                finished["finishedAt"] = format_time(self.now)
            state = {"terminated": finished}
        elif phase == "Running":
            state = {"running": {}}
        else:
            state = {"waiting": {}}
        pod["status"] = {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "main",
                    "state": state,
                    "ready": phase == "Running" and ready,
                    "restartCount": restarts,
                }
            ],
        }

    def set_job_pods(self, job: Mapping[str, Any], phase: str, **kw: Any) -> None:
        for p in self.job_pods(job):
            if not p["metadata"].get("deletionTimestamp"):
                self.set_pod_phase(
                    str(meta(p).get("namespace")), str(meta(p).get("name")), phase, **kw
                )

    def job_phase(self, namespace: str, name: str) -> str:
        job = self.get("Job", namespace, name) or {}
        return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def command(job: Mapping[str, Any], action: str, *, name: str | None = None) -> JSON:
    """A bus Command targeting `job` (as `tephra job suspend` creates)."""
    m = meta(job)
    ref = {
        "apiVersion": c.BATCH_API,
        "kind": "Job",
        "name": m.get("name"),
        "uid": m.get("uid"),
        "controller": True,
    }
    return {
        "apiVersion": c.BUS_API,
        "kind": "Command",
        "metadata": {
            "name": name or f"{m.get('name')}-{action.lower()}",
            "namespace": m.get("namespace"),
            "ownerReferences": [ref],
        },
        "action": action,
        "target": ref,
    }
