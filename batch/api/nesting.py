"""How deep a decoded document nests, found without recursion (any depth, no RecursionError).

Why this exists: hostile bodies nest thousands of levels deep; the webhook's admission and the
sandbox's decoder both refuse them before any recursive walk, with the one check here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["deeper_than"]


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists more than `limit` levels (iterative: any depth)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
