"""Kubernetes quantity parsing/formatting and Volcano resource-vector semantics."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from batch.api.quantity import Quantity, QuantityError, format_quantity, parse_quantity
from batch.api.resources import (
    Resource,
    format_resource_list,
    from_internal,
    parse_resource_list,
    to_internal,
)

# (input, canonical form as the Kubernetes API server prints it)
CANONICAL = [
    ("0", "0"),
    ("-0", "0"),
    ("1", "1"),
    ("5.", "5"),
    (".5", "500m"),
    ("0.1", "100m"),
    ("100m", "100m"),
    ("1000m", "1"),
    ("1500m", "1500m"),
    ("1000", "1k"),
    ("1024", "1024"),
    ("+2k", "2k"),
    ("-1.5", "-1500m"),
    ("1n", "1n"),
    ("0.1n", "1n"),  # rounded up to the nano scale
    ("1u", "1u"),
    ("1Ki", "1Ki"),
    ("12Mi", "12Mi"),
    ("0.5Gi", "512Mi"),
    ("1.5Gi", "1536Mi"),
    ("1.1Ki", "1126400m"),  # fractional bytes fall back to DecimalSI
    ("100Ki", "100Ki"),
    ("1e3", "1e3"),
    ("1E3", "1e3"),
    ("1.5e3", "1500"),
    ("5e-1", "500e-3"),
    ("12e6", "12e6"),
    ("1E", "1E"),
    ("2e-10", "1e-9"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical_form(text: str, canonical: str) -> None:
    assert str(Quantity.parse(text)) == canonical
    # The canonical form is a fixed point.
    assert str(Quantity.parse(canonical)) == canonical
    assert parse_quantity(canonical) == parse_quantity(text)


@pytest.mark.parametrize(
    "bad", ["", ".", "1e", "1 ", " 1", "abc", "1.5.5", "1KiB", "--1", "1e3.5", "Ki", "1ki", "1e999"]
)
def test_rejects_invalid(bad: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(bad)


def test_rejects_non_numbers() -> None:
    for bad in (True, None, [], float("nan"), float("inf")):
        with pytest.raises(QuantityError):
            Quantity.parse(bad)  # type: ignore[arg-type]


def test_numbers_from_yaml() -> None:
    assert parse_quantity(2) == 2
    assert parse_quantity(0.5) == Fraction(1, 2)
    assert str(Quantity.parse(0.25)) == "250m"


def test_milli_and_int_values_round_up() -> None:
    assert Quantity.parse("1").milli_value() == 1000
    assert Quantity.parse("1n").milli_value() == 1
    assert Quantity.parse("1.0001m").milli_value() == 2
    assert Quantity.parse("0.5").int_value() == 1
    assert Quantity.parse("1Gi").int_value() == 2**30
    assert Quantity.parse("-1.5").int_value() == -2


def test_units_by_resource() -> None:
    assert to_internal("cpu", "500m") == 500
    assert to_internal("cpu", 2) == 2000
    assert to_internal("nvidia.com/gpu", "1") == 1000
    assert to_internal("memory", "1Gi") == 2**30
    assert to_internal("requests.memory", "1000Mi") == 1000 * 2**20
    assert to_internal("ephemeral-storage", "1G") == 10**9
    assert to_internal("hugepages-2Mi", "4Mi") == 4 * 2**20
    assert to_internal("pods", "110") == 110
    assert to_internal("count/pods", "2") == 2
    assert from_internal("cpu", 1500) == "1500m"
    assert from_internal("cpu", 2000) == "2"
    assert from_internal("nvidia.com/gpu", 8000) == "8"
    assert from_internal("memory", 2000 * 2**20) == "2000Mi"
    assert from_internal("memory", 10**9) == "1G"
    assert from_internal("pods", 110) == "110"


def test_resource_list_round_trip_and_errors() -> None:
    rl = {"cpu": "2", "memory": "2000Mi", "nvidia.com/gpu": "2", "pods": "2"}
    parsed = parse_resource_list(rl)
    assert parsed == {"cpu": 2000, "memory": 2000 * 2**20, "nvidia.com/gpu": 2000, "pods": 2}
    assert format_resource_list(parsed) == rl
    assert parse_resource_list(None) == {}
    with pytest.raises(QuantityError, match="memory"):
        parse_resource_list({"memory": "lots"})


def test_resource_vector_semantics() -> None:
    a = Resource.from_list({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})
    b = Resource.from_list({"cpu": "2", "memory": "2Gi"})
    assert Resource({"cpu": 0}) == Resource.zero()
    assert Resource.zero().is_empty()
    # A GPU absent from b counts as zero by default, as unlimited with missing="infinity".
    assert not a.less_equal(b)
    assert a.less_equal(b, missing="infinity")
    # cpu and memory are always compared, whatever `missing` says.
    assert not Resource({"cpu": 3000}).less_equal(Resource({"memory": 1}), missing="infinity")
    assert a.less_equal_on(b, ["cpu", "memory"])
    assert not a.less_equal_on(b, ["nvidia.com/gpu"])
    assert a.add(b) == Resource({"cpu": 3000, "memory": 3 * 2**30, "nvidia.com/gpu": 1000})
    assert a.sub(b).get("cpu") == -1000
    assert a.sub_clamped(b) == Resource({"nvidia.com/gpu": 1000})
    assert a.min(b) == Resource({"cpu": 1000, "memory": 2**30})
    assert a.max(b) == Resource({"cpu": 2000, "memory": 2 * 2**30, "nvidia.com/gpu": 1000})
    assert a.scale(2).get("nvidia.com/gpu") == 2000
    assert b.less_partly(a)
    assert not a.less_partly(a)
    assert a.to_list() == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert hash(a) == hash(Resource(dict(a)))


nano_values = st.integers(min_value=-(10**30), max_value=10**30).map(lambda n: Fraction(n, 10**9))
formats = st.sampled_from(["DecimalSI", "BinarySI", "DecimalExponent"])


@given(nano_values, formats)
def test_parse_format_round_trip(value: Fraction, fmt: str) -> None:
    text = format_quantity(value, fmt)  # type: ignore[arg-type]
    assert parse_quantity(text) == value
    # Canonical strings are fixed points of parse -> format.
    assert str(Quantity.parse(text)) == text


@given(nano_values, nano_values)
def test_ordering_is_preserved(a: Fraction, b: Fraction) -> None:
    qa, qb = parse_quantity(format_quantity(a)), parse_quantity(format_quantity(b))
    assert (qa < qb) == (a < b)
    assert (qa == qb) == (a == b)


@given(st.integers(min_value=0, max_value=10**15), st.sampled_from(["cpu", "memory", "pods"]))
def test_internal_round_trip(amount: int, name: str) -> None:
    assert to_internal(name, from_internal(name, amount)) == amount


def test_internal_amounts_are_bounded_like_kubernetes() -> None:
    """Kubernetes bounds a quantity by 2^63-1 in the unit it is counted in (MilliValue for cpu)."""
    assert to_internal("memory", "7Ei") == 7 * 2**60
    assert to_internal("cpu", "9223372036854775") == 9223372036854775000
    for name, text in (("memory", "16Ei"), ("memory", "8Ei"), ("cpu", "9223372036854775807")):
        with pytest.raises(QuantityError, match="2\\^63-1"):
            to_internal(name, text)
