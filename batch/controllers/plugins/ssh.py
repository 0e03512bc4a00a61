"""`ssh` job plugin: password-less ssh among a job's pods (Secret `<job>-ssh` with a key pair).

Reproduces Volcano's ssh plugin: one RSA key pair per job (or the one given with
`--ssh-private-key`/`--ssh-public-key`), stored as `id_rsa`, `id_rsa.pub`, `authorized_keys` and
`config` in Secret `<job>-ssh`, mounted at `--ssh-key-file-path` (default /root/.ssh) in every
container through a volume named `<job>-ssh`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence

from batch.api.jobview import JobView, TaskView
from batch.controllers.jobspec import owner_ref
from batch.controllers.plugins.base import JSON, ObjectKey, task_hosts


def generate_key_pair() -> tuple[str, str]:
    """A fresh 2048-bit RSA key pair: (PEM private key, OpenSSH public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return private, public


KeyGen = Callable[[], tuple[str, str]]


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


class SshPlugin:
    name = "ssh"
    keygen: KeyGen = staticmethod(generate_key_pair)

    def __init__(self, args: Mapping[str, str]) -> None:
        self.path = args.get("ssh-key-file-path", "/root/.ssh")
        self.private = args.get("ssh-private-key")
        self.public = args.get("ssh-public-key")
        self.port = int(args.get("ssh-port", "22"))

    @staticmethod
    def secret_name(job: JobView) -> str:
        return f"{job.name}-ssh"

    def object_keys(self, job: JobView) -> list[ObjectKey]:
        return [("v1", "Secret", self.secret_name(job))]

    def ssh_config(self, job: JobView, tasks: Sequence[TaskView]) -> str:
        lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
        for t in tasks:
            for host in task_hosts(job, t):
                short = host.split(".", 1)[0]
                lines += [f"Host {short}", f"  HostName {host}", f"  Port {self.port}"]
        return "\n".join(lines) + "\n"

    def on_job_add(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]:
        if self.private and self.public:
            private, public = self.private, self.public
        else:
            private, public = type(self).keygen()
        return [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {
                    "name": self.secret_name(job),
                    "namespace": job.namespace,
                    "ownerReferences": [owner_ref(job)],
                },
                "data": {
                    "id_rsa": _b64(private),
                    "id_rsa.pub": _b64(public),
                    "authorized_keys": _b64(public),
                    "config": _b64(self.ssh_config(job, tasks)),
                },
            }
        ]

    def on_job_update(self, job: JobView, tasks: Sequence[TaskView]) -> list[JSON]:
        return []

    def on_pod_create(
        self,
        job: JobView,
        tasks: Sequence[TaskView],
        pod: JSON,
        task: TaskView,
        index: int,
    ) -> None:
        spec = pod.setdefault("spec", {})
        name = self.secret_name(job)
        vols = spec.setdefault("volumes", [])
        if not any(v.get("name") == name for v in vols):
            vols.append(
                {
                    "name": name,
                    "secret": {
                        "secretName": name,
                        "defaultMode": 0o600,
                        "items": [
                            {"key": k, "path": k}
                            for k in ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
                        ],
                    },
                }
            )
        for group in ("containers", "initContainers"):
            for ctr in spec.get(group) or []:
                mounts = ctr.setdefault("volumeMounts", [])
                if not any(vm.get("name") == name for vm in mounts):
                    mounts.append({"name": name, "mountPath": self.path})
