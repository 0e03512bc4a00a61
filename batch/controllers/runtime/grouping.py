"""The PodGroup controller's shell: pods not of VCJobs grouped, and the groups it made kept.

Pods and the PodGroups it created are read from the watch's caches (`Watched`) where they are
held, else from the API server; a pod a framework adapter claims gets its workload's gang.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from batch.controllers import constants as c
from batch.controllers.podgroup import (
    CREATED_BY,
    CREATED_BY_CONTROLLER,
    controller_owner,
    is_vcjob_pod,
    plain_podgroup_name,
    reconcile_adapter_pod,
    reconcile_group,
    reconcile_plain_pod,
    wants_group,
)
from batch.controllers.runtime.adapters import workload_finished
from batch.controllers.runtime.part import Part
from batch.controllers.shell import (
    NAMESPACES,
    PODGROUPS,
    PODS,
    get_or_none,
    list_items,
    register_kind,
    resource_for,
)
from batch.kube.client import ApiError, KubeClient

log = logging.getLogger(__name__)


class Grouping(Part):
    """Reconciles the pod a `pod` key names and the PodGroup a `pg` key names."""

    async def process_pod(self, ns: str, name: str) -> None:
        client = self.client()
        cached = self.watched.pod_cache.get((ns, name))
        pod = copy.deepcopy(cached) if cached else await get_or_none(client, PODS, name, ns)
        if pod is None or is_vcjob_pod(pod):
            return
        pod.setdefault("kind", "Pod")
        pod.setdefault("apiVersion", "v1")
        names = self.settings.scheduler_names
        if str((pod.get("spec") or {}).get("schedulerName") or "") not in names:
            return
        if self.settings.adapters:
            from batch.api.integration import adapter_for_pod

            claimed = adapter_for_pod(pod, self.settings.adapters)
            if claimed is not None and await self._process_adapter_pod(pod, *claimed):
                return
            # The adapter has no gang for the pod's workload (e.g. Spark executors whose driver
            # is an ordinary notebook pod): Volcano's default path below, as for any other pod.
        if not wants_group(pod, scheduler_names=names):
            return
        owner_ref = controller_owner(pod)
        owner_obj = None
        if owner_ref is not None:
            res = resource_for(str(owner_ref.get("apiVersion")), str(owner_ref.get("kind")))
            try:
                owner_obj = await get_or_none(client, res, str(owner_ref.get("name")), ns)
            except ApiError as exc:
                # Only a missing owner (404) means "no group-min-member annotation": a group
                # built or refreshed from an owner that could not be read would lose its gang
                # size (minMember 1). Retry later instead.
                log.warning(
                    "pod %s/%s: reading its owner %s %s failed: %s",
                    ns,
                    name,
                    owner_ref.get("kind"),
                    owner_ref.get("name"),
                    exc,
                )
                await self.writes.failed(("pod", ns, name))
                return
        pg_name = plain_podgroup_name(pod)
        pg = self.watched.pg_cache.get((ns, pg_name))
        if pg is None and not self.watched.pg_cache_seeded:
            pg = await get_or_none(client, PODGROUPS, pg_name, ns)
        result = reconcile_plain_pod(pod, owner_obj=owner_obj, podgroup=pg, scheduler_names=names)
        await self.writes.apply(("pod", ns, name), result)

    async def _process_adapter_pod(self, pod: dict[str, Any], adapter: Any, ref: Any) -> bool:
        """Reconcile a pod an adapter claimed. False when the adapter has no gang for the pod's
        workload (`gang_for_workload` returned None): the caller then takes the default path."""
        client = self.client()
        ns = str(pod["metadata"].get("namespace"))
        plural = None
        for k in adapter.kinds:
            if getattr(k, "kind", None) == ref.kind:
                plural = getattr(k, "plural", None)
                if plural:
                    register_kind(ref.api_version, ref.kind, str(plural))
        res = resource_for(ref.api_version, ref.kind, plural=plural)
        workload = await get_or_none(client, res, ref.name, ref.namespace or ns)
        if workload is None:
            return True  # no workload object to derive a gang from: leave the pod alone
        workload.setdefault("apiVersion", ref.api_version)
        workload.setdefault("kind", ref.kind)
        gang = adapter.gang_for_workload(workload)
        if gang is None:
            return False
        existing = await get_or_none(client, PODGROUPS, gang.name, gang.namespace)
        namespace_obj = await get_or_none(client, NAMESPACES, gang.namespace)
        leader_is_running = False
        if gang.leader_role is not None:
            # Only this gang's own pods count: another application's running driver in the
            # same namespace is not this gang's leader.
            from batch.api.integration import leader_running

            pods = await list_items(client, PODS, namespace=ns)
            leader_is_running = leader_running(gang, pods, adapter)
        result = reconcile_adapter_pod(
            pod,
            adapter=adapter,
            gang=gang,
            podgroup=existing,
            now=datetime.now(UTC),
            workload=workload,
            namespace_obj=namespace_obj,
            leader_running=leader_is_running,
            workload_finished=workload_finished(workload, adapter),
        )
        await self.writes.apply(("pod", ns, str(pod["metadata"].get("name"))), result)
        return True

    async def process_group(self, ns: str, name: str) -> None:
        client = self.client()
        cached = self.watched.pg_cache.get((ns, name))
        pg = copy.deepcopy(cached) if cached else await get_or_none(client, PODGROUPS, name, ns)
        if pg is None:
            return
        pg.setdefault("kind", "PodGroup")
        pg.setdefault("apiVersion", c.SCHED_API)
        if (pg["metadata"].get("annotations") or {}).get(CREATED_BY) != CREATED_BY_CONTROLLER:
            return
        owners = await self._owners(client, ns, pg)
        filed = self.watched.group_pods.get((ns, name))
        bare = [dict(p) for p in owners.values() if p is not None and p.get("kind") == "Pod"]
        if filed is not None:
            pods = list(filed.values())
        elif bare:  # a bare pod's group, made before the watch saw the pod annotated
            pods = bare
        else:  # not seen by the watch (yet): ask the API server
            pods = [
                p
                for p in await list_items(client, PODS, namespace=ns)
                if (p["metadata"].get("annotations") or {}).get(c.GROUP_NAME_ANNOTATION) == name
            ]
        result = reconcile_group(pg, owners=owners, pods=pods)
        await self.writes.apply(("pg", ns, name), result)

    async def _owners(
        self, client: KubeClient, ns: str, pg: Mapping[str, Any]
    ) -> dict[str, Mapping[str, Any] | None]:
        """The group's owners by uid (None: gone, or another object of the same name now)."""
        owners: dict[str, Mapping[str, Any] | None] = {}
        for o in pg["metadata"].get("ownerReferences") or []:
            res = resource_for(str(o.get("apiVersion")), str(o.get("kind")))
            is_pod = (o.get("apiVersion"), o.get("kind")) == ("v1", "Pod")
            known = self.watched.pod_cache.get((ns, str(o.get("name")))) if is_pod else None
            obj = dict(known) if known is not None else None
            if obj is None:
                obj = await get_or_none(client, res, str(o.get("name")), ns)
            if obj is not None and obj["metadata"].get("uid") != o.get("uid"):
                obj = None
            if obj is not None:
                obj.setdefault("apiVersion", o.get("apiVersion"))
                obj.setdefault("kind", o.get("kind"))
            owners[str(o.get("uid"))] = obj
        return owners
