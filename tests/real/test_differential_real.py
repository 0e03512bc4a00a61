"""The differential tier (issue 34): the same scenario under Volcano v1.10's own scheduler and
controller-manager and under Tephra's, and what each leaves in the API compared.

Each side has a control plane of its own (built by scripts/build-kube.sh), its own CRDs
(Volcano's, from the module it was built from, and Tephra's crds/), the tier's emulated kubelets
(four 8-GPU, 16-cpu Nodes) and the same scheduler configuration: the one a fresh Volcano Helm
install runs. Volcano comes from scripts/build-oracle.sh (`TEPHRA_VOLCANO_BIN`); without a Go
toolchain to build it these tests skip, saying so.

What is compared, once the scenario has settled: the VCJob's phase, counts and condition
statuses; the kinds of event (object kind, type, reason) about the job, its PodGroup and pods;
its PodGroup's phase and conditions (type, status, reason; messages are free text); its pods'
phases, how many are bound and their conditions (type, status, reason), as sorted lists over
the pods (which pod of a gang gets which is each scheduler's own order). Every difference must
be one of KNOWN_DIFFERENCES, each listed in README.md's compatibility table with the test that
shows it: a new difference fails the test, and so does a known one that went away (remove it
from both).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from batch.sandbox.control_plane import control_plane
from batch.sandbox.real_components import volcano_components
from batch.scheduler.config import HELM_DEFAULT_CONFIG
from tests.real.conftest import Api, install_crds, kube_bin, oracle_bin, tephra_process
from tests.real.kubelets import emulated
from tests.real.test_e2e_real import (
    NS,
    SCHED,
    VCJOBS,
    Stack,
    _controller_args,
    _corpus_job,
    _job,
    _namespace,
    _wait_open,
)
from tests.real.test_volcano_crds_real import _scheduler_args

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

SIDES = ("volcano", "tephra")
Observation = dict[str, Any]
# scenario -> {what: (under Volcano, under Tephra)}; each is in README.md's compatibility table.
COUNTS = ("completed", "inqueue", "pending", "running", "unknown")
PG_UNSCHEDULABLE = "PodGroup Warning Unschedulable"
REPEATS = {"job.conditions repeat a phase": (True, False)}
# Volcano: PodGroupPending on the job while the gang has no pods yet; both: Scheduled on each
# bound pod.
RAN = {
    **REPEATS,
    "events": (["Job Warning PodGroupPending", "Pod Normal Scheduled"], ["Pod Normal Scheduled"]),
}


def plugin_objects(job: str) -> dict[str, tuple[Any, Any]]:
    """Volcano deletes the svc and ssh plugins' objects when the job completes; Tephra keeps
    them until the job is deleted."""
    kept = [f"ConfigMap {job}-svc", f"NetworkPolicy {job}", f"Secret {job}-ssh", f"Service {job}"]
    return {"owned": ([], kept)}


KNOWN_DIFFERENCES: dict[str, dict[str, tuple[Any, Any]]] = {
    "gang_too_big": {
        **REPEATS,
        # Volcano admits a gang that can never fit (Inqueue) and its job controller makes the
        # five pods, which wait: "Schedulable" for the four that fit (once minAvailable is
        # satisfied), the fit errors for the fifth, FailedScheduling on each. Tephra knows the
        # gang can never fit (4 nodes of 16 cpu, one 10-cpu pod each; issue 29.2): it stays
        # Pending, holds nothing and no pod is made.
        "podgroup.phase": ("Inqueue", "Pending"),
        "job.pending": (5, 0),
        "pods.phase": (["Pending"] * 5, []),
        "pods.condition.PodScheduled": (
            ["False/Schedulable"] * 4 + ["False/Unschedulable"],
            None,
        ),
        "events": (
            ["Job Warning PodGroupPending", "Pod Warning FailedScheduling", PG_UNSCHEDULABLE],
            [PG_UNSCHEDULABLE],
        ),
    },
    "gang_fits": {**RAN},
    "over_capability": {
        # Volcano: a Normal Unschedulable ("queue resource quota insufficient") from enqueue
        # besides the Warning, and PodGroupPending on the job.
        "events": (
            ["Job Warning PodGroupPending", "PodGroup Normal Unschedulable", PG_UNSCHEDULABLE],
            [PG_UNSCHEDULABLE],
        ),
    },
    "corpus job.yaml": {**RAN, **plugin_objects("cx-test-job")},
    "corpus job-plugin.yaml": {**RAN, **plugin_objects("cx-test-job-plugin")},
    "corpus task-start-dependency/job.yaml": {**RAN},
    "fresh_queues": {
        # Tephra adds a `root` queue, the parent of every other (Volcano v1.10 has no hierarchy
        # unless configured), and counts PodGroups by phase (zeros too) where Volcano omits them.
        "queues": (["default"], ["default", "root"]),
        "default.spec": (
            {"guarantee": {}, "reclaimable": True, "weight": 1},
            {"parent": "root", "reclaimable": True, "weight": 1},
        ),
        "default.status": (
            {"allocated": {"cpu": "0", "memory": "0"}, "reservation": {}, "state": "Open"},
            {"allocated": {"cpu": "0", "memory": "0"}, "state": "Open", **dict.fromkeys(COUNTS, 0)},
        ),
    },
}


# ------------------------------------------------------------------------------- the sides
def _volcano(stack: ExitStack, api: Api, tmp: Path, conf: Path) -> Stack:
    """vc-controller-manager and vc-scheduler on a control plane with Volcano's own CRDs, started
    as `tephra cluster up --components volcano` starts them."""
    oracle = oracle_bin("volcano")
    install_crds(api, oracle / "crds")
    _namespace(api, NS)
    controller, scheduler = stack.enter_context(
        volcano_components(oracle, api.plane.kubeconfig, tmp, conf, schedule_period=1.0)
    )
    return Stack(api, controller, [scheduler])


def _tephra(stack: ExitStack, api: Api, tmp: Path, conf: Path) -> Stack:
    """`tephra controller` and `tephra scheduler` on a control plane with Tephra's CRDs."""
    install_crds(api)
    _namespace(api, NS)
    kubeconfig = str(api.plane.kubeconfig)
    controller = stack.enter_context(
        tephra_process(tmp / "controller.log", *_controller_args(kubeconfig))
    )
    scheduler = stack.enter_context(
        tephra_process(tmp / "scheduler.log", *_scheduler_args(kubeconfig, str(conf)))
    )
    return Stack(api, controller, [scheduler])


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Stack]]:
    """Both sides, each on a control plane of its own, running together."""
    oracle_bin("volcano")  # skips before any control plane starts when it cannot be built
    starters = {"volcano": _volcano, "tephra": _tephra}
    with ExitStack() as stack:
        out = {}
        for side in SIDES:
            tmp = tmp_path_factory.mktemp(f"differential-{side}")
            conf = tmp / "scheduler.conf"
            conf.write_text(HELM_DEFAULT_CONFIG)
            plane = stack.enter_context(control_plane(kube_bin(), tmp / "plane"))
            stack.enter_context(emulated(side, plane.server, plane.ssl_context()))
            out[side] = starters[side](stack, Api(plane), tmp, conf)
        for side in SIDES:
            _wait_open(out[side], "default")
        yield out


# -------------------------------------------------------------------------- observations
def _conditions(prefix: str, conditions: list[dict[str, Any]] | None) -> Observation:
    return {
        f"{prefix}.condition.{c['type']}": f"{c['status']}/{c.get('reason') or ''}"
        for c in conditions or []
    }


def _podgroups(stack: Stack, uid: str) -> list[dict[str, Any]]:
    items = (stack.get(f"{SCHED}/namespaces/{NS}/podgroups") or {}).get("items") or []
    return [
        pg
        for pg in items
        if any(o.get("uid") == uid for o in pg["metadata"].get("ownerReferences") or [])
    ]


def observe(stack: Stack, name: str) -> Observation:
    """What a user (or a tool) reads of the job `name`: see the module's docstring."""
    job = stack.job(name) or {"metadata": {}, "status": {}}
    status = job.get("status") or {}
    out: Observation = {"job.phase": (status.get("state") or {}).get("phase")}
    for key in ("minAvailable", "pending", "running", "succeeded", "failed", "terminating"):
        out[f"job.{key}"] = status.get(key, 0)
    seen = [c.get("status") for c in status.get("conditions") or []]
    # The transitions, and whether a phase was recorded again without one (how many times
    # depends on how often the controller synced).
    out["job.conditions"] = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]
    out["job.conditions repeat a phase"] = len(out["job.conditions"]) < len(seen)
    pgs = _podgroups(stack, job["metadata"].get("uid", ""))
    out["podgroups"] = len(pgs)
    for pg in pgs:
        pg_status = pg.get("status") or {}
        out["podgroup.phase"] = pg_status.get("phase")
        out.update(_conditions("podgroup", pg_status.get("conditions")))
    pods = stack.pods(name)
    out["pods.phase"] = sorted(str((p.get("status") or {}).get("phase")) for p in pods)
    out["pods.bound"] = sum(1 for p in pods if p["spec"].get("nodeName"))
    # Per condition type, the sorted values over the pods: which pod of a gang gets which is
    # the schedulers' own order.
    by_type: dict[str, list[str]] = {}
    for pod in pods:
        for key, value in _conditions("pods", (pod.get("status") or {}).get("conditions")).items():
            by_type.setdefault(key, []).append(value)
    out.update({key: sorted(values) for key, values in by_type.items()})
    out["owned"] = _owned(stack, job["metadata"].get("uid", ""))
    uids = {o["metadata"]["uid"] for o in [job, *pgs, *pods] if o["metadata"].get("uid")}
    out["events"] = _events(stack, uids)
    return out


OWNED = {
    "Service": "/api/v1/namespaces/e2e/services",
    "ConfigMap": "/api/v1/namespaces/e2e/configmaps",
    "Secret": "/api/v1/namespaces/e2e/secrets",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/e2e/networkpolicies",
}


def _owned(stack: Stack, uid: str) -> list[str]:
    """The job plugins' objects the job owns: "<kind> <name>"."""
    return sorted(
        f"{kind} {item['metadata']['name']}"
        for kind, path in OWNED.items()
        for item in (stack.get(path) or {}).get("items") or []
        if any(o.get("uid") == uid for o in item["metadata"].get("ownerReferences") or [])
    )


def _events(stack: Stack, uids: set[str]) -> list[str]:
    """The kinds of event about these objects: "<object kind> <type> <reason>", each once."""
    items = (stack.get(f"/api/v1/namespaces/{NS}/events") or {}).get("items") or []
    return sorted(
        {
            f"{e['involvedObject'].get('kind')} {e.get('type')} {e.get('reason')}"
            for e in items
            if e["involvedObject"].get("uid") in uids
        }
    )


def settled(
    stack: Stack, look: Callable[[], Observation], ready: Callable[[Observation], bool]
) -> Observation:
    """What `look` sees once `ready` holds and two looks two scheduling periods apart agree."""
    last: Observation | None = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        now = look()
        if ready(now) and now == last:
            return now
        last = now if ready(now) else None
        time.sleep(2.0)
    pytest.fail(f"not settled within 90 s: {look()}\n{stack.logs()}")


def differences(by_side: dict[str, Observation]) -> dict[str, tuple[Any, Any]]:
    volcano, tephra = by_side["volcano"], by_side["tephra"]
    keys = sorted(set(volcano) | set(tephra))
    return {k: (volcano.get(k), tephra.get(k)) for k in keys if volcano.get(k) != tephra.get(k)}


def _delete(stack: Stack, name: str) -> None:
    """The job, its pods and its PodGroup gone: the PodGroup explicitly too, as a PodGroup left
    to the garbage collector (which learns of new kinds up to 30 s late) still holds its queue's
    share when the next scenario starts."""
    job = stack.job(name) or {"metadata": {}}
    pgs = [pg["metadata"]["name"] for pg in _podgroups(stack, job["metadata"].get("uid", ""))]
    stack.delete_job(name)
    for pg in pgs:
        stack.api.request("DELETE", f"{SCHED}/namespaces/{NS}/podgroups/{pg}")
    stack.wait(
        f"{name}'s PodGroups gone",
        lambda: not any(stack.get(f"{SCHED}/namespaces/{NS}/podgroups/{pg}") for pg in pgs),
    )


def run_scenario(
    sides: dict[str, Stack],
    scenario: str,
    job: dict[str, Any],
    ready: Callable[[Observation], bool],
) -> dict[str, Observation]:
    name = job["metadata"]["name"]
    by_side = {}
    for side, stack in sides.items():
        stack.create(f"{VCJOBS}/namespaces/{NS}/jobs", job)
        try:
            by_side[side] = settled(stack, partial(observe, stack, name), ready)
        finally:
            _delete(stack, name)
    compare(scenario, by_side)
    return by_side


def compare(scenario: str, by_side: dict[str, Observation]) -> None:
    found = differences(by_side)
    assert found == KNOWN_DIFFERENCES[scenario], (
        "the differences between Volcano and Tephra changed: fix the new ones, or list them in "
        "KNOWN_DIFFERENCES and README.md's compatibility table; remove the ones gone.\n"
        + yaml.safe_dump({"found": found, "observed": by_side}, width=100)
    )


def observe_queues(stack: Stack) -> Observation:
    """The queues and the `default` queue as the API serves them."""
    items = (stack.get(f"{SCHED}/queues") or {}).get("items") or []
    out: Observation = {"queues": sorted(q["metadata"]["name"] for q in items)}
    for queue in items:
        if queue["metadata"]["name"] == "default":
            out["default.spec"] = queue.get("spec")
            out["default.status"] = queue.get("status")
    return out


# ---------------------------------------------------------------------------------- tests
def test_a_fresh_install_has_the_same_queues(sides: dict[str, Stack]) -> None:
    # First in the module: the queues before any job ran in them.
    by_side = {
        side: settled(stack, partial(observe_queues, stack), lambda _: True)
        for side, stack in sides.items()
    }
    compare("fresh_queues", by_side)


def test_gang_too_big_for_the_cluster(sides: dict[str, Stack]) -> None:
    # 10-cpu pods on 16-cpu nodes: one per node, 4 fit; the gang needs 5.
    job = _job("gang5", replicas=5, min_available=5, cpu="10")

    def waiting(obs: Observation) -> bool:
        # Volcano admits the gang and creates its pods; Tephra knows it can never fit (4 nodes
        # of 16 cpu, one 10-cpu pod each) and admits it not: no pod is made (issue 29.2).
        made = len(obs["pods.phase"]) == 5 or obs.get("podgroup.phase") == "Pending"
        return made and "podgroup.condition.Unschedulable" in obs

    by_side = run_scenario(sides, "gang_too_big", job, waiting)
    for obs in by_side.values():
        assert obs["pods.bound"] == 0, obs


def test_gang_that_fits_runs_to_completion(sides: dict[str, Stack]) -> None:
    job = _job("gang2", replicas=2, min_available=2, cpu="10", run_seconds=1)
    by_side = run_scenario(sides, "gang_fits", job, lambda obs: obs["job.phase"] == "Completed")
    for obs in by_side.values():
        assert obs["job.succeeded"] == 2, obs


def test_a_gang_over_its_queue_capability_waits(sides: dict[str, Stack]) -> None:
    # The queue may hold 20 cpu; the gang needs 30 at once: never admitted, no pod created.
    for stack in sides.values():
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "capped"},
            "spec": {"weight": 1, "reclaimable": True, "capability": {"cpu": "20"}},
        }
        stack.create(f"{SCHED}/queues", body)
        _wait_open(stack, "capped")
    job = _job("capped3", replicas=3, min_available=3, cpu="10", queue="capped")

    def waiting(obs: Observation) -> bool:
        return obs["podgroups"] == 1 and obs.get("podgroup.phase") == "Pending"

    by_side = run_scenario(sides, "over_capability", job, waiting)
    for obs in by_side.values():
        assert obs["pods.phase"] == [], obs


@pytest.mark.parametrize("rel", ["job.yaml", "job-plugin.yaml", "task-start-dependency/job.yaml"])
def test_corpus_vcjob_runs_as_under_volcano(sides: dict[str, Stack], rel: str) -> None:
    job = _corpus_job(rel)
    by_side = run_scenario(sides, f"corpus {rel}", job, lambda obs: obs["job.phase"] == "Completed")
    total = sum(t["replicas"] for t in job["spec"]["tasks"])
    for obs in by_side.values():
        assert obs["job.succeeded"] == total, obs
