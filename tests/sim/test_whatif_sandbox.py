"""From the sandbox to a what-if: jobs run by the real controllers and scheduler fill the ledger,
and `tephra whatif` replays exactly that history under a proposed queue weight.

Two queues share 4 GPUs; each submits three 2-pod, 1-GPU-per-pod gangs of about 2 s at once, so
the queues contend and jobs wait. The ledger must give back the workload that ran (queues,
weights, gang shapes, run times); raising q2's weight raises its deserved share and must not
make it wait longer. `tephra whatif --json` answers the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from batch.sandbox.components import default_components
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import run_sandbox
from batch.sim.cluster import cluster_from_nodes
from batch.sim.traces.ledger import load_ledger
from batch.sim.whatif import compare_queue_configs, parse_change
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("sim-sandbox")

B = ("batch.volcano.sh", "v1alpha1")
Q = ("scheduling.volcano.sh", "v1beta1")
TEPHRA = str(Path(sys.executable).with_name("tephra"))


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{Q[0]}/{Q[1]}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True},
    }


def gang(name: str, q: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{B[0]}/{B[1]}",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minAvailable": 2,
            "schedulerName": "volcano",
            "queue": q,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "metadata": {"annotations": {"sandbox.tephra.io/run-seconds": "2"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {
                                        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                        "limits": {"nvidia.com/gpu": "1"},
                                    },
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def test_whatif_replays_the_history_the_sandbox_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    nodes = make_nodes(count=1, gpus=4, cpu="16", memory="64Gi")
    options = SandboxOptions(schedule_period=0.2, db_url=url, max_grace_seconds=0.3)
    names = [(f"{q}-{i}", q) for i in range(3) for q in ("q1", "q2")]
    with run_sandbox(
        nodes=nodes, options=options, components=default_components(options), ready_timeout=120
    ) as sb:
        co = client.CustomObjectsApi(sb.api_client())
        for q in ("q1", "q2"):
            co.create_cluster_custom_object(*Q, "queues", queue(q))
        for name, q in names:
            co.create_namespaced_custom_object(*B, "default", "jobs", gang(name, q))

        def phases() -> dict[str, str]:
            items = co.list_namespaced_custom_object(*B, "default", "jobs")["items"]
            return {
                j["metadata"]["name"]: ((j.get("status") or {}).get("state") or {}).get("phase", "")
                for j in items
            }

        wait_for(
            lambda: all(p == "Completed" for p in phases().values()) and len(phases()) == 6,
            what="all six gangs Completed",
            timeout=120,
            explain=phases,
        )
        for component in sb.components:  # everything recorded reaches the database
            recorder = getattr(component, "recorder", None)
            if recorder is not None:
                assert recorder.flush(10)

    cluster = cluster_from_nodes(nodes, source="test")
    workload = load_ledger(url, since="1h", cluster=cluster)
    assert sorted(j.name for j in workload.jobs) == sorted(f"default-{n}" for n, _ in names)
    weights = {q.name: q.weight for q in workload.cluster.queues}
    assert weights["q1"] == weights["q2"] == 1, weights
    for j in workload.jobs:
        assert j.min_available == 2 and j.pods == 2, j
        assert j.gpu_milli == 2000, j
        # 2 s containers, as the emulator ran them; the ledger's phase times have 1 s resolution
        # and the job's Running is seen up to a second after its pods start, so 1 s is possible.
        assert 1.0 <= j.run_time <= 15, j
    # Four GPUs, six 2-GPU gangs submitted together: some waited, in the sandbox and the replay.
    assert max(j.submit for j in workload.jobs) < 5

    result = compare_queue_configs(workload, [parse_change("queue=q2,weight=3")])
    rows = {r["queue"]: r for r in result.rows}
    assert {"q1", "q2"} <= set(rows)
    assert rows["q2"]["weight_proposed"] == 3 and rows["q2"]["jobs"] == 3
    assert result.current.summary["completed"] == 6 == result.proposed.summary["completed"]
    assert rows["q2"]["wait_mean_proposed_s"] <= rows["q2"]["wait_mean_now_s"]
    # (not the window's average deserved share: q2's jobs done sooner, its demand, and so what
    # it deserves, end sooner too)

    # The command line gives the same answer as the library.
    nodes_file = tmp_path / "nodes.yaml"
    nodes_file.write_text(yaml.safe_dump_all(nodes))
    out = subprocess.run(
        [
            TEPHRA,
            "whatif",
            "--db",
            url,
            "--since",
            "1h",
            "--cluster",
            str(nodes_file),
            "--set",
            "queue=q2,weight=3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    cli_rows = {r["queue"]: r for r in json.loads(out.stdout)["queues"]}
    assert cli_rows["q2"]["weight_proposed"] == 3
    assert cli_rows["q2"]["wait_mean_now_s"] == pytest.approx(rows["q2"]["wait_mean_now_s"])
