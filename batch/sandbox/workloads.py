"""Built-in workload controllers, as kube-controller-manager runs them.

ReplicaSet and ReplicationController keep `replicas` pods from their template; Deployment keeps
one ReplicaSet per pod-template hash (the current one scaled to `replicas`, older ones to 0: a
Recreate-style rollout); StatefulSet keeps pods `<name>-<ordinal>` (OrderedReady or Parallel);
batch/v1 Job runs pods to `completions` with `parallelism` and `backoffLimit`. Pods are created
through `Core.create`, so they meet the same defaulting and admission as any pod, and carry
controller ownerReferences, so garbage collection removes them with their owner.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
from typing import Any

from batch.sandbox.core import Core
from batch.sandbox.errors import ApiError
from batch.sandbox.meta import ResourceType
from batch.sandbox.selectors import selector_from_label_selector
from batch.sandbox.store import Obj

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # storage key, namespace, name
_TERMINAL = ("Succeeded", "Failed")
# The field manager of these controllers' writes (managedFields of applied objects).
KCM = "kube-controller-manager"
_OWNER_KEYS = {
    "ReplicaSet": "replicasets.apps",
    "StatefulSet": "statefulsets.apps",
    "Job": "jobs.batch",
    "ReplicationController": "replicationcontrollers",
    "Deployment": "deployments.apps",
}
_WATCHED = frozenset(
    {
        "pods",
        "replicasets.apps",
        "statefulsets.apps",
        "jobs.batch",
        "replicationcontrollers",
        "deployments.apps",
    }
)


def _controller_ref(obj: Obj) -> dict[str, Any] | None:
    for r in obj["metadata"].get("ownerReferences") or []:
        if r.get("controller"):
            return dict(r)
    return None


def _owner_ref(owner: Obj) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def _active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in _TERMINAL and not pod["metadata"].get(
        "deletionTimestamp"
    )


def template_hash(template: Obj) -> str:
    raw = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:10]


class WorkloadControllers:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.dirty: set[Key] = set()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pods_rt = core.rt("", "v1", "pods")

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.core.store.listeners.append(self.on_change)
        for key in _WATCHED - {"pods"}:
            for obj in self.core.store.buckets[key].iter(None):
                self._mark((key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))

    def stop(self) -> None:
        if self.on_change in self.core.store.listeners:
            self.core.store.listeners.remove(self.on_change)

    def on_change(self, etype: str, key: str, obj: Obj, old: Obj | None) -> None:
        if key not in _WATCHED:
            return
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        if key != "pods" and etype != "DELETED":
            self._mark((key, ns, meta["name"]))
        ref = _controller_ref(obj)
        if ref is not None and ref.get("kind") in _OWNER_KEYS:
            self._mark((_OWNER_KEYS[str(ref["kind"])], ns, str(ref.get("name"))))

    def _mark(self, key: Key) -> None:
        self.dirty.add(key)
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        dirty, self.dirty = self.dirty, set()
        for key in sorted(dirty):
            try:
                self._reconcile(key)
            except ApiError as err:
                if err.code not in (404, 409):
                    log.warning("workload controller %s/%s: %s", key[1], key[2], err.message)
            except Exception:
                log.exception("workload controller failed on %s", key)

    def _reconcile(self, key: Key) -> None:
        storage, ns, name = key
        rt = self.core.rt_for_key(storage)
        if rt is None:
            return
        obj = self.core.find(rt, ns, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        if storage in ("replicasets.apps", "replicationcontrollers"):
            self._replicas(rt, obj)
        elif storage == "deployments.apps":
            self._deployment(rt, obj)
        elif storage == "statefulsets.apps":
            self._statefulset(rt, obj)
        elif storage == "jobs.batch":
            self._job(rt, obj)

    # ------------------------------------------------------------------ helpers
    def _owned(self, owner: Obj, storage: str = "pods") -> list[Obj]:
        uid = owner["metadata"]["uid"]
        ns = owner["metadata"].get("namespace", "")
        out = []
        for obj in self.core.store.buckets[storage].iter(ns):
            ref = _controller_ref(obj)
            if ref is not None and ref.get("uid") == uid:
                out.append(obj)
        return out

    def _new_pod(
        self,
        owner: Obj,
        template: Obj,
        *,
        name: str | None = None,
        extra_labels: dict[str, str] | None = None,
        extra_annotations: dict[str, str] | None = None,
    ) -> Obj:
        tmeta = template.get("metadata") or {}
        meta: Obj = {
            "namespace": owner["metadata"].get("namespace", "default"),
            "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
            "ownerReferences": [_owner_ref(owner)],
        }
        ann = {**(tmeta.get("annotations") or {}), **(extra_annotations or {})}
        if ann:
            meta["annotations"] = ann
        if tmeta.get("finalizers"):
            meta["finalizers"] = list(tmeta["finalizers"])
        if name:
            meta["name"] = name
        else:
            meta["generateName"] = owner["metadata"]["name"] + "-"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        return self.core.create(self.pods_rt, meta["namespace"], pod)

    def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self.core.delete(self.pods_rt, meta.get("namespace", ""), meta["name"])

    def _set_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        current = obj.get("status") or {}
        merged = {**current, **status}
        if merged != current:
            self.core.write(rt, obj, {**obj, "status": merged}, subresource="status", manager=KCM)

    # ------------------------------------------------------------------ ReplicaSet / RC
    def _replicas(self, rt: ResourceType, rs: Obj) -> None:
        spec = rs.get("spec") or {}
        want = int(spec.get("replicas", 1))
        pods = [p for p in self._owned(rs) if _active(p)]
        if len(pods) < want:
            for _ in range(want - len(pods)):
                self._new_pod(rs, spec.get("template") or {})
        elif len(pods) > want:
            # delete unscheduled first, then not ready, then newest
            order = sorted(
                pods,
                key=lambda p: (
                    bool((p.get("spec") or {}).get("nodeName")),
                    _ready(p),
                    p["metadata"].get("creationTimestamp", ""),
                ),
                reverse=False,
            )
            for p in order[: len(pods) - want]:
                self._delete_pod(p)
        pods = [p for p in self._owned(rs) if _active(p)]
        ready = sum(1 for p in pods if _ready(p))
        self._set_status(
            rt,
            rs,
            {
                "replicas": len(pods),
                "fullyLabeledReplicas": len(pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": rs["metadata"].get("generation", 1),
            },
        )

    # ------------------------------------------------------------------ Deployment
    def _deployment(self, rt: ResourceType, dep: Obj) -> None:
        want = int((dep.get("spec") or {}).get("replicas", 1))
        rs_rt = self.core.rt("apps", "v1", "replicasets")
        owned = self._owned(dep, "replicasets.apps")
        current = self._current_replicaset(rs_rt, dep, owned, want)
        for r in owned:
            if (
                r is not current
                and r["metadata"]["uid"] != current["metadata"]["uid"]
                and int((r.get("spec") or {}).get("replicas", 1)) != 0
            ):
                self.core.write(rs_rt, r, {**r, "spec": {**r["spec"], "replicas": 0}}, manager=KCM)
        owned = self._owned(dep, "replicasets.apps")
        self._set_status(rt, dep, _deployment_status(dep, want, owned, current["metadata"]["uid"]))

    def _current_replicaset(
        self, rs_rt: ResourceType, dep: Obj, owned: list[Obj], want: int
    ) -> Obj:
        """The ReplicaSet of the Deployment's pod template, created or scaled to `want`."""
        spec = dep.get("spec") or {}
        thash = template_hash(spec.get("template") or {})
        current = next(
            (
                r
                for r in owned
                if (r["metadata"].get("labels") or {}).get("pod-template-hash") == thash
            ),
            None,
        )
        if current is None:
            body = _replicaset_for(dep, want, thash, revision=len(owned) + 1)
            return self.core.create(rs_rt, body["metadata"]["namespace"], body)
        if int((current.get("spec") or {}).get("replicas", 1)) != want:
            self.core.write(
                rs_rt,
                current,
                {**current, "spec": {**current["spec"], "replicas": want}},
                manager=KCM,
            )
        return current

    # ------------------------------------------------------------------ StatefulSet
    def _statefulset(self, rt: ResourceType, sts: Obj) -> None:
        spec = sts.get("spec") or {}
        want = int(spec.get("replicas", 1))
        name = sts["metadata"]["name"]
        parallel = spec.get("podManagementPolicy") == "Parallel"
        pods = {p["metadata"]["name"]: p for p in self._owned(sts)}
        for i in range(want):
            pname = f"{name}-{i}"
            pod = pods.get(pname)
            if pod is None:
                template = copy.deepcopy(spec.get("template") or {})
                tspec = template.setdefault("spec", {})
                tspec.setdefault("hostname", pname)
                if spec.get("serviceName"):
                    tspec.setdefault("subdomain", spec["serviceName"])
                self._new_pod(
                    sts,
                    template,
                    name=pname,
                    extra_labels={
                        "statefulset.kubernetes.io/pod-name": pname,
                        "apps.kubernetes.io/pod-index": str(i),
                    },
                )
                if not parallel:
                    break
            elif not parallel and not _ready(pod):
                if (pod.get("status") or {}).get("phase") in _TERMINAL:
                    self._delete_pod(pod)  # recreated on the next pass
                break
            elif (pod.get("status") or {}).get("phase") in _TERMINAL:
                self._delete_pod(pod)
        for pname, pod in sorted(pods.items(), key=lambda kv: -_ordinal(kv[0])):
            if _ordinal(pname) >= want and not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(pod)
                if not parallel:
                    break
        pods_now = [p for p in self._owned(sts) if _active(p)]
        ready = sum(1 for p in pods_now if _ready(p))
        self._set_status(
            rt,
            sts,
            {
                "observedGeneration": sts["metadata"].get("generation", 1),
                "replicas": len(pods_now),
                "readyReplicas": ready,
                "currentReplicas": len(pods_now),
                "updatedReplicas": len(pods_now),
                "availableReplicas": ready,
            },
        )

    # ------------------------------------------------------------------ Job
    def _job(self, rt: ResourceType, job: Obj) -> None:
        status = job.get("status") or {}
        if _job_finished(status):
            return
        job = self._default_job_selector(rt, job)
        spec = job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        pods = self._job_pods(job, spec)
        active = [p for p in pods if _active(p)]
        succeeded = _count_phase(pods, "Succeeded")
        failed = _count_phase(pods, "Failed")
        now = self.core.clock.stamp()
        new_status: Obj = {"startTime": status.get("startTime") or now}
        conditions: list[Obj] = []
        if failed + _restarts(pods) > int(spec.get("backoffLimit", 6)):
            for p in active:
                self._delete_pod(p)
            conditions = _job_conditions(("FailureTarget", "Failed"), _BACKOFF_EXCEEDED, now)
        elif _job_complete(spec, succeeded, active):
            conditions = _job_conditions(("SuccessCriteriaMet", "Complete"), _COMPLETIONS, now)
            new_status["completionTime"] = now
        elif not spec.get("suspend"):
            self._start_job_pods(job, spec, pods, len(active), succeeded, parallelism)
            active = [p for p in self._owned(job) if _active(p)]
        new_status.update(
            active=len(active),
            succeeded=succeeded,
            failed=failed,
            ready=sum(1 for p in active if _ready(p)),
        )
        if conditions:
            new_status["active"] = 0
            new_status["conditions"] = conditions
        elif status.get("conditions"):
            new_status["conditions"] = status["conditions"]
        self._set_status(rt, job, new_status)

    def _default_job_selector(self, rt: ResourceType, job: Obj) -> Obj:
        """Without a manual selector, select (and label) the Job's pods by its uid."""
        spec = job.get("spec") or {}
        if "selector" in spec or spec.get("manualSelector"):
            return job
        uid = job["metadata"]["uid"]
        name = job["metadata"]["name"]
        new_spec = copy.deepcopy(spec)
        new_spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta = new_spec.setdefault("template", {}).setdefault("metadata", {})
        tmeta["labels"] = {
            **(tmeta.get("labels") or {}),
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
        }
        return self.core.write(rt, job, {**job, "spec": new_spec}, manager=KCM)

    def _job_pods(self, job: Obj, spec: Obj) -> list[Obj]:
        """The pods the Job owns that its selector matches."""
        pods = self._owned(job)
        sel = selector_from_label_selector(spec.get("selector"))
        if sel is None:
            return pods
        return [p for p in pods if sel(p["metadata"].get("labels") or {})]

    def _start_job_pods(
        self, job: Obj, spec: Obj, pods: list[Obj], active: int, succeeded: int, parallelism: int
    ) -> None:
        """Create the pods that bring the active count up to what is still to run."""
        completions = spec.get("completions")
        if completions is not None:
            remaining = int(completions) - succeeded
        else:
            remaining = parallelism if succeeded == 0 else 0
        missing = max(min(parallelism, remaining) - active, 0)
        if spec.get("completionMode") == "Indexed":
            indexes: list[str | None] = list(_free_indexes(pods, missing))
        else:
            indexes = [None] * missing
        for index in indexes:
            marks = {} if index is None else {_COMPLETION_INDEX: index}
            self._new_pod(
                job, spec.get("template") or {}, extra_annotations=marks, extra_labels=dict(marks)
            )


def _ordinal(name: str) -> int:
    try:
        return int(name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_BACKOFF_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
_COMPLETIONS = ("CompletionsReached", "Reached expected number of succeeded pods")


def _phase(pod: Obj) -> str | None:
    phase = (pod.get("status") or {}).get("phase")
    return None if phase is None else str(phase)


def _count_phase(pods: list[Obj], phase: str) -> int:
    return sum(1 for p in pods if _phase(p) == phase)


def _restarts(pods: list[Obj]) -> int:
    return sum(
        int(cs.get("restartCount", 0))
        for p in pods
        for cs in (p.get("status") or {}).get("containerStatuses") or []
    )


def _job_finished(status: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _job_complete(spec: Obj, succeeded: int, active: list[Obj]) -> bool:
    completions = spec.get("completions")
    if completions is not None:
        return succeeded >= int(completions)
    return succeeded > 0 and not active


def _job_conditions(types: tuple[str, str], why: tuple[str, str], now: str) -> list[Obj]:
    """The two True conditions a finished Job gets (the target, then the final one)."""
    reason, message = why
    return [
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        for kind in types
    ]


def _free_indexes(pods: list[Obj], count: int) -> list[str]:
    """The lowest `count` completion indexes no active or succeeded pod holds."""
    used = {
        (p["metadata"].get("annotations") or {}).get(_COMPLETION_INDEX)
        for p in pods
        if _active(p) or _phase(p) == "Succeeded"
    }
    free: list[str] = []
    index = 0
    while len(free) < count:
        if str(index) not in used:
            free.append(str(index))
        index += 1
    return free


def _replicaset_for(dep: Obj, want: int, thash: str, *, revision: int) -> Obj:
    """A new ReplicaSet of the Deployment's pod template, labelled and selected by its hash."""
    spec = dep.get("spec") or {}
    ns = dep["metadata"].get("namespace", "default")
    tmpl = copy.deepcopy(spec.get("template") or {})
    tmeta = tmpl.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), "pod-template-hash": thash}
    selector = copy.deepcopy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})["pod-template-hash"] = thash
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{dep['metadata']['name']}-{thash}",
            "namespace": ns,
            "labels": dict(tmeta["labels"]),
            "annotations": {"deployment.kubernetes.io/revision": str(revision)},
            "ownerReferences": [_owner_ref(dep)],
        },
        "spec": {"replicas": want, "selector": selector, "template": tmpl},
    }


def _deployment_status(dep: Obj, want: int, owned: list[Obj], current_uid: str) -> Obj:
    """A Deployment's status from its ReplicaSets' (`current_uid` is the current one's)."""
    replicas = sum(int((r.get("status") or {}).get("replicas", 0)) for r in owned)
    ready = sum(int((r.get("status") or {}).get("readyReplicas", 0)) for r in owned)
    cur = next((r for r in owned if r["metadata"]["uid"] == current_uid), None)
    updated = int(((cur or {}).get("status") or {}).get("replicas", 0))
    enough = ready >= want
    return {
        "observedGeneration": dep["metadata"].get("generation", 1),
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(want - ready, 0),
        "conditions": [
            {
                "type": "Available",
                "status": "True" if enough else "False",
                "reason": "MinimumReplicasAvailable" if enough else "MinimumReplicasUnavailable",
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable" if enough else "ReplicaSetUpdated",
            },
        ],
    }
