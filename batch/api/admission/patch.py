"""RFC 6902 JSON patch from one JSON document to another (what a mutating webhook returns).

Small on purpose: objects are diffed key by key, lists element-wise when their lengths match and
replaced whole otherwise. Applying the patch to the source yields the target exactly.
"""

from __future__ import annotations

from typing import Any

__all__ = ["json_patch"]


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def json_patch(source: Any, target: Any) -> list[dict[str, Any]]:
    """Operations that turn `source` into `target`."""
    ops: list[dict[str, Any]] = []
    _diff(source, target, "", ops)
    return ops


def _diff(src: Any, dst: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if isinstance(src, dict) and isinstance(dst, dict):
        for key in src:
            if key not in dst:
                ops.append({"op": "remove", "path": f"{path}/{_escape(str(key))}"})
        for key, value in dst.items():
            sub = f"{path}/{_escape(str(key))}"
            if key not in src:
                ops.append({"op": "add", "path": sub, "value": value})
            else:
                _diff(src[key], value, sub, ops)
        return
    if isinstance(src, list) and isinstance(dst, list) and len(src) == len(dst):
        for i, (a, b) in enumerate(zip(src, dst, strict=True)):
            _diff(a, b, f"{path}/{i}", ops)
        return
    if type(src) is not type(dst) or src != dst:
        ops.append({"op": "replace", "path": path, "value": dst})
