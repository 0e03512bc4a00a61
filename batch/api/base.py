"""Common base for every Kubernetes-shaped pydantic model in Tephra's API.

Kubernetes objects routinely carry fields a given program does not model (newer API versions,
annotations of other tools, the full pod spec). So every model keeps unknown keys (`extra="allow"`)
and dumping with `to_dict()` (by alias, unset fields excluded) reproduces the input exactly.
JSON names are the camelCase aliases; Python attribute names are snake_case.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, PlainValidator, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from batch.api.quantity import QuantityError, parse_quantity

__all__ = [
    "DNS1123_LABEL",
    "DNS1123_SUBDOMAIN",
    "QUANTITY_PATTERN",
    "KubeModel",
    "QuantityValue",
    "ResourceList",
]

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


class KubeModel(BaseModel):
    """Base model: camelCase aliases, lossless for unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_default=False,
    )

    #: CRD generation marks the schema of this model `x-kubernetes-preserve-unknown-fields`.
    crd_preserve_unknown: ClassVar[bool] = False

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        if cls.crd_preserve_unknown:
            target["x-kubernetes-preserve-unknown-fields"] = True
        return schema

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes JSON: aliases, only fields that were set (lossless)."""
        return self.model_dump(by_alias=True, exclude_unset=True)

    @classmethod
    def from_dict(cls, data: Any, *, strict: bool = False) -> Self:
        """Load a Kubernetes JSON dict (strict=True rejects type coercions like "3" -> 3)."""
        return cls.model_validate(data, strict=strict)


def _check_quantity(value: Any) -> str | int | float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PydanticCustomError(
            "quantity",
            "a quantity must be a string or a number, not {t}",
            {"t": type(value).__name__},
        )
    problem = _quantity_problem(type(value).__name__, value)
    if problem is not None:
        raise PydanticCustomError("quantity", "{msg}", {"msg": problem})
    return value


@functools.lru_cache(maxsize=8192)
def _quantity_problem(_kind: str, value: str | int | float) -> str | None:
    try:
        parse_quantity(value)
    except QuantityError as exc:
        return str(exc)
    return None


#: A Kubernetes quantity as written by the user (kept verbatim; parse with batch.api.quantity).
QuantityValue = Annotated[
    str | int | float,
    PlainValidator(_check_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]

#: Kubernetes ResourceList: resource name -> quantity.
ResourceList = dict[str, QuantityValue]
