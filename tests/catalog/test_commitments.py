"""Commitment and discount facts: units, ranges, sourced figures."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.columns import TEXT_COLUMNS, unit_of
from gpufleet.catalog.commitments import Commitment, load_commitments
from gpufleet.catalog.instances import get_instance
from gpufleet.catalog.table import data_file

TEXT = {
    "provider",
    "program",
    "instance_types",
    "accelerator",
    "regions",
    "scope",
    "source_kind",
}


def capacity_block(instance_type: str) -> Commitment:
    return next(
        c
        for c in load_commitments()
        if c.program == "capacity-block" and c.instance_types == (instance_type,)
    )


def test_loads_every_fact_row() -> None:
    rows = load_commitments()
    assert len(rows) == 43
    assert {r.provider for r in rows} == {"aws", "gcp", "azure", "cross-cloud"}
    assert all(r.scope and r.source for r in rows)


def test_numeric_columns_carry_units() -> None:
    header = next(csv.reader(io.StringIO(data_file("commitments.csv"))))
    assert set(header) == set(Commitment.model_fields)
    for column in header:
        if column not in TEXT and column not in TEXT_COLUMNS:
            assert unit_of(column) is not None, column


@pytest.mark.parametrize(
    ("instance_type", "rate", "per_accelerator"),
    [
        ("p5.48xlarge", "39.33", "4.916"),
        ("p5e.48xlarge", "43.26", "5.408"),
        ("p4d.24xlarge", "14.75", "1.844"),
        ("trn1.32xlarge", "15.49", "0.968"),
    ],
)
def test_capacity_block_rates_match_the_instance_accelerator_count(
    instance_type: str, rate: str, per_accelerator: str
) -> None:
    block = capacity_block(instance_type)
    assert block.rate_usd_per_hour == Decimal(rate)
    assert block.rate_per_accelerator_usd_per_hour == Decimal(per_accelerator)
    assert block.source_kind == "vendor"
    count = get_instance("aws", instance_type).accelerators_count
    assert count is not None
    # The page rounds its per-GPU figure to 3 decimals.
    assert abs(Decimal(rate) / Decimal(str(count)) - Decimal(per_accelerator)) < Decimal("0.001")


def test_accelerators_are_canonical() -> None:
    for row in load_commitments():
        if row.accelerator is not None:
            assert get_accelerator(row.accelerator).name == row.accelerator


def test_up_to_figures_are_maxima_only() -> None:
    azure = [r for r in load_commitments() if r.provider == "azure" and r.program == "reservation"]
    assert sorted(r.term_years for r in azure if r.term_years is not None) == [1, 3]
    assert all(r.discount_max_fraction == 0.72 and r.discount_fraction is None for r in azure)


def test_gcp_resource_cud_terms() -> None:
    resource = {
        (r.term_years, r.discount_fraction)
        for r in load_commitments()
        if r.program == "cud-resource" and r.discount_fraction is not None and not r.accelerator
    }
    assert resource == {(1, 0.37), (3, 0.55)}


def test_gcp_a3_committed_prices_are_the_sources_monthly_figures() -> None:
    """Per-SKU CUDs for H100 (issue 27): discount = 1 − commitment ÷ on-demand per month, as
    the third-party copy of Google's SKU catalogue states them; the hourly rate ÷ 730 h."""
    a3 = {
        (r.instance_types, r.regions, r.term_years): r
        for r in load_commitments()
        if r.accelerator == "h100-sxm5-80gb" and r.program == "cud-resource"
    }
    assert len(a3) == 6
    one = a3[(("a3-highgpu-8g",), ("us-central1",), 1)]
    assert float(one.discount_fraction or 0) == pytest.approx(
        1 - 44_810.08066464 / 64_597.69992888, abs=1e-4
    )
    assert float(one.rate_usd_per_hour or 0) == pytest.approx(44_810.08066464 / 730, abs=1e-4)
    three = a3[(("a3-megagpu-8g",), ("us-east4",), 3)]
    assert float(three.discount_fraction or 0) == pytest.approx(
        1 - 29_555.25790768 / 67_844.4393504, abs=1e-4
    )
    assert {r.source_kind for r in a3.values()} == {"analyst"}


def test_ranges_are_split_into_min_and_max() -> None:
    blackwell = next(r for r in load_commitments() if r.program == "committed-use")
    assert (blackwell.discount_min_fraction, blackwell.discount_max_fraction) == (0.3, 0.55)
    assert (blackwell.term_min_years, blackwell.term_max_years) == (1, 3)


def test_validation_rejects_inverted_ranges_and_bad_fractions() -> None:
    base = {
        "provider": "aws",
        "program": "savings-plan",
        "scope": "x",
        "source": "s",
        "source_kind": "vendor",
        "retrieved": "2026-11-29",
    }
    with pytest.raises(ValueError, match="fraction"):
        Commitment.model_validate({**base, "discount_max_fraction": 72})
    with pytest.raises(ValueError, match="exceeds"):
        Commitment.model_validate(
            {**base, "discount_min_fraction": 0.6, "discount_max_fraction": 0.3}
        )


def test_json_dump_writes_rates_as_numbers() -> None:
    dumped = capacity_block("p5.48xlarge").model_dump(mode="json")
    assert dumped["rate_usd_per_hour"] == 39.33
    assert dumped["regions"] == ["US East (N. Virginia)", "US East (Ohio)"]
