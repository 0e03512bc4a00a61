"""HyperNode admission: each member has exactly one selector, and regex selectors compile."""

from __future__ import annotations

import re

from batch.api.topology import HyperNode

from .common import Errors, join

__all__ = ["validate_hypernode"]


def validate_hypernode(hn: HyperNode, errors: Errors) -> None:
    spec = hn.spec
    if spec is None:
        errors.add("spec", "required", "a HyperNode needs a spec")
        return
    for i, member in enumerate(spec.members or []):
        mpath = join("spec.members", i)
        sel = member.selector
        chosen = (
            [
                n
                for n, v in (
                    ("exactMatch", sel.exact_match),
                    ("regexMatch", sel.regex_match),
                    ("labelMatch", sel.label_match),
                )
                if v is not None
            ]
            if sel is not None
            else []
        )
        if len(chosen) != 1:
            errors.add(
                join(mpath, "selector"),
                "selector",
                "exactly one of exactMatch, regexMatch and labelMatch must be set"
                + (f" (got {', '.join(chosen)})" if chosen else ""),
            )
        if sel is not None and sel.regex_match is not None:
            try:
                re.compile(sel.regex_match.pattern)
            except re.error as exc:
                errors.add(f"{mpath}.selector.regexMatch.pattern", "regex", f"invalid regex: {exc}")
        if sel is not None and sel.label_match is not None:
            lm = sel.label_match
            if not lm.match_labels and not lm.match_expressions:
                errors.add(f"{mpath}.selector.labelMatch", "required", "labelMatch selects nothing")
