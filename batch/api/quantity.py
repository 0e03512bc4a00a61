"""Kubernetes resource quantities, parsed and formatted exactly as the API server does.

Why this exists: every accounting decision in Tephra (does a gang fit, is a queue over its
capability) is made on integers derived from these quantities, so parsing must be exact
(`fractions.Fraction`, never floats) and formatting must reproduce Kubernetes' canonical form
(`1000m` -> `1`, `0.5Gi` -> `512Mi`, `1000` -> `1k`) so that what we write back compares equal
to what a real API server would store.

Grammar (Kubernetes `resource.Quantity`)::

    quantity        ::= signedNumber suffix
    suffix          ::= binarySI | decimalExponent | decimalSI
    binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI       ::= n | u | m | "" | k | M | G | T | P | E
    decimalExponent ::= ("e" | "E") signedInteger
    signedNumber    ::= [+-] (digits | digits "." digits | digits "." | "." digits)

Like Kubernetes, a non-zero value is rounded up (away from zero) to a multiple of 1e-9, and
`MilliValue`/`Value` round up as well.

Kubernetes' `resource.Quantity` documents that no quantity may represent a number greater than
2^63-1 in magnitude (its `Value`/`MilliValue` are int64 and wrap beyond it). `check_int64` applies
that bound to the integer a quantity is counted as (bytes, or thousandths for cpu).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from batch.api.errors import UserError

__all__ = [
    "MAX_INT64",
    "Quantity",
    "QuantityError",
    "QuantityFormat",
    "QuantityRangeError",
    "check_int64",
    "format_quantity",
    "parse_quantity",
]

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_NUMBER = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")

_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {exp: suffix for suffix, exp in _BINARY_SUFFIXES.items()}

# Kubernetes accepts any int32 exponent; we bound it so that "1e999999999" cannot make us
# build a gigantic integer. 10**±100 is far beyond any real resource amount.
_MAX_EXPONENT = 100
_NANO = Fraction(1, 10**9)


#: Kubernetes' bound on a quantity's magnitude in the unit it is counted in (int64).
MAX_INT64 = 2**63 - 1


class QuantityError(UserError):
    """A string that is not a valid Kubernetes quantity."""


class QuantityRangeError(QuantityError):
    """A valid quantity whose counted integer exceeds Kubernetes' int64 bound."""


def check_int64(amount: int, text: object, unit: str) -> int:
    """`amount` (the integer `text` is counted as, in `unit`) if it fits Kubernetes' int64."""
    if abs(amount) > MAX_INT64:
        raise QuantityRangeError(
            f"quantity {text!r} is too large: Kubernetes bounds a quantity by 2^63-1 {unit}"
        )
    return amount


def _round_up_nano(value: Fraction) -> Fraction:
    """Round a non-zero value up (away from zero) to a multiple of 1e-9, as Kubernetes does."""
    if value == 0:
        return value
    sign = 1 if value > 0 else -1
    scaled = abs(value) / _NANO
    units = -(-scaled.numerator // scaled.denominator)  # ceil
    return sign * units * _NANO


def _ceil_away(value: Fraction) -> int:
    magnitude = -(-abs(value).numerator // abs(value).denominator)
    return magnitude if value >= 0 else -magnitude


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: its exact value and the format its suffix implies."""

    value: Fraction
    format: QuantityFormat = "DecimalSI"

    @classmethod
    def parse(cls, text: str | int | float | Fraction) -> Quantity:
        """Parse a quantity string (or a number, as YAML may give one) exactly."""
        if isinstance(text, bool):
            raise QuantityError(f"quantity must be a string or a number, not {text!r}")
        if isinstance(text, int | Fraction):
            return cls(_round_up_nano(Fraction(text)), "DecimalSI")
        if isinstance(text, float):
            if not math.isfinite(text):
                raise QuantityError(f"quantity {text!r} is not a finite number")
            # YAML `0.5` arrives as a float; its repr is the shortest exact decimal string.
            text = repr(text)
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string or a number, not {type(text).__name__}")
        s = text
        match = _NUMBER.fullmatch(s)
        if match is None:
            raise QuantityError(f"not a Kubernetes quantity (like 500m, 1Gi, 1e3): {text!r}")
        sign, number, suffix = match.groups()
        value = Fraction(number)
        fmt: QuantityFormat
        if suffix in _BINARY_SUFFIXES:
            value *= 2 ** _BINARY_SUFFIXES[suffix]
            fmt = "BinarySI"
        elif suffix in _DECIMAL_SUFFIXES:
            value *= Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
            fmt = "DecimalSI"
        else:
            exp_match = _EXPONENT.fullmatch(suffix)
            if exp_match is None:
                raise QuantityError(f"unable to parse quantity's suffix {suffix!r} in {text!r}")
            exponent = int(exp_match.group(1))
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"quantity exponent out of range in {text!r}")
            value *= Fraction(10) ** exponent
            fmt = "DecimalExponent"
        if sign == "-":
            value = -value
        value = _round_up_nano(value)
        if fmt == "BinarySI" and 0 < abs(value) < 1:
            fmt = "DecimalSI"
        return cls(value, fmt)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (Kubernetes `MilliValue`)."""
        return _ceil_away(self.value * 1000)

    def int_value(self) -> int:
        """The value as an integer, rounded up (Kubernetes `Value`)."""
        return _ceil_away(self.value)

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


def parse_quantity(value: str | int | float | Fraction) -> Fraction:
    """Parse a Kubernetes quantity into its exact value."""
    return Quantity.parse(value).value


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """Mantissa and exponent (a multiple of 3) of a positive multiple of 1e-9, mantissa integral."""
    scaled = value * 10**9
    if scaled.denominator != 1:  # pragma: no cover - callers round to nano first
        raise ValueError("value is not a multiple of 1e-9")
    mantissa, exponent = scaled.numerator, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent


def format_quantity(value: Fraction | int, fmt: QuantityFormat = "DecimalSI") -> str:
    """Format a value in Kubernetes' canonical form for the given format."""
    value = _round_up_nano(Fraction(value))
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI" and (magnitude < 1024 or magnitude.denominator != 1):
        fmt = "DecimalSI"
    if fmt == "BinarySI":
        number = magnitude.numerator
        exponent = 0
        while exponent < 60 and number % 1024 == 0:
            number //= 1024
            exponent += 10
        return f"{sign}{number}{_BINARY_BY_EXPONENT.get(exponent, '')}"
    mantissa, exponent = _decimal_parts(magnitude)
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
