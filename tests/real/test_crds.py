"""Tephra's CRDs on a real kube-apiserver: accepted as structural schemas, served with OpenAPI,
and every Volcano example of our kinds passes the real server's schema validation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.api.conftest import corpus_documents
from tests.real.conftest import Api, conditions

pytestmark = [pytest.mark.real, pytest.mark.xdist_group("real")]

OUR_GROUPS = ("batch.volcano.sh", "scheduling.volcano.sh", "bus.volcano.sh", "topology.volcano.sh")
CLUSTER_SCOPED = {"Queue", "HyperNode"}


def test_every_crd_is_a_structural_schema_with_accepted_names(api: Api, crds: list[str]) -> None:
    assert len(crds) == 6
    for name in crds:
        conds = conditions(api, name)
        assert "NonStructuralSchema" not in conds, (name, conds["NonStructuralSchema"])
        assert conds["NamesAccepted"]["status"] == "True", (name, conds["NamesAccepted"])


def explain(api: Api, field: str) -> str:
    """`kubectl explain FIELD`, waiting for the apiserver to publish the CRD's OpenAPI (async)."""
    deadline = time.monotonic() + 60
    while True:
        done = api.kubectl("explain", field, check=time.monotonic() > deadline)
        if done.returncode == 0:
            return done.stdout
        time.sleep(1)


def test_kubectl_explain_reads_the_crd_openapi(api: Api, crds: list[str]) -> None:
    explained = explain(api, "vcjob.spec.tasks")
    assert "minAvailable" in explained and "replicas" in explained, explained
    assert "weight" in explain(api, "queue.spec")
    assert "minMember" in explain(api, "podgroup.spec")


def corpus_objects() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for rel, index, doc in corpus_documents():
        if isinstance(doc, dict) and str(doc.get("apiVersion", "")).split("/")[0] in OUR_GROUPS:
            found.append((f"{rel}#{index}", doc))
    return found


def collection_path(api: Api, doc: dict[str, Any]) -> str:
    group_version = doc["apiVersion"]
    code, resources = api.request("GET", f"/apis/{group_version}")
    assert code == 200, resources
    plural = next(r["name"] for r in resources["resources"] if r["kind"] == doc["kind"])
    if doc["kind"] in CLUSTER_SCOPED:
        return f"/apis/{group_version}/{plural}"
    namespace = doc["metadata"].get("namespace", "default")
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    return f"/apis/{group_version}/namespaces/{namespace}/{plural}"


def test_volcano_examples_pass_the_real_schema_validation(api: Api, crds: list[str]) -> None:
    objects = corpus_objects()
    assert len(objects) >= 20, "the Volcano corpus lost its examples"
    refused = {}
    for where, doc in objects:
        code, answer = api.request("POST", collection_path(api, doc) + "?dryRun=All", doc)
        # AlreadyExists comes from storage, after validation passed (a `default` queue made
        # by a scheduler an earlier test of the shared control plane ran)
        if code != 201 and not (code == 409 and answer.get("reason") == "AlreadyExists"):
            refused[where] = answer.get("message")
    assert not refused, refused


def test_a_protected_group_needs_the_approval_annotation(api: Api) -> None:
    """A divergence (docs/sandbox.md): kube-apiserver refuses a CRD of a `*.k8s.io` group without
    `api-approved.kubernetes.io`; the sandbox stores it."""
    from batch.sandbox.testing import run_sandbox
    from tests.real.conftest import json_request

    path = Path(__file__).resolve().parents[1] / "integrations" / "fixtures" / "crds"
    crd = yaml.safe_load((path / "sparkapplications.yaml").read_text())
    crd["metadata"]["name"] = "probes.sparkoperator.k8s.io"
    crd["spec"]["names"] = {"plural": "probes", "singular": "probe", "kind": "Probe"}
    url = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    code, answer = api.request("POST", url, crd)
    assert code == 422 and "api-approved.kubernetes.io" in answer["message"], answer
    with run_sandbox(install_crds=False) as sb:
        code, answer = json_request(sb.url + url, "POST", crd)
    assert code == 201, answer
