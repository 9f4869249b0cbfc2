from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.quantities import (
    parse_bit_rate,
    parse_byte_rate,
    parse_bytes,
    parse_count,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("15T", 15 * 10**12),
        ("15.6T", 15_600_000_000_000),
        ("2.5B", 2_500_000_000),
        ("300k", 300_000),
        (1000, 1000),
        ("1e12", 10**12),
    ],
)
def test_counts(text: object, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [("80GiB", 80 * 2**30), ("141GB", 141 * 10**9), ("1.5TB", 1_500_000_000_000), (42, 42)],
)
def test_bytes(text: object, value: int) -> None:
    assert parse_bytes(text) == value


def test_bits_and_bytes_are_different_units() -> None:
    assert parse_bit_rate("400Gbps") == 400e9
    assert parse_byte_rate("50GB/s") == 50e9
    assert parse_bit_rate(400) == 400e9
    with pytest.raises(ValueError, match="GB/s is bytes"):
        parse_bit_rate("400GB/s")
    with pytest.raises(ValueError, match="Gbps is bits"):
        parse_byte_rate("400Gbps")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3.5d", 302_400.0), ("90d", 7_776_000.0), ("6h", 21_600.0), ("30min", 1800.0), (60, 60.0)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("parser", "text", "message"),
    [
        (parse_count, "15X", "unknown count suffix 'X' in '15X'; use K, M, B, T or P"),
        (parse_count, "lots", "expected a count such as 15T, 2.5B or 1000, got 'lots'"),
        (parse_count, "1.5", "expected a whole number, got 1.5"),
        (parse_bytes, "80 GiG", "unknown size unit 'GiG' in '80 GiG'; use GB, GiB, TB or TiB"),
        (parse_duration, "3 fortnights", "unknown duration unit 'fortnights' in '3 fortnights'"),
        (parse_count, True, "expected a count such as 15T, 2.5B or 1000, got True"),
    ],
)
def test_bad_quantities_say_what_is_accepted(parser: object, text: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parser(text)  # type: ignore[operator]


@given(st.integers(min_value=0, max_value=10**15))
def test_plain_integers_round_trip(n: int) -> None:
    assert parse_count(n) == n
    assert parse_count(str(n)) == n
    assert parse_bytes(f"{n}B") == n


def test_zero_and_negative_amounts_are_rejected_where_they_make_no_sense() -> None:
    from pydantic import TypeAdapter, ValidationError

    from gpufleet.quantities import PositiveSeconds, TokenCount

    with pytest.raises(ValidationError, match="must be greater than 0, got '0T'"):
        TypeAdapter(TokenCount).validate_python("0T")
    with pytest.raises(ValidationError, match="must be greater than 0, got 0"):
        TypeAdapter(PositiveSeconds).validate_python(0)
