"""Declared plugin and action arguments (issue 32.4): every key a plugin or action reads is
declared once (``ARGUMENTS``); ``load_config`` refuses an unknown key, naming the owner and the
closest declared key, and a value of the wrong kind or out of range."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import pytest
import yaml

from batch.scheduler import ConfigError, argdocs, load_config
from batch.scheduler.builtins import BUILTIN_ACTIONS, BUILTIN_PLUGINS
from batch.scheduler.framework.arguments import Arg, Arguments, check_arguments

# the built-ins only: other tests register plugins of their own in the same process
PLUGINS = {c.name: c for c in BUILTIN_PLUGINS}
ACTIONS = {c.name: c for c in BUILTIN_ACTIONS}


def plugin_conf(name: str, arguments: str) -> str:
    return f"actions: allocate\ntiers: [{{plugins: [{{name: {name}, arguments: {arguments}}}]}}]"


def action_conf(name: str, arguments: str) -> str:
    return (
        f"actions: allocate, {name}\ntiers: [{{plugins: [{{name: gang}}]}}]\n"
        f"configurations: [{{name: {name}, arguments: {arguments}}}]"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            plugin_conf("binpack", "{binpack.weigth: 5}"),
            "plugin binpack: unknown argument 'binpack.weigth'; did you mean 'binpack.weight'?",
        ),
        (
            plugin_conf("nodeorder", "{leastrequested.weights: 2}"),
            "plugin nodeorder: unknown argument 'leastrequested.weights'; did you mean "
            "'leastrequested.weight'?",
        ),
        (
            plugin_conf("proportion", "{fairshare: true}"),
            "plugin proportion: unknown argument 'fairshare'; did you mean 'fairShare'?",
        ),
        (
            plugin_conf("predicates", "{predicate.NodeAffinityEnabled: false}"),
            "did you mean 'predicate.NodeAffinityEnable'?",
        ),
        (
            action_conf("preempt", "{victimSelecton: strict}"),
            "configurations[preempt]: unknown argument 'victimSelecton'; did you mean "
            "'victimSelection'?",
        ),
        (
            action_conf("gangreclaim", "{keepVictimQueueAtDeserve: true}"),
            "did you mean 'keepVictimQueueAtDeserved'?",
        ),
        (
            plugin_conf("gang", "{minAvailable: 2}"),
            "plugin gang: unknown argument 'minAvailable'; ",
        ),
        (action_conf("backfill", "{x: 1}"), "configurations[backfill]: unknown argument 'x'; "),
    ],
)
def test_a_typo_key_is_refused_naming_the_owner_and_the_closest_key(
    text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(text)
    assert message in str(exc.value)


def test_the_refusal_lists_the_known_keys() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(plugin_conf("overcommit", "{overcommitFactor: 2}"))
    assert str(exc.value).endswith("known: overcommit-factor")
    with pytest.raises(ConfigError, match="it takes no arguments"):
        load_config(plugin_conf("drf", "{weight: 1}"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            plugin_conf("nodeorder", "{leastrequested.weight: heavy}"),
            "plugin nodeorder: argument 'leastrequested.weight' must be a number, got 'heavy'",
        ),
        (
            plugin_conf("predicates", "{predicate.CacheEnable: maybe}"),
            "plugin predicates: argument 'predicate.CacheEnable' must be true or false",
        ),
        (
            plugin_conf("overcommit", "{overcommit-factor: [2]}"),
            "argument 'overcommit-factor' must be a number, got [2]",
        ),
        (
            plugin_conf("network-topology-aware", "{hypernode.binpack.normal-pod.enable: 3}"),
            "'hypernode.binpack.normal-pod.enable' must be true or false, got 3",
        ),
        (
            plugin_conf("proportion", "{usageWeight: much}"),  # checked even with no half-life
            "argument 'usageWeight' must be a number",
        ),
        (
            plugin_conf("proportion", "{usageHalfLife: 7d, usageMinFactor: 0}"),
            "argument 'usageMinFactor' must be (0, 1], got 0",
        ),
        (
            plugin_conf("sla", "{sla-waiting-time: soon}"),
            "plugin sla: argument 'sla-waiting-time'",
        ),
        (
            plugin_conf("minruntime", "{queues.batch.reclaimMinRuntime: later}"),
            "plugin minruntime: argument 'queues.batch.reclaimMinRuntime'",
        ),
        (
            plugin_conf("binpack", "{binpack.resources: [a, b]}"),
            "argument 'binpack.resources' must be a string",
        ),
        (
            plugin_conf("reservation", "{maxReservations: 1.5}"),
            "argument 'maxReservations' must be an integer, got 1.5",
        ),
        (
            action_conf("allocate", "{percentageOfNodesToFind: 150}"),
            "configurations[allocate]: argument 'percentageOfNodesToFind' must be 0..100, got 150",
        ),
        (
            action_conf("preempt", "{victimSelection: lenient}"),
            "'victimSelection' must be 'volcano' or 'strict', got 'lenient'",
        ),
        (
            action_conf("gangpreempt", "{allowWholeBundle: sometimes}"),
            "configurations[gangpreempt]: argument 'allowWholeBundle' must be true or false",
        ),
    ],
)
def test_an_ill_typed_value_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(text)
    assert message in str(exc.value)


def test_volcano_keys_and_key_patterns_load() -> None:
    """Volcano's dotted keys name a resource inside the key: declared as patterns."""
    load_config(
        plugin_conf(
            "binpack",
            "{binpack.weight: 10, binpack.resources: 'nvidia.com/gpu,example.com/foo', "
            "binpack.resources.nvidia.com/gpu: 8, binpack.resources.example.com/foo: '2'}",
        )
    )
    load_config(
        plugin_conf(
            "predicates",
            "{predicate.ProportionalEnable: true, predicate.resources: nvidia.com/gpu, "
            "predicate.resources.nvidia.com/gpu.cpu: 8, "
            "predicate.resources.nvidia.com/gpu.memory: 8, predicate.GPUSharingEnable: 'true'}",
        )
    )
    load_config(
        plugin_conf(
            "minruntime",
            "{preemptMinRuntime: 5m, queues.team-a.preemptMinRuntime: 1h, "
            "queues.root.b.reclaimMinRuntime: 90}",
        )
    )
    load_config(
        plugin_conf(
            "nodeorder",
            "{selectorspread.weight: 0, volumebinding.weight: 1, podaffinity.weight: 2}",
        )
    )
    load_config(
        action_conf(
            "preempt",
            "{topologyAwarePreemptWorkerNum: 16, minCandidateNodesPercentage: 10, "
            "minCandidateNodesAbsolute: 1, maxCandidateNodesAbsolute: 100, "
            "enableTopologyAwarePreemption: true}",
        )
    )
    with pytest.raises(ConfigError, match=r"did you mean 'binpack\.resources\.<resource>'"):
        load_config(plugin_conf("binpack", "{binpack.resource.nvidia.com/gpu: 8}"))


def test_every_builtin_plugin_and_action_declares_its_arguments() -> None:
    missing = [n for n, c in {**PLUGINS, **ACTIONS}.items() if c.ARGUMENTS is None]
    assert not missing
    for owner in (*PLUGINS.values(), *ACTIONS.values()):
        names = [a.name for a in owner.ARGUMENTS or ()]
        assert len(names) == len(set(names)), owner.name


def sample_key(arg: Arg) -> str:
    if not arg.is_pattern:
        return arg.name
    head, _, rest = arg.name.partition("<")
    return head + "example.com/x" + rest.partition(">")[2]


def test_every_declared_default_loads() -> None:
    """Each declaration agrees with its owner's reader: every key at its declared default
    loads (a pattern key with a sample name in it)."""
    for kind, table in (("plugin", PLUGINS), ("action", ACTIONS)):
        for name, cls in table.items():
            values = {
                sample_key(a): a.default
                for a in cls.ARGUMENTS or ()
                if a.default is not None and a.default != ""
            }
            args = "{" + ", ".join(f"'{k}': {v!r}" for k, v in values.items()) + "}"
            args = args.replace("True", "true").replace("False", "false")
            load_config(plugin_conf(name, args) if kind == "plugin" else action_conf(name, args))


class Recording(Mapping[str, Any]):
    """An empty arguments map that notes every key asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_every_key_read_is_declared() -> None:
    """A key read but not declared would be refused by load_config: the reader and the
    declaration cannot drift apart."""
    for cls in (*PLUGINS.values(), *ACTIONS.values()):
        raw = Recording()
        cls(Arguments(f"test {cls.name}", raw))
        declared = {a.name for a in cls.ARGUMENTS or ()}
        assert raw.asked <= declared, (cls.name, raw.asked - declared)


def test_check_arguments_ranges() -> None:
    specs = (
        Arg("a", "int", 1, "", min=1),
        Arg("b", "float", 0.5, "", min=0, max=1, max_open=True),
        Arg("c.<x>", "float", 1, ""),
    )
    check_arguments("t", specs, {"a": "3", "b": 0, "c.y": 2})
    with pytest.raises(ConfigError, match="t: argument 'a' must be >= 1, got 0"):
        check_arguments("t", specs, {"a": 0})
    with pytest.raises(ConfigError, match=r"t: argument 'b' must be \[0, 1\), got 1"):
        check_arguments("t", specs, {"b": 1})
    with pytest.raises(ConfigError, match=r"unknown argument 'c\.'"):
        check_arguments("t", specs, {"c.": 1})


def test_the_docs_argument_tables_are_generated_from_the_declarations() -> None:
    """docs/scheduler.md carries exactly the generated tables (regenerate with
    ``python -m batch.scheduler.argdocs``)."""
    text = argdocs.DOC.read_text()
    assert argdocs.updated_doc(text) == text
    block = argdocs.arguments_markdown()
    for cls in (*PLUGINS.values(), *ACTIONS.values()):
        for arg in cls.ARGUMENTS or ():
            assert f"| {cls.name} | `{arg.name}` |" in block


def test_the_chart_schema_is_generated_from_the_declarations() -> None:
    text = argdocs.SCHEMA.read_text()
    assert argdocs.chart_schema(json.loads(text)) == json.loads(text)


def chart_values(tiers: list[Any], configurations: list[Any] | None = None) -> dict[str, Any]:
    values = yaml.safe_load((argdocs.ROOT / "charts/tephra/values.yaml").read_text())
    values["scheduler"]["config"]["tiers"] = tiers
    if configurations is not None:
        values["scheduler"]["config"]["configurations"] = configurations
    return values


def test_the_chart_schema_refuses_what_load_config_refuses() -> None:
    validator = jsonschema.Draft7Validator(json.loads(argdocs.SCHEMA.read_text()))
    defaults = yaml.safe_load((argdocs.ROOT / "charts/tephra/values.yaml").read_text())
    assert not list(validator.iter_errors(defaults))
    good = chart_values(
        [
            {
                "plugins": [
                    {
                        "name": "binpack",
                        "arguments": {
                            "binpack.weight": "10",
                            "binpack.resources": "nvidia.com/gpu",
                            "binpack.resources.nvidia.com/gpu": 8,
                        },
                    },
                    {"name": "predicates", "arguments": {"predicate.CacheEnable": "true"}},
                    {"name": "gang"},
                ]
            }
        ],
        [{"name": "preempt", "arguments": {"victimSelection": "strict"}}],
    )
    assert not list(validator.iter_errors(good))
    bad = [
        chart_values([{"plugins": [{"name": "binpack", "arguments": {"binpack.weigth": 1}}]}]),
        chart_values([{"plugins": [{"name": "binpack", "arguments": {"binpack.cpu": -1}}]}]),
        chart_values([{"plugins": [{"name": "gang", "arguments": {"x": 1}}]}]),
        chart_values(
            [{"plugins": [{"name": "predicates", "arguments": {"predicate.CacheEnable": "no"}}]}]
        ),
        chart_values(
            [{"plugins": [{"name": "gang"}]}],
            [{"name": "preempt", "arguments": {"victimSelection": "lenient"}}],
        ),
        chart_values(
            [{"plugins": [{"name": "gang"}]}],
            [{"name": "reclaim", "arguments": {"reclaimHysteresis": 1}}],
        ),
    ]
    for values in bad:
        assert list(validator.iter_errors(values)), values["scheduler"]["config"]
