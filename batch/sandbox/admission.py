"""Bridge from the sandbox's write path to Tephra's in-process admission (`batch.api.admission`).

The production webhook and the sandbox call the same `admit()` function, so a VCJob rejected by
the sandbox is rejected by a real cluster with Tephra installed. The lookup it needs (queues,
namespaces) is answered from the sandbox store, and carries the sandbox's admission size limits
(`SandboxOptions.admission_limits`). If `batch.api.admission` is not importable the sandbox admits
everything (schema checks still apply) and says so once in the log.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
from collections.abc import Callable
from typing import Any

from batch.sandbox.errors import ApiError, Cause, invalid
from batch.sandbox.pod_annotations import EXIT_CODE, RUN_SECONDS

log = logging.getLogger(__name__)

# (group, kind) pairs whose writes go through Tephra admission.
TEPHRA_KINDS = frozenset(
    {
        ("batch.volcano.sh", "Job"),
        ("batch.volcano.sh", "CronJob"),
        ("scheduling.volcano.sh", "Queue"),
        ("scheduling.volcano.sh", "PodGroup"),
        ("bus.volcano.sh", "Command"),
        ("topology.volcano.sh", "HyperNode"),
        ("", "Pod"),
    }
)


class StoreLookup:
    """The `lookup` protocol of `batch.api.admission.admit`, answered from the store; `limits` are
    the `AdmissionLimits` this sandbox admits with (None: admission's defaults)."""

    def __init__(
        self,
        get: Callable[[str, str, str], dict[str, Any] | None],
        list_all: Callable[[str], list[dict[str, Any]]],
    ) -> None:
        self._get = get
        self._list = list_all
        self.limits: Any = None

    def get_queue(self, name: str) -> dict[str, Any] | None:
        return self._get("queues.scheduling.volcano.sh", "", name)

    def list_queues(self) -> list[dict[str, Any]]:
        return self._list("queues.scheduling.volcano.sh")

    def get_namespace(self, name: str) -> dict[str, Any] | None:
        return self._get("namespaces", "", name)


_admit: Callable[..., Any] | None = None
_loaded = False


def _load() -> Callable[..., Any] | None:
    global _admit, _loaded
    if not _loaded:
        _loaded = True
        try:
            module = importlib.import_module("batch.api.admission")
            _admit = getattr(module, "admit", None)
        except ImportError:
            _admit = None
        if _admit is None:
            log.warning(
                "batch.api.admission.admit is not available; Tephra kinds are admitted "
                "without defaulting or validation"
            )
    return _admit


def admit(
    *,
    group: str,
    kind: str,
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None,
    lookup: StoreLookup,
) -> dict[str, Any] | None:
    """Run admission; return the (possibly defaulted) object or raise a 422 ApiError."""
    if (group, kind) not in TEPHRA_KINDS:
        return obj
    _check_emulator_annotations(kind, obj)
    if kind == "Pod" and not _volcano_pod(obj):
        # Tephra's pod admission only looks at Volcano's pod annotations (job disruption
        # budgets); skipping other pods keeps pod creation fast and changes no outcome.
        return obj
    fn = _load()
    if fn is None:
        return obj
    sized = {"limits": lookup.limits} if lookup.limits is not None else {}
    result = fn(kind=kind, operation=operation, obj=obj, old=old, lookup=lookup, **sized)
    if not getattr(result, "allowed", True):
        errors = list(getattr(result, "errors", []) or [])
        causes = [
            Cause(
                str(getattr(e, "path", "")),
                _reason(str(getattr(e, "rule", ""))),
                str(getattr(e, "message", "")),
            )
            for e in errors
        ] or [Cause("", "FieldValueForbidden", "denied by Tephra admission")]
        name = str(((obj or old or {}).get("metadata") or {}).get("name", ""))
        raise invalid(kind, group, name, causes)
    new_obj = getattr(result, "object", None)
    return new_obj if isinstance(new_obj, dict) else obj


@functools.lru_cache(maxsize=1)
def _adapters() -> tuple[Any, ...]:
    from batch.api.integration import load_adapters

    return tuple(load_adapters())


def inject_gang(pod: dict[str, Any], namespace_obj: dict[str, Any] | None) -> None:
    """The opt-in mutating pod webhook (`tephra webhook`), in process: in a namespace that opted
    into gang injection, a pod a framework adapter claims gets its gang (schedulerName, group
    annotation). Pods in other namespaces cost one label lookup."""
    from batch.api.integration import apply_gang_injection, gang_injection_enabled

    if not gang_injection_enabled(namespace_obj):
        return
    apply_gang_injection(pod, namespace_obj=namespace_obj, adapters=_adapters())


def _check_emulator_annotations(kind: str, obj: dict[str, Any] | None) -> None:
    """The node emulator's annotations, on a pod or a VCJob's pod templates: run-seconds a
    finite number >= 0 (`nan` ran for ever, or broke the emulator's timer), exit-code an
    integer 0..255. A field error, as any admission rule."""
    if kind == "Pod":
        places = [("metadata.annotations", (obj or {}).get("metadata"))]
    elif kind == "Job":
        tasks = ((obj or {}).get("spec") or {}).get("tasks")
        places = [
            (
                f"spec.tasks[{i}].template.metadata.annotations",
                (t.get("template") or {}).get("metadata"),
            )
            for i, t in enumerate(tasks if isinstance(tasks, list) else [])
            if isinstance(t, dict) and isinstance(t.get("template"), dict)
        ]
    else:
        return
    causes = [c for path, meta in places for c in _annotation_causes(path, meta)]
    if causes:
        name = str(((obj or {}).get("metadata") or {}).get("name", ""))
        raise invalid(kind, "" if kind == "Pod" else "batch.volcano.sh", name, causes)


def _annotation_causes(path: str, meta: Any) -> list[Cause]:
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(ann, dict):
        return []
    out: list[Cause] = []
    seconds = ann.get(RUN_SECONDS)
    if seconds is not None and not _seconds_ok(seconds):
        message = f"Invalid value: {seconds!r}: must be a finite number of seconds >= 0"
        out.append(Cause(f"{path}[{RUN_SECONDS}]", "FieldValueInvalid", message))
    code = ann.get(EXIT_CODE)
    if code is not None and not (isinstance(code, str) and code.isdigit() and int(code) <= 255):
        message = f"Invalid value: {code!r}: must be an exit code, an integer 0..255"
        out.append(Cause(f"{path}[{EXIT_CODE}]", "FieldValueInvalid", message))
    return out


def _seconds_ok(value: Any) -> bool:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(seconds) and seconds >= 0


def _volcano_pod(obj: dict[str, Any] | None) -> bool:
    ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return isinstance(ann, dict) and any("volcano.sh/" in str(k) for k in ann)


def _reason(rule: str) -> str:
    mapping = {
        "required": "FieldValueRequired",
        "duplicate": "FieldValueDuplicate",
        "enum": "FieldValueNotSupported",
        "not-supported": "FieldValueNotSupported",
        "forbidden": "FieldValueForbidden",
        "immutable": "FieldValueForbidden",
        "not-found": "FieldValueNotFound",
    }
    return mapping.get(rule, "FieldValueInvalid")


__all__ = ["TEPHRA_KINDS", "ApiError", "StoreLookup", "admit"]
