"""Terminal formatting helpers."""

from __future__ import annotations

import pytest

from gpufleet.cli.output import header, human
from gpufleet.formatting import format_bytes


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (80 * 10**9, "80 GB"),
        (32 * 2**30, "32 GiB"),
        (2 * 2**40, "2 TiB"),
        (30.72e12, "30.72 TB"),
        (12 * 10**15, "12 PB"),
        (512, "512 B"),
    ],
)
def test_format_bytes(value: float, text: str) -> None:
    assert format_bytes(value) == text


@pytest.mark.parametrize(
    ("column", "label"),
    [
        ("memory_bandwidth_gbytes_per_s", "memory bandwidth (GB/s)"),
        ("port_gbit_per_s", "port (Gb/s)"),
        ("on_demand_usd_per_hour", "on demand ($/h)"),
        ("memory_bytes", "memory"),
        ("vendor", "vendor"),
    ],
)
def test_headers_carry_units(column: str, label: str) -> None:
    assert header(column) == label


def test_blank_cells_show_a_dash() -> None:
    assert human("x", None) == "-"
    assert human("aliases", ("a", "b")) == "a, b"
