"""volcano-scheduler.conf loading and validation (docs/volcano-semantics.md#configuration)."""

from __future__ import annotations

import pytest

from batch.scheduler import (
    BUILTIN_DEFAULT_CONFIG,
    HELM_DEFAULT_CONFIG,
    TEPHRA_DEFAULT_CONFIG,
    ConfigError,
    load_config,
)


def test_defaults_load() -> None:
    for text in (BUILTIN_DEFAULT_CONFIG, HELM_DEFAULT_CONFIG):
        cfg = load_config(text)
        assert cfg.actions == ("enqueue", "allocate", "backfill")
    tephra = load_config(TEPHRA_DEFAULT_CONFIG)  # Tephra ships preempt and reclaim on
    assert tephra.actions == (
        "enqueue",
        "allocate",
        "preempt",
        "reclaim",
        "gangreclaim",
        "backfill",
    )
    helm = load_config(HELM_DEFAULT_CONFIG)
    gang = helm.plugin("gang")
    assert gang is not None and not gang.enabled("preemptable") and gang.enabled("job_ready")
    assert [p.name for p in helm.tiers[1].plugins][-1] == "binpack"


def test_switches_arguments_and_configurations() -> None:
    cfg = load_config(
        """
actions: "enqueue,allocate"
tiers:
- plugins:
  - name: gang
    enableJobReady: false
    enabledOverused: true
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 5
configurations:
- name: allocate
  arguments: {percentageOfNodesToFind: 50}
"""
    )
    assert cfg.plugin("gang") is not None
    assert not cfg.plugin("gang").enabled("job_ready")  # type: ignore[union-attr]
    assert cfg.action_arguments("allocate").get_int("percentageOfNodesToFind", 0) == 50


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("actions: 'enqueue, nosuch'\ntiers: []", "unknown action 'nosuch'"),
        ("actions: allocate\ntiers: [{plugins: [{name: magic}]}]", "unknown plugin 'magic'"),
        (
            "actions: allocate\ntiers: [{plugins: [{name: gang, enableJobReady: 'no'}]}]",
            "enableJobReady",
        ),
        (
            "actions: allocate\ntiers: [{plugins: [{name: gang, enablePreemptible: false}]}]",
            "unknown key 'enablePreemptible'",
        ),
        ("actions: [allocate]\ntiers: []", "actions: must be a comma-separated string"),
        (
            "actions: allocate\ntiers: [{plugins: [{name: proportion}, {name: drf, "
            "enableHierarchy: true}]}]",
            "proportion and drf with enableHierarchy",
        ),
        (
            "actions: allocate\ntiers: [{plugins: [{name: overcommit, arguments: "
            "{overcommit-factor: lots}}]}]",
            "overcommit-factor",
        ),
        (
            "actions: allocate\ntiers: [{plugins: [{name: binpack, arguments: "
            "{binpack.weight: true}}]}]",
            "binpack.weight",
        ),
        (
            "actions: allocate\nconfigurations: [{name: allocate, arguments: {minNodesToFind: x}}]",
            "minNodesToFind",
        ),
        (
            "actions: allocate\ntiers: [{plugins: [{name: sla, arguments: "
            "{sla-waiting-time: soon}}]}]",
            "sla-waiting-time",
        ),
        ("[1, 2]", "must be a mapping"),
        ("actions: allocate\nbogus: 1", "unknown top-level key"),
        ("actions: 'allocate'\ntiers: [{plugins: [{name: gang}, {name: gang}]}]", "more than once"),
        ("actions: allocate: x", "not valid YAML"),
    ],
)
def test_bad_configs_are_clear_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(text)
    assert needle in str(exc.value)


def test_drf_hierarchy_with_proportion_in_another_tier_is_allowed() -> None:
    load_config(
        "actions: allocate\ntiers: [{plugins: [{name: drf, enableHierarchy: true}]},"
        " {plugins: [{name: proportion}]}]"
    )


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ("{leastrequested.weight: nan}", "finite"),
        ("{leastrequested.weight: .nan}", "finite"),
        ("{mostrequested.weight: .inf}", "finite"),
        ("{leastrequested.weight: -1}", "0..1000000"),
        ("{balancedresource.weight: 1e300}", "0..1000000"),
    ],
)
def test_nodeorder_weights_must_be_finite_and_bounded(arguments: str, needle: str) -> None:
    """Issue 20.3: `leastrequested.weight: nan` loaded, made every score nan and stopped all
    scheduling while `job why` said "0/4 nodes are available"."""
    text = f"actions: allocate\ntiers: [{{plugins: [{{name: nodeorder, arguments: {arguments}}}]}}]"
    with pytest.raises(ConfigError) as exc:
        load_config(text)
    assert needle in str(exc.value) and "nodeorder" in str(exc.value)


def test_binpack_resource_weights_and_action_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"binpack\.cpu"):
        load_config(
            "actions: allocate\ntiers: [{plugins: [{name: binpack, arguments: {binpack.cpu: -2}}]}]"
        )
    with pytest.raises(ConfigError, match="finite"):
        load_config(
            "actions: allocate, preempt\n"
            "configurations: [{name: preempt, arguments: {timeBudgetSeconds: .inf}}]"
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("actions: allocate\ntiers: {plugins: []}", "tiers: must be a list, got {'plugins': []}"),
        (
            "actions: allocate\ntiers: [{plugins: [], extra: 1}]",
            "tiers[0]: must be a mapping with only 'plugins', got {'plugins': [], 'extra': 1}",
        ),
        (
            "actions: allocate\ntiers: [{plugins: []}, {plugins: gang}]",
            "tiers[1].plugins: must be a list, got 'gang'",
        ),
        (
            "actions: allocate\nconfigurations: {name: allocate}",
            "configurations: must be a list, got {'name': 'allocate'}",
        ),
        (
            "actions: allocate\nconfigurations: [{arguments: {}}]",
            "configurations[0]: must be a mapping with a 'name', got {'arguments': {}}",
        ),
        (
            "actions: allocate\nconfigurations: [{name: allocate, args: {}, x: 1}]",
            "configurations[0]: unknown key(s) ['args', 'x']",
        ),
        (
            "actions: allocate\nconfigurations: [{name: allocate}, {name: nosuch}]",
            "configurations[1].name: unknown action 'nosuch'",
        ),
        (
            "actions: allocate\nconfigurations: [{name: allocate, arguments: [1]}]",
            "configurations[0].arguments: must be a mapping, got [1]",
        ),
        (
            "actions: allocate\nconfigurations: [{name: allocate, arguments: "
            "{minNodesToFind: .nan}}]",
            "configurations[0].arguments (allocate): argument 'minNodesToFind' must be a finite "
            "number, got nan",
        ),
        ("actions: allocate\nmetrics: [1]", "metrics: must be a mapping, got [1]"),
        ("actions: '  '", "actions: must be a comma-separated string, got '  '"),
        ("actions: ' , ,'", "actions: names no action, got ' , ,'"),
        # the first problem in document order is the one reported
        (
            "actions: nosuch\ntiers: 1\nconfigurations: 1\nmetrics: 1",
            "actions: unknown action 'nosuch'; known: ",
        ),
        ("actions: allocate\ntiers: 1\nconfigurations: 1\nmetrics: 1", "tiers: must be a list"),
        (
            "actions: allocate\ntiers: [{plugins: [{name: gang}]}, {plugins: [{name: gang}, "
            "{name: magic}]}]",
            "tiers[1].plugins[1].name: unknown plugin 'magic'",
        ),
        ("actions: allocate\nconfigurations: 1\nmetrics: 1", "configurations: must be a list"),
    ],
)
def test_config_errors_name_the_first_problem(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(text)
    assert str(exc.value).startswith(message)


def test_empty_sections_and_repeated_configurations() -> None:
    cfg = load_config(
        "actions: ' allocate ,, backfill '\ntiers:\nconfigurations:\n"
        "- {name: allocate, arguments: {percentageOfNodesToFind: 10}}\n"
        "- {name: allocate, arguments: {percentageOfNodesToFind: 20}}\n"
        "- {name: backfill}\n"
    )
    assert cfg.actions == ("allocate", "backfill")
    assert cfg.tiers == ()
    assert cfg.metrics == {}
    assert cfg.action_arguments("allocate").get_int("percentageOfNodesToFind", 0) == 20
    assert dict(cfg.configurations) == {
        "allocate": {"percentageOfNodesToFind": 20},
        "backfill": {},
    }
