"""What a session leaves on the plugin and action instances that outlive it.

A ``Scheduler`` keeps its configuration's plugin and action instances across sessions
(``cycle.Kit``); every plugin and action sets its per-session state anew when a session opens
or the action runs. What a session set on them must go with the session: a kept instance would
otherwise hold the last session (its events, reasons, node copies and journal) until the next
one replaced it, and a session's own plugins could hold it in a reference cycle (session,
hooks, plugin, session) that only Python's cyclic collector frees.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

__all__ = ["constructed", "forget_sessions"]

T = TypeVar("T")

#: the instance attribute naming what a plugin or action held when built (``constructed``)
_BUILT = "_built_attributes"


def constructed(obj: T) -> T:
    """``obj``, a plugin or action just built, with the names of its attributes noted: what
    ``forget_sessions`` leaves on it."""
    attributes = obj.__dict__
    attributes[_BUILT] = frozenset([*attributes, _BUILT])
    return obj


def forget_sessions(objs: Iterable[object]) -> None:
    """Drop from each of ``objs`` every attribute set on it since it was built
    (``constructed``; an object not built that way keeps everything): a session releases
    some twenty instances, one set difference each."""
    for obj in objs:
        attributes = obj.__dict__
        built = attributes.get(_BUILT)
        if built is not None:
            for name in attributes.keys() - built:
                del attributes[name]
