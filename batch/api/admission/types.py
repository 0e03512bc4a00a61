"""The admission interface shared by the webhook server, the sandbox, the CLI and the simulator.

`admit()` (in `batch.api.admission`) takes a raw object and returns an `AdmissionResult`: the
defaulted object, the RFC 6902 patch that produced it, and the violated rules as `FieldError`s.
Queue and namespace facts come from an `AdmissionLookup`; `StaticLookup` and `AssumeAllQueues`
serve offline use (`tephra validate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from batch.api.constants import DEFAULT_QUEUE, QUEUE_OPEN, ROOT_QUEUE, SCHEDULING_GROUP

__all__ = [
    "AdmissionLookup",
    "AdmissionResult",
    "AssumeAllQueues",
    "FieldError",
    "StaticLookup",
    "builtin_queue",
]


class AdmissionLookup(Protocol):
    """What admission needs to know about the cluster (raw Kubernetes dicts)."""

    def get_queue(self, name: str) -> Mapping[str, Any] | None: ...

    def list_queues(self) -> Iterable[Mapping[str, Any]]: ...

    def get_namespace(self, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class FieldError:
    """One violated rule: the field path (`spec.tasks[1].minAvailable`), a rule id, a message.

    `ref` names the object (`Job ns/name`); `str()` gives the whole error on one line.
    """

    path: str
    rule: str
    message: str
    ref: str = ""

    def __str__(self) -> str:
        where = _printable(self.path) or "(object)"
        head = f"{_printable(self.ref)}: " if self.ref else ""
        return f"{head}{where}: {self.rule} ({_one_line(self.message)})"


def _one_line(text: str) -> str:
    return _printable(" ".join(text.split()))


def _printable(text: str) -> str:
    """Escape control characters so that an error stays on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass
class AdmissionResult:
    """Outcome of `admit`: allowed or not, the defaulted object, errors and the JSON patch.

    `early` marks a refusal by size (`bounds.py`) made before any defaulting: `object` is then
    empty, and a mutating webhook refuses too rather than answer an unchanged object."""

    allowed: bool
    object: dict[str, Any]
    errors: list[FieldError] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)
    early: bool = False

    def messages(self) -> list[str]:
        """One line per error (object, field path, rule, message)."""
        return [str(e) for e in self.errors]


def builtin_queue(name: str, *, parent: str | None = None) -> dict[str, Any]:
    """A minimal Open queue object, as the scheduler creates `root` and `default`."""
    spec: dict[str, Any] = {"weight": 1, "reclaimable": name != ROOT_QUEUE}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": f"{SCHEDULING_GROUP}/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": QUEUE_OPEN},
    }


class StaticLookup:
    """A lookup over fixed lists of Queue and Namespace dicts.

    With `builtin_queues=True` (default) `root` and `default` exist even when not listed, as on
    every Volcano cluster.
    """

    def __init__(
        self,
        queues: Iterable[Mapping[str, Any]] = (),
        namespaces: Iterable[Mapping[str, Any]] = (),
        *,
        builtin_queues: bool = True,
    ) -> None:
        self._queues: dict[str, Mapping[str, Any]] = {}
        if builtin_queues:
            self._queues[ROOT_QUEUE] = builtin_queue(ROOT_QUEUE)
            self._queues[DEFAULT_QUEUE] = builtin_queue(DEFAULT_QUEUE, parent=ROOT_QUEUE)
        for q in queues:
            name = _name_of(q)
            if name:
                self._queues[name] = q
        self._namespaces: dict[str, Mapping[str, Any]] = {}
        for ns in namespaces:
            name = _name_of(ns)
            if name:
                self._namespaces[name] = ns

    def get_queue(self, name: str) -> Mapping[str, Any] | None:
        return self._queues.get(name)

    def list_queues(self) -> Iterable[Mapping[str, Any]]:
        return list(self._queues.values())

    def get_namespace(self, name: str) -> Mapping[str, Any] | None:
        return self._namespaces.get(name)


class AssumeAllQueues:
    """A lookup in which every queue exists, is Open and is a leaf; no namespace has annotations."""

    def get_queue(self, name: str) -> Mapping[str, Any] | None:
        return builtin_queue(name)

    def list_queues(self) -> Iterable[Mapping[str, Any]]:
        return []

    def get_namespace(self, name: str) -> Mapping[str, Any] | None:
        return None


def _name_of(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else None
