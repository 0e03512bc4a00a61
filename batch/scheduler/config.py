"""Loader for Volcano's ``volcano-scheduler.conf`` (docs/volcano-semantics.md#configuration),
unchanged format.

``load_config(text)`` parses the YAML (``actions`` string, ``tiers[].plugins[]`` with Volcano's
exact enable-switch keys and ``arguments``, ``configurations[]`` per action, ``metrics``) and
validates it completely: unknown actions, plugins or keys, wrong types, bad plugin arguments and
proportion + hierarchical drf in one tier each raise ``ConfigError`` with a message naming the
problem. Unlike Volcano, a bad file is never silently replaced by the default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import yaml

import batch.scheduler.builtins  # noqa: F401 (fills PLUGINS and ACTIONS, read below)
from batch.api.yamlio import yaml_error_summary
from batch.scheduler.framework.arguments import MAX_WEIGHT, Arguments, ConfigError, check_arguments
from batch.scheduler.framework.conf import (
    GATES,
    SWITCHES,
    PluginOption,
    SchedulerConfig,
    Tier,
)
from batch.scheduler.framework.registry import ACTIONS, PLUGINS

_TOP_KEYS = {"actions", "tiers", "configurations", "metrics"}


def _as_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None
    except OverflowError:
        return math.inf


def _is_weight(key: str) -> bool:
    return key.rsplit(".", 1)[-1] == "weight" or "binpack." in key


def _check_numbers(where: str, arguments: Mapping[str, Any]) -> None:
    """No argument may be nan or infinite, no weight outside 0..MAX_WEIGHT: a nan weight made
    every node's score nan and silently stopped all scheduling (issue 20.3)."""
    for key, value in arguments.items():
        number = _as_number(value)
        if number is None:
            continue
        if not math.isfinite(number):
            raise ConfigError(f"{where}: argument {key!r} must be a finite number, got {value!r}")
        if _is_weight(key) and not 0 <= number <= MAX_WEIGHT:
            raise ConfigError(f"{where}: weight {key!r} must be in 0..{MAX_WEIGHT}, got {value!r}")


def _parse_plugin(i: int, j: int, raw: object) -> PluginOption:
    where = f"tiers[{i}].plugins[{j}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping with a 'name', got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: must be a non-empty string, got {name!r}")
    if name not in PLUGINS:
        raise ConfigError(f"{where}.name: unknown plugin {name!r}; known: {sorted(PLUGINS)}")
    switches: dict[str, bool] = {}
    arguments: Mapping[str, Any] = {}
    for key, value in raw.items():
        if key == "name":
            continue
        if key == "arguments":
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}.arguments ({name}): must be a mapping, got {value!r}")
            arguments = {str(k): v for k, v in value.items()}
        elif key in SWITCHES:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}.{key} ({name}): must be true or false, got {value!r}")
            switches[key] = value
        else:
            raise ConfigError(f"{where}: unknown key {key!r} for plugin {name!r}")
    _check_numbers(f"{where}.arguments ({name})", arguments)
    option = PluginOption(name=name, switches=switches, arguments=arguments)
    declared = PLUGINS[name].ARGUMENTS
    if declared is not None:
        check_arguments(f"plugin {name}", declared, arguments)
    PLUGINS[name](Arguments(f"plugin {name}", arguments))  # validates the arguments
    return option


def _parse_document(text: str) -> Mapping[str, Any]:
    """The YAML mapping, with only the known top-level keys."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        summary = yaml_error_summary(exc)
        raise ConfigError(f"scheduler configuration is not valid YAML: {summary}") from None
    if not isinstance(doc, Mapping):
        raise ConfigError("scheduler configuration must be a mapping with 'actions' and 'tiers'")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ConfigError(
            f"unknown top-level key(s) {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}"
        )
    return doc


def _parse_actions(raw: object) -> tuple[str, ...]:
    """``actions``: a comma-separated string of known action names."""
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f"actions: must be a comma-separated string, got {raw!r}")
    actions = tuple(a.strip() for a in raw.split(",") if a.strip())
    if not actions:
        raise ConfigError(f"actions: names no action, got {raw!r}")
    for a in actions:
        if a not in ACTIONS:
            raise ConfigError(f"actions: unknown action {a!r}; known: {sorted(ACTIONS)}")
    return actions


def _parse_tier(i: int, raw: object) -> Tier:
    if not isinstance(raw, Mapping) or set(raw) - {"plugins"}:
        raise ConfigError(f"tiers[{i}]: must be a mapping with only 'plugins', got {raw!r}")
    plugins_raw = raw.get("plugins") or []
    if not isinstance(plugins_raw, list):
        raise ConfigError(f"tiers[{i}].plugins: must be a list, got {plugins_raw!r}")
    plugins = tuple(_parse_plugin(i, j, p) for j, p in enumerate(plugins_raw))
    names = {p.name for p in plugins}
    if "proportion" in names and any(p.name == "drf" and p.hierarchy for p in plugins):
        raise ConfigError(
            f"tiers[{i}]: proportion and drf with enableHierarchy cannot be in the same tier"
        )
    return Tier(plugins)


def _parse_tiers(raw: object) -> tuple[Tier, ...]:
    """``tiers``: a list of tiers; a plugin may be configured once in all of them."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ConfigError(f"tiers: must be a list, got {raw!r}")
    tiers = tuple(_parse_tier(i, t) for i, t in enumerate(raw))
    seen: set[str] = set()
    for tier in tiers:
        for p in tier.plugins:
            if p.name in seen:
                raise ConfigError(f"tiers: plugin {p.name!r} is configured more than once")
            seen.add(p.name)
    return tiers


def _parse_configuration(k: int, raw: object) -> tuple[str, Mapping[str, Any]]:
    """One ``configurations[]`` entry: an action's name and its validated arguments."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ConfigError(f"configurations[{k}]: must be a mapping with a 'name', got {raw!r}")
    if set(raw) - {"name", "arguments"}:
        raise ConfigError(
            f"configurations[{k}]: unknown key(s) {sorted(set(raw) - {'name', 'arguments'})}"
        )
    name = raw["name"]
    if name not in ACTIONS:
        raise ConfigError(f"configurations[{k}].name: unknown action {name!r}")
    args = raw.get("arguments") or {}
    if not isinstance(args, Mapping):
        raise ConfigError(f"configurations[{k}].arguments: must be a mapping, got {args!r}")
    arguments = {str(a): v for a, v in args.items()}
    _check_numbers(f"configurations[{k}].arguments ({name})", arguments)
    declared = ACTIONS[name].ARGUMENTS
    if declared is not None:
        check_arguments(f"configurations[{name}]", declared, arguments)
    ACTIONS[name](Arguments(f"configurations[{name}]", arguments))  # validates
    return name, arguments


def _parse_configurations(raw: object) -> dict[str, Mapping[str, Any]]:
    """``configurations``: per-action arguments (a later entry for an action wins)."""
    raw = raw or []
    if not isinstance(raw, list):
        raise ConfigError(f"configurations: must be a list, got {raw!r}")
    confs: dict[str, Mapping[str, Any]] = {}
    for k, c in enumerate(raw):
        name, arguments = _parse_configuration(k, c)
        confs[name] = arguments
    return confs


def load_config(text: str) -> SchedulerConfig:
    """Parse and validate a ``volcano-scheduler.conf`` document."""
    doc = _parse_document(text)
    actions = _parse_actions(doc.get("actions"))
    tiers = _parse_tiers(doc.get("tiers"))
    confs = _parse_configurations(doc.get("configurations"))
    metrics = doc.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ConfigError(f"metrics: must be a mapping, got {metrics!r}")
    return SchedulerConfig(
        actions=actions, tiers=tiers, configurations=confs, metrics=metrics, source=text
    )


#: Volcano's built-in default (compiled into vc-scheduler)
BUILTIN_DEFAULT_CONFIG = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

#: the Helm chart's volcano-scheduler.conf (what a fresh Volcano install runs)
HELM_DEFAULT_CONFIG = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

#: Tephra's shipped default: Helm's plugins plus preempt, reclaim and gangreclaim with safe settings
#: (docs/preemption.md): gang and conformance protect victims, pods run 5 minutes before they can
#: be evicted and no run longer than 100 times the reclaiming pod's wait is thrown away, victims
#: must satisfy every plugin (strict), budgets bound each cycle, and (gang)reclaim never leaves a
#: victim queue below its deserved share (no ping-pong); unlike Volcano, one fair share per
#: queue, with waiting gangs' demand in it and gangs that can never fit left out, decides
#: admission, order, the overcommit budget and reclaim (proportion fairShare; docs/scheduler.md);
#: binpack packs GPUs first, so gangs keep whole nodes free and reclaim can free whole nodes
TEPHRA_DEFAULT_CONFIG = """\
actions: "enqueue, allocate, preempt, reclaim, gangreclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: requeue
    arguments:
      admissionTimeout: 5m
  - name: gang
  - name: conformance
  - name: minruntime
    arguments:
      preemptMinRuntime: 5m
      reclaimMinRuntime: 5m
      reclaimLostWorkRatio: 100
  - name: nominated
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
    arguments:
      fairShare: true
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 10
  - name: network-topology-aware
configurations:
- name: preempt
  arguments:
    victimSelection: strict
    timeBudgetSeconds: 0.4
    maxCandidateNodesAbsolute: 100
- name: reclaim
  arguments:
    victimSelection: strict
    timeBudgetSeconds: 0.4
    maxCandidateNodesAbsolute: 100
    keepVictimQueueAtDeserved: true
- name: gangreclaim
  arguments:
    keepVictimQueueAtDeserved: true
    timeBudgetSeconds: 0.4
"""


def builtin_default() -> SchedulerConfig:
    return load_config(BUILTIN_DEFAULT_CONFIG)


def helm_default() -> SchedulerConfig:
    return load_config(HELM_DEFAULT_CONFIG)


def tephra_default() -> SchedulerConfig:
    return load_config(TEPHRA_DEFAULT_CONFIG)


__all__ = [
    "BUILTIN_DEFAULT_CONFIG",
    "GATES",
    "HELM_DEFAULT_CONFIG",
    "SWITCHES",
    "TEPHRA_DEFAULT_CONFIG",
    "ConfigError",
    "PluginOption",
    "SchedulerConfig",
    "Tier",
    "builtin_default",
    "helm_default",
    "load_config",
    "tephra_default",
]
