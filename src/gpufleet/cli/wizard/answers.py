"""Checking one answer, with the same pydantic fields and quantity parsers the spec files use.

An answer is checked the moment it is given, against the very field it will fill,
so the written spec always loads and a bad answer is refused with the spec
loader's own message, while the question can still be asked again.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

from pydantic import BaseModel, PositiveInt, TypeAdapter, ValidationError

from gpufleet.catalog.architecture import ModelArch
from gpufleet.specs.load import describe

_TRUE = frozenset({"y", "yes", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "false", "off", "0"})


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    """A validator for one field, with the field's own type and constraints."""
    return TypeAdapter(model.model_fields[name].rebuild_annotation())


def describe_errors(model: type[BaseModel], exc: ValidationError) -> str:
    return "; ".join(describe(model, err) for err in exc.errors())


def check(model: type[BaseModel], name: str, value: object) -> Any:
    """Validate `value` as field `name` of `model`; the message is the spec loader's."""
    try:
        return _adapter(model, name).validate_python(value)
    except ValidationError as exc:
        raise ValueError(describe_errors(model, exc)) from None


def choice(model: type[BaseModel], name: str) -> Callable[[object], Any]:
    """A literal field: case does not matter."""

    def parse(value: object) -> Any:
        return check(model, name, value.strip().lower() if isinstance(value, str) else value)

    return parse


def field(model: type[BaseModel], name: str) -> Callable[[object], Any]:
    return lambda value: check(model, name, value)


_POSITIVE_INT: TypeAdapter[int] = TypeAdapter(PositiveInt)


def positive_int(value: object) -> int:
    try:
        return _POSITIVE_INT.validate_python(value)
    except ValidationError as exc:
        raise ValueError(describe_errors(ModelArch, exc)) from None


def number(value: float) -> int | float:
    """Whole numbers as integers, so the written spec reads 800 rather than 800.0."""
    return int(value) if float(value).is_integer() else value


def items(value: object) -> list[object]:
    """A YAML list, or text separated by commas or spaces."""
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    raise ValueError(f"expected a list or comma-separated text, got {type(value).__name__}")


def as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected yes or no, got {value!r}")


class Quantity(NamedTuple):
    """An answer with units: as written (for the spec) and in base units (for the notes)."""

    written: object
    amount: float


def quantity(model: type[BaseModel], name: str) -> Callable[[object], Quantity]:
    def parse(value: object) -> Quantity:
        amount = check(model, name, value)
        written = value.strip() if isinstance(value, str) else amount
        return Quantity(written, float(amount))

    return parse
