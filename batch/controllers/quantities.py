"""Exact sums of Kubernetes resource quantities for PodGroup minResources.

The PodGroup's `minResources` is a ResourceList of quota-usage keys whose values are the sums of
pod requests (`volcano-semantics.md#job-podgroup-and-pods`). Sums are exact (Fractions), never
floats; parsing and
canonical formatting are `batch.api.quantity`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from batch.api import pods
from batch.api.quantity import Quantity, QuantityError, format_quantity as _api_format
from batch.api.resources import format_resource_list


class QuantityParseError(QuantityError):
    """A quantity string that does not follow the Kubernetes grammar."""


def parse(value: str | int | float) -> tuple[Fraction, bool]:
    """Parse a quantity (`batch.api.quantity`); returns (exact value, uses a binary suffix)."""
    if isinstance(value, bool):
        raise QuantityParseError(f"invalid quantity {value!r}")
    try:
        q = Quantity.parse(value)
    except QuantityError as exc:
        raise QuantityParseError(str(exc)) from None
    return q.value, q.format == "BinarySI"


def format_quantity(value: Fraction, *, binary: bool) -> str:
    """Kubernetes' canonical form: binary suffixes for memory-like sums, SI otherwise."""
    return _api_format(value, "BinarySI" if binary else "DecimalSI")


class ResourceSum:
    """Accumulates ResourceLists exactly, remembering whether a key used binary suffixes."""

    __slots__ = ("_binary", "_values")

    def __init__(self) -> None:
        self._values: dict[str, Fraction] = {}
        self._binary: dict[str, bool] = {}

    def add(self, rl: Mapping[str, Any] | None, *, times: int = 1, prefix: str = "") -> None:
        for name, raw in (rl or {}).items():
            value, binary = parse(raw)
            key = prefix + name
            self._values[key] = self._values.get(key, Fraction(0)) + value * times
            self._binary[key] = self._binary.get(key, False) or binary

    def add_count(self, key: str, n: int) -> None:
        self._values[key] = self._values.get(key, Fraction(0)) + n
        self._binary.setdefault(key, False)

    def to_list(self) -> dict[str, str]:
        return {
            k: format_quantity(v, binary=self._binary[k]) for k, v in sorted(self._values.items())
        }


def pod_request_lists(pod_spec: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """A pod's effective (requests, limits) as ResourceLists, by :mod:`batch.api.pods` (the
    rule kube-scheduler and the quota evaluator share: sidecars, init peak, overhead)."""
    return format_resource_list(pods.pod_requests(pod_spec)), format_resource_list(
        pods.pod_limits(pod_spec)
    )


def quota_keys(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Quota-usage keys for one pod, as Kubernetes' pod evaluator names them."""
    out: list[tuple[str, Any]] = [("count/pods", 1), ("pods", 1)]
    for name, value in requests.items():
        out.append((name, value))
        out.append((f"requests.{name}", value))
    for name, value in limits.items():
        if name in ("cpu", "memory", "ephemeral-storage"):
            out.append((f"limits.{name}", value))
    return out


def sum_lists(items: Iterable[tuple[str, Any]]) -> dict[str, str]:
    total = ResourceSum()
    for key, value in items:
        total.add({key: value})
    return total.to_list()
