"""Job plugins' outputs (volcano-semantics.md#job-plugins)."""

from __future__ import annotations

import base64
import json
from typing import Any

from batch.controllers.plugins import parse_args

from .conftest import Harness, make_job, task


def _env(pod: dict[str, Any], container: int = 0) -> dict[str, Any]:
    out = {}
    for e in pod["spec"]["containers"][container].get("env") or []:
        out[e["name"]] = e.get("value", e.get("valueFrom"))
    return out


def _started(job: dict[str, Any]) -> Harness:
    h = Harness(job)
    h.step()
    h.admit()
    return h


def test_parse_args() -> None:
    assert parse_args(["--a=1", "--flag", "--b", "2"]) == {"a": "1", "flag": "true", "b": "2"}


def test_svc_configmap_service_networkpolicy_and_pod_shape() -> None:
    h = _started(
        make_job(
            "mpi-job", tasks=[task("mpimaster", 1), task("mpi-worker", 2)], plugins={"svc": []}
        )
    )
    cm = h.cluster.get("ConfigMap", "ns", "mpi-job-svc")
    assert cm is not None
    assert cm["data"]["mpimaster.host"] == "mpi-job-mpimaster-0.mpi-job"
    assert (
        cm["data"]["mpi-worker.host"]
        == "mpi-job-mpi-worker-0.mpi-job\nmpi-job-mpi-worker-1.mpi-job"
    )
    assert (
        cm["data"]["VC_MPI_WORKER_HOSTS"]
        == "mpi-job-mpi-worker-0.mpi-job,mpi-job-mpi-worker-1.mpi-job"
    )
    assert cm["data"]["VC_MPI_WORKER_NUM"] == "2"
    svc = h.cluster.get("Service", "ns", "mpi-job")
    assert svc is not None and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {
        "volcano.sh/job-name": "mpi-job",
        "volcano.sh/job-namespace": "ns",
    }
    assert h.cluster.get("NetworkPolicy", "ns", "mpi-job") is not None
    assert h.status["controlledResources"]["plugin-svc"] == "svc"
    pod = h.cluster.get("Pod", "ns", "mpi-job-mpi-worker-1")
    assert pod is not None
    assert pod["spec"]["hostname"] == "mpi-job-mpi-worker-1"
    assert pod["spec"]["subdomain"] == "mpi-job"
    env = _env(pod)
    assert env["VC_MPIMASTER_HOSTS"] == {
        "configMapKeyRef": {"name": "mpi-job-svc", "key": "VC_MPIMASTER_HOSTS"}
    }
    assert "VC_MPI_WORKER_NUM" in env
    mounts = {m["name"]: m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["mpi-job-svc"] == "/etc/volcano"


def test_svc_flags_and_rescale_rewrites_configmap() -> None:
    h = _started(
        make_job(
            tasks=[task("w", 2)],
            min_available=1,
            plugins={"svc": ["--disable-network-policy=true", "--inject-hosts-env=false"]},
        )
    )
    assert h.cluster.get("NetworkPolicy", "ns", "job") is None
    pod = h.cluster.get("Pod", "ns", "job-w-0")
    assert pod is not None and "VC_W_HOSTS" not in _env(pod)
    h.cluster.get("Job", "ns", "job")["spec"]["tasks"][0]["replicas"] = 3
    h.step(1)
    cm = h.cluster.get("ConfigMap", "ns", "job-svc")
    assert cm is not None and cm["data"]["VC_W_NUM"] == "3"
    assert "job-w-2" in h.pod_names()


def test_ssh_secret_and_mount() -> None:
    h = _started(
        make_job(tasks=[task("w", 2)], plugins={"ssh": ["--ssh-key-file-path=/home/u/.ssh"]})
    )
    secret = h.cluster.get("Secret", "ns", "job-ssh")
    assert secret is not None
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["id_rsa"].startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert data["id_rsa.pub"].startswith("ssh-rsa ")
    assert data["authorized_keys"] == data["id_rsa.pub"]
    assert "Host job-w-1" in data["config"]
    pod = h.cluster.get("Pod", "ns", "job-w-0")
    assert pod is not None
    mounts = {m["name"]: m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["job-ssh"] == "/home/u/.ssh"


def test_env_plugin() -> None:
    h = _started(make_job(tasks=[task("w", 2)], plugins={"env": []}))
    pod = h.cluster.get("Pod", "ns", "job-w-1")
    assert pod is not None
    assert _env(pod)["VK_TASK_INDEX"] == "1" and _env(pod)["VC_TASK_INDEX"] == "1"


def test_pytorch_plugin_env() -> None:
    h = _started(
        make_job(
            "pt",
            tasks=[task("master", 1), task("worker", 3)],
            plugins={"pytorch": ["--port=29500"]},
        )
    )
    assert h.cluster.get("ConfigMap", "ns", "pt-svc") is not None  # implies svc
    m = _env(h.cluster.get("Pod", "ns", "pt-master-0"))  # type: ignore[arg-type]
    w = _env(h.cluster.get("Pod", "ns", "pt-worker-2"))  # type: ignore[arg-type]
    assert m["MASTER_ADDR"] == "pt-master-0.pt" and m["MASTER_PORT"] == "29500"
    assert m["WORLD_SIZE"] == "4" and m["RANK"] == "0"
    assert w["RANK"] == "3"


def test_mpi_plugin_implies_ssh_and_sets_hosts() -> None:
    h = _started(make_job("m", tasks=[task("master", 1), task("worker", 2)], plugins={"mpi": []}))
    assert h.cluster.get("Secret", "ns", "m-ssh") is not None
    env = _env(h.cluster.get("Pod", "ns", "m-master-0"))  # type: ignore[arg-type]
    assert env["MPI_HOST"] == "m-worker-0.m,m-worker-1.m"


def test_tensorflow_plugin_tf_config() -> None:
    h = _started(
        make_job("tf", tasks=[task("ps", 1), task("worker", 2)], plugins={"tensorflow": []})
    )
    cfg = json.loads(_env(h.cluster.get("Pod", "ns", "tf-worker-1"))["TF_CONFIG"])  # type: ignore[arg-type]
    assert cfg == {
        "cluster": {
            "ps": ["tf-ps-0.tf:2222"],
            "worker": ["tf-worker-0.tf:2222", "tf-worker-1.tf:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }


def test_ray_plugin_commands() -> None:
    head = task("head", 1)
    head["template"]["spec"]["containers"][0]["name"] = "head"
    worker = task("worker", 2)
    worker["template"]["spec"]["containers"][0]["name"] = "worker"
    h = _started(make_job("r", tasks=[head, worker], plugins={"ray": []}))
    hp = h.cluster.get("Pod", "ns", "r-head-0")
    wp = h.cluster.get("Pod", "ns", "r-worker-0")
    assert hp is not None and wp is not None
    assert "ray start --head --block --port=6379" in hp["spec"]["containers"][0]["command"][2]
    assert (
        wp["spec"]["containers"][0]["command"][2] == "ray start --block --address=r-head-0.r:6379"
    )


def test_pytorch_wait_for_master_and_hcclrank() -> None:
    h = _started(
        make_job(
            "pt",
            tasks=[task("master", 1), task("worker", 2)],
            plugins={"pytorch": ["--wait-master-enabled=true"], "hcclrank": []},
        )
    )
    worker = h.cluster.get("Pod", "ns", "pt-worker-1")
    master = h.cluster.get("Pod", "ns", "pt-master-0")
    assert worker is not None and master is not None
    inits = worker["spec"]["initContainers"]
    assert [i["name"] for i in inits] == ["wait-for-master"]
    assert "pt-master-0.pt 23456" in inits[0]["command"][2]
    assert "initContainers" not in master["spec"]
    assert master["metadata"]["annotations"]["hccl/rankIndex"] == "0"
    assert worker["metadata"]["annotations"]["hccl/rankIndex"] == "2"


def test_plugin_arguments_of_the_wrong_type_fail_the_job_once() -> None:
    """Issue 20.3: `ssh: ["--ssh-port=notaport"]` (stored without admission) made every reconcile
    raise; the job now fails with a reason, and its Commands are still handled."""
    from batch.controllers import constants as c
    from batch.controllers.memory import command

    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"ssh": ["--ssh-port=notaport"]}))
    h.step()
    state = h.status["state"]
    assert h.phase == c.FAILED
    assert state["reason"] == "InvalidPluginArguments"
    assert "ssh-port" in state["message"] and "notaport" in state["message"]
    assert not h.pods() and h.podgroup() is None
    h.cluster.add(command(h.job, "TerminateJob"))
    h.step(1)
    assert h.cluster.objects_of("Command") == []


def test_plugin_arguments_turning_bad_later_do_not_stop_commands() -> None:
    from batch.controllers import constants as c
    from batch.controllers.memory import command

    h = Harness(make_job(tasks=[task("worker", 2)], plugins={"ssh": []}))
    h.start()
    job = h.cluster.get("Job", h.ns, h.name)
    assert job is not None and h.phase == c.RUNNING
    job["spec"]["plugins"] = {"ssh": ["--ssh-port=notaport"]}  # an update that bypassed admission
    h.cluster.add(command(h.job, "TerminateJob"))
    h.step(1)
    assert h.cluster.objects_of("Command") == []
    assert h.phase in (c.TERMINATING, c.TERMINATED)
