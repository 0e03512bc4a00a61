"""Helpers shared by the per-kind admission modules: error collection, field paths, name and
duration grammars, schema (type) validation through the pydantic models, quantity comparison.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from batch.api.base import KubeModel
from batch.api.durations import is_go_duration
from batch.api.quantity import QuantityError, QuantityRangeError
from batch.api.resources import is_extended_resource, to_internal

from .types import FieldError

__all__ = [
    "Errors",
    "as_dict",
    "as_list",
    "check_amount",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_go_duration",
    "is_qualified_name",
    "join",
    "json_copy",
    "object_ref",
    "quantity_amount",
    "schema_validate",
]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and _DNS_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and _DNS_SUBDOMAIN.fullmatch(value) is not None


def is_qualified_name(value: str) -> bool:
    """Kubernetes "qualified name" without prefix: <= 63 chars, alnum at both ends."""
    return len(value) <= 63 and _QUALIFIED.fullmatch(value) is not None


def join(path: str, key: str | int) -> str:
    """Append a field name, list index or map key to a field path."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def object_ref(kind: str, obj: Mapping[str, Any], *, namespaced: bool) -> str:
    """`Kind ns/name` (or `Kind name` for cluster-scoped kinds) for error messages."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        gen = meta.get("generateName")
        name = f"{gen}*" if isinstance(gen, str) and gen else "<unnamed>"
    if not namespaced:
        return f"{kind} {name}"
    ns = meta.get("namespace")
    ns = ns if isinstance(ns, str) and ns else "default"
    return f"{kind} {ns}/{name}"


class Errors:
    """Collects `FieldError`s for one object."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.items: list[FieldError] = []

    def add(self, path: str, rule: str, message: str) -> None:
        self.items.append(FieldError(path=path, rule=rule, message=message, ref=self.ref))

    def __bool__(self) -> bool:
        return bool(self.items)


def as_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def as_list(value: Any) -> list[Any] | None:
    return value if isinstance(value, list) else None


_RULE_BY_PYDANTIC_TYPE = {
    "missing": "required",
    "literal_error": "enum",
    "greater_than_equal": "minimum",
    "greater_than": "minimum",
    "less_than_equal": "maximum",
    "less_than": "maximum",
    "string_too_long": "maxLength",
    "string_too_short": "minLength",
    "string_pattern_mismatch": "pattern",
    "too_short": "minItems",
    "too_long": "maxItems",
    "quantity": "quantity",
}


def _loc_path(loc: tuple[str | int, ...]) -> str:
    path = ""
    for part in loc:
        path = join(path, part)
    return path


def schema_validate(model: type[KubeModel], obj: Mapping[str, Any], errors: Errors) -> Any:
    """Validate `obj` strictly against `model` (types, enums, bounds, quantities).

    Returns the model instance, or None after adding one error per offending field.
    """
    try:
        return model.model_validate(obj, strict=True)
    except ValidationError as exc:
        seen: set[str] = set()
        for err in exc.errors(include_url=False):
            path = _loc_path(tuple(err["loc"]))
            if path in seen:
                continue
            seen.add(path)
            etype = str(err["type"])
            rule = _RULE_BY_PYDANTIC_TYPE.get(etype)
            if rule is None:
                rule = "type" if etype.endswith(("_type", "_parsing")) else etype
            errors.add(path, rule, str(err["msg"]))
        return None


def quantity_amount(resource: str, value: Any) -> int | None:
    """Internal integer amount of a quantity (see batch.api.resources), None when unparsable
    or beyond Kubernetes' bound."""
    amount = _amount(resource, value)
    return amount if isinstance(amount, int) else None


def check_amount(
    resource: str, value: Any, path: str, errors: Errors, *, whole_extended: bool = False
) -> int | None:
    """The internal amount of one ResourceList entry, or None after adding the error: not a
    quantity, negative, beyond Kubernetes' int64 bound, or (with `whole_extended`, as Kubernetes
    checks container resources) a fraction of an extended resource such as `nvidia.com/gpu`."""
    amount = _amount(resource, value)
    if isinstance(amount, tuple):
        errors.add(path, *amount)
        return None
    if amount < 0:
        errors.add(path, "nonNegative", f"quantity {value!r} must not be negative")
        return None
    if whole_extended and is_extended_resource(resource) and amount % 1000:
        errors.add(path, "integer", f"{value!r} must be an integer ({resource} is counted whole)")
        return None
    return amount


def _amount(resource: str, value: Any) -> int | tuple[str, str]:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return "quantity", f"invalid quantity {value!r}"
    return _cached_amount(resource, type(value).__name__, value)


@functools.lru_cache(maxsize=8192)
def _cached_amount(resource: str, _kind: str, value: str | int | float) -> int | tuple[str, str]:
    try:
        return to_internal(resource, value)
    except QuantityRangeError as exc:
        return "maxQuantity", str(exc)
    except (QuantityError, ValueError, OverflowError):
        return "quantity", f"invalid quantity {value!r}"


def json_copy(value: Any) -> Any:
    """Deep copy of a JSON-shaped value (dicts and lists copied, scalars shared)."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value
