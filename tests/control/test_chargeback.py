"""Chargeback: clipping, grouping, rates, idle distribution, usage basis, exports, budgets.

Most tests are tables whose ids say the case in words. The identity that matters to a finance
reader is checked throughout: workload cost + idle cost = capacity × period × rate, with every
column adding up to its TOTAL to the cent. GPUFLEET_PROPERTY_SCALE multiplies the Hypothesis
examples.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.control.chargeback import chargeback
from gpufleet.control.chargeback_budget import budget_status, gpu_hours_text, month_bounds
from gpufleet.control.chargeback_csv import FOCUS_COLUMNS, to_csv, to_focus_csv
from gpufleet.control.chargeback_report import (
    GROUP_KEYS,
    IDLE,
    ROUNDING,
    ChargebackReport,
    RateChange,
    Rounding,
    UsageRecord,
)
from gpufleet.errors import UserError

H = 3600.0
DAY = 24 * H
H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"
RATES = {H100: 2_000_000, A100: 1_000_000}  # $2 and $1 per GPU-hour, in micro-dollars


def rec(**kw: Any) -> UsageRecord:
    """A record with dull defaults: job 1 of team vision holding one H100 for the first hour."""
    base: dict[str, Any] = {
        "job_id": 1,
        "attempt": 0,
        "team": "vision",
        "project": "detect",
        "user": "ann",
        "flavor": H100,
        "priority_class": "standard",
        "start_s": 0.0,
        "end_s": H,
        "gpu_milli": 1000,
        "used_gpu_s": None,
    }
    base.update(kw)
    return UsageRecord(**base)


def report(records: list[UsageRecord], **kw: Any) -> ChargebackReport:
    args: dict[str, Any] = {
        "period_start_s": 0.0,
        "period_end_s": DAY,
        "rates_usd_micro_per_gpu_h": RATES,
    }
    args.update(kw)
    return chargeback(records, **args)


def by_value(rep: ChargebackReport, attr: str) -> dict[tuple[str | None, ...], Any]:
    return {tuple(v for _, v in row.group): getattr(row, attr) for row in rep.rows}


# a small mixed cluster used by several tables
TEAMS = [
    rec(job_id=1, team="vision", project="detect", user="ann", start_s=0, end_s=10 * H,
        gpu_milli=8000),
    rec(job_id=2, team="vision", project="segment", user="bob", flavor=A100,
        priority_class="low", start_s=0, end_s=24 * H, gpu_milli=2000),
    rec(job_id=10, team="nlp", project=None, user="bob", start_s=12 * H, end_s=16 * H,
        gpu_milli=4000),
    rec(job_id=9, team="nlp", project="chat", user="cy", priority_class="low", start_s=0,
        end_s=2 * H, gpu_milli=1000),
]  # fmt: skip


# ---------------------------------------------------------------------------------------
# clipping


@pytest.mark.parametrize(
    ("start_s", "end_s", "gpu_milli", "expected_gpu_h"),
    [
        pytest.param(2 * H, 5 * H, 1000, 3.0, id="inside the period counts whole"),
        pytest.param(-5 * H, 2 * H, 2000, 4.0, id="started before the period: only the part in it"),
        pytest.param(20 * H, 30 * H, 1000, 4.0, id="runs past the period end: only up to the end"),
        pytest.param(-DAY, 2 * DAY, 1000, 24.0, id="spans the period: the whole period"),
        pytest.param(-5 * H, -1 * H, 1000, 0.0, id="entirely before the period: nothing"),
        pytest.param(
            DAY, DAY + H, 1000, 0.0, id="starts at the period end: nothing (end excluded)"
        ),
        pytest.param(-H, 0.0, 1000, 0.0, id="ends at the period start: nothing"),
        pytest.param(3 * H, 3 * H, 1000, 0.0, id="zero-length record: nothing"),
        pytest.param(0.0, DAY, 143, 3.432, id="MIG 1g slice of 143 milli for the whole day"),
        pytest.param(0.0, 1.0, 1000, 1 / 3600, id="one GPU-second"),
    ],
)
def test_records_are_clipped_to_the_period(
    start_s: float, end_s: float, gpu_milli: int, expected_gpu_h: float
) -> None:
    rep = report([rec(start_s=start_s, end_s=end_s, gpu_milli=gpu_milli)])
    assert rep.totals.gpu_hours_allocated == pytest.approx(expected_gpu_h)
    assert rep.records_in_period == (1 if expected_gpu_h else 0)
    assert len(rep.rows) == (1 if expected_gpu_h else 0)


def test_used_hours_are_scaled_by_the_same_overlap_fraction() -> None:
    # 10 h held, 5 GPU-h busy over the whole record; the period sees the last 4 h of it
    r = rec(start_s=-6 * H, end_s=4 * H, used_gpu_s=5 * H)
    rep = report([r])
    (row,) = rep.rows
    assert row.gpu_hours_allocated == pytest.approx(4.0)
    assert row.gpu_hours_used == pytest.approx(2.0)
    assert row.gpu_efficiency == pytest.approx(0.5)


def test_consecutive_periods_add_up_to_the_whole() -> None:
    records = [rec(start_s=-3 * H, end_s=DAY + 7 * H, gpu_milli=3000)]
    cut = 11.5 * H
    first = report(records, period_start_s=-3 * H, period_end_s=cut)
    second = report(records, period_start_s=cut, period_end_s=DAY + 7 * H)
    both = first.totals.gpu_hours_allocated + second.totals.gpu_hours_allocated
    assert both == pytest.approx(3 * 34)
    assert first.totals.cost_usd + second.totals.cost_usd == Decimal("204.00")


# ---------------------------------------------------------------------------------------
# grouping


@pytest.mark.parametrize(
    ("group_by", "expected_gpu_h"),
    [
        pytest.param(("team",), {("nlp",): 18.0, ("vision",): 128.0}, id="by team"),
        pytest.param(
            ("project",),
            {("chat",): 2.0, ("detect",): 80.0, ("segment",): 48.0, (None,): 16.0},
            id="by project: no project is its own group, listed last",
        ),
        pytest.param(
            ("user",), {("ann",): 80.0, ("bob",): 64.0, ("cy",): 2.0}, id="by user across teams"
        ),
        pytest.param(("accelerator",), {(A100,): 48.0, (H100,): 98.0}, id="by accelerator"),
        pytest.param(("priority",), {("low",): 50.0, ("standard",): 96.0}, id="by priority"),
        pytest.param(
            ("job",),
            {("1",): 80.0, ("2",): 48.0, ("9",): 2.0, ("10",): 16.0},
            id="by job: ids in numeric order",
        ),
        pytest.param(
            ("team", "accelerator"),
            {("nlp", H100): 18.0, ("vision", A100): 48.0, ("vision", H100): 80.0},
            id="team x accelerator",
        ),
        pytest.param(
            ("team", "project"),
            {
                ("nlp", "chat"): 2.0,
                ("nlp", None): 16.0,
                ("vision", "detect"): 80.0,
                ("vision", "segment"): 48.0,
            },
            id="team x project",
        ),
        pytest.param(
            ("user", "priority"),
            {
                ("ann", "standard"): 80.0,
                ("bob", "low"): 48.0,
                ("bob", "standard"): 16.0,
                ("cy", "low"): 2.0,
            },
            id="user x priority",
        ),
    ],
)
def test_grouping(
    group_by: tuple[str, ...], expected_gpu_h: dict[tuple[str | None, ...], float]
) -> None:
    rep = report(TEAMS, group_by=group_by)
    assert rep.group_by == group_by
    got = by_value(rep, "gpu_hours_allocated")
    assert list(got) == list(expected_gpu_h)  # the order, too
    assert got == pytest.approx(expected_gpu_h)
    assert rep.totals.gpu_hours_allocated == pytest.approx(146.0)
    assert sum(r.cost_usd for r in rep.rows) == rep.totals.cost_usd


def test_row_value_lookup_and_flavors() -> None:
    rep = report(TEAMS, group_by=("team", "project"))
    vision_detect = rep.rows[2]
    assert vision_detect.value("team") == "vision"
    assert vision_detect.value("project") == "detect"
    assert vision_detect.flavors == (H100,)
    assert rep.rows[1].value("project") is None
    with pytest.raises(KeyError):
        vision_detect.value("user")


def test_attempts_of_one_job_add_up_under_job() -> None:
    records = [rec(attempt=0, end_s=H), rec(attempt=1, start_s=2 * H, end_s=4 * H)]
    rep = report(records, group_by=("job",))
    assert [(r.value("job"), r.gpu_hours_allocated, r.records) for r in rep.rows] == [("1", 3.0, 2)]


def test_group_by_accepts_a_single_string() -> None:
    assert report(TEAMS, group_by="team").group_by == ("team",)


# ---------------------------------------------------------------------------------------
# rates


@pytest.mark.parametrize(
    ("records", "rates", "cost", "rate", "unpriced"),
    [
        pytest.param(
            [rec(end_s=3 * H, gpu_milli=8000)],
            {H100: 2_500_000},
            "60.00",
            "2.500000",
            (),
            id="8 GPUs x 3 h x $2.50",
        ),
        pytest.param(
            [rec(end_s=DAY, gpu_milli=143)],
            {H100: 2_000_000},
            "6.86",
            "2.000000",
            (),
            id="MIG 1g slice: 143 milli x 24 h x $2 = 6.864, rounded once",
        ),
        pytest.param(
            [rec(end_s=H, gpu_milli=1000), rec(flavor=A100, end_s=H, gpu_milli=3000)],
            {H100: 2_000_000, A100: 1_000_000},
            "5.00",
            "1.250000",
            (),
            id="two flavors: rate averaged over billed hours",
        ),
        pytest.param(
            [rec(end_s=H), rec(flavor="mi300x", end_s=H, gpu_milli=4000)],
            {H100: 2_000_000},
            "2.00",
            None,
            ("mi300x",),
            id="unpriced flavor costs 0, is listed and leaves no blended rate",
        ),
        pytest.param(
            [rec(end_s=H)], {}, "0.00", None, (H100,), id="no rates at all: everything unpriced"
        ),
        pytest.param(
            [rec(end_s=1.0)],
            {H100: 1_000_000},
            "0.00",
            "1.000000",
            (),
            id="a GPU-second at $1/h rounds to 0.00",
        ),
    ],
)
def test_rates(
    records: list[UsageRecord],
    rates: dict[str, int],
    cost: str,
    rate: str | None,
    unpriced: tuple[str, ...],
) -> None:
    rep = report(records, rates_usd_micro_per_gpu_h=rates)
    (row,) = rep.rows
    assert row.cost_usd == Decimal(cost)
    assert row.rate_usd_per_gpu_h == (None if rate is None else Decimal(rate))
    assert rep.unpriced_flavors == unpriced
    assert rep.totals.total_cost_usd == Decimal(cost)


def test_each_row_is_rounded_on_its_own_and_the_remainder_is_a_line() -> None:
    """Three teams, each 1/3 of an hour at $1/h: $0.3333 each, $1.00 in all. Each row reads
    0.33 (its hours × its rate, to the cent: a reader can check it), the TOTAL is the exact
    sum rounded once, and the cent between them is a rounding line, not hidden in a row (it
    was added to the first: 0.34 for the same 1/3 h as the others' 0.33)."""
    records = [rec(team=t, start_s=0, end_s=1200.0) for t in ("a", "b", "c")]
    rep = report(records, rates_usd_micro_per_gpu_h={H100: 1_000_000})
    assert [r.cost_usd for r in rep.rows] == [Decimal("0.33")] * 3
    assert rep.totals.cost_usd == Decimal("1.00")
    assert rep.rounding == Rounding(Decimal("0.01"), Decimal("0.00"), Decimal("0.01"))
    assert sum(r.cost_usd for r in rep.rows) + rep.rounding.cost_usd == rep.totals.cost_usd
    _, rows = parse_csv(to_csv(rep))
    assert [r["team"] for r in rows] == ["a", "b", "c", ROUNDING, "TOTAL"]
    assert rows[3]["cost_usd"] == "0.01"
    for column in ("cost_usd", "idle_cost_usd", "total_cost_usd"):
        assert sum(Decimal(r[column]) for r in rows[:-1]) == Decimal(rows[-1][column])


def test_rows_read_as_hours_times_rate() -> None:
    """A reviewer's row: 200.0134 GPU-hours at 2.124738 is 424.98; the cost is each row's
    own product rounded once, whatever the other rows."""
    records = [
        rec(team="a", end_s=200.0134 * H),
        rec(team="b", end_s=0.6331 * H),
    ]
    rep = report(records, rates_usd_micro_per_gpu_h={H100: 2_124_738}, period_end_s=300 * H)
    for row in rep.rows:
        assert row.rate_usd_per_gpu_h is not None
        exact = Decimal(repr(row.gpu_hours_billed)) * row.rate_usd_per_gpu_h
        assert row.cost_usd == exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    assert [str(r.cost_usd) for r in rep.rows] == ["424.98", "1.35"]


# ---------------------------------------------------------------------------------------
# rate history


def test_a_rate_change_prices_each_part_at_the_rate_then() -> None:
    """Issue: one rate per flavor, overwritten, re-priced every closed period. With a
    history, an 8-GPU job across a change at 10:00 pays $2 before and $3 after."""
    history = {H100: [RateChange(0.0, 2_000_000), RateChange(10 * H, 3_000_000)]}
    records = [rec(start_s=8 * H, end_s=12 * H, gpu_milli=8000)]
    rep = report(records, rates_usd_micro_per_gpu_h=history)
    (row,) = rep.rows
    assert row.cost_usd == Decimal("80.00")  # 16 GPU-h x $2 + 16 x $3
    assert row.rate_usd_per_gpu_h == Decimal("2.5")  # averaged over its 32 billed hours
    assert [(r.from_s, r.to_s, r.rate_usd_per_gpu_h) for r in rep.rates] == [
        (0.0, 10 * H, Decimal("2.000000")),
        (10 * H, DAY, Decimal("3.000000")),
    ]
    # a period before the change is billed at the old rate, whatever was set since
    before = report(records, rates_usd_micro_per_gpu_h=history, period_end_s=10 * H)
    assert before.totals.cost_usd == Decimal("32.00")
    assert [r.rate_usd_per_gpu_h for r in before.rates] == [Decimal("2.000000")]
    after = report(records, rates_usd_micro_per_gpu_h=history, period_start_s=10 * H)
    assert before.totals.cost_usd + after.totals.cost_usd == rep.totals.cost_usd


def test_time_before_a_flavors_first_rate_is_unpriced() -> None:
    history = {H100: [RateChange(6 * H, 1_000_000)]}
    rep = report([rec(start_s=4 * H, end_s=8 * H)], rates_usd_micro_per_gpu_h=history)
    assert rep.totals.cost_usd == Decimal("2.00")  # the 2 h from 06:00
    assert rep.unpriced_flavors == (H100,)
    assert rep.rows[0].rate_usd_per_gpu_h is None  # part of it had no rate
    assert [r.rate_usd_per_gpu_h for r in rep.rates] == [None, Decimal("1.000000")]
    later = report(
        [rec(start_s=7 * H, end_s=8 * H)], rates_usd_micro_per_gpu_h=history, period_start_s=6 * H
    )
    assert later.unpriced_flavors == ()


def test_idle_is_priced_at_the_rate_of_its_time_and_keeps_the_capacity_identity() -> None:
    history = {H100: [RateChange(0.0, 1_000_000), RateChange(12 * H, 2_000_000)]}
    records = [rec(start_s=10 * H, end_s=14 * H, gpu_milli=2000)]
    rep = report(records, rates_usd_micro_per_gpu_h=history, capacity_gpus={H100: 4})
    # capacity 4 GPUs: 48 GPU-h at $1 then 48 at $2 = $144; work 4 GPU-h at $1 + 4 at $2
    assert rep.capacity_cost_usd == Decimal("144.00")
    assert rep.totals.cost_usd == Decimal("12.00")
    assert rep.idle is not None
    assert rep.idle.idle_cost_usd == Decimal("132.00")  # 44 x $1 + 44 x $2
    assert rep.totals.total_cost_usd == rep.capacity_cost_usd


def test_a_repriced_rate_is_stated() -> None:
    history = {H100: [RateChange(0.0, 1_000_000), RateChange(6 * H, 4_000_000, DAY, True)]}
    rep = report([rec(end_s=8 * H)], rates_usd_micro_per_gpu_h=history)
    assert [(r.from_s, r.repriced, r.set_s) for r in rep.repriced] == [(6 * H, True, DAY)]
    comments, _ = parse_csv(to_csv(rep))
    assert any("re-priced" in c for c in comments)
    assert any(c.startswith(f"# rate: {H100} 4.000000 USD/GPU-h from") for c in comments)


def test_of_two_rates_at_one_instant_the_later_wins() -> None:
    history = {H100: [RateChange(0.0, 1_000_000), RateChange(0.0, 5_000_000)]}
    assert report([rec()], rates_usd_micro_per_gpu_h=history).totals.cost_usd == Decimal("5.00")


# ---------------------------------------------------------------------------------------
# idle


CAPACITY = {H100: 16, A100: 4}
# TEAMS over one day: H100 98 of 384 GPU-h held (vision 80, nlp 18), A100 48 of 96 (vision)
H100_IDLE_USD = Decimal("572.00")  # (384 - 98) x $2
A100_IDLE_USD = Decimal("48.00")  # (96 - 48) x $1
CAPACITY_USD = Decimal("864.00")  # 384 x $2 + 96 x $1


@pytest.mark.parametrize(
    ("idle_method", "idle_by_team", "idle_line"),
    [
        pytest.param(
            "none",
            {"nlp": "0.00", "vision": "0.00"},
            "620.00",
            id="none: all idle on the __idle__ line",
        ),
        pytest.param(
            "uniform",
            {"nlp": "286.00", "vision": "334.00"},  # H100 idle halved; all A100 idle to vision
            None,
            id="uniform: each flavor's idle split equally among its users",
        ),
        pytest.param(
            "proportional",
            # H100 idle by held hours 80:18, A100 idle all to vision
            {"nlp": "105.06", "vision": "514.94"},
            None,
            id="proportional: by each group's allocated hours of the flavor",
        ),
    ],
)
def test_idle_methods_keep_the_capacity_identity(
    idle_method: str, idle_by_team: dict[str, str], idle_line: str | None
) -> None:
    rep = report(TEAMS, capacity_gpus=CAPACITY, idle_method=idle_method)
    assert {r.value("team"): str(r.idle_cost_usd) for r in rep.rows} == idle_by_team
    assert (None if rep.idle is None else str(rep.idle.idle_cost_usd)) == idle_line
    assert rep.idle_gpu_hours == pytest.approx(286 + 48)
    assert rep.capacity_gpu_hours == pytest.approx(384 + 96)
    # workload + idle = capacity x period x rate, and the TOTAL is the column sum
    assert rep.totals.cost_usd == Decimal("244.00")  # 98 x $2 + 48 x $1
    assert rep.totals.idle_cost_usd == H100_IDLE_USD + A100_IDLE_USD
    assert rep.totals.total_cost_usd == rep.capacity_cost_usd == CAPACITY_USD
    lines = [*rep.rows, *([rep.idle] if rep.idle else [])]
    assert sum(r.total_cost_usd for r in lines) == rep.totals.total_cost_usd
    assert all(r.total_cost_usd == r.cost_usd + r.idle_cost_usd for r in lines)


@pytest.mark.parametrize("idle_method", ["uniform", "proportional"])
def test_rows_total_per_flavor_equals_capacity_cost(idle_method: str) -> None:
    rep = report(
        TEAMS, group_by=("team", "accelerator"), capacity_gpus=CAPACITY, idle_method=idle_method
    )
    assert rep.idle is None
    for flavor, capacity_usd in ((H100, Decimal("768.00")), (A100, Decimal("96.00"))):
        rows = [r for r in rep.rows if r.value("accelerator") == flavor]
        assert sum(r.total_cost_usd for r in rows) == capacity_usd
        summary = next(s for s in rep.flavors if s.flavor == flavor)
        assert summary.capacity_cost_usd == capacity_usd
        assert summary.cost_usd + summary.idle_cost_usd == capacity_usd
        assert summary.idle_distributed


def test_idle_of_a_flavor_nobody_used_stays_on_the_idle_line() -> None:
    rep = report(
        TEAMS,
        capacity_gpus={**CAPACITY, "l4": 8},
        idle_method="proportional",
        rates_usd_micro_per_gpu_h={**RATES, "l4": 500_000},
    )
    assert rep.idle is not None
    assert rep.idle.idle_cost_usd == Decimal("96.00")  # 8 x 24 h x $0.50
    assert rep.idle.flavors == ("l4",)
    assert rep.idle.gpu_hours_allocated == 0.0
    assert rep.idle.gpu_hours_idle == pytest.approx(192.0)
    assert rep.totals.total_cost_usd == CAPACITY_USD + Decimal("96.00")


def test_half_cents_the_total_is_still_the_capacity_cost() -> None:
    # 18 GPU-seconds at $1/h cost $0.005 and the idle rest $0.995: rounding the two on their
    # own bills $1.01 for a $1.00 GPU-hour. The lines do (each checks as hours × rate); the
    # TOTAL is the capacity cost rounded once, and the rounding line says so.
    rep = report(
        [rec(end_s=18.0)],
        period_end_s=H,
        rates_usd_micro_per_gpu_h={H100: 1_000_000},
        capacity_gpus={H100: 1},
    )
    assert rep.rows[0].cost_usd == Decimal("0.01")
    assert rep.idle is not None
    assert rep.idle.idle_cost_usd == Decimal("1.00")  # 0.995 GPU-hours x $1, half up
    assert rep.totals.cost_usd == Decimal("0.01")
    assert rep.totals.idle_cost_usd == Decimal("0.99")
    assert rep.totals.total_cost_usd == rep.capacity_cost_usd == Decimal("1.00")
    assert rep.rounding == Rounding(Decimal("0.00"), Decimal("-0.01"), Decimal("-0.01"))


def test_the_idle_line_is_its_hours_times_its_rate() -> None:
    """Issue: 80.997344 idle GPU-hours at 1.971139 USD/h = 159.657 read 159.65 in JSON, CSV
    and the portal: the idle line was the total rounded less the costs rounded. It is its
    own product rounded like every other line; the cent goes to the rounding line."""
    rep = report(
        [rec(end_s=29.0)],
        period_end_s=291_619.4384,  # 1 GPU: 29 s held, 80.997344 h idle
        rates_usd_micro_per_gpu_h={H100: 1_971_139},
        capacity_gpus={H100: 1},
    )
    assert rep.idle is not None
    assert rep.idle.gpu_hours_idle == pytest.approx(80.997344, abs=1e-9)
    assert rep.idle.rate_usd_per_gpu_h == Decimal("1.971139")
    assert rep.idle.idle_cost_usd == Decimal("159.66")
    assert rep.rows[0].cost_usd == Decimal("0.02")
    assert rep.totals.total_cost_usd == rep.capacity_cost_usd == Decimal("159.67")
    assert rep.rounding.total_cost_usd == Decimal("-0.01")
    _, rows = parse_csv(to_csv(rep))
    assert [(r["team"], r["total_cost_usd"]) for r in rows] == [
        ("vision", "0.02"),
        (IDLE, "159.66"),
        (ROUNDING, "-0.01"),
        ("TOTAL", "159.67"),
    ]


def test_focus_idle_rows_are_their_hours_times_their_rate() -> None:
    """The FOCUS export's l4 idle row: 0.188279 GPU-hours × 0.4567 = 0.0860, shown 0.08
    (apportioned to make the column add up); it is 0.09 now, and an Adjustment row carries
    what the rows, each rounded, differ from the total."""
    period_s = 0.188279 * H
    rep = report(
        [rec(end_s=period_s / 2, flavor=A100), rec(job_id=2, end_s=period_s / 3)],
        period_end_s=period_s,
        rates_usd_micro_per_gpu_h={"l4": 456_700, A100: 1_234_567, H100: 2_124_738},
        capacity_gpus={"l4": 1, A100: 1, H100: 1},
    )
    rows = list(csv.DictReader(io.StringIO(to_focus_csv(rep))))
    l4 = next(r for r in rows if r["SkuId"] == "l4")
    assert l4["ConsumedQuantity"] == "0.188279"
    assert l4["BilledCost"] == "0.09"
    for r in rows:
        if r["ChargeCategory"] == "Usage" and r["ConsumedQuantity"]:
            rate = next(x.rate_usd_per_gpu_h for x in rep.rates if x.flavor == r["SkuId"])
            product = Decimal(r["ConsumedQuantity"]) * rate  # type: ignore[operator]
            assert (
                abs(Decimal(r["BilledCost"]) - product)
                <= Decimal("0.005") + Decimal("0.000001") * rate
            )  # type: ignore[operator]
    assert sum(Decimal(r["BilledCost"]) for r in rows) == rep.totals.total_cost_usd
    adjustments = [r for r in rows if r["ChargeCategory"] == "Adjustment"]
    assert [Decimal(r["BilledCost"]) for r in adjustments] == (
        [rep.flavor_rounding.total_cost_usd] if rep.flavor_rounding.total_cost_usd else []
    )


def test_uniform_counts_groups_not_hours() -> None:
    records = [rec(team="big", end_s=DAY, gpu_milli=7000), rec(team="tiny", end_s=H)]
    rep = report(records, capacity_gpus={H100: 8}, idle_method="uniform")
    idle = {r.value("team"): r.idle_cost_usd for r in rep.rows}
    assert idle["big"] == idle["tiny"] == Decimal("23.00")  # (192 - 169) x $2 / 2
    assert rep.totals.total_cost_usd == Decimal("384.00")


def test_full_cluster_has_no_idle() -> None:
    rep = report([rec(end_s=DAY, gpu_milli=8000)], capacity_gpus={H100: 8}, idle_method="none")
    assert rep.idle is None
    assert rep.idle_gpu_hours == 0.0
    assert rep.totals.total_cost_usd == Decimal("384.00")


def test_more_held_than_capacity_is_flagged_and_idle_floored_at_zero() -> None:
    rep = report([rec(end_s=DAY, gpu_milli=8000)], capacity_gpus={H100: 4})
    assert rep.over_capacity_flavors == (H100,)
    assert rep.idle_gpu_hours == 0.0
    assert rep.totals.cost_usd == Decimal("384.00")  # charged for what was held regardless


def test_flavor_without_capacity_has_no_idle() -> None:
    rep = report(TEAMS, capacity_gpus={H100: 16}, idle_method="proportional")
    a100 = next(s for s in rep.flavors if s.flavor == A100)
    assert a100.capacity_gpus is None
    assert a100.capacity_cost_usd is None
    assert a100.idle_gpu_hours == 0.0
    assert rep.totals.total_cost_usd == Decimal("768.00") + Decimal("48.00")


# ---------------------------------------------------------------------------------------
# usage basis


@pytest.mark.parametrize(
    ("records", "cost", "missing", "used", "efficiency"),
    [
        pytest.param(
            [rec(end_s=10 * H, gpu_milli=2000, used_gpu_s=5 * H)],
            "10.00",
            0,
            5.0,
            0.25,
            id="reported usage: billed on 5 used of 20 held GPU-hours",
        ),
        pytest.param(
            [rec(end_s=10 * H, gpu_milli=2000)],
            "40.00",
            1,
            None,
            None,
            id="no usage reported: billed on allocation and counted",
        ),
        pytest.param(
            [
                rec(end_s=10 * H, gpu_milli=2000, used_gpu_s=5 * H),
                rec(job_id=2, end_s=10 * H, gpu_milli=1000),
            ],
            "30.00",
            1,
            5.0,
            0.25,
            id="mixed: efficiency only over the records that report usage",
        ),
        pytest.param(
            [rec(end_s=H, used_gpu_s=2 * H)],
            "2.00",
            0,
            1.0,
            1.0,
            id="usage above what was held is capped at the allocation",
        ),
        pytest.param(
            [rec(end_s=H, used_gpu_s=0.0)],
            "0.00",
            0,
            0.0,
            0.0,
            id="held but never busy: 0 on the usage basis",
        ),
    ],
)
def test_usage_basis(
    records: list[UsageRecord],
    cost: str,
    missing: int,
    used: float | None,
    efficiency: float | None,
) -> None:
    rep = report(records, basis="usage")
    assert rep.totals.cost_usd == Decimal(cost)
    assert rep.usage_missing_records == missing
    assert rep.totals.gpu_hours_used == (None if used is None else pytest.approx(used))
    assert rep.totals.gpu_efficiency == (None if efficiency is None else pytest.approx(efficiency))


def test_usage_basis_differs_from_allocation_when_usage_is_reported() -> None:
    records = [rec(end_s=10 * H, gpu_milli=2000, used_gpu_s=5 * H)]
    alloc = report(records, basis="allocation")
    usage = report(records, basis="usage")
    assert (alloc.totals.cost_usd, usage.totals.cost_usd) == (Decimal("40.00"), Decimal("10.00"))
    assert alloc.totals.gpu_efficiency == usage.totals.gpu_efficiency == pytest.approx(0.25)


@pytest.mark.parametrize("idle_method", ["none", "uniform", "proportional"])
def test_usage_basis_moves_unused_held_hours_to_idle(idle_method: str) -> None:
    records = [rec(end_s=DAY, gpu_milli=4000, used_gpu_s=24 * H)]  # 96 held, 24 busy
    rep = report(records, basis="usage", capacity_gpus={H100: 8}, idle_method=idle_method)
    assert rep.totals.cost_usd == Decimal("48.00")
    assert rep.idle_gpu_hours == pytest.approx(192 - 24)
    assert rep.totals.total_cost_usd == Decimal("384.00")  # still capacity x period x rate


# ---------------------------------------------------------------------------------------
# CSV


def parse_csv(text: str) -> tuple[list[str], list[dict[str, str]]]:
    comments = [line for line in text.splitlines() if line.startswith("#")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return comments, list(csv.DictReader(io.StringIO(body)))


def test_csv_header_columns_and_total_row() -> None:
    start, end = month_bounds(datetime(2025, 3, 14, tzinfo=UTC).timestamp())
    records = [replace(r, start_s=r.start_s + start, end_s=r.end_s + start) for r in TEAMS]
    rep = report(
        records,
        period_start_s=start,
        period_end_s=end,
        group_by=("team", "project"),
        capacity_gpus=CAPACITY,
        idle_method="proportional",
    )
    comments, rows = parse_csv(to_csv(rep))
    assert "# period: 2025-03-01T00:00:00Z to 2025-04-01T00:00:00Z (end exclusive)" in comments
    assert any(c.startswith("# basis: allocation") for c in comments)
    assert any(c.startswith("# idle method: proportional") for c in comments)
    assert "# GPU-hours allocated = GPUs held x hours held, clipped to the period" in comments
    assert list(rows[0]) == [
        "period_start", "period_end", "team", "project", "gpu_hours_allocated", "gpu_hours_used",
        "gpu_efficiency", "rate_usd_per_gpu_hour", "cost_usd", "idle_cost_usd", "total_cost_usd",
    ]  # fmt: skip
    assert rows[-1]["team"] == "TOTAL"
    assert len(rows) == len(rep.rows) + 1
    assert rows[0]["period_start"] == "2025-03-01T00:00:00Z"
    for column in ("cost_usd", "idle_cost_usd", "total_cost_usd"):
        assert sum(Decimal(r[column]) for r in rows[:-1]) == Decimal(rows[-1][column])
    assert rows[1] == rows[1] | {"team": "nlp", "project": "", "gpu_hours_allocated": "16.000000"}


def test_csv_idle_line_and_usage_notes() -> None:
    rep = report(
        [rec(end_s=H), rec(flavor="tpu", end_s=H)],
        basis="usage",
        capacity_gpus={H100: 1},
    )
    comments, rows = parse_csv(to_csv(rep))
    assert any(c.startswith("# basis: usage") for c in comments)
    assert "# unpriced flavors (charged 0): tpu" in comments
    assert "# records without usage data: 2" in comments
    assert [r["team"] for r in rows] == ["vision", IDLE, "TOTAL"]
    assert rows[1]["idle_cost_usd"] == "46.00"
    assert rows[2]["total_cost_usd"] == "48.00"


def test_csv_cells_cannot_become_spreadsheet_formulas() -> None:
    rep = report([rec(team="=HYPERLINK(1)")])
    _, rows = parse_csv(to_csv(rep))
    assert rows[0]["team"] == "'=HYPERLINK(1)"


# ---------------------------------------------------------------------------------------
# FOCUS


@pytest.mark.parametrize(
    ("group_by", "idle_method"),
    [
        pytest.param(("team",), "none", id="by team, idle apart: split by flavor + idle rows"),
        pytest.param(("team", "project", "user"), "proportional", id="tags carry project and user"),
        pytest.param(("accelerator", "team"), "uniform", id="already by accelerator"),
        pytest.param(("priority", "job"), "none", id="no team: empty SubAccountName"),
    ],
)
def test_focus_export_adds_up_to_the_report(group_by: tuple[str, ...], idle_method: str) -> None:
    rep = report(TEAMS, group_by=group_by, capacity_gpus=CAPACITY, idle_method=idle_method)
    text = to_focus_csv(rep)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == FOCUS_COLUMNS
    assert sum(Decimal(r["BilledCost"]) for r in rows) == rep.totals.total_cost_usd
    assert {r["ChargeCategory"] for r in rows} == {"Usage"}
    assert {r["ConsumedUnit"] for r in rows} == {r["PricingUnit"] for r in rows} == {"GPU-Hours"}
    assert {r["BillingCurrency"] for r in rows} == {"USD"}
    assert {r["SkuId"] for r in rows} == {H100, A100}
    assert all(r["BilledCost"] == r["EffectiveCost"] == r["ListCost"] for r in rows)
    assert {r["ChargePeriodStart"] for r in rows} == {"1970-01-01T00:00:00Z"}
    idle_rows = [r for r in rows if r["SubAccountName"] == IDLE]
    assert len(idle_rows) == (2 if idle_method == "none" else 0)  # one per flavor
    work = [r for r in rows if r["SubAccountName"] != IDLE]
    assert sum(float(r["ConsumedQuantity"]) for r in work) == pytest.approx(146.0)
    if "team" in group_by:
        assert {r["SubAccountName"] for r in work} == {"vision", "nlp"}
    else:
        assert {r["SubAccountName"] for r in work} == {""}
    tags = [json.loads(r["Tags"]) for r in work]
    wanted = {k for k in group_by if k not in ("team", "accelerator")}
    assert all(set(t) <= wanted for t in tags)


def test_focus_one_row_per_group_and_flavor() -> None:
    rep = report(TEAMS, group_by=("team",), capacity_gpus=CAPACITY)
    rows = list(csv.DictReader(io.StringIO(to_focus_csv(rep, provider="acme"))))
    pairs = [(r["SubAccountName"], r["SkuId"]) for r in rows]
    assert pairs == [("nlp", H100), ("vision", A100), ("vision", H100), (IDLE, A100), (IDLE, H100)]
    assert rows[1]["BilledCost"] == "48.00"
    assert rows[1]["ResourceId"] == f"acme/{A100}/team=vision"
    assert rows[3]["ConsumedQuantity"] == "48.000000"
    assert {r["ProviderName"] for r in rows} == {"acme"}


def test_focus_tags_are_json() -> None:
    rep = report(TEAMS, group_by=("team", "project", "priority"))
    rows = list(csv.DictReader(io.StringIO(to_focus_csv(rep))))
    tags = [json.loads(r["Tags"]) for r in rows]
    assert {"project": "detect", "priority": "standard"} in tags
    assert {"priority": "standard"} in tags  # nlp's job without a project


def test_focus_currency_is_checked() -> None:
    rep = report(TEAMS)
    assert "EUR" in to_focus_csv(rep, billing_currency="eur")
    with pytest.raises(UserError, match="ISO 4217"):
        to_focus_csv(rep, billing_currency="dollars")


# ---------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param(
            {"group_by": ("teem",)},
            "unknown group-by key 'teem'; did you mean 'team'?",
            id="typo gets a did-you-mean",
        ),
        pytest.param(
            {"group_by": ("flavor",)},
            "did you mean 'accelerator'?",
            id="the field name hints at the key",
        ),
        pytest.param(
            {"group_by": ("zzz",)},
            "unknown group-by key 'zzz' (valid keys: team, project, user, accelerator, priority, "
            "job)",
            id="no close match: the valid keys",
        ),
        pytest.param({"group_by": ()}, "group by at least one key", id="empty group-by"),
        pytest.param({"group_by": ("team", "team")}, "repeat", id="repeated key"),
        pytest.param({"period_end_s": 0.0}, "the period is empty", id="empty period"),
        pytest.param({"basis": "request"}, "unknown basis", id="unknown basis"),
        pytest.param({"idle_method": "even"}, "unknown idle method", id="unknown idle method"),
        pytest.param({"rates_usd_micro_per_gpu_h": {H100: -1}}, "negative", id="negative rate"),
        pytest.param({"capacity_gpus": {H100: -1}}, "negative", id="negative capacity"),
    ],
)
def test_bad_arguments(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        report(TEAMS, **kw)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        pytest.param(rec(start_s=5.0, end_s=1.0), "ends", id="ends before it starts"),
        pytest.param(rec(gpu_milli=-1), "negative gpu_milli", id="negative GPUs"),
        pytest.param(rec(used_gpu_s=-1.0), "used_gpu_s", id="negative usage"),
        pytest.param(rec(end_s=float("inf")), "finite", id="infinite end"),
    ],
)
def test_bad_records_name_the_job(record: UsageRecord, message: str) -> None:
    with pytest.raises(UserError, match=f"job 1 attempt 0.*{message}"):
        report([record])


def test_every_documented_group_key_is_accepted() -> None:
    assert report(TEAMS, group_by=tuple(GROUP_KEYS)).totals.gpu_hours_allocated == 146.0


# ---------------------------------------------------------------------------------------
# budgets and months


@pytest.mark.parametrize(
    ("used", "budget", "fraction", "over", "alerts", "reached"),
    [
        pytest.param(500.0, 1000.0, 0.5, False, (), (), id="half the budget: no alert"),
        pytest.param(
            850.0,
            1000.0,
            0.85,
            False,
            ("team vision has used 85% (850 GPU-hours) of its 1,000 GPU-hour monthly budget "
             "(alert at 80%)",),
            (0.8,),
            id="past 80%: one alert",
        ),
        pytest.param(
            999.7,
            1000.0,
            0.9997,
            False,
            ("team vision has used 99% (999.7 GPU-hours) of its 1,000 GPU-hour monthly budget "
             "(alert at 80%)",),
            (0.8,),
            id="99.97% reads 99%, never 100% while under",
        ),
        pytest.param(
            999.96,
            1000.0,
            0.99996,
            False,
            ("team vision has used 99% (999.96 GPU-hours) of its 1,000 GPU-hour monthly budget "
             "(alert at 80%)",),
            (0.8,),
            id="just under: used never reads as much as the budget",
        ),
        pytest.param(
            1000.0,
            1000.0,
            1.0,
            False,
            ("team vision has used 100% (1,000 GPU-hours) of its 1,000 GPU-hour monthly budget "
             "(alert at 100%, past 80% too)",),
            (0.8, 1.0),
            id="exactly the budget: one alert at 100%, not over",
        ),
        pytest.param(
            1234.5,
            1000.0,
            1.2345,
            True,
            ("team vision has used 123% (1,234.5 GPU-hours) of its 1,000 GPU-hour monthly "
             "budget (alert at 100%, past 80% too)",),
            (0.8, 1.0),
            id="over the budget: one alert, not the same sentence twice",
        ),
        pytest.param(
            0.148,
            0.17,
            0.148 / 0.17,
            False,
            ("team vision has used 87% (0.148 GPU-hours) of its 0.17 GPU-hour monthly budget "
             "(alert at 80%)",),
            (0.8,),
            id="a budget of 0.17 reads 0.17, not 0.2",
        ),
        pytest.param(
            0.4492,
            0.04,
            0.4492 / 0.04,
            True,
            ("team vision has used 1,123% (0.449 GPU-hours) of its 0.04 GPU-hour monthly "
             "budget (alert at 100%, past 80% too)",),
            (0.8, 1.0),
            id="a budget of 0.04 never reads 0",
        ),
        pytest.param(10.0, None, None, False, (), (), id="no budget: nothing to say"),
        pytest.param(
            2.5,
            0.0,
            None,
            True,
            ("team vision has used 2.5 GPU-hours of its 0 GPU-hour monthly budget",),
            (1.0,),
            id="zero budget: any use is over",
        ),
        pytest.param(0.0, 0.0, None, False, (), (), id="zero budget unused"),
    ],
)  # fmt: skip
def test_budget_status(  # noqa: PLR0917 - one parametrised case per argument
    used: float,
    budget: float | None,
    fraction: float | None,
    over: bool,
    alerts: tuple[str, ...],
    reached: tuple[float, ...],
) -> None:
    status = budget_status(used, budget, team="vision")
    assert status.fraction == (None if fraction is None else pytest.approx(fraction))
    assert status.over is over
    assert status.alerts == alerts
    assert status.thresholds_reached == reached


def test_budget_custom_thresholds_and_wording() -> None:
    status = budget_status(1_900.0, 2_000.0, thresholds=(0.5, 0.9, 0.75), period_label="quarterly")
    assert status.thresholds_reached == (0.5, 0.75, 0.9)
    assert status.alerts == (
        "the team has used 95% (1,900 GPU-hours) of its 2,000 GPU-hour quarterly budget "
        "(alert at 90%, past 75% too, past 50% too)",
    )


@pytest.mark.parametrize(
    ("amount", "text"),
    [(1000.0, "1,000"), (150.5, "150.5"), (2.5, "2.5"), (0.17, "0.17"), (0.04, "0.04"),
     (0.000123, "0.000123"), (12_345.678, "12,345.7"), (0.0, "0")],
)  # fmt: skip
def test_budget_amounts_keep_three_significant_figures(amount: float, text: str) -> None:
    assert gpu_hours_text(amount) == text


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({"used_gpu_h": -1.0, "budget_gpu_h": 10.0}, "used", id="negative use"),
        pytest.param({"used_gpu_h": 1.0, "budget_gpu_h": -10.0}, "budget", id="negative budget"),
        pytest.param(
            {"used_gpu_h": 1.0, "budget_gpu_h": 10.0, "thresholds": (0.0,)},
            "thresholds",
            id="zero threshold",
        ),
    ],
)
def test_budget_bad_input(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        budget_status(**kw)


def utc(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        pytest.param(
            utc("2025-03-14T15:09:26"), utc("2025-03-01"), utc("2025-04-01"), id="mid-March"
        ),
        pytest.param(
            utc("2025-03-01"), utc("2025-03-01"), utc("2025-04-01"), id="the first instant"
        ),
        pytest.param(
            utc("2025-03-31T23:59:59"), utc("2025-03-01"), utc("2025-04-01"), id="the last second"
        ),
        pytest.param(
            utc("2025-12-31T23:00:00"),
            utc("2025-12-01"),
            utc("2026-01-01"),
            id="December to January",
        ),
        pytest.param(
            utc("2024-02-29T12:00:00"), utc("2024-02-01"), utc("2024-03-01"), id="leap February"
        ),
    ],
)
def test_month_bounds(now: float, start: float, end: float) -> None:
    assert month_bounds(now) == (start, end)


# ---------------------------------------------------------------------------------------
# properties

FLAVORS = [H100, A100, "l4"]
SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))  # multiplies max_examples


@dataclass(frozen=True)
class World:
    records: list[UsageRecord]
    period_start_s: float
    period_end_s: float
    rates: dict[str, int | list[RateChange]]
    capacity: dict[str, int]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    records = []
    for i in range(draw(st.integers(0, 12))):
        start = draw(st.floats(-2 * DAY, 3 * DAY, allow_nan=False))
        length = draw(st.floats(0, 2 * DAY, allow_nan=False))
        milli = draw(st.sampled_from([143, 250, 500, 1000, 2000, 8000]))
        used = draw(st.one_of(st.none(), st.floats(0, milli / 1000 * length * 1.2)))
        records.append(
            UsageRecord(
                job_id=draw(st.integers(1, 5)),
                attempt=i,
                team=draw(st.sampled_from(["a", "b", "c"])),
                project=draw(st.sampled_from([None, "p", "q"])),
                user=draw(st.sampled_from(["u", "v"])),
                flavor=draw(st.sampled_from(FLAVORS)),
                priority_class=draw(st.sampled_from(["low", "high"])),
                start_s=start,
                end_s=start + length,
                gpu_milli=milli,
                used_gpu_s=used,
            )
        )
    period_start = draw(st.floats(-DAY, DAY, allow_nan=False))
    period_len = draw(st.floats(1.0, 2 * DAY, allow_nan=False))
    rates: dict[str, int | list[RateChange]] = draw(
        st.dictionaries(
            st.sampled_from(FLAVORS),
            st.one_of(
                st.integers(0, 5_000_000),
                st.lists(
                    st.builds(
                        RateChange,
                        st.floats(-2 * DAY, 3 * DAY, allow_nan=False),
                        st.integers(0, 5_000_000),
                    ),
                    min_size=1,
                    max_size=3,
                ),
            ),
        )
    )
    capacity = draw(st.dictionaries(st.sampled_from(FLAVORS), st.integers(0, 64)))
    return World(records, period_start, period_start + period_len, rates, capacity)


@settings(max_examples=int(150 * SCALE), deadline=None)
@given(
    worlds(),
    st.lists(st.sampled_from(sorted(GROUP_KEYS)), min_size=1, max_size=3, unique=True),
    st.sampled_from(["allocation", "usage"]),
    st.sampled_from(["none", "uniform", "proportional"]),
)
def test_grouping_never_changes_the_totals_and_costs_are_never_negative(
    world: World, group_by: list[str], basis: str, idle_method: str
) -> None:
    records, start, end = world.records, world.period_start_s, world.period_end_s
    kw: dict[str, Any] = {
        "period_start_s": start,
        "period_end_s": end,
        "rates_usd_micro_per_gpu_h": world.rates,
        "capacity_gpus": world.capacity,
        "basis": basis,
        "idle_method": idle_method,
    }
    grouped = chargeback(records, group_by=tuple(group_by), **kw)
    flat = chargeback(records, group_by=("team",), **kw)
    expected_gpu_h = sum(
        r.gpu_milli / 1000 * max(0.0, min(r.end_s, end) - max(r.start_s, start)) / 3600
        for r in records
    )
    for rep in (grouped, flat):
        assert sum(r.gpu_hours_allocated for r in rep.rows) == pytest.approx(
            expected_gpu_h, rel=1e-9, abs=1e-7
        )
        assert rep.totals.gpu_hours_allocated == pytest.approx(expected_gpu_h, rel=1e-9, abs=1e-7)
        lines = [*rep.rows, *([rep.idle] if rep.idle else [])]
        for column in ("cost_usd", "idle_cost_usd", "total_cost_usd"):
            assert all(getattr(r, column) >= 0 for r in lines)
            # lines, each rounded on its own, + the stated rounding = the TOTAL
            rounding = getattr(rep.rounding, column)
            assert sum(getattr(r, column) for r in lines) + rounding == getattr(rep.totals, column)
            assert abs(rounding) <= Decimal("0.01") * (len(lines) + 2) / 2
        for r in lines:  # each line is its own exact amount rounded: never off by a cent
            assert r.total_cost_usd == r.cost_usd + r.idle_cost_usd
        focus = list(csv.DictReader(io.StringIO(to_focus_csv(rep))))
        assert sum(Decimal(r["BilledCost"]) for r in focus) == rep.totals.total_cost_usd
    # grouping moves money between rows, never creates or loses it
    assert grouped.totals.cost_usd == flat.totals.cost_usd
    assert grouped.totals.idle_cost_usd == flat.totals.idle_cost_usd
    # with known capacity that is not exceeded, workload + idle = capacity x period x rate
    known = all(s.capacity_gpus is not None for s in grouped.flavors)
    if world.capacity and known and not grouped.over_capacity_flavors:
        assert grouped.totals.total_cost_usd == grouped.capacity_cost_usd
