"""JSON merge patches (RFC 7386): the one place that computes and applies them.

Why this exists: every writer of a status or a spec (scheduler, controllers, simulator, sandbox)
speaks merge patches, and the rule that is easy to forget is that a key which left a map must be
sent as `null`, or the server keeps its old value. A queue's `allocated` map once kept
`nvidia.com/gpu: 2` after every job of the queue had ended because a writer sent only the keys
still present. Lists are replaced whole, as RFC 7386 says.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["apply_merge_patch", "merge_patch"]


def merge_patch(old: Any, new: Any) -> Any:
    """The merge patch turning `old` into `new` (None when nothing changes).

    Keys of `old` that `new` lacks are patched to None (removed), at every depth.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, Any] = {}
        for k, v in new.items():
            if k not in old:
                out[k] = v
            else:
                sub = merge_patch(old[k], v)
                if sub is not None:
                    out[k] = sub
        for k in old:
            if k not in new:
                out[k] = None
        return out or None
    if old == new:
        return None
    return new


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied (None deletes a key); a new value, `target` is untouched."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out
