"""Tephra on Volcano-shaped CRDs, on a real kube-apiserver (issue 34, item 1): the oracle for
tests/controllers/test_volcano_crds_sandbox.py.

Volcano's PodGroup CRD has no status subresource; kube-apiserver then answers a PATCH of
`podgroups/NAME/status` with a 404 whose body is that of an object gone. `tephra controller`
and `tephra scheduler` run as processes on each shape of the PodGroup CRD (Volcano's, which
Tephra ships too, and the one with a status subresource that Tephra shipped before) and a VCJob
must run to completion on both, and on Volcano v1.10's own CRDs, all of them (issue 34.3). The
CRDs are put back as crds/ has them afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.sandbox.control_plane import ControlPlane
from batch.sandbox.crds import load_crds
from tests.controllers.test_volcano_crds_sandbox import PODGROUP_CRD, SHAPES, podgroup_crd
from tests.real.conftest import Api, conditions, install_crds, tephra_process, volcano_crds
from tests.real.kubelets import Cluster
from tests.real.test_e2e_real import (
    NS,
    VCJOBS,
    Stack,
    _controller_args,
    _free_port,
    _job,
    _namespace,
    _scheduler_conf,
    _wait_open,
)

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]


def _shape(api: Api, subresources: dict[str, Any], tmp: Path) -> None:
    """Give the PodGroup CRD these subresources and wait until the API serves them. Applied
    server-side as `install_crds` applies crds/ (same field manager): applying crds/ again puts
    the shipped shape back without a conflict. The change is meant, so it takes the fields over
    from any other manager (a Helm install earlier in the same control plane owns them)."""
    path = tmp / f"podgroups-{'-'.join(subresources) or 'none'}.yaml"
    path.write_text(yaml.safe_dump(podgroup_crd(subresources)))
    api.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    _wait_served(api, status="status" in subresources)


def _wait_served(api: Api, *, status: bool) -> None:
    """Until the PodGroup CRD is Established and discovery lists `podgroups/status` or not."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, found = api.request("GET", "/apis/scheduling.volcano.sh/v1beta1")
        served = {r["name"] for r in (found or {}).get("resources") or []}
        established = conditions(api, PODGROUP_CRD).get("Established", {}).get("status")
        if established == "True" and ("podgroups/status" in served) == status:
            return
        time.sleep(0.2)
    pytest.fail(f"discovery does not list podgroups/status={status} within 60 s")


def _shipped_has_status() -> bool:
    crd = next(c for c in load_crds() if c["metadata"]["name"] == PODGROUP_CRD)
    return "status" in (crd["spec"]["versions"][0].get("subresources") or {})


def _scheduler_args(kubeconfig: str, conf: str) -> list[str]:
    ports = (str(_free_port()), str(_free_port()))
    return [
        "scheduler",
        *("--kubeconfig", kubeconfig, "--scheduler-conf", conf, "--schedule-period", "0.3s"),
        *("--metrics-port", ports[0], "--healthz-port", ports[1], "-v"),
    ]


# Tephra's CRDs with each shape of the PodGroup CRD, and Volcano v1.10's own CRDs, all of them.
VOLCANO = "volcano-v1.10"


@pytest.fixture(params=[*sorted(SHAPES), VOLCANO], scope="module")
def stack(
    request: pytest.FixtureRequest,
    real: ControlPlane,
    api: Api,
    crds: list[str],
    kubelets: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    shape = request.param
    tmp = tmp_path_factory.mktemp(f"volcano-crds-{shape}")
    _namespace(api, NS)
    kubeconfig = str(real.kubeconfig)
    conf = str(_scheduler_conf(tmp / "scheduler.conf"))
    try:
        with ExitStack() as processes:
            if shape == VOLCANO:
                processes.enter_context(volcano_crds(api))
            else:
                _shape(api, SHAPES[shape], tmp)
            controller = processes.enter_context(
                tephra_process(tmp / "controller.log", *_controller_args(kubeconfig))
            )
            sched = processes.enter_context(
                tephra_process(tmp / "scheduler.log", *_scheduler_args(kubeconfig, conf))
            )
            stack = Stack(api, controller, [sched])
            _wait_open(stack, "default")
            yield stack
    finally:
        install_crds(api)  # the shipped shape again, for the tier's other tests
        _wait_served(api, status=_shipped_has_status())


def test_a_vcjob_runs_and_completes(stack: Stack) -> None:
    name = "dropin"
    stack.create(
        f"{VCJOBS}/namespaces/{NS}/jobs",
        _job(name, replicas=2, min_available=2, run_seconds=1),
    )
    try:
        stack.wait(f"{name} Running", lambda: stack.phase(name) in ("Running", "Completed"))
        stack.wait(f"{name} Completed", lambda: stack.phase(name) == "Completed", timeout=90)
    finally:
        stack.delete_job(name)
