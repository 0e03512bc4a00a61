"""Tephra on Volcano's own CRDs (issue 34, item 1), on the sandbox over HTTP.

Volcano's PodGroup CRD declares no status subresource (`subresources: {}` in v1.10 and since):
its scheduler and controllers write PodGroup status with a plain update of the object. On such
a cluster a PATCH of `podgroups/NAME/status` answers 404, which Tephra took for "deleted
meanwhile": the PodGroup stayed Pending, no pod was ever created, and nothing was logged.

The sandbox serves whatever CRDs are applied to it, so the test replaces the PodGroup CRD the
way a cluster that had Volcano installed has it, then runs the controllers and the scheduler.
Both shapes must work: Volcano's (no status subresource, what Tephra now ships too) and the one
Tephra shipped before (with it), which an upgraded cluster may still have.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")
pytest.importorskip("batch.kube.service")

from kubernetes import client

from batch.controllers.runner import ControllerComponent
from batch.kube.service import SchedulerComponent
from batch.sandbox.components import start_all
from batch.sandbox.crds import load_crds
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for

from .test_integration import B, vcjob

pytestmark = pytest.mark.xdist_group("controllers-scheduler")

PODGROUP_CRD = "podgroups.scheduling.volcano.sh"
#: the PodGroup CRD's subresources: as Volcano declares them, and as Tephra did before
SHAPES = {"volcano": {}, "with-status": {"status": {}}}


def podgroup_crd(subresources: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup CRD Tephra ships, with the given subresources on every version."""
    crd = next(c for c in load_crds() if c["metadata"]["name"] == PODGROUP_CRD)
    crd = copy.deepcopy(crd)
    for version in crd["spec"]["versions"]:
        version["subresources"] = copy.deepcopy(subresources)
    return crd


def replace_crd(api: Any, crd: dict[str, Any]) -> None:
    ext = client.ApiextensionsV1Api(api)
    name = crd["metadata"]["name"]
    current = ext.read_custom_resource_definition(name)
    body = {
        **crd,
        "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version},
    }
    ext.replace_custom_resource_definition(name, body)


def has_status_subresource(api: Any) -> bool:
    found = client.CustomObjectsApi(api).get_api_resources("scheduling.volcano.sh", "v1beta1")
    return any(r.name == "podgroups/status" for r in found.resources)


@pytest.fixture(params=sorted(SHAPES), scope="module")
def sb(request: pytest.FixtureRequest) -> Iterator[SandboxHandle]:
    with run_sandbox(nodes=make_nodes(count=1, cpu="4", memory="8Gi")) as handle:
        api = handle.api_client()
        replace_crd(api, podgroup_crd(SHAPES[request.param]))
        assert has_status_subresource(api) == bool(SHAPES[request.param])
        # the components start once the CRD has its shape, as on a cluster Volcano set up
        handle.components = [ControllerComponent(), SchedulerComponent()]
        start_all(
            handle.components,
            kubeconfig=handle.kubeconfig_path,
            options=handle.options,
            timeout=120,
        )
        yield handle


def _job_phase(co: Any, name: str) -> str:
    job = co.get_namespaced_custom_object(*B, "default", "jobs", name)
    return str(((job.get("status") or {}).get("state") or {}).get("phase", ""))


def _podgroup_phases(co: Any) -> dict[str, str]:
    groups = co.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", "default", "podgroups"
    )
    return {
        g["metadata"]["name"]: str((g.get("status") or {}).get("phase", ""))
        for g in groups["items"]
    }


def test_a_vcjob_runs_and_completes(sb: SandboxHandle) -> None:
    co = client.CustomObjectsApi(sb.api_client())
    co.create_namespaced_custom_object(*B, "default", "jobs", vcjob("gang", replicas=2, run=1.0))
    wait_for(
        lambda: _job_phase(co, "gang") in ("Running", "Completed"),
        "the VCJob Running",
        timeout=90,
        explain=lambda: {"podgroups": _podgroup_phases(co), "job": _job_phase(co, "gang")},
    )
    wait_for(
        lambda: _job_phase(co, "gang") == "Completed",
        "the VCJob Completed",
        timeout=90,
        explain=lambda: {"podgroups": _podgroup_phases(co), "job": _job_phase(co, "gang")},
    )
