"""The job controller's shell: read a VCJob and what it owns, reconcile, apply, count.

A job's pods are created in batches (`pod_batch`), one reconcile each, the key requeued at once:
between batches the job is read again (a deleted job stops there) and other keys get their turn,
and within one every create awaits the API, so shutdown is never held up by a big job.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from batch.controllers import constants as c
from batch.controllers.effects import CreateObject, PatchStatus
from batch.controllers.job import plugin_object_keys, reconcile_job
from batch.controllers.jobspec import job_volumes, podgroup_name, tasks_of
from batch.controllers.metrics import ControllerMetrics
from batch.controllers.priorities import PriorityClassList, priority_class_names
from batch.controllers.runtime.part import Part
from batch.controllers.shell import (
    COMMANDS,
    JOBS,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    get_or_none,
    list_items,
    resource_for,
)
from batch.controllers.timeutil import parse_time
from batch.kube.client import ApiError, KubeClient


@dataclass(eq=False)
class Jobs(Part):
    """Reconciles the VCJob a `job` key names."""

    metrics: ControllerMetrics
    priorities: PriorityClassList = field(default_factory=PriorityClassList, init=False)

    async def process(self, ns: str, name: str) -> None:
        client = self.client()
        job = await get_or_none(client, JOBS, name, ns)
        if job is None:
            return
        job.setdefault("kind", "Job")
        job.setdefault("apiVersion", c.BATCH_API)
        uid = str(job["metadata"].get("uid"))
        pods = [
            p
            for p in await list_items(
                client, PODS, namespace=ns, labelSelector=f"{c.JOB_NAME}={name}"
            )
            if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]
        pg = await get_or_none(client, PODGROUPS, podgroup_name(job), ns)
        commands = [
            cmd
            for cmd in await list_items(client, COMMANDS, namespace=ns)
            if (cmd.get("target") or {}).get("kind", "Job") == "Job"
            and (
                (cmd.get("target") or {}).get("uid") == uid
                or (
                    not (cmd.get("target") or {}).get("uid")
                    and (cmd.get("target") or {}).get("name") == name
                )
            )
        ]
        # Deleted pods are forgotten only once a reconcile that saw them was applied: a failed
        # apply must not lose the eviction they name (RestartPod could not act on it then).
        deleted = list(self.watched.deleted_pods.get(uid, []))
        missing = set()
        for claim, _mount, claim_spec in job_volumes(job):
            if claim_spec is None and await get_or_none(client, PVCS, claim, ns) is None:
                missing.add(claim)
        result = reconcile_job(
            job,
            pods,
            pg,
            now=datetime.now(UTC),
            commands=commands,
            deleted_pods=deleted,
            priority_values=await self.priority_values(priority_class_names(job, tasks_of(job))),
            missing_claims=missing,
            pod_batch=self.settings.pod_batch,
            limits=self.settings.limits,
            plugin_objects=await plugin_objects(client, job, ns),
        )
        ok = await self.writes.apply(
            ("job", ns, name),
            result,
            applied=lambda action: self._count(job, action),
            owner=job,
        )
        if ok and deleted:
            self.watched.forget_deleted(uid, deleted)

    async def priority_values(self, wanted: Collection[str]) -> dict[str, int] | None:
        """PriorityClass values by name for a job whose pods name ``wanted``: read again when
        30 s old, or when one of ``wanted`` is missing and the last read is 5 s old (see
        batch.controllers.priorities); None while never read."""
        if self.priorities.due(time.monotonic(), wanted):
            try:
                items = await list_items(self.client(), PRIORITY_CLASSES)
            except ApiError:
                self.priorities.read(time.monotonic(), None)
            else:
                values = {str(i["metadata"]["name"]): int(i.get("value") or 0) for i in items}
                self.priorities.read(time.monotonic(), values)
        return self.priorities.known()

    def _count(self, job: Mapping[str, Any], action: Any) -> None:
        """Count one action the API server took (never an intended write that failed)."""
        if isinstance(action, PatchStatus) and action.ref.kind == "Job":
            queue = str((job.get("spec") or {}).get("queue") or c.DEFAULT_QUEUE)
            name = str(job["metadata"].get("name"))
            phase = (action.status.get("state") or {}).get("phase")
            if phase == c.COMPLETED:
                self.metrics.job_completed.labels(name, queue).inc()
            elif phase == c.FAILED:
                self.metrics.job_failed.labels(name, queue).inc()
        elif isinstance(action, CreateObject) and action.ref.kind == "Pod":
            created = parse_time(job["metadata"].get("creationTimestamp"))
            if created is not None:
                ms = (datetime.now(UTC) - created).total_seconds() * 1000
                self.metrics.pod_creation_latency.observe(ms)


async def plugin_objects(
    client: KubeClient, job: Mapping[str, Any], ns: str
) -> list[dict[str, Any]]:
    """The objects the job's plugins would create or rewrite that exist (the reconciler
    never writes one the job does not control). A kind the controller may not read (the
    chart grants only `create` on Secrets and NetworkPolicies) it may not rewrite either:
    an existing one is left as it is by the create, so it is not looked up."""
    found = []
    for api, kind, name in plugin_object_keys(job):
        try:
            obj = await get_or_none(client, resource_for(api, kind), name, ns)
        except ApiError as exc:
            if exc.status != 403:
                raise
            continue
        if obj is not None:
            obj.setdefault("apiVersion", api)
            obj.setdefault("kind", kind)
            found.append(obj)
    return found
