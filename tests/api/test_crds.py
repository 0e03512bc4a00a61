"""Generated CRDs: in sync with `crds/`, structural, and accepting every served corpus file."""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from batch.api.admission import AssumeAllQueues, admit
from batch.api.crdgen import (
    _structural,
    crd_filename,
    generate_crds,
    openapi_schema,
    write_crds,
)
from batch.api.kinds import KINDS, kind_for_object

from .conftest import REPO, corpus_documents, make_job

CRD_DIR = REPO / "crds"


def test_committed_crds_are_up_to_date(tmp_path: Path) -> None:
    write_crds(tmp_path)
    generated = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in CRD_DIR.glob("*.yaml"))
    assert generated == committed, "crds/ has missing or extra files: run `make crds`"
    for name in generated:
        new = (tmp_path / name).read_text(encoding="utf-8")
        old = (CRD_DIR / name).read_text(encoding="utf-8")
        if new != old:
            diff = "".join(
                difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), f"crds/{name}", "generated", n=1
                )
            )
            pytest.fail(f"crds/{name} is out of date: run `make crds`\n{diff[:3000]}")


def test_generation_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_crds(a)
    write_crds(b)
    for p in a.iterdir():
        assert p.read_bytes() == (b / p.name).read_bytes()


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        out.append((path, node))
        for key in ("properties",):
            for k, v in node.get(key, {}).items():
                out += _walk(v, f"{path}.{k}")
        if isinstance(node.get("items"), dict):
            out += _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            out += _walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("info", KINDS, ids=lambda k: k.kind)
def test_schemas_are_structural(info: Any) -> None:
    schema = openapi_schema(info)
    for path, node in _walk(schema):
        assert "$ref" not in node and "$defs" not in node, path
        assert "title" not in node, path
        if "anyOf" in node:  # only int-or-string quantities
            assert node.get("x-kubernetes-int-or-string") is True, path
        else:
            assert "type" in node, f"{info.kind}{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("additionalProperties") is not True, path


def test_crd_metadata_matches_volcano() -> None:
    crds = generate_crds()
    job = crds["batch.volcano.sh_jobs.yaml"]
    assert job["metadata"]["name"] == "jobs.batch.volcano.sh"
    assert job["spec"]["names"]["shortNames"] == ["vcjob", "vj"]
    version = job["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    cols = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert cols == [
        ("STATUS", ".status.state.phase"),
        ("minAvailable", ".status.minAvailable"),
        ("RUNNINGS", ".status.running"),
        ("AGE", ".metadata.creationTimestamp"),
        ("QUEUE", ".spec.queue"),
    ]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["queue"]["default"] == "default"
    assert spec["maxRetry"] == {"default": 3, "minimum": 0, "type": "integer"}
    template = spec["tasks"]["items"]["properties"]["template"]
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    assert template["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    queue = crds["scheduling.volcano.sh_queues.yaml"]
    assert queue["spec"]["scope"] == "Cluster"
    assert queue["spec"]["names"]["shortNames"] == ["q", "queue-v1beta1"]
    qspec = queue["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    assert qspec["weight"] == {"default": 1, "maximum": 65535, "minimum": 1, "type": "integer"}
    assert qspec["capability"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    pg = crds["scheduling.volcano.sh_podgroups.yaml"]
    assert pg["spec"]["names"]["shortNames"] == ["pg", "podgroup-v1beta1"]
    assert set(crds) == {crd_filename(k) for k in KINDS}
    for crd in crds.values():
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"


#: the kinds whose CRD Volcano gives a status subresource (v1.10 and upstream alike): its
#: components write those with UpdateStatus, and PodGroups with a plain Update, which a status
#: subresource would strip of its status without an error; a Command has no status at all
VOLCANO_STATUS_SUBRESOURCE = {
    "Job": True,
    "CronJob": True,
    "Queue": True,
    "HyperNode": True,
    "PodGroup": False,
    "Command": False,
}


@pytest.mark.parametrize("info", KINDS, ids=lambda k: k.kind)
def test_status_subresources_are_volcanos(info: Any) -> None:
    """Drop-in both ways: Volcano's components keep working on the CRDs Tephra ships."""
    crd = generate_crds()[crd_filename(info)]
    for version in crd["spec"]["versions"]:
        has = "status" in (version.get("subresources") or {})
        assert has == VOLCANO_STATUS_SUBRESOURCE[info.kind], version["name"]


@functools.cache
def _validator(kind: str) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load(
        (CRD_DIR / crd_filename(next(k for k in KINDS if k.kind == kind))).read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def test_corpus_validates_against_generated_schemas(corpus: Path) -> None:
    checked = 0
    for rel, idx, doc in corpus_documents():
        info = kind_for_object(doc) if isinstance(doc, dict) else None
        if info is None:
            continue
        errors = [e.message for e in _validator(info.kind).iter_errors(doc)]
        if "invalid_jobs" in rel:
            # these pass the schema; the webhook (admission) is what rejects them
            result = admit(
                kind=info.kind, operation="CREATE", obj=doc, old=None, lookup=AssumeAllQueues()
            )
            assert not result.allowed, f"{rel}:{idx}"
        else:
            assert errors == [], f"{rel}:{idx}: {errors}"
        checked += 1
    assert checked >= 30


def test_schema_rejects_what_admission_rejects_by_type() -> None:
    validator = _validator("Job")
    bad = make_job(minAvailable=-1, queue="Not Valid")
    bad["spec"]["tasks"][0]["replicas"] = "two"
    messages = sorted(e.json_path for e in validator.iter_errors(bad))
    assert messages == ["$.spec.minAvailable", "$.spec.queue", "$.spec.tasks[0].replicas"]
    assert list(validator.iter_errors(make_job())) == []


def test_crds_are_valid_kubernetes_objects() -> None:
    import kubernetes_validate

    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        kubernetes_validate.validate(crd, "1.33", strict=True)  # raises on any unknown field
        assert crd["spec"]["scope"] in ("Namespaced", "Cluster")


def test_structural_schema_rules() -> None:
    """Every rewrite of a JSON-schema node into a structural one, on a hand-made schema."""
    defs = {"Ref": {"type": "object", "properties": {"a": {"type": "string", "title": "A"}}}}
    node = {
        "type": "object",
        "description": "dropped",
        "required": ["b", "a"],
        "properties": {
            "ref": {"$ref": "#/$defs/Ref", "description": "x"},
            "opt": {"anyOf": [{"type": "integer"}, {"type": "null"}], "x-tephra-default": 3},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
            "fixed": {"const": "v"},
            "map": {"type": "object", "additionalProperties": {"type": "integer", "default": 1}},
            "free": {"type": "object", "additionalProperties": True},
            "open": {"type": "object", "properties": {}, "additionalProperties": True},
            "list": {"type": "array", "items": {"$ref": "#/$defs/Ref"}},
            "enum": {"enum": ["x", "y"]},
        },
    }
    ref = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert _structural(node, defs) == {
        "type": "object",
        "required": ["a", "b"],
        "properties": {
            "ref": ref,
            "opt": {"type": "integer", "default": 3},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "fixed": {"enum": ["v"]},
            "map": {"type": "object", "additionalProperties": {"type": "integer"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "open": {"type": "object", "properties": {}},
            "list": {"type": "array", "items": ref},
            "enum": {"enum": ["x", "y"]},
        },
    }
    kept = {
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"s": {"type": "object", "properties": {}, "additionalProperties": True}},
    }
    assert _structural(kept, {})["properties"]["s"] == {
        "type": "object",
        "properties": {},
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert _structural(["a", 1], {}) == ["a", 1]
