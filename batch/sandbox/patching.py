"""PATCH bodies: the media types taken, and an ordinary patch (merge, JSON, strategic merge)
applied to an object (server-side apply is `Core.patch` with `managed`)."""

from __future__ import annotations

import copy
from typing import Any

from batch.api.mergepatch import apply_merge_patch
from batch.sandbox.errors import ApiError
from batch.sandbox.meta import ResourceType
from batch.sandbox.patch import json_patch, strategic_merge_patch
from batch.sandbox.store import Obj

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# application/json first: taken as a merge patch, but not named among the accepted types
PATCH_TYPES = ("application/json", JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)


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
