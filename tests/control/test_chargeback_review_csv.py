"""The chargeback CSV as a finance partner reads it: every row checks, every column adds up.

Review findings, each checked here against figures worked out by hand:
- on the usage basis a row mixing jobs that report utilisation with jobs that do not read
  2.000000 allocated, 0.500000 used, 2.50 a GPU-hour and 3.75 USD: neither hours × rate,
  because 1.5 hours were billed and the CSV had no column for them;
- GPU-hours are rounded to six decimals row by row, so three rows of 0.333333 stood above
  a TOTAL of 1.000000, with no rounding line and nothing in the header saying how hours
  round.
"""

from __future__ import annotations

import csv
import io
from decimal import ROUND_HALF_UP, Decimal

from gpufleet.control.chargeback import chargeback
from gpufleet.control.chargeback_csv import to_csv
from gpufleet.control.chargeback_report import ROUNDING, TOTAL, UsageRecord

H = 3600.0
H100 = "h100-sxm5-80gb"


def rec(job_id: int, team: str, end_s: float, used_gpu_s: float | None = None) -> UsageRecord:
    return UsageRecord(job_id, 1, team, None, "ann", H100, "standard", 0.0, end_s, 1000, used_gpu_s)


def rows_of(text: str) -> tuple[list[str], list[dict[str, str]]]:
    comments = [line for line in text.splitlines() if line.startswith("#")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return comments, list(csv.DictReader(io.StringIO(body)))


def test_usage_basis_rows_carry_the_hours_they_are_billed_on() -> None:
    # job 1 held a GPU for an hour and was busy half of it; job 2 reports no utilisation
    records = [rec(1, "vision", H, used_gpu_s=0.5 * H), rec(2, "vision", H)]
    report = chargeback(
        records,
        period_start_s=0.0,
        period_end_s=H,
        rates_usd_micro_per_gpu_h={H100: 2_500_000},
        basis="usage",
    )
    comments, rows = rows_of(to_csv(report))
    vision = rows[0]
    assert vision["gpu_hours_allocated"] == "2.000000"
    assert vision["gpu_hours_used"] == "0.500000"
    # billed: 0.5 used (job 1) + 1.0 allocated (job 2, unreported) = 1.5; 1.5 x 2.50 = 3.75
    assert vision["gpu_hours_billed"] == "1.500000"
    assert vision["cost_usd"] == "3.75"
    for row in rows:
        product = Decimal(row["gpu_hours_billed"]) * Decimal(row["rate_usd_per_gpu_hour"])
        assert product.quantize(Decimal("0.01"), ROUND_HALF_UP) == Decimal(row["cost_usd"])
    assert any("gpu_hours_billed x rate" in c for c in comments)


def test_the_allocation_basis_keeps_its_columns() -> None:
    report = chargeback(
        [rec(1, "vision", H)],
        period_start_s=0.0,
        period_end_s=H,
        rates_usd_micro_per_gpu_h={H100: 2_500_000},
    )
    _, rows = rows_of(to_csv(report))
    assert "gpu_hours_billed" not in rows[0]  # allocated is what is billed there


def test_hour_columns_add_up_to_the_total_and_the_header_says_how_they_round() -> None:
    # three teams held one GPU for 20 minutes each: 1/3 GPU-hour, 0.333333 rounded
    records = [rec(i, f"t{i}", H / 3) for i in range(3)]
    report = chargeback(
        records,
        period_start_s=0.0,
        period_end_s=H,
        rates_usd_micro_per_gpu_h={H100: 3_000_000},
    )
    comments, rows = rows_of(to_csv(report))
    assert [r["team"] for r in rows] == ["t0", "t1", "t2", ROUNDING, TOTAL]
    assert [r["gpu_hours_allocated"] for r in rows] == [
        "0.333333",
        "0.333333",
        "0.333333",
        "0.000001",
        "1.000000",
    ]
    for column in ("gpu_hours_allocated", "cost_usd", "idle_cost_usd", "total_cost_usd"):
        assert sum(Decimal(r[column]) for r in rows[:-1]) == Decimal(rows[-1][column])
    assert any("GPU-hours to 6 decimals" in c for c in comments)


def test_no_rounding_line_when_every_column_adds_up() -> None:
    report = chargeback(
        [rec(1, "a", H), rec(2, "b", 2 * H)],
        period_start_s=0.0,
        period_end_s=2 * H,
        rates_usd_micro_per_gpu_h={H100: 2_000_000},
    )
    _, rows = rows_of(to_csv(report))
    assert [r["team"] for r in rows] == ["a", "b", TOTAL]
