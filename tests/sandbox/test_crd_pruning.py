"""The generated VCJob CRD must not prune what users put in pod templates.

A real API server prunes every field its structural schema does not know; the sandbox does the
same. Containers carry far more than Tephra types (command, env, volumeMounts, ...), so they must
survive a round trip through the CRD schema.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from batch.sandbox.schema import prune_and_default

ROOT = Path(__file__).resolve().parents[2]


def test_job_template_fields_survive_pruning() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "batch.volcano.sh_jobs.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", "echo hi"],
        "args": ["--x"],
        "env": [{"name": "A", "value": "1"}],
        "imagePullPolicy": "IfNotPresent",
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"requests": {"cpu": "1"}},
    }
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [copy.deepcopy(container)],
                            "volumes": [{"name": "data", "emptyDir": {}}],
                        }
                    },
                }
            ],
        },
    }
    prune_and_default(job, schema)
    kept = job["spec"]["tasks"][0]["template"]["spec"]
    assert kept["containers"][0] == container
    assert kept["volumes"] == [{"name": "data", "emptyDir": {}}]
