"""What the watches tell: each event turned into keys, and the caches it keeps current.

Pods that vanished without the controller deleting them are remembered (they raise
PodEvicted; forgotten only once a reconcile that saw them has been applied). Watch-fed caches
of the objects the PodGroup controller reads (as an informer's): pods not of VCJobs by
(namespace, name) and by (namespace, group), and the PodGroups it created. Reading them instead
of the API server is what lets it group bare pods at hundreds per second (issue 19.5: 11 per
second).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from batch.api.bus import queue_target
from batch.controllers import constants as c
from batch.controllers.podgroup import (
    CREATED_BY,
    CREATED_BY_CONTROLLER,
    controller_owner,
    is_vcjob_pod,
    pod_done,
    wants_group,
)
from batch.controllers.queue import parent_of
from batch.controllers.runtime.keys import Keys
from batch.controllers.runtime.settings import Settings


class Watched:
    """The keys each watch event names, and the caches the events keep."""

    def __init__(self, settings: Settings, keys: Keys) -> None:
        self.settings = settings
        self.keys = keys
        #: pods of VCJobs deleted by someone else, by the job's uid (the last 100 each)
        self.deleted_pods: dict[str, list[dict[str, Any]]] = {}
        self.pod_cache: dict[tuple[str, str], dict[str, Any]] = {}
        self.group_pods: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._pod_group: dict[str, tuple[str, str]] = {}  # pod uid -> the group it is filed under
        self.pg_cache: dict[tuple[str, str], dict[str, Any]] = {}
        self.pg_cache_seeded = False  # pg_cache holds every such PodGroup (listed at start)
        self.queue_parents: dict[str, str | None] = {}

    def on_pod_event(self, etype: str, pod: Mapping[str, Any]) -> None:
        m = pod.get("metadata") or {}
        ns = str(m.get("namespace"))
        labels = m.get("labels") or {}
        ann = m.get("annotations") or {}
        if is_vcjob_pod(pod):
            owner = controller_owner(pod) or {}
            job_name = str(labels.get(c.JOB_NAME) or owner.get("name"))
            if etype == "DELETED" and ann.get(c.OUT_OF_SYNC_ANNOTATION) != "true":
                bucket = self.deleted_pods.setdefault(str(owner.get("uid")), [])
                bucket.append(dict(pod))
                del bucket[:-100]
            self.keys.enqueue(("job", ns, job_name))
            return
        group = ann.get(c.GROUP_NAME_ANNOTATION)
        self._file_pod(etype, ns, str(group) if group else None, pod)
        if group:
            self.keys.enqueue(("pg", ns, str(group)))
        names = self.settings.scheduler_names
        ours = str((pod.get("spec") or {}).get("schedulerName") or "") in names
        if (
            etype != "DELETED"
            and ours
            and (wants_group(pod, scheduler_names=names) or self.settings.adapters)
        ):
            self.keys.enqueue(("pod", ns, str(m.get("name"))))

    def _file_pod(self, etype: str, ns: str, group: str | None, pod: Mapping[str, Any]) -> None:
        """Keep `group_pods` in step with the watch, so a PodGroup's reconcile reads its pods
        from memory instead of listing the namespace (one list per group made creating
        PodGroups for N bare pods O(N^2): 11 per second, issue 19.5)."""
        m = pod.get("metadata") or {}
        uid = str(m.get("uid") or "")
        if not uid:
            return
        if etype == "DELETED":
            self.pod_cache.pop((ns, str(m.get("name"))), None)
        else:
            self.pod_cache[(ns, str(m.get("name")))] = dict(pod)
        before = self._pod_group.pop(uid, None)
        if before is not None:
            members = self.group_pods.get(before, {})
            members.pop(uid, None)
            if not members:
                self.group_pods.pop(before, None)
        if etype != "DELETED" and group:
            self.group_pods.setdefault((ns, group), {})[uid] = dict(pod)
            self._pod_group[uid] = (ns, group)

    def forget_deleted(self, uid: str, seen: list[dict[str, Any]]) -> None:
        """A reconcile that saw ``seen`` (of the job ``uid``) was applied: forget them."""
        bucket = self.deleted_pods.get(uid, [])
        bucket[:] = [p for p in bucket if not any(p is d for d in seen)]
        if not bucket:
            self.deleted_pods.pop(uid, None)

    def on_podgroup_event(self, pg: Mapping[str, Any], etype: str = "") -> None:
        m = pg.get("metadata") or {}
        ns = str(m.get("namespace"))
        if (m.get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
            if etype == "DELETED":
                self.pg_cache.pop((ns, str(m.get("name"))), None)
            else:
                self.pg_cache[(ns, str(m.get("name")))] = dict(pg)
        if etype == "DELETED":
            self._regroup(ns, str(m.get("name")))
        owner = controller_owner(pg)
        if (
            owner
            and owner.get("kind") == "Job"
            and str(owner.get("apiVersion", "")).startswith(c.BATCH_GROUP)
        ):
            self.keys.enqueue(("job", ns, str(owner.get("name"))))
        elif (m.get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
            self.keys.enqueue(("pg", ns, str(m.get("name"))))
        queue = str((pg.get("spec") or {}).get("queue") or c.DEFAULT_QUEUE)
        self.keys.enqueue(("queue", "", queue))

    def _regroup(self, ns: str, group: str) -> None:
        """A PodGroup was deleted: its pods that still run or wait are reconciled again, so an
        adapter's gang is made again (for a workload that is not finished) instead of the pods
        waiting for ever on a group no event brings back."""
        if not self.settings.adapters:
            return
        for pod in list(self.group_pods.get((ns, group), {}).values()):
            if not pod_done(pod):
                self.keys.enqueue(("pod", ns, str(pod["metadata"].get("name"))))

    def seed_podgroups(self, groups: Iterable[dict[str, Any]]) -> None:
        """The start's list of PodGroups: from now on the watch keeps `pg_cache` complete."""
        for g in groups:
            m = g["metadata"]
            if (m.get("annotations") or {}).get(CREATED_BY) == CREATED_BY_CONTROLLER:
                self.pg_cache.setdefault((str(m.get("namespace")), str(m.get("name"))), g)
        self.pg_cache_seeded = True

    def on_queue_event(self, etype: str, q: Mapping[str, Any]) -> None:
        name = str((q.get("metadata") or {}).get("name"))
        if etype == "DELETED":
            self.queue_parents.pop(name, None)
        else:
            self.queue_parents[name] = parent_of(q)
        self.keys.enqueue(("queue", "", name))
        self.enqueue_children(name)

    def enqueue_children(self, name: str) -> None:
        for child, parent in list(self.queue_parents.items()):
            if parent == name:
                self.keys.enqueue(("queue", "", child))

    def on_command_event(self, cmd: Mapping[str, Any]) -> None:
        m = cmd.get("metadata") or {}
        target = cmd.get("target") or {}
        queue = queue_target(cmd)
        if queue is not None:
            self.keys.enqueue(("queue", "", queue))
        else:
            self.keys.enqueue(("job", str(m.get("namespace")), str(target.get("name"))))
