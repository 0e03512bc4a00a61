"""Framework job plugins: pytorch, mpi, tensorflow, ray and hcclrank
(`volcano-semantics.md#job-plugins`).

Each one only shapes pods (env, ports, commands) from the job's task layout; the host names come
from the `svc` plugin's naming (`<job>-<task>-<i>.<job>`), which these plugins imply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from batch.api.jobview import JobView, TaskView
from batch.controllers.plugins.base import JSON, PluginBase, add_env, add_port, task_hosts


def _find(tasks: Sequence[TaskView], name: str) -> TaskView | None:
    return next((t for t in tasks if t.name == name), None)


class PytorchPlugin(PluginBase):
    """MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK for torch.distributed."""

    name = "pytorch"

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        master = self.args.get("master", "master")
        worker = self.args.get("worker", "worker")
        port = int(self.args.get("port", "23456"))
        if task.name not in (master, worker):
            return
        mt, wt = _find(tasks, master), _find(tasks, worker)
        job_name = job.name
        world = (mt.replicas if mt else 0) + (wt.replicas if wt else 0)
        rank = index if task.name == master else index + (mt.replicas if mt else 0)
        add_env(
            pod,
            [
                {"name": "MASTER_ADDR", "value": f"{job_name}-{master}-0.{job_name}"},
                {"name": "MASTER_PORT", "value": str(port)},
                {"name": "WORLD_SIZE", "value": str(world)},
                {"name": "RANK", "value": str(rank)},
            ],
            init=False,
        )
        add_port(pod, port, "pytorchjob-port")
        if task.name == worker and self.args.get("wait-master-enabled", "false") == "true":
            timeout = self.args.get("wait-master-timeout", "300")
            image = self.args.get("wait-master-image", "busybox:1.36.1")
            addr = f"{job_name}-{master}-0.{job_name}"
            probe = f"until nc -z {addr} {port}; do sleep 2; done"
            inits = pod["spec"].setdefault("initContainers", [])
            if not any(i.get("name") == "wait-for-master" for i in inits):
                inits.append(
                    {
                        "name": "wait-for-master",
                        "image": image,
                        "command": [
                            "sh",
                            "-c",
                            f"timeout {timeout} sh -c '{probe}'",
                        ],
                    }
                )


class MpiPlugin(PluginBase):
    """MPI_HOST (worker host list) on the master, ssh port open on every pod."""

    name = "mpi"

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        master = self.args.get("master", "master")
        worker = self.args.get("worker", "worker")
        port = int(self.args.get("port", "22"))
        if task.name == master:
            wt = _find(tasks, worker)
            hosts = task_hosts(job, wt) if wt else []
            add_env(pod, [{"name": "MPI_HOST", "value": ",".join(hosts)}], init=False)
        add_port(pod, port, "mpijob-port")


class TensorflowPlugin(PluginBase):
    """TF_CONFIG with the cluster spec and this pod's task type/index."""

    name = "tensorflow"

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        port = int(self.args.get("port", "2222"))
        roles = {
            self.args.get("ps", "ps"): "ps",
            self.args.get("worker", "worker"): "worker",
            self.args.get("chief", "chief"): "chief",
            self.args.get("evaluator", "evaluator"): "evaluator",
        }
        if len(tasks) == 1 and tasks[0].replicas == 1:
            return
        if task.name not in roles:
            return
        cluster: dict[str, list[str]] = {}
        for t in tasks:
            if t.name in roles:
                cluster[roles[t.name]] = [f"{h}:{port}" for h in task_hosts(job, t)]
        tf_config = {"cluster": cluster, "task": {"type": roles[task.name], "index": index}}
        add_env(
            pod,
            [{"name": "TF_CONFIG", "value": json.dumps(tf_config, sort_keys=True)}],
            init=False,
        )
        add_port(pod, port, "tfjob-port")


class RayPlugin(PluginBase):
    """`ray start --head` on the head container, workers join the head's GCS address."""

    name = "ray"

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        head = self.args.get("head", "head")
        head_ctr = self.args.get("headContainer", "head")
        worker = self.args.get("worker", "worker")
        worker_ctr = self.args.get("workerContainer", "worker")
        port = int(self.args.get("port", "6379"))
        dash = int(self.args.get("dashboardPort", "8265"))
        client = int(self.args.get("clientPort", "10001"))
        job_name = job.name
        head_addr = f"{job_name}-{head}-0.{job_name}"
        for ctr in pod["spec"].get("containers") or []:
            if task.name == head and ctr.get("name") == head_ctr:
                ctr["command"] = [
                    "sh",
                    "-c",
                    f"ray start --head --block --port={port} --dashboard-host=0.0.0.0 "
                    f"--dashboard-port={dash} --ray-client-server-port={client}",
                ]
                ports = ctr.setdefault("ports", [])
                for p, n in ((port, "gcs"), (dash, "dashboard"), (client, "client")):
                    if not any(x.get("containerPort") == p for x in ports):
                        ports.append({"name": n, "containerPort": p, "protocol": "TCP"})
            elif task.name == worker and ctr.get("name") == worker_ctr:
                ctr["command"] = ["sh", "-c", f"ray start --block --address={head_addr}:{port}"]


class HcclRankPlugin(PluginBase):
    """Ascend HCCL rank annotation `hccl/rankIndex` (master first, then workers)."""

    name = "hcclrank"

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        master = self.args.get("master", "master")
        worker = self.args.get("worker", "worker")
        mt = _find(tasks, master)
        if task.name == master:
            rank = index
        elif task.name == worker:
            rank = index + (mt.replicas if mt else 0)
        else:
            return
        pod["metadata"].setdefault("annotations", {})["hccl/rankIndex"] = str(rank)
