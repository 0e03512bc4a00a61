"""The queue tree as the scheduler reads it: a Queue's ``spec.parent``.

capacity's hierarchical mode and proportion's fair share (``fairShare: true``) both hang queues
under their parents; this is where a queue's parent is read, so both read the same tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from batch.model.info import QueueInfo
from batch.model.parse import ROOT_QUEUE


def parent_of(q: QueueInfo) -> str | None:
    """``q``'s parent queue: none for root; root for a queue that names none (Volcano's
    defaulting, which Tephra's queue controller also writes)."""
    if q.name == ROOT_QUEUE:
        return None
    return q.parent or ROOT_QUEUE


def resolved_parents(queues: Mapping[str, QueueInfo]) -> dict[str, str]:
    """Every queue but root with its parent; root for a queue whose parent does not exist or
    that is its own ancestor (a cycle, which queue admission refuses but a stale cache may
    still show)."""
    declared = {name: parent_of(q) for name, q in queues.items()}
    out: dict[str, str] = {}
    for name, parent in declared.items():
        if parent is not None:
            lost = parent not in queues or _in_cycle(name, declared)
            out[name] = ROOT_QUEUE if lost else parent
    return out


def _in_cycle(name: str, declared: Mapping[str, str | None]) -> bool:
    seen: set[str] = set()
    node = declared.get(name)
    while node is not None and node not in seen:
        if node == name:
            return True
        seen.add(node)
        node = declared.get(node)
    return False
