"""One LabelSelector matcher for the scheduler, HyperNodes and the sandbox."""

from __future__ import annotations

from typing import Any

import pytest

from batch.api.selectors import label_selector_matches
from batch.sandbox.selectors import selector_from_label_selector
from batch.scheduler.plugins.network_topology import _matches as hypernode_member

LABELS = {"app": "web", "tier": "1"}


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ({}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"tier": 1}}, True),  # values compare as strings
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]}, True),
        ({"matchExpressions": [{"key": "gone", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    ],
)
def test_every_user_of_a_selector_agrees(selector: dict[str, Any], want: bool) -> None:
    assert label_selector_matches(selector, LABELS) is want
    assert hypernode_member({"labelMatch": selector}, "n1", LABELS) is want
    sandbox = selector_from_label_selector(selector)
    assert (sandbox is None and want) or (sandbox is not None and sandbox(LABELS) is want)


def test_nil_selects_nothing() -> None:
    assert not label_selector_matches(None, LABELS)
