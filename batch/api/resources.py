"""Resource lists as exact integer vectors, with Volcano's comparison semantics.

Why this exists: Kubernetes ResourceLists are maps of quantity strings; the scheduler, the
controllers and the ledger all need the same integers from them. Units (DESIGN.md conventions):

* `cpu` and every countable or extended resource (`nvidia.com/gpu`, ...) in milli-units,
  exactly like Volcano's internal `Resource` (1 GPU = 1000);
* `memory`, `ephemeral-storage`, `storage` and `hugepages-*` in bytes;
* `pods` and `count/*` object counts as plain counts.

Quota-style keys (`requests.cpu`, `limits.memory`) use the unit of the resource they name.

`Resource` reproduces Volcano's vector comparisons. Volcano compares floats with a tolerance of
0.1 and treats any dimension below 0.1 as absent; on integers that tolerance means exact
comparison and "zero is absent", which is what this class implements.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Literal

from batch.api.quantity import Quantity, QuantityError, check_int64, format_quantity

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "GPU",
    "MEMORY",
    "PODS",
    "Resource",
    "describe_amount",
    "format_resource_list",
    "from_internal",
    "is_byte_resource",
    "is_count_resource",
    "is_extended_resource",
    "parse_resource_list",
    "to_internal",
]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
EPHEMERAL_STORAGE = "ephemeral-storage"

_BYTE_RESOURCES = frozenset({MEMORY, EPHEMERAL_STORAGE, "storage"})
_QUOTA_PREFIXES = ("requests.", "limits.")


def _base_name(name: str) -> str:
    for prefix in _QUOTA_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def is_byte_resource(name: str) -> bool:
    """True for resources counted in bytes (memory, storage, hugepages)."""
    base = _base_name(name)
    return base in _BYTE_RESOURCES or base.startswith("hugepages-")


def is_extended_resource(name: str) -> bool:
    """Kubernetes' extended resources (`nvidia.com/gpu`): a prefixed name outside
    `kubernetes.io/`, not a quota key. Kubernetes accepts only whole amounts of them."""
    if name.startswith("requests.") or "/" not in name:
        return False
    return "kubernetes.io/" not in name


def is_count_resource(name: str) -> bool:
    """True for plain object counts (`pods`, `count/pods`, ...)."""
    base = _base_name(name)
    return base == PODS or name.startswith("count/")


def to_internal(name: str, value: str | int | float | Fraction) -> int:
    """Convert one quantity of resource `name` to Tephra's integer unit for it.

    Raises QuantityRangeError when that integer exceeds Kubernetes' int64 bound."""
    if type(value) is str:  # watch events repeat the same few strings: parse each once
        return _str_to_internal(name, value)
    return _to_internal(name, value)


@functools.lru_cache(maxsize=4096)
def _str_to_internal(name: str, value: str) -> int:
    return _to_internal(name, value)  # an error is raised again, never remembered


def _to_internal(name: str, value: str | int | float | Fraction) -> int:
    quantity = Quantity.parse(value)
    if is_byte_resource(name) or is_count_resource(name):
        return check_int64(quantity.int_value(), value, "units")
    return check_int64(quantity.milli_value(), value, "thousandths")


@functools.lru_cache(maxsize=4096)
def from_internal(name: str, amount: int) -> str:
    """Format an internal integer amount of resource `name` as a canonical quantity (memoised:
    every session formats the same few figures of each queue again)."""
    if is_count_resource(name):
        return format_quantity(amount, "DecimalSI")
    if is_byte_resource(name):
        binary = format_quantity(amount, "BinarySI")
        decimal = format_quantity(amount, "DecimalSI")
        return binary if len(binary) <= len(decimal) else decimal
    return format_quantity(Fraction(amount, 1000), "DecimalSI")


_BINARY_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def describe_amount(name: str, amount: int) -> str:
    """An internal amount of resource `name` for people to read (not a canonical quantity):
    38400 milli-GPUs read `38.4`, 1500m cpu `1.5`, memory in the largest binary unit."""
    if is_count_resource(name):
        return str(amount)
    if is_byte_resource(name):
        for unit, size in _BINARY_UNITS:
            if abs(amount) >= size:
                return f"{round(amount / size, 1):g}{unit}"
        return str(amount)
    return f"{amount / 1000:g}"


def parse_resource_list(rl: Mapping[str, str | int | float] | None) -> dict[str, int]:
    """Parse a Kubernetes ResourceList into internal integers; errors name the resource."""
    if rl is None:
        return {}
    if not isinstance(rl, Mapping):
        raise QuantityError(f"resource list must be a mapping, not {type(rl).__name__}")
    out: dict[str, int] = {}
    for name, value in rl.items():
        try:
            out[str(name)] = to_internal(str(name), value)
        except QuantityError as exc:
            raise QuantityError(f"{name}: {exc}") from None
    return out


def format_resource_list(amounts: Mapping[str, int]) -> dict[str, str]:
    """Format internal integers back into a Kubernetes ResourceList (sorted by name)."""
    return {name: from_internal(name, amounts[name]) for name in sorted(amounts)}


_Missing = Literal["zero", "infinity"]
_ALWAYS_PRESENT = frozenset({CPU, MEMORY})


class Resource(Mapping[str, int]):
    """An immutable resource vector: resource name -> internal integer amount.

    Zero dimensions are dropped, so `Resource({"cpu": 0})` equals `Resource.zero()`.
    """

    __slots__ = ("_amounts",)

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        self._amounts: dict[str, int] = (
            {k: int(v) for k, v in amounts.items() if v} if amounts else {}
        )

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def zero(cls) -> Resource:
        return cls()

    @classmethod
    def from_list(cls, rl: Mapping[str, str | int | float] | None) -> Resource:
        """Build from a Kubernetes ResourceList (quantity strings)."""
        return cls(parse_resource_list(rl))

    # -- Mapping protocol -----------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resource):
            return self._amounts == other._amounts
        if isinstance(other, Mapping):
            return self._amounts == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._amounts.items()))

    def __repr__(self) -> str:
        return f"Resource({format_resource_list(self._amounts)})"

    def get(self, name: str, default: int = 0) -> int:  # type: ignore[override]
        return self._amounts.get(name, default)

    def names(self) -> frozenset[str]:
        return frozenset(self._amounts)

    # -- arithmetic -----------------------------------------------------------------------
    def add(self, other: Mapping[str, int]) -> Resource:
        out = dict(self._amounts)
        for name, value in other.items():
            out[name] = out.get(name, 0) + value
        return Resource(out)

    def sub(self, other: Mapping[str, int]) -> Resource:
        """Subtract per dimension; results may be negative."""
        out = dict(self._amounts)
        for name, value in other.items():
            out[name] = out.get(name, 0) - value
        return Resource(out)

    def sub_clamped(self, other: Mapping[str, int]) -> Resource:
        """Subtract per dimension, never going below zero."""
        return Resource({k: max(0, v) for k, v in self.sub(other).items()})

    def scale(self, factor: int) -> Resource:
        return Resource({k: v * factor for k, v in self._amounts.items()})

    def min(self, other: Mapping[str, int]) -> Resource:
        """Per-dimension minimum over the union of dimensions (absent = 0)."""
        names = set(self._amounts) | set(other)
        return Resource({n: min(self.get(n), other.get(n, 0)) for n in names})

    def max(self, other: Mapping[str, int]) -> Resource:
        """Per-dimension maximum over the union of dimensions (absent = 0)."""
        names = set(self._amounts) | set(other)
        return Resource({n: max(self.get(n), other.get(n, 0)) for n in names})

    # -- comparisons (Volcano semantics) --------------------------------------------------
    def is_empty(self) -> bool:
        """True when every dimension is zero (Volcano `IsEmpty`)."""
        return not any(v > 0 for v in self._amounts.values())

    def less_equal(self, other: Mapping[str, int], *, missing: _Missing = "zero") -> bool:
        """Volcano `LessEqual(rr, defaultValue)`.

        cpu and memory are always compared (absent = 0). For other dimensions of `self`, a
        dimension absent from `other` counts as 0 (`missing="zero"`) or as unlimited
        (`missing="infinity"`).
        """
        for name, value in self._amounts.items():
            if name not in other and name not in _ALWAYS_PRESENT and missing == "infinity":
                continue
            if value > other.get(name, 0):
                return False
        return True

    def less_equal_on(self, other: Mapping[str, int], dims: Iterable[str]) -> bool:
        """Compare only the given dimensions (Volcano `LessEqualWithDimension`); absent = 0."""
        return all(self.get(name) <= other.get(name, 0) for name in dims)

    def less_partly(self, other: Mapping[str, int], *, missing: _Missing = "zero") -> bool:
        """Volcano `LessPartly`: some dimension of `self` is strictly below `other`'s."""
        names = set(self._amounts) | set(other)
        for name in names:
            if name not in other and name not in _ALWAYS_PRESENT and missing == "infinity":
                return True
            if self.get(name) < other.get(name, 0):
                return True
        return False

    def to_list(self) -> dict[str, str]:
        """Format as a Kubernetes ResourceList."""
        return format_resource_list(self._amounts)
