"""The sandbox's OpenAPI documents (what kubectl reads to validate and explain)."""

from __future__ import annotations

from typing import Any

from batch.sandbox.core import Core
from batch.sandbox.crds import load_crds
from batch.sandbox.openapi import OpenAPI, builtin_structural
from batch.sandbox.runtime import install_objects
from batch.sandbox.schema import unknown_fields


def _core() -> Core:
    core = Core()
    install_objects(core, load_crds())
    return core


def test_every_served_kind_takes_field_validation_on_patch() -> None:
    core = _core()
    api = OpenAPI()
    index = api.v3_index(core.types)["paths"]
    assert "api/v1" in index and "apis/batch.volcano.sh/v1alpha1" in index
    for gv in ("api/v1", "apis/batch.volcano.sh/v1alpha1"):
        doc = api.v3(gv, core.types)
        assert doc is not None
        kinds = set()
        for item in doc["paths"].values():
            patch: dict[str, Any] | None = item.get("patch")
            if patch is None:
                continue
            names = {p["name"] for p in patch["parameters"] if p["in"] == "query"}
            assert "fieldValidation" in names
            kinds.add(patch["x-kubernetes-group-version-kind"]["kind"])
        assert ("Pod" if gv == "api/v1" else "Job") in kinds
        schemas = doc["components"]["schemas"]
        for schema in schemas.values():
            for ref in _refs(schema):  # every reference resolves inside the document
                assert ref.removeprefix("#/components/schemas/") in schemas


def test_a_document_changes_with_its_crds_only() -> None:
    core = _core()
    api = OpenAPI()
    first = api.v3_index(core.types)["paths"]["apis/batch.volcano.sh/v1alpha1"]
    assert api.v3_index(core.types)["paths"]["apis/batch.volcano.sh/v1alpha1"] == first
    assert api.v3("apis/no.such/v1", core.types) is None


def test_v2_has_definitions_for_the_same_kinds() -> None:
    doc = OpenAPI().v2(_core().types)
    assert doc["swagger"] == "2.0"
    assert "V1Pod" in doc["definitions"]
    assert "#/components" not in str(doc)


def test_builtin_unknown_fields_use_the_client_models() -> None:
    pod_type = next(rt for rt in _core().types.values() if rt.kind == "Pod" and rt.group == "")
    structural = builtin_structural(pod_type)
    assert structural is not None
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {
            "restartPolicyy": "Never",
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
            "nodeSelector": {"any": "key"},
        },
    }
    assert unknown_fields(pod, structural) == ["spec.restartPolicyy"]


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []
