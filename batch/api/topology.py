"""HyperNode (`topology.volcano.sh/v1alpha1`): one level of the network-topology tree.

A HyperNode of tier N groups members that are nodes (tier 1) or HyperNodes of a lower tier,
selected by exact name, regular expression, or node labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field

from batch.api.base import DNS1123_SUBDOMAIN, KubeModel
from batch.api.meta import Condition, LabelSelectorRequirement, ObjectMeta
from batch.api.selectors import label_selector_matches

__all__ = [
    "RACK_LABEL",
    "SPINE_LABEL",
    "ExactMatch",
    "HyperNode",
    "HyperNodeSpec",
    "HyperNodeStatus",
    "LabelMatch",
    "MemberSelector",
    "MemberSpec",
    "RegexMatch",
    "member_matches",
]

#: the node labels of racks and spines (`tephra sandbox --topology`), the network-topology
#: plugin's default tiers 1 and 2 when there are no HyperNode objects
RACK_LABEL = "topology.tephra.io/rack"
SPINE_LABEL = "topology.tephra.io/spine"


class ExactMatch(KubeModel):
    name: str = Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)


class RegexMatch(KubeModel):
    pattern: str = Field(min_length=1)


class LabelMatch(KubeModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class MemberSelector(KubeModel):
    # Volcano's CRD states the one-selector rule in CEL; admission checks it in Python too.
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "message": "Either ExactMatch or RegexMatch or LabelMatch must be specified",
                    "rule": "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
                },
                {
                    "message": "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
                    "rule": "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0)"
                    " + (has(self.labelMatch) ? 1 : 0) <= 1",
                },
            ]
        }
    )

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelMatch | None = None


class MemberSpec(KubeModel):
    type: Literal["Node", "HyperNode"]
    selector: MemberSelector | None = None


class HyperNodeSpec(KubeModel):
    tier: int = Field(ge=0)
    tier_name: str | None = Field(default=None, max_length=253)
    members: list[MemberSpec] | None = Field(default=None, min_length=1)


class HyperNodeStatus(KubeModel):
    conditions: list[Condition] | None = None
    node_count: int | None = Field(default=None, ge=0)


class HyperNode(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: HyperNodeSpec | None = None
    status: HyperNodeStatus | None = None


def member_matches(
    selector: Mapping[str, Any], name: str, labels: Mapping[str, str] | None
) -> bool:
    """Whether a HyperNode member selector (exactMatch, regexMatch or labelMatch) picks the
    node or HyperNode `name` (with `labels`; None for a HyperNode, which labelMatch never
    picks)."""
    exact = selector.get("exactMatch")
    if isinstance(exact, Mapping):
        return str(exact.get("name", "")) == name
    rx = selector.get("regexMatch")
    if isinstance(rx, Mapping):
        try:
            return re.fullmatch(str(rx.get("pattern", "")), name) is not None
        except re.error:
            return False
    lm = selector.get("labelMatch")
    if isinstance(lm, Mapping):
        return labels is not None and label_selector_matches(lm, labels)
    return False
