"""What the chaos tier's tests share: the VCJob they submit (each test starts its own sandbox)."""

from __future__ import annotations

from typing import Any

B = ("batch.volcano.sh", "v1alpha1")


def vcjob(name: str, *, replicas: int = 3, run: float = 0.3, cpu: str = "100m") -> dict[str, Any]:
    """A gang of `replicas` pods (minAvailable = replicas) that each run `run` seconds."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": "w",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {"sandbox.tephra.io/run-seconds": str(run)}},
                        "spec": {"restartPolicy": "Never", "containers": [container]},
                    },
                }
            ],
        },
    }
