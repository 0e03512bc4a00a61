"""Exact quantity sums used for PodGroup minResources."""

from __future__ import annotations

from fractions import Fraction

import pytest

from batch.controllers.quantities import (
    QuantityParseError,
    ResourceSum,
    format_quantity,
    parse,
    pod_request_lists,
)


@pytest.mark.parametrize(
    ("text", "value", "binary"),
    [
        ("1", 1, False),
        ("500m", Fraction(1, 2), False),
        ("1Gi", 2**30, True),
        ("1e3", 1000, False),
        ("2k", 2000, False),
        ("0.5", Fraction(1, 2), False),
        ("100Mi", 100 * 2**20, True),
        ("-1", -1, False),
    ],
)
def test_parse(text: str, value: Fraction | int, binary: bool) -> None:
    assert parse(text) == (Fraction(value), binary)


def test_parse_numbers_and_errors() -> None:
    assert parse(2) == (Fraction(2), False)
    assert parse(0.25) == (Fraction(1, 4), False)
    for bad in ("1x", "", "Gi", "1.2.3"):
        with pytest.raises(QuantityParseError):
            parse(bad)
    with pytest.raises(QuantityParseError):
        parse(True)  # type: ignore[arg-type]


def test_format() -> None:
    assert format_quantity(Fraction(3, 2), binary=False) == "1500m"
    assert format_quantity(Fraction(2000), binary=False) == "2k"
    assert format_quantity(Fraction(3 * 2**30), binary=True) == "3Gi"
    assert format_quantity(Fraction(1500), binary=True) == "1500"
    assert format_quantity(Fraction(0), binary=False) == "0"
    assert format_quantity(Fraction(1, 10**6), binary=False) == "1u"


def test_sum_and_pod_requests() -> None:
    s = ResourceSum()
    s.add({"cpu": "500m", "memory": "1Gi"}, times=3)
    s.add_count("pods", 3)
    assert s.to_list() == {"cpu": "1500m", "memory": "3Gi", "pods": "3"}
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "250m"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
    }
    requests, limits = pod_request_lists(spec)
    assert requests == {"cpu": "3", "memory": "1Gi"}  # limits default requests; init max
    assert limits == {"cpu": "2", "memory": "1Gi"}
