"""One job row per framework job, when a workload is part of another's job.

A RayCluster that a RayJob or RayService created is no job of its own: its adapter's
``observe`` says it is ``part_of`` the owner, and :func:`batch.ledger.convert.events_from_job`
records nothing for it. Its PodGroup, though, may be owned by the cluster (KubeRay's for a
RayService's cluster, and Tephra's own when KubeRay runs without its Volcano plugin); recorded
as it is, it would make the cluster's row after all. :class:`JobOwners` sits between the
controller's watches and the converters: a PodGroup owned by a workload that is part of
another's job is recorded as owned by that job; a PodGroup owned by a followed kind whose
workload has not been seen yet is held until it is (after a restart the watches list in any
order), then recorded. The part's start (a cluster ready) is its job's start.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from batch.api.integration import OwnerRef, WorkloadObservation, observe_workload
from batch.api.owners import controller_ref
from batch.ledger.convert import events_from_job, events_from_podgroup
from batch.ledger.events import JobPhaseChanged, LedgerEvent

Obj = Mapping[str, Any]


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
        self, adapters: Iterable[object], observed_kinds: Collection[tuple[str, str]]
    ) -> None:
        self.adapters = tuple(adapters)
        self.observed_kinds = frozenset(observed_kinds)
        #: uid of each live followed workload -> the job it is part of (None: its own)
        self._seen: dict[str, OwnerRef | None] = {}
        #: uid of a followed workload not seen yet -> {PodGroup uid: its latest PodGroup}
        self._held: dict[str, dict[str, Obj]] = {}

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
            self._seen.pop(uid, None)
            self._held.pop(uid, None)
            return events
        seen = observe_workload(new, self.adapters)
        self._seen[uid] = seen.part_of if seen is not None else None
        if seen is not None and seen.part_of is not None:
            before = observe_workload(old, self.adapters) if old is not None else None
            events += _part_running(new, seen, before)
        for pg in self._held.pop(uid, {}).values():
            events += self._podgroup(None, pg, now)
        return events

    def podgroup_events(
        self, old: Obj | None, new: Obj | None, *, now: dt.datetime | None = None
    ) -> list[LedgerEvent]:
        """:func:`events_from_podgroup` of the PodGroup as owned by its job (held, none yet,
        while its owner is a followed workload not seen)."""
        obj = new if new is not None else old
        if obj is None:
            return []
        owner = controller_ref(obj)
        owner_uid = str(owner.get("uid") or "") if owner is not None else ""
        if owner is not None and owner_uid and owner_uid not in self._seen:
            kind = (str(owner.get("apiVersion") or ""), str(owner.get("kind") or ""))
            if kind in self.observed_kinds:
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
        job = self._seen.get(str(owner.get("uid") or "")) if owner is not None else None
        if job is None:
            return pg
        return {**pg, "metadata": {**_meta(pg), "ownerReferences": [job.to_dict()]}}
