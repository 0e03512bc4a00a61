"""CustomResourceDefinitions generated from the pydantic models (one source of truth).

`generate_crds()` builds one apiextensions.k8s.io/v1 CRD per served kind (`batch.api.kinds`):
a structural openAPIV3Schema derived from the model's JSON schema (references inlined,
Optional unwrapped, unknown fields pruned except where a model keeps them — pod templates and
PVC specs are `x-kubernetes-preserve-unknown-fields`), the status subresource, printer columns
and short names as Volcano's. `write_crds()` writes them as `<group>_<plural>.yaml`, with
sorted keys so that regeneration is byte-for-byte stable (a test diffs `crds/` against it).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from batch.api.kinds import KINDS, KindInfo

__all__ = ["crd_filename", "crd_for", "generate_crds", "openapi_schema", "render_crd", "write_crds"]

_DROP_KEYS = frozenset({"title", "default", "description", "examples"})
_DEFAULT_KEY = "x-tephra-default"


def _structural(node: Any, defs: dict[str, Any], keep: bool = False) -> Any:
    """A structural schema node. Unknown fields are pruned (as Volcano's CRDs do) but in free-form
    maps and below a model that keeps them (`keep`: a pod template keeps every core/v1 field
    Tephra does not model, however deep)."""
    if isinstance(node, list):
        return [_structural(n, defs, keep) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    ref = node.pop("$ref", None)
    if isinstance(ref, str):
        target = copy.deepcopy(defs[ref.rsplit("/", 1)[-1]])
        target.update(node)
        return _structural(target, defs, keep)
    unwrapped = _unwrap_optional(node)
    if unwrapped is not None:
        return _structural(unwrapped, defs, keep)
    keep = keep or node.get("x-kubernetes-preserve-unknown-fields") is True
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _DROP_KEYS:
            out.update(_structural_entry(key, value, node, defs, keep))
    return out


def _unwrap_optional(node: dict[str, Any]) -> dict[str, Any] | None:
    """An `anyOf` of one schema and null, merged into one schema (the node's own keys kept, its
    default too); None when there is nothing to unwrap. Drops null from a longer `anyOf`, in
    place."""
    any_of = node.get("anyOf")
    if not isinstance(any_of, list):
        return None
    rest = [s for s in any_of if s != {"type": "null"}]
    if len(rest) != 1:
        node["anyOf"] = rest
        return None
    node.pop("anyOf")
    merged = dict(rest[0])
    for key, value in node.items():
        merged.setdefault(key, value)
    if _DEFAULT_KEY in node:
        merged[_DEFAULT_KEY] = node[_DEFAULT_KEY]
    return merged


def _structural_entry(
    key: str, value: Any, node: dict[str, Any], defs: dict[str, Any], keep: bool
) -> dict[str, Any]:
    """What one key of a JSON-schema node becomes in the structural node (nothing, or one key)."""
    if key == _DEFAULT_KEY:
        return {"default": value}
    if key == "const":
        return {"enum": [value]}
    if key == "additionalProperties":
        if isinstance(value, dict):
            return {key: _structural(value, defs, keep)}
        if value is True and (keep or "properties" not in node):
            return {"x-kubernetes-preserve-unknown-fields": True}
        return {}
    if key == "properties":
        return {key: {k: _structural(v, defs, keep) for k, v in value.items()}}
    if key == "required":
        return {key: sorted(value)}
    if key in ("items", "anyOf"):
        return {key: _structural(value, defs, keep)}
    return {key: value}


def openapi_schema(info: KindInfo) -> dict[str, Any]:
    """The structural openAPIV3Schema of one kind."""
    raw = info.model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    schema: dict[str, Any] = _structural(raw, defs)
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    schema["type"] = "object"
    return schema


def crd_for(info: KindInfo) -> dict[str, Any]:
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(info)},
    }
    if info.status_subresource:
        version["subresources"] = {"status": {}}
    if info.printer_columns:
        version["additionalPrinterColumns"] = [c.to_crd() for c in info.printer_columns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": info.crd_name,
            "annotations": {"tephra.io/generated-by": "batch.api.crdgen (make crds)"},
        },
        "spec": {
            "group": info.group,
            "names": names,
            "scope": info.scope,
            "versions": [version],
        },
    }


def generate_crds() -> dict[str, dict[str, Any]]:
    """File name -> CRD object, for every served kind."""
    return {crd_filename(info): crd_for(info) for info in KINDS}


def crd_filename(info: KindInfo) -> str:
    return f"{info.group}_{info.plural}.yaml"


def render_crd(crd: dict[str, Any]) -> str:
    body = yaml.safe_dump(crd, sort_keys=True, default_flow_style=False, width=100)
    return "# Generated by `tephra crds` (make crds) from batch.api; do not edit.\n---\n" + body


def write_crds(out_dir: Path) -> list[Path]:
    """Write every CRD into `out_dir` (created if missing); returns the written paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, crd in sorted(generate_crds().items()):
        path = out_dir / name
        path.write_text(render_crd(crd), encoding="utf-8")
        written.append(path)
    return written
