"""The sandbox's OpenAPI v3 and v2 documents, so kubectl validates and explains as on a cluster.

Why this exists: without them `kubectl apply` refuses to run unless told `--validate=false`
(which then drops a typo such as `minAvaliable` silently) and `kubectl explain` fails. kubectl
asks `/openapi/v3` whether a kind's PATCH takes the `fieldValidation` query parameter; when it
does, kubectl leaves validation to the server (the sandbox refuses unknown fields of custom
resources as kube-apiserver does) and `kubectl explain` reads the kind's schema from the same
document. Custom resources take their schema from their CRD; built-in kinds from the models of
the official Python client (the same OpenAPI definitions, carried with their descriptions).

Documents are built on the first request for a group-version and kept until the served types
change (a CRD created, changed or deleted).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from batch.sandbox.meta import ResourceType

__all__ = ["OpenAPI", "builtin_structural"]

Obj = dict[str, Any]

_REF = "#/components/schemas/"
_OBJECT_META = "V1ObjectMeta"


def _gvk(rt: ResourceType) -> Obj:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _model_name(rt: ResourceType) -> str | None:
    """The official client's model class for a built-in kind (``CoreV1Event``, ``V1Pod``)."""
    from kubernetes.client import models

    version = rt.version[0].upper() + rt.version[1:]
    prefix = (rt.group.split(".")[0] or "core").capitalize()
    for name in (f"{prefix}{version}{rt.kind}", f"{version}{rt.kind}"):
        if hasattr(models, name):
            return name
    return None


def _tidy(node: Any) -> Any:
    """A pydantic JSON schema in the shape of Kubernetes' OpenAPI: optional fields without the
    ``anyOf [X, null]`` wrapper, no titles or null defaults."""
    if isinstance(node, list):
        return [_tidy(n) for n in node]
    if not isinstance(node, dict):
        return node
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        kept = [a for a in any_of if a != {"type": "null"}]
        if len(kept) == 1:
            merged = {k: v for k, v in node.items() if k != "anyOf"}
            merged.update(kept[0])
            node = merged
    out: Obj = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "additionalProperties" and value is False:
            continue
        out[key] = _tidy(value) if key != "properties" else {k: _tidy(v) for k, v in value.items()}
    return out


@functools.cache
def _builtin_schemas(model: str) -> dict[str, Obj]:
    """``model``'s schema and every schema it refers to, keyed by model name."""
    from kubernetes.client import models

    cls = getattr(models, model)
    raw = cls.model_json_schema(by_alias=True, ref_template=_REF + "{model}")
    defs = raw.pop("$defs", {})
    out = {name: _tidy(schema) for name, schema in defs.items()}
    out[model] = _tidy(raw)
    return out


def _inline(node: Any, defs: Mapping[str, Obj], seen: tuple[str, ...]) -> Any:
    """``node`` with every ``$ref`` replaced by its definition; a definition met again inside
    itself (a recursive type) keeps unknown fields, as it cannot be spelled out."""
    if isinstance(node, list):
        return [_inline(n, defs, seen) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF):
        name = ref[len(_REF) :]
        if name in seen or name not in defs:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return _inline(defs[name], defs, (*seen, name))
    out = {k: _inline(v, defs, seen) for k, v in node.items()}
    if "allOf" in out and len(out["allOf"]) == 1:
        out = {**out.pop("allOf")[0], **out}
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def builtin_structural(rt: ResourceType) -> Obj | None:
    """A built-in kind's schema with every reference spelled out, for the unknown-field check
    of ``fieldValidation`` (None: the official client has no model for the kind)."""
    model = _model_name(rt)
    return None if model is None else _structural(model)


@functools.cache
def _structural(model: str) -> Obj:
    defs = _builtin_schemas(model)
    inlined: Obj = _inline(defs[model], defs, (model,))
    return inlined


def _custom_schema(rt: ResourceType) -> Obj:
    """A custom resource's schema from its CRD, with the standard fields described."""
    schema: Obj = json.loads(json.dumps(rt.schema or {"type": "object"}))
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion of the object."}
    props["kind"] = {"type": "string", "description": "Kind of the object."}
    props["metadata"] = {
        "allOf": [{"$ref": _REF + _OBJECT_META}],
        "description": "Standard object's metadata.",
    }
    schema.setdefault("type", "object")
    return schema


def _schemas_for(types: Iterable[ResourceType]) -> tuple[dict[str, Obj], dict[str, str]]:
    """Component schemas of ``types`` and, per kind, the name of its schema."""
    schemas: dict[str, Obj] = {}
    names: dict[str, str] = {}
    for rt in types:
        if rt.crd:
            name = f"{rt.group}.{rt.version}.{rt.kind}"
            schemas[name] = _custom_schema(rt)
            schemas.update(_builtin_schemas(_OBJECT_META))
        else:
            model = _model_name(rt)
            if model is None:
                continue
            name = model
            schemas.update(_builtin_schemas(model))
        schemas[name] = {**schemas[name], "x-kubernetes-group-version-kind": [_gvk(rt)]}
        names[rt.kind] = name
    return schemas, names


_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string"}, "description": text}
    for name, text in (
        ("dryRun", "When present, modifications are not persisted. Valid value: All."),
        ("fieldManager", "A name for the actor making these changes."),
        ("fieldValidation", "Ignore, Warn or Strict: what to do with unknown fields."),
    )
]


def _operation(rt: ResourceType, verb: str, schema: str) -> Obj:
    content = {"application/json": {"schema": {"$ref": _REF + schema}}}
    op: Obj = {
        "operationId": f"{verb}{rt.kind}",
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": _gvk(rt),
        "responses": {"200": {"description": "OK", "content": content}},
    }
    if verb in ("post", "put", "patch"):
        op["parameters"] = list(_PARAMETERS)
        op["requestBody"] = {"content": content}
    return op


def _paths(rt: ResourceType, schema: str) -> Obj:
    base = "/" + _gv_path(rt.group, rt.version)
    scope = f"{base}/namespaces/{{namespace}}" if rt.namespaced else base
    collection = f"{scope}/{rt.plural}"
    return {
        collection: {
            "get": _operation(rt, "list", schema),
            "post": _operation(rt, "post", schema),
        },
        f"{collection}/{{name}}": {
            "get": _operation(rt, "get", schema),
            "put": _operation(rt, "put", schema),
            "patch": _operation(rt, "patch", schema),
            "delete": _operation(rt, "delete", schema),
        },
    }


Types = Mapping[tuple[str, str, str], ResourceType]


class OpenAPI:
    """The documents for the types a sandbox serves (``types``: a snapshot of its registry),
    kept per group-version until its types change."""

    def __init__(self) -> None:
        self._docs: dict[str, tuple[str, Obj]] = {}

    @staticmethod
    def _group_versions(types: Types) -> dict[str, list[ResourceType]]:
        out: dict[str, list[ResourceType]] = {}
        for (group, version, plural), rt in sorted(types.items()):
            if rt.virtual or "/" in plural or plural == "bindings":
                continue
            out.setdefault(_gv_path(group, version), []).append(rt)
        return out

    @staticmethod
    def _key(types: list[ResourceType]) -> str:
        blob = json.dumps(
            [(rt.kind, rt.plural, rt.namespaced, rt.schema) for rt in types],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16].upper()

    def v3_index(self, types: Types) -> Obj:
        paths = {
            gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={self._key(served)}"}
            for gv, served in self._group_versions(types).items()
        }
        return {"paths": paths}

    def v3(self, gv: str, types: Types) -> Obj | None:
        """The document of one group-version (``api/v1``, ``apis/batch.volcano.sh/v1alpha1``)."""
        served = self._group_versions(types).get(gv)
        if served is None:
            return None
        key = self._key(served)
        kept = self._docs.get(gv)
        if kept is not None and kept[0] == key:
            return kept[1]
        schemas, names = _schemas_for(served)
        paths: Obj = {}
        for rt in served:
            if rt.kind in names:
                paths.update(_paths(rt, names[rt.kind]))
        doc: Obj = {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes (Tephra sandbox)", "version": "v1.32.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        }
        self._docs[gv] = (key, doc)
        return doc

    def v2(self, types: Types) -> Obj:
        """One Swagger 2.0 document of every kind (definitions and paths), for v2 clients."""
        definitions: Obj = {}
        paths: Obj = {}
        for gv in self._group_versions(types):
            doc = self.v3(gv, types) or {}
            definitions.update(doc.get("components", {}).get("schemas", {}))
            paths.update(doc.get("paths", {}))
        text = json.dumps({"definitions": definitions, "paths": paths})
        text = text.replace('"' + _REF, '"#/definitions/')
        body: Obj = json.loads(text)
        for item in body["paths"].values():
            for op in item.values():
                op.pop("requestBody", None)
                for param in op.get("parameters", []):
                    param["type"] = param.pop("schema", {}).get("type", "string")
                for response in op.get("responses", {}).values():
                    content = response.pop("content", {})
                    if "application/json" in content:
                        response["schema"] = content["application/json"]["schema"]
        return {
            "swagger": "2.0",
            "info": {"title": "Kubernetes (Tephra sandbox)", "version": "v1.32.0"},
            **body,
        }
