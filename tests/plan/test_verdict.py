"""The rent-or-own verdict against a hand calculation (issue 27: "owning costs $92.9M vs
$21.4M renting ... cloud is cheaper ... break-even 18 months" compared one run's rental with
three years of the whole fleet)."""

from __future__ import annotations

import math

import pytest

from gpufleet.plan.cost.breakdown import present_values
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.verdict import RentOrOwn


def _case(**changes: float | None) -> RentOrOwn:
    base: dict[str, float | None] = {
        "fleet_gpus": 100,
        "horizon_years": 1.0,
        "rent_usd_per_gpu_hour": 2.0,
        "own_usd": 1_000_000.0,
        "work_gpu_hours": 100_000.0,
        "rent_work_usd": 200_000.0,
        "stated_utilization": 0.7,
        "payback_months": 9.0,
    }
    base.update(changes)
    return RentOrOwn(**base)  # type: ignore[arg-type]


def test_by_hand() -> None:
    v = _case()
    # 100 GPUs × 8,760 h = 876,000 GPU-hours a year
    assert v.work_utilization == pytest.approx(100_000 / 876_000)
    assert v.own_idle_usd == pytest.approx(1e6 * (1 - 100_000 / 876_000))
    assert v.rent_at_stated_usd == pytest.approx(2.0 * 876_000 * 0.7)  # 1,226,400
    assert v.breakeven_utilization == pytest.approx(1e6 / (2.0 * 876_000))  # 57.1 %
    assert v.cheaper_for_work == "rent"
    assert v.cheaper_at_stated == "own"
    assert v.sentence() == (
        "renting is cheaper for the planned work, which keeps 100 owned GPUs 11.4% busy over "
        "1 year: owning costs $1,000,000 ($885,845 of it idle capacity) against $200,000 to "
        "rent the same GPU-hours; owning wins above 57.1% average utilisation (at the stated "
        "70.0%: $1,000,000 owned against $1,226,400 rented, paying back after 9.0 months, if "
        "other work keeps the fleet that busy)"
    )


def test_below_the_breakeven_utilisation_renting_wins_on_both_bases() -> None:
    v = _case(stated_utilization=0.5, payback_months=None)
    assert v.cheaper_at_stated == "rent"
    assert "paying back" not in v.sentence()
    assert "if other work" not in v.sentence()


def test_owning_that_never_wins_says_so() -> None:
    v = _case(own_usd=5e6, payback_months=None)
    assert v.breakeven_utilization > 1
    assert v.sentence().endswith("owning would not win even with the fleet busy every hour")


def test_work_that_fills_the_fleet_makes_owning_win_for_the_work() -> None:
    v = _case(work_gpu_hours=800_000.0, rent_work_usd=1_600_000.0)
    assert v.cheaper_for_work == "own"
    assert v.sentence().startswith("owning is cheaper for the planned work")


def test_rentpresent_values_by_hand() -> None:
    """Training rented in its window from the start, serving evenly over the horizon, both
    discounted at the plan's rate: a 30-day run costs more in present value than the same
    dollars spread over three years."""
    demand = Demand("x", 2, 10_000.0, 0.0, 0.0, 3 * HOURS_PER_YEAR, burst_window_hours=720.0)
    tco = {"discount_rate": 0.1, "present_value": 123.0}
    pv = present_values(demand, 2.0, tco, utilization=0.5, gpus=10)
    g = math.log(1.1)

    def spread(years: float) -> float:
        return (1 - math.exp(-g * years)) / (years * g)

    work = 10_000.0 * spread(720 / HOURS_PER_YEAR) + 2 * 3 * HOURS_PER_YEAR * spread(3.0)
    assert pv["rent_work_pv_usd"] == pytest.approx(2.0 * work)
    assert pv["rent_at_stated_pv_usd"] == pytest.approx(
        2.0 * 10 * 3 * HOURS_PER_YEAR * 0.5 * spread(3.0)
    )
    assert pv["own_pv_usd"] == 123.0
    v = _case(discount_rate=0.1, own_pv_usd=150_000.0, rent_work_pv_usd=190_000.0)
    assert v.cheaper_for_work_pv == "own"  # the present values can disagree with the totals
    assert v.cheaper_for_work == "rent"
    assert RentOrOwn.from_json(v.to_json()) == v
    old = {k: x for k, x in v.to_json().items() if "pv" not in k and k != "discount_rate"}
    assert RentOrOwn.from_json(old).own_pv_usd is None  # plan.json from before present values
