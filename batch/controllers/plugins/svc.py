"""`svc` job plugin: stable DNS names for a job's pods.

Reproduces Volcano's svc plugin: pods get `hostname=<pod>` and `subdomain=<job>`; a headless
Service `<job>`; a ConfigMap `<job>-svc` with `<task>.host` (newline-joined host names),
`VC_<TASK>_HOSTS` and `VC_<TASK>_NUM`, mounted at /etc/volcano; the hosts/num values of every task
injected as env (unless `--inject-hosts-env=false`); a NetworkPolicy `<job>` admitting ingress from
the job's own pods (unless `--disable-network-policy=true`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from batch.api.jobview import JobView, TaskView
from batch.controllers import constants as c
from batch.controllers.jobspec import owner_ref
from batch.controllers.plugins.base import JSON, ObjectKey, add_env, task_hosts

MOUNT_PATH = "/etc/volcano"


def _env_key(task: str) -> str:
    return task.replace("-", "_").upper()


def _truthy(v: str | None, default: bool) -> bool:
    if v is None:
        return default
    return v.lower() in ("true", "1", "yes")


class SvcPlugin:
    name = "svc"

    def __init__(self, args: Mapping[str, str]) -> None:
        self.publish_not_ready = _truthy(args.get("publish-not-ready-addresses"), False)
        self.disable_network_policy = _truthy(args.get("disable-network-policy"), False)
        self.inject_hosts_env = _truthy(args.get("inject-hosts-env"), True)

    @staticmethod
    def configmap_name(job: JobView) -> str:
        return f"{job.name}-svc"

    def object_keys(self, job: JobView) -> list[ObjectKey]:
        name = job.name
        keys = [("v1", "ConfigMap", self.configmap_name(job)), ("v1", "Service", name)]
        if not self.disable_network_policy:
            keys.append(("networking.k8s.io/v1", "NetworkPolicy", name))
        return keys

    def configmap_data(self, job: JobView, tasks: Sequence[TaskView]) -> dict[str, str]:
        data: dict[str, str] = {}
        for t in tasks:
            hosts = task_hosts(job, t)
            data[f"{t.name}.host"] = "\n".join(hosts)
            key = _env_key(t.name)
            data[f"VC_{key}_HOSTS"] = ",".join(hosts)
            data[f"VC_{key}_NUM"] = str(len(hosts))
        return data

    def _configmap(self, job: JobView, tasks: Sequence[TaskView]) -> JSON:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.configmap_name(job),
                "namespace": job.namespace,
                "ownerReferences": [owner_ref(job)],
            },
            "data": self.configmap_data(job, tasks),
        }

    def on_job_add(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]:
        name = job.name
        ns = job.namespace
        selector = {c.JOB_NAME: name, c.JOB_NAMESPACE: str(ns)}
        objs: list[JSON] = [
            self._configmap(job, tasks),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner_ref(job)]},
                "spec": {
                    "clusterIP": "None",
                    "selector": selector,
                    "publishNotReadyAddresses": self.publish_not_ready,
                    "ports": [{"name": "placeholder-volcano", "port": 1, "protocol": "TCP"}],
                },
            },
        ]
        if not self.disable_network_policy:
            objs.append(
                {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "ownerReferences": [owner_ref(job)],
                    },
                    "spec": {
                        "podSelector": {"matchLabels": selector},
                        "ingress": [{"from": [{"podSelector": {"matchLabels": selector}}]}],
                        "policyTypes": ["Ingress"],
                    },
                }
            )
        return objs

    def on_job_update(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]:
        return [self._configmap(job, tasks)]

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        spec = pod.setdefault("spec", {})
        job_name = job.name
        if not spec.get("hostname"):
            spec["hostname"] = pod["metadata"]["name"]
        if not spec.get("subdomain"):
            spec["subdomain"] = job_name
        cm = self.configmap_name(job)
        vols = spec.setdefault("volumes", [])
        if not any(v.get("name") == cm for v in vols):
            vols.append({"name": cm, "configMap": {"name": cm}})
        for group in ("containers", "initContainers"):
            for ctr in spec.get(group) or []:
                mounts = ctr.setdefault("volumeMounts", [])
                if not any(vm.get("name") == cm for vm in mounts):
                    mounts.append({"name": cm, "mountPath": MOUNT_PATH})
        if self.inject_hosts_env:
            env: list[JSON] = []
            for t in tasks:
                key = _env_key(t.name)
                for var in (f"VC_{key}_HOSTS", f"VC_{key}_NUM"):
                    env.append(
                        {
                            "name": var,
                            "valueFrom": {"configMapKeyRef": {"name": cm, "key": var}},
                        }
                    )
            add_env(pod, env)
