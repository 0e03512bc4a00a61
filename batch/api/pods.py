"""A pod's effective resource requests and limits, as kube-scheduler and the quota evaluator
compute them.

Why this exists: the scheduler (``batch.model``), the PodGroup minResources the controllers and
adapters derive, and the ledger must all count one pod the same way; this is the one place that
says how. For a PodSpec:

* each container requests its ``requests``, with ``limits`` standing in for a resource that has
  a limit and no request (the API server defaults requests that way);
* the pod holds, while it runs, the sum of its app containers plus its restartable init
  containers (sidecars, ``restartPolicy: Always``) plus ``spec.overhead``
  (:func:`running_requests`);
* before that, each plain init container runs alone beside the sidecars started before it; the
  pod's effective request is, per resource, the larger of the running sum and the largest such
  init step, plus the overhead (:func:`pod_requests`, kube-scheduler's ``PodRequests``).

Amounts are Tephra's internal integers (:mod:`batch.api.resources`). How a ResourceList is
parsed is the caller's choice (``parse``): strict by default, raising :class:`PodResourceError`
naming the field; a memoised parser on the scheduler's hot path, a tolerant one in the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from batch.api.quantity import QuantityError
from batch.api.resources import parse_resource_list
from batch.api.views import as_mapping

__all__ = [
    "ParseList",
    "PodResourceError",
    "container_limits",
    "container_requests",
    "pod_limits",
    "pod_requests",
    "running_requests",
    "strict_parse",
]

Amounts = dict[str, int]
#: Parses one ResourceList found at the field path ``where`` (e.g. ``container main: limits``).
ParseList = Callable[[Any, str], Mapping[str, int]]


class PodResourceError(QuantityError):
    """A quantity in a pod spec is malformed; the message starts with where it is."""


def strict_parse(rl: Any, where: str) -> Mapping[str, int]:
    """:func:`~batch.api.resources.parse_resource_list`, errors prefixed with ``where``."""
    try:
        return parse_resource_list(rl)
    except QuantityError as exc:
        raise PodResourceError(f"{where}: {exc}") from None


def _containers(pod_spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = pod_spec.get(key)
    if not isinstance(value, list):
        return []
    return [c for c in value if type(c) is dict or isinstance(c, Mapping)]


def container_requests(container: Mapping[str, Any], parse: ParseList = strict_parse) -> Amounts:
    """One container's requests: ``requests``, else ``limits`` per resource."""
    resources = as_mapping(container.get("resources"))
    merged = {**as_mapping(resources.get("limits")), **as_mapping(resources.get("requests"))}
    if not merged:
        return {}
    return dict(parse(merged, f"container {container.get('name', '?')}: resources"))


def container_limits(container: Mapping[str, Any], parse: ParseList = strict_parse) -> Amounts:
    """One container's ``limits``."""
    limits = as_mapping(as_mapping(container.get("resources")).get("limits"))
    if not limits:
        return {}
    return dict(parse(limits, f"container {container.get('name', '?')}: resources.limits"))


def _add(acc: Amounts, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        acc[name] = acc.get(name, 0) + amount


def _peak(acc: Amounts, candidate: Mapping[str, int]) -> None:
    for name, amount in candidate.items():
        if amount > acc.get(name, 0):
            acc[name] = amount


PerContainer = Callable[[Mapping[str, Any], ParseList], Amounts]


def _effective(
    pod_spec: Mapping[str, Any] | None, per_container: PerContainer, parse: ParseList
) -> tuple[Amounts, Amounts]:
    """(running sum without overhead, largest init step) of ``per_container`` amounts."""
    running: Amounts = {}
    if not pod_spec:
        return running, {}
    for container in _containers(pod_spec, "containers"):
        _add(running, per_container(container, parse))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for container in _containers(pod_spec, "initContainers"):
        amounts = per_container(container, parse)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, amounts)
            _peak(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, amounts)
            _peak(init_peak, step)
    _add(running, sidecars)
    return running, init_peak


def _overhead(pod_spec: Mapping[str, Any] | None, parse: ParseList) -> Mapping[str, int]:
    overhead = as_mapping((pod_spec or {}).get("overhead"))
    return parse(overhead, "spec.overhead") if overhead else {}


def running_requests(
    pod_spec: Mapping[str, Any] | None, parse: ParseList = strict_parse
) -> Amounts:
    """What the pod holds while it runs: app containers + sidecars + overhead."""
    running, _ = _effective(pod_spec, container_requests, parse)
    _add(running, _overhead(pod_spec, parse))
    return running


def pod_requests(pod_spec: Mapping[str, Any] | None, parse: ParseList = strict_parse) -> Amounts:
    """kube-scheduler's effective requests: max(running sum, init peak) + overhead."""
    running, init_peak = _effective(pod_spec, container_requests, parse)
    _peak(running, init_peak)
    _add(running, _overhead(pod_spec, parse))
    return running


def pod_limits(pod_spec: Mapping[str, Any] | None, parse: ParseList = strict_parse) -> Amounts:
    """Effective limits, by the same rule; overhead is added only to resources with a limit."""
    running, init_peak = _effective(pod_spec, container_limits, parse)
    _peak(running, init_peak)
    for name, amount in _overhead(pod_spec, parse).items():
        if name in running:
            running[name] += amount
    return running
