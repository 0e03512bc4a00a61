"""The node emulator over HTTP behaves as kubelets for a real kube-apiserver, and the same test
passes against the sandbox's API server with the same emulator attached over HTTP.

Real-apiserver facts these tests pin: TaintNodesByCondition taints a new Node not-ready until
kube-controller-manager's node lifecycle controller sees it Ready; the emulator's status patches,
leases, events and final deletions are accepted as a kubelet's are.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from batch.sandbox.emulator_http import NOT_READY_TAINT, schedulable
from batch.sandbox.pod_annotations import EXIT_CODE, RUN_SECONDS
from tests.real.kubelets import (
    HEARTBEAT_SECONDS,
    MAX_GRACE_SECONDS,
    NODE_LABEL,
    Cluster,
    sandbox_cluster,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

NS = "default"


@pytest.fixture(scope="module")
def sandbox_kubelets() -> Iterator[Cluster]:
    with sandbox_cluster() as cluster:
        yield cluster


@pytest.fixture(params=["real", "sandbox"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    name = "kubelets" if request.param == "real" else "sandbox_kubelets"
    found: Cluster = request.getfixturevalue(name)
    return found


def _pod(name: str, *, cpu: str = "100m", restart: str = "Never", **ann: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": ann},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def _run(cluster: Cluster, pod: dict[str, Any], node: str) -> None:
    code, answer = cluster.request("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    assert code == 201, answer
    cluster.bind(NS, pod["metadata"]["name"], node)


def _phase(cluster: Cluster, name: str) -> str | None:
    pod = cluster.pod(NS, name)
    return None if pod is None else pod["status"].get("phase")


def _cleanup(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")
    for name in names:
        wait_for(lambda n=name: cluster.pod(NS, n) is None, f"pod {name} deleted")


def test_nodes_ready_untainted_with_renewed_leases(cluster: Cluster) -> None:
    def lease(name: str) -> str:
        code, body = cluster.request(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        )
        assert code == 200, body
        assert body["metadata"]["ownerReferences"][0]["kind"] == "Node"
        return str(body["spec"]["renewTime"])

    before = {name: lease(name) for name in cluster.nodes}
    for name in cluster.nodes:
        code, node = cluster.request("GET", f"/api/v1/nodes/{name}")
        assert code == 200 and schedulable(node), node
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["status"]["nodeInfo"]["kubeletVersion"]
    time.sleep(HEARTBEAT_SECONDS)
    wait_for(
        lambda: all(lease(n) > before[n] for n in cluster.nodes),
        "every lease renewed",
        timeout=30,
        explain=lambda: (before, {n: lease(n) for n in cluster.nodes}),
    )


def test_new_node_is_tainted_not_ready_until_ready(cluster: Cluster) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "late-node", "labels": NODE_LABEL},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi"}},
    }
    code, created = cluster.request("POST", "/api/v1/nodes", body)
    assert code == 201, created
    taints = {t["key"] for t in (created.get("spec") or {}).get("taints") or []}
    # A divergence (docs/sandbox.md): only kube-apiserver's TaintNodesByCondition adds it.
    assert (NOT_READY_TAINT in taints) == (cluster.name == "real"), created
    cluster.emulator.wait_schedulable(["late-node"], timeout=60)
    code, gone = cluster.request("DELETE", "/api/v1/nodes/late-node")
    assert code == 200, gone


def test_bound_pods_run_and_end_by_annotations(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    _run(cluster, _pod("ok", **{RUN_SECONDS: "1"}), node)
    _run(cluster, _pod("bad", **{RUN_SECONDS: "1", EXIT_CODE: "3"}), node)
    _run(cluster, _pod("flaky", restart="OnFailure", **{RUN_SECONDS: "0.5", EXIT_CODE: "1"}), node)
    running = wait_for(
        lambda: (p := cluster.pod(NS, "ok")) and p["status"].get("phase") == "Running" and p,
        "ok Running",
    )
    assert running["status"]["podIP"] and running["status"]["hostIP"]
    ready = {c["type"]: c["status"] for c in running["status"]["conditions"]}
    assert ready["Ready"] == "True" and ready["PodScheduled"] == "True", ready
    wait_for(lambda: _phase(cluster, "ok") == "Succeeded", "ok Succeeded")
    wait_for(lambda: _phase(cluster, "bad") == "Failed", "bad Failed")
    bad = cluster.pod(NS, "bad")
    assert bad is not None
    ended = bad["status"]["containerStatuses"][0]
    assert ended["state"]["terminated"]["exitCode"] == 3
    # A divergence (docs/sandbox.md): kube-apiserver defaults a missing lastState to {}.
    assert ("lastState" in ended) == (cluster.name == "real"), ended

    def restarts() -> int:
        pod = cluster.pod(NS, "flaky") or {"status": {}}
        return int(((pod["status"].get("containerStatuses") or [{}])[0]).get("restartCount", 0))

    wait_for(lambda: restarts() >= 2, "flaky restarted twice")
    assert _phase(cluster, "flaky") == "Running"
    _cleanup(cluster, "ok", "bad", "flaky")


def test_out_of_cpu_fails_with_a_kubelet_event(cluster: Cluster) -> None:
    _run(cluster, _pod("too-big", cpu="17"), cluster.nodes[1])
    wait_for(lambda: _phase(cluster, "too-big") == "Failed", "too-big Failed")
    pod = cluster.pod(NS, "too-big")
    assert pod is not None and pod["status"]["reason"] == "OutOfcpu", pod
    selector = "involvedObject.name=too-big,reason=OutOfcpu"
    path = f"/api/v1/namespaces/{NS}/events?fieldSelector={selector}"

    def listed() -> list[dict[str, Any]]:
        code, events = cluster.request("GET", path)
        assert code == 200, events
        items: list[dict[str, Any]] = events["items"]
        return items

    # The kubelet writes its event after the pod's Failed status, as a real kubelet does.
    wait_for(listed, "an OutOfcpu event")
    events = {"items": listed()}
    assert len(events["items"]) == 1, events
    assert events["items"][0]["source"]["component"] == "kubelet"
    assert events["items"][0]["involvedObject"]["uid"] == pod["metadata"]["uid"]
    _cleanup(cluster, "too-big")


def test_deleted_pod_goes_after_its_capped_grace(cluster: Cluster) -> None:
    _run(cluster, _pod("doomed"), cluster.nodes[2])
    wait_for(lambda: _phase(cluster, "doomed") == "Running", "doomed Running")
    code, answer = cluster.request("DELETE", f"/api/v1/namespaces/{NS}/pods/doomed")
    assert code == 200, answer
    assert answer["metadata"]["deletionTimestamp"], answer  # graceful: 30 s asked
    # liveness only (the 30 s asked would not do); the Killing event shows the grace applied
    wait_for(lambda: cluster.pod(NS, "doomed") is None, "doomed deleted", timeout=30)
    path = f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name=doomed,reason=Killing"
    events = wait_for(lambda: cluster.request("GET", path)[1]["items"], "a Killing event")
    grace = f"{MAX_GRACE_SECONDS:g} s"
    assert [e["message"] for e in events] == [
        f"Stopping container main with a grace of {grace} (30 s asked, capped at {grace})"
    ], events
    assert events[0]["type"] == "Normal" and events[0]["source"]["component"] == "kubelet"


def test_a_status_patch_naming_another_uid_is_refused(cluster: Cluster) -> None:
    """The emulator's status patches carry the pod's uid so that a pod recreated under the same
    name is never written to by mistake; both servers must refuse the patch (the sandbox
    applied it through /status)."""
    code, created = cluster.request("POST", f"/api/v1/namespaces/{NS}/pods", _pod("twin"))
    assert code == 201, created
    other = "00000000-0000-0000-0000-000000000000"
    path = f"{cluster.server}/api/v1/namespaces/{NS}/pods/twin/status"
    body = {"metadata": {"uid": other}, "status": {"phase": "Running"}}
    code, answer = _patch(path, body, cluster)
    assert code == 422 and "metadata.uid" in answer["message"], answer
    assert _phase(cluster, "twin") == "Pending"
    _cleanup(cluster, "twin")


def _patch(url: str, body: Any, cluster: Cluster) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="PATCH")
    req.add_header("Content-Type", "application/strategic-merge-patch+json")
    try:
        with urllib.request.urlopen(req, context=cluster.context, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
