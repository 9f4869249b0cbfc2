"""Parse quantities users write with units: "15T" tokens, "80GiB", "400Gbps", "3.5d".

Specs are written by people, so a token budget is "15.6T", not 15600000000000.
Each parser returns one exact base unit (count, bytes, bits/s, bytes/s,
seconds) and raises ValueError with an example of what it accepts; pydantic
turns that into a field error with its path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, TypeVar

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

Q = TypeVar("Q", int, float)

_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_SPLIT = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[A-Za-z/]*)\s*$")

COUNT_SCALE: dict[str, float] = {
    "": 1.0,
    "k": 1e3,
    "m": 1e6,
    "b": 1e9,
    "g": 1e9,
    "t": 1e12,
    "p": 1e15,
}
BYTE_SCALE: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}
# Bit rates are case-sensitive on purpose: "Gbps" is bits, "GB/s" is bytes.
BIT_RATE_SCALE: dict[str, float] = {
    "bps": 1.0,
    "Kbps": 1e3,
    "Mbps": 1e6,
    "Gbps": 1e9,
    "Tbps": 1e12,
    "Gb/s": 1e9,
    "Tb/s": 1e12,
}
BYTE_RATE_SCALE: dict[str, float] = {
    "B/s": 1.0,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "TB/s": 1e12,
    "MiB/s": 2.0**20,
    "GiB/s": 2.0**30,
}
DURATION_SCALE: dict[str, float] = {
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
    "y": 365 * 86400.0,
}


def _split(value: str, what: str, example: str) -> tuple[float, str]:
    match = _SPLIT.match(value)
    if match is None:
        raise ValueError(f"expected {what} such as {example}, got '{value}'")
    return float(match["num"]), match["unit"]


def _plain_number(value: object, what: str, example: str) -> float | None:
    if isinstance(value, bool):
        raise ValueError(f"expected {what} such as {example}, got {value}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"expected {what} such as {example}, got {value}")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected {what} such as {example}, got {type(value).__name__}")
    return None


def parse_count(value: object) -> int:
    """'15.6T' -> 15_600_000_000_000; SI prefixes K, M, B/G, T, P (decimal)."""
    what, example = "a count", "15T, 2.5B or 1000"
    plain = _plain_number(value, what, example)
    if plain is None:
        num, unit = _split(str(value), what, example)
        scale = COUNT_SCALE.get(unit.lower())
        if scale is None:
            raise ValueError(f"unknown count suffix '{unit}' in '{value}'; use K, M, B, T or P")
        plain = num * scale
    if plain != round(plain):
        raise ValueError(f"expected a whole number, got {value}")
    return round(plain)


def parse_bytes(value: object) -> int:
    """'80GiB' -> 85_899_345_920; a bare number is bytes. GB = 10^9, GiB = 2^30."""
    what, example = "a size", "80GiB, 141GB or 1.5TB"
    plain = _plain_number(value, what, example)
    if plain is None:
        num, unit = _split(str(value), what, example)
        scale = BYTE_SCALE.get(unit.lower() or "b")
        if scale is None:
            raise ValueError(f"unknown size unit '{unit}' in '{value}'; use GB, GiB, TB or TiB")
        plain = num * scale
    return round(plain)


def parse_bit_rate(value: object) -> float:
    """'400Gbps' -> 4e11 bits/s; a bare number is Gb/s, the unit fabrics are sold in."""
    what, example = "a bit rate", "400Gbps or 3.2Tbps"
    plain = _plain_number(value, what, example)
    if plain is not None:
        return plain * 1e9
    num, unit = _split(str(value), what, example)
    scale = BIT_RATE_SCALE.get(unit)
    if scale is None:
        hint = " (GB/s is bytes: write Gbps for bits)" if unit in BYTE_RATE_SCALE else ""
        if not hint and unit.upper() in {u.upper() for u in BIT_RATE_SCALE}:
            hint = " (units are case-sensitive: Gbps is bits, GB/s is bytes)"
        raise ValueError(f"unknown bit-rate unit '{unit}' in '{value}'{hint}; use Gbps or Tbps")
    return num * scale


def parse_byte_rate(value: object) -> float:
    """'200GB/s' -> 2e11 bytes/s; a bare number is GB/s, the unit storage is sold in."""
    what, example = "a throughput", "200GB/s or 1.5TB/s"
    plain = _plain_number(value, what, example)
    if plain is not None:
        return plain * 1e9
    num, unit = _split(str(value), what, example)
    scale = BYTE_RATE_SCALE.get(unit)
    if scale is None:
        hint = " (Gbps is bits: write GB/s for bytes)" if unit in BIT_RATE_SCALE else ""
        if not hint and unit.upper() in {u.upper() for u in BYTE_RATE_SCALE}:
            hint = " (units are case-sensitive: GB/s is bytes, Gbps is bits)"
        raise ValueError(f"unknown throughput unit '{unit}' in '{value}'{hint}; use GB/s or TB/s")
    return num * scale


def parse_duration(value: object) -> float:
    """'3.5d' -> 302400.0 seconds; units s, m(in), h, d, w, y; a bare number is seconds."""
    what, example = "a duration", "90d, 6h, 30min or 3600"
    plain = _plain_number(value, what, example)
    if plain is None:
        num, unit = _split(str(value), what, example)
        scale = DURATION_SCALE.get(unit.lower())
        if scale is None:
            raise ValueError(
                f"unknown duration unit '{unit}' in '{value}'; use s, min, h, d, w or y"
            )
        plain = num * scale
    return plain


def _schema(description: str, example: str) -> WithJsonSchema:
    """The schema says what users may write (a number or a string with a unit)."""
    return WithJsonSchema(
        {
            "anyOf": [{"type": "number"}, {"type": "string"}],
            "description": description,
            "examples": [example],
        }
    )


def _positive(parse: Callable[[object], Q]) -> Callable[[object], Q]:
    """Wrap a parser so zero and negative amounts are rejected with the amount shown."""

    def check(value: object) -> Q:
        amount = parse(value)
        if amount <= 0:
            raise ValueError(f"must be greater than 0, got {value!r}")
        return amount

    return check


def _non_negative(parse: Callable[[object], Q]) -> Callable[[object], Q]:
    def check(value: object) -> Q:
        amount = parse(value)
        if amount < 0:
            raise ValueError(f"must not be negative, got {value!r}")
        return amount

    return check


TokenCount = Annotated[
    int,
    BeforeValidator(_positive(parse_count)),
    _schema("A positive count; SI suffixes K, M, B, T, P.", "15T"),
]
Bytes = Annotated[
    int,
    BeforeValidator(_non_negative(parse_bytes)),
    _schema("A size in bytes; units GB, GiB, TB, TiB.", "80GiB"),
]
BitsPerSecond = Annotated[
    float,
    BeforeValidator(_positive(parse_bit_rate)),
    _schema("A positive bit rate; units Gbps, Tbps (bare number: Gb/s).", "400Gbps"),
]
BytesPerSecond = Annotated[
    float,
    BeforeValidator(_positive(parse_byte_rate)),
    _schema("A positive throughput; units GB/s, TB/s (bare number: GB/s).", "200GB/s"),
]
Seconds = Annotated[
    float,
    BeforeValidator(_non_negative(parse_duration)),
    PlainSerializer(float),
    _schema("A duration; units s, min, h, d, w, y (bare number: seconds).", "90d"),
]
PositiveSeconds = Annotated[
    float,
    BeforeValidator(_positive(parse_duration)),
    PlainSerializer(float),
    _schema("A positive duration; units s, min, h, d, w, y (bare number: seconds).", "6h"),
]
