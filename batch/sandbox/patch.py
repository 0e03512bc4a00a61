"""The PATCH flavours clients send: JSON merge patch, JSON patch and strategic merge patch.

Merge patch is RFC 7386, JSON patch RFC 6902 (as kube-apiserver's json-patch library: add,
replace, remove, move and copy need a non-empty path). Strategic merge patch is implemented for the
lists that carry `patchStrategy: merge` in the built-in kinds (containers by name, conditions by
type, ...), with the `$patch` directives `delete`/`replace` and `$deleteFromPrimitiveList/<field>`;
other lists (NodeSpec.taints, PodStatus.containerStatuses, tolerations, ...) are replaced, as for
fields without a patch strategy, and directives inside them are dropped, never stored as data.
All functions return new objects and never modify their inputs, because stored objects are shared
with readers.
`patched` applies the flavour a request's media type names (`PATCH_TYPES`; server-side apply
is `Core.patch` with `managed`).
"""

from __future__ import annotations

import copy
from typing import Any

from batch.api.mergepatch import apply_merge_patch
from batch.sandbox.errors import ApiError
from batch.sandbox.meta import ResourceType
from batch.sandbox.store import Obj

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# application/json first: taken as a merge patch, but not named among the accepted types
PATCH_TYPES = ("application/json", JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)

# field name -> merge key for lists merged by key in built-in kinds (`patchMergeKey` in
# k8s.io/api). Lists not named here have no patch strategy: a list in a patch replaces them.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
    "addresses": "type",
    "resourceClaims": "name",
    "resourceClaimStatuses": "name",
}
# primitive lists merged as sets.
MERGE_PRIMITIVES = frozenset({"finalizers"})


def _is_directive(key: str) -> bool:
    return key in ("$patch", "$retainKeys") or key.startswith(
        ("$setElementOrder/", "$deleteFromPrimitiveList/")
    )


def _data(value: Any) -> Any:
    """A copy of patch content stored as is, without the directives a typed decoder drops."""
    if isinstance(value, dict):
        return {k: _data(v) for k, v in value.items() if not _is_directive(k)}
    if isinstance(value, list):
        return [_data(v) for v in value]
    return value


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return _data(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _data(patch)
    if directive == "delete":
        return None
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            _delete_from_primitive_list(result, key.split("/", 1)[1], value)
        else:
            _patch_field(result, key, value)
    return result


def _delete_from_primitive_list(result: dict[str, Any], field: str, values: Any) -> None:
    if isinstance(result.get(field), list) and isinstance(values, list):
        result[field] = [v for v in result[field] if v not in values]


def _patch_field(result: dict[str, Any], key: str, value: Any) -> None:
    """One key of a strategic merge patch, applied to result in place."""
    if value is None:
        result.pop(key, None)
    elif isinstance(value, dict):
        merged = strategic_merge_patch(result.get(key), value)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    elif isinstance(value, list) and key in MERGE_KEYS:
        current = result.get(key)
        result[key] = _merge_list(
            current if isinstance(current, list) else [], value, _merge_key(key, value)
        )
    elif isinstance(value, list) and key in MERGE_PRIMITIVES and isinstance(result.get(key), list):
        merged_list = list(result[key])
        for v in value:
            if v not in merged_list:
                merged_list.append(v)
        result[key] = merged_list
    else:
        result[key] = _data(value)


def _merge_key(field: str, items: list[Any]) -> str:
    """The merge key of a list: a container's ports merge by containerPort, a Service's by port."""
    if field == "ports" and not any(isinstance(p, dict) and "containerPort" in p for p in items):
        return "port"
    return MERGE_KEYS[field]


def _merge_list(old: list[Any], patch: list[Any], mkey: str) -> list[Any]:
    out = list(old)
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_data(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    for item in patch:
        if not isinstance(item, dict) or mkey not in item:
            if not (isinstance(item, dict) and "$patch" in item):
                out.append(_data(item))
            continue
        idx = next(
            (i for i, o in enumerate(out) if isinstance(o, dict) and o.get(mkey) == item[mkey]),
            None,
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(strategic_merge_patch({}, item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict):
            if p not in cur:
                raise ApiError(422, f"json patch: missing path element {p!r}")
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError) as exc:
                raise ApiError(422, f"json patch: bad index {p!r}") from exc
        else:
            raise ApiError(422, f"json patch: cannot descend into {p!r}")
    return cur, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    try:
        return parent[last] if isinstance(parent, dict) else parent[int(last)]
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        raise ApiError(422, f"json patch: path {'/'.join(parts)!r} not found") from exc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts)
    try:
        if isinstance(parent, dict):
            return parent.pop(last)
        return parent.pop(int(last))
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        raise ApiError(422, f"json patch: cannot remove {'/'.join(parts)!r}") from exc


def _add(doc: Any, parts: list[str], value: Any, *, replace: bool) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"json patch: cannot replace missing key {last!r}")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError as exc:
                raise ApiError(422, f"json patch: bad index {last!r}") from exc
            if replace:
                if not 0 <= idx < len(parent):
                    raise ApiError(422, f"json patch: index {idx} out of range")
                parent[idx] = value
            else:
                if not 0 <= idx <= len(parent):
                    raise ApiError(422, f"json patch: index {idx} out of range")
                parent.insert(idx, value)
    else:
        raise ApiError(422, "json patch: target is not a container")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"invalid json patch operation: {op!r}")
        kind = op["op"]
        parts = _pointer(op["path"])
        if not parts and kind in ("add", "replace", "remove", "move", "copy"):
            # evanphx/json-patch v4 (kube-apiserver's) has no parent container for the root
            raise ApiError(
                422, f'{kind} operation does not apply: doc is missing path: "{op["path"]}"'
            )
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), replace=False)
        elif kind == "replace":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise ApiError(422, f"json patch: test failed at {op['path']}")
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            if not src:
                raise ApiError(
                    422, f'{kind} operation does not apply: doc is missing from path: ""'
                )
            value = copy.deepcopy(_get(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, parts, value, replace=False)
        else:
            raise ApiError(400, f"unknown json patch operation {kind!r}")
    return doc


def field_manager_required() -> ApiError:
    """An apply patch without ?fieldManager= (kube-apiserver's answer, word for word)."""
    return ApiError(
        422,
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch",
        details={
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        },
    )


def patched(rt: ResourceType, old: Obj, ctype: str, patch_body: Any) -> Obj:
    """``old`` with an ordinary patch (merge, JSON or strategic merge) applied."""
    if ctype == MERGE_PATCH or ctype == "application/json":
        if not isinstance(patch_body, dict):
            raise ApiError(400, "merge patch must be a JSON object")
        new = apply_merge_patch(copy.deepcopy(old), patch_body)
    elif ctype == JSON_PATCH:
        new = json_patch(old, patch_body)
    else:  # STRATEGIC_PATCH
        if rt.crd:
            raise ApiError(
                415,
                "strategic merge patch is not supported for custom "
                "resources; use a merge patch or a JSON patch",
            )
        if not isinstance(patch_body, dict):
            raise ApiError(400, "strategic merge patch must be a JSON object")
        new = strategic_merge_patch(copy.deepcopy(old), patch_body)
    if not isinstance(new, dict):
        raise ApiError(422, "the patch did not produce an object")
    return new
