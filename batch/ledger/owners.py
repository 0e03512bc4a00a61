"""One job row per framework job, when a workload is part of another's job.

A RayCluster that a RayJob or RayService created is no job of its own: its adapter's
``observe`` says it is ``part_of`` the owner, and :func:`batch.ledger.convert.events_from_job`
records nothing for it. Its PodGroup, though, may be owned by the cluster (KubeRay's for a
RayService's cluster, and Tephra's own when KubeRay runs without its Volcano plugin); recorded
as it is, it would make the cluster's row after all. :class:`JobOwners` sits between the
controller's watches and the converters: a PodGroup owned by a workload that is part of
another's job is recorded as owned by that job; a PodGroup owned by a followed kind whose
workload has not been seen yet is held until it is (after a restart the watches list in any
order), then recorded. The part's start (a cluster ready) is its job's start. Pods are treated
alike: a part's pods are recorded as pods of its job (a RayJob's usage is its own, not that of
a cluster row that does not exist), held while their owner is unseen; a part deleted is
remembered a while, since its pods' deletions come after its own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from batch.api.integration import OwnerRef, WorkloadAdapter, WorkloadObservation, observe_workload
from batch.api.owners import controller_ref
from batch.ledger.convert import events_from_job, events_from_pod, events_from_podgroup
from batch.ledger.events import JobPhaseChanged, LedgerEvent, PodAttempt

Obj = Mapping[str, Any]

#: parts deleted that are still remembered (their pods are deleted after them)
GONE_PARTS = 4096


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _uid(obj: Obj) -> str:
    return str(_meta(obj).get("uid") or "")


def _part_running(
    part: Obj, seen: WorkloadObservation, before: WorkloadObservation | None
) -> list[LedgerEvent]:
    """A part's start is its job's: when a RayJob's or RayService's cluster becomes ready, the
    job's gang has run, whatever the owner's own status says yet (KubeRay writes a RayService's
    status only once Ray's dashboard answers, so a RayService whose Serve applications never
    come up would otherwise wait for ever while holding its nodes). Its other phases are not
    the job's: a failed cluster may be replaced."""
    job = seen.part_of
    assert job is not None
    old = set(before.phases) if before is not None else set()
    namespace = str(_meta(part).get("namespace") or "default")
    return [
        JobPhaseChanged(
            job_uid=job.uid,
            namespace=namespace,
            name=job.name,
            kind=job.kind,
            to_phase="Running",
            at=at,
            reason=f"{part.get('kind')}Ready",
            message=f"{part.get('kind')} {_meta(part).get('name')} is ready",
        )
        for phase, at in seen.phases
        if phase == "Running" and (phase, at) not in old
    ]


class JobOwners:
    """Ledger events for framework workload and PodGroup changes, one job row per job.

    ``observed_kinds``: the (apiVersion, kind) of the workloads the controller follows
    themselves (their adapters observe them); ``adapters``: those adapters.
    """

    def __init__(
        self, adapters: Iterable[WorkloadAdapter], observed_kinds: Collection[tuple[str, str]]
    ) -> None:
        self.adapters = tuple(adapters)
        self.observed_kinds = frozenset(observed_kinds)
        #: uid of each live followed workload -> the job it is part of (None: its own)
        self._seen: dict[str, OwnerRef | None] = {}
        #: uid of a followed workload not seen yet -> {PodGroup uid: its latest PodGroup}
        self._held: dict[str, dict[str, Obj]] = {}
        #: the same for pods: {pod uid: (its latest snapshot, deleted since)}
        self._held_pods: dict[str, dict[str, tuple[Obj, bool]]] = {}
        #: parts deleted lately -> their job (oldest first, at most GONE_PARTS)
        self._gone: OrderedDict[str, OwnerRef] = OrderedDict()

    def job_events(
        self, old: Obj | None, new: Obj | None, *, now: dt.datetime | None = None
    ) -> list[LedgerEvent]:
        """:func:`events_from_job`, plus the events of the PodGroups held for this workload."""
        events = events_from_job(old, new, now=now, adapters=self.adapters)
        obj = new if new is not None else old
        if obj is None or obj.get("kind") in ("Job", "PodGroup"):
            return events
        uid = _uid(obj)
        if new is None:
            self._forget(uid)
            return events
        seen = observe_workload(new, self.adapters)
        self._seen[uid] = seen.part_of if seen is not None else None
        if seen is not None and seen.part_of is not None:
            before = observe_workload(old, self.adapters) if old is not None else None
            events += _part_running(new, seen, before)
        for pg in self._held.pop(uid, {}).values():
            events += self._podgroup(None, pg, now)
        for pod, deleted in self._held_pods.pop(uid, {}).values():
            events += self._pod(None, pod, now)
            if deleted:
                events += self._pod(pod, None, now)
        return events

    def _forget(self, uid: str) -> None:
        part_of = self._seen.pop(uid, None)
        self._held.pop(uid, None)
        self._held_pods.pop(uid, None)
        if part_of is not None:
            self._gone[uid] = part_of
            while len(self._gone) > GONE_PARTS:
                self._gone.popitem(last=False)

    def _unseen_owner(self, obj: Obj) -> str:
        """The uid of `obj`'s controller when that is a followed workload not seen (yet or
        lately), else ''."""
        owner = controller_ref(obj)
        if owner is None:
            return ""
        uid = str(owner.get("uid") or "")
        if not uid or uid in self._seen or uid in self._gone:
            return ""
        kind = (str(owner.get("apiVersion") or ""), str(owner.get("kind") or ""))
        return uid if kind in self.observed_kinds else ""

    def _job_of(self, uid: str) -> OwnerRef | None:
        """The job the workload `uid` is part of (None: its own, or not followed)."""
        return self._seen.get(uid) or self._gone.get(uid)

    def pod_events(
        self, old: Obj | None, new: Obj | None, *, now: dt.datetime | None = None
    ) -> list[LedgerEvent]:
        """:func:`events_from_pod` with a part's pods counted for its job (held, none yet,
        while the pod's controller is a followed workload not seen)."""
        obj = new if new is not None else old
        if obj is None:
            return []
        owner_uid = self._unseen_owner(obj)
        if not owner_uid:
            return self._pod(old, new, now)
        held = self._held_pods.setdefault(owner_uid, {})
        if new is not None:
            held[_uid(obj)] = (new, False)
        elif _uid(obj) in held:
            held[_uid(obj)] = (held[_uid(obj)][0], True)
        else:
            held[_uid(obj)] = (obj, True)
        return []

    def _pod(self, old: Obj | None, new: Obj | None, now: dt.datetime | None) -> list[Any]:
        events = events_from_pod(old, new, now=now, adapters=self.adapters)
        return [self._pod_as_owned(e) for e in events]

    def _pod_as_owned(self, event: LedgerEvent) -> LedgerEvent:
        if not isinstance(event, PodAttempt) or not event.job_uid:
            return event
        job = self._job_of(event.job_uid)
        return event if job is None else dataclasses.replace(event, job_uid=job.uid)

    def podgroup_events(
        self, old: Obj | None, new: Obj | None, *, now: dt.datetime | None = None
    ) -> list[LedgerEvent]:
        """:func:`events_from_podgroup` of the PodGroup as owned by its job (held, none yet,
        while its owner is a followed workload not seen)."""
        obj = new if new is not None else old
        if obj is None:
            return []
        owner_uid = self._unseen_owner(obj)
        if owner_uid:
            held = self._held.setdefault(owner_uid, {})
            if new is None:
                held.pop(_uid(obj), None)
            else:
                held[_uid(obj)] = new
            if not held:
                del self._held[owner_uid]
            return []
        return self._podgroup(old, new, now)

    def _podgroup(self, old: Obj | None, new: Obj | None, now: dt.datetime | None) -> list[Any]:
        return events_from_podgroup(
            self._as_owned(old), self._as_owned(new), now=now, observed_kinds=self.observed_kinds
        )

    def _as_owned(self, pg: Obj | None) -> Obj | None:
        """``pg`` owned by the job its owner is part of (unchanged when that is its owner)."""
        if pg is None:
            return None
        owner = controller_ref(pg)
        job = self._job_of(str(owner.get("uid") or "")) if owner is not None else None
        if job is None:
            return pg
        return {**pg, "metadata": {**_meta(pg), "ownerReferences": [job.to_dict()]}}
