"""The rent-or-own verdict against a hand calculation (issue 27: "owning costs $92.9M vs
$21.4M renting ... cloud is cheaper ... break-even 18 months" compared one run's rental with
three years of the whole fleet)."""

from __future__ import annotations

import math

import pytest

from gpufleet.plan.cost.breakdown import present_values
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.verdict import RentOrOwn


def _case(**changes: float | str | None) -> RentOrOwn:
    """100 GPUs for a year: the planned work rents at $6/GPU-h (a gang on demand), steady use
    of the fleet at $2/GPU-h (a reservation), owning costs $1M."""
    base: dict[str, float | str | None] = {
        "fleet_gpus": 100,
        "horizon_years": 1.0,
        "rent_usd_per_gpu_hour": 6.0,
        "own_usd": 1_000_000.0,
        "work_gpu_hours": 100_000.0,
        "rent_work_usd": 600_000.0,
        "stated_utilization": 0.7,
        "payback_months": 9.0,
        "rent_at_stated_usd": 2.0 * 876_000 * 0.7,  # 1,226,400
        "rent_at_stated_basis": "70 GPUs on 1-year reservations",
        "rent_full_usd": 2.0 * 876_000,
        "rent_full_basis": "100 GPUs on 1-year reservations",
        "breakeven_utilization": 1e6 / (2.0 * 876_000),  # 57.1 %
    }
    base.update(changes)
    return RentOrOwn(**base)  # type: ignore[arg-type]


def test_by_hand() -> None:
    v = _case()
    # 100 GPUs × 8,760 h = 876,000 GPU-hours a year
    assert v.work_utilization == pytest.approx(100_000 / 876_000)
    assert v.own_idle_usd == pytest.approx(1e6 * (1 - 100_000 / 876_000))
    assert v.rent_at_stated_usd_per_gpu_hour == pytest.approx(2.0)
    assert v.cheaper_for_work == "rent"
    assert v.cheaper_at_stated == "own"
    assert v.sentence() == (
        "renting is cheaper for the planned work, which keeps 100 owned GPUs 11.4% busy over "
        "1 year: owning costs $1,000,000 ($885,845 of it idle capacity) against $600,000 to "
        "rent the same GPU-hours; owning wins above 57.1% average utilisation (at the stated "
        "70.0%: $1,000,000 owned against $1,226,400 to rent that use steadily at $2.00 per "
        "GPU-hour used as 70 GPUs on 1-year reservations, paying back after 9.0 months, if "
        "other work keeps the fleet that busy)"
    )


def test_below_the_breakeven_utilisation_renting_wins_on_both_bases() -> None:
    v = _case(stated_utilization=0.5, rent_at_stated_usd=876_000.0, payback_months=None)
    assert v.cheaper_at_stated == "rent"
    assert "paying back" not in v.sentence()
    assert "if other work" not in v.sentence()


def test_owning_that_never_wins_says_so_with_the_steady_rent() -> None:
    v = _case(own_usd=5e6, payback_months=None, breakeven_utilization=5e6 / 1_752_000)
    assert v.breakeven_utilization > 1
    assert v.sentence().endswith(
        "owning would not win even with the fleet busy every hour ($5,000,000 owned against "
        "$1,752,000 to rent it busy every hour at $2.00 per GPU-hour used as 100 GPUs on 1-year "
        "reservations)"
    )


def test_work_that_fills_the_fleet_makes_owning_win_for_the_work() -> None:
    v = _case(work_gpu_hours=800_000.0, rent_work_usd=1_600_000.0)
    assert v.cheaper_for_work == "own"
    assert v.sentence().startswith("owning is cheaper for the planned work")


def test_a_win_only_through_the_residual_value_says_so_in_cash() -> None:
    """Defect 5 (examples/plan-chat-70b.yaml): owning cheaper over a 3-year horizon only
    because the TCO credits the book value left at the end, and paying back after it."""
    v = _case(
        horizon_years=3.0,
        own_usd=849_748.0,
        own_residual_usd=171_606.0,
        work_gpu_hours=341_640.0,
        rent_work_usd=948_548.0,
        rent_at_stated_usd=948_548.0,
        stated_utilization=0.8,
        payback_months=40.3,
        breakeven_utilization=0.706,
    )
    assert v.own_cash_usd == pytest.approx(1_021_354.0)
    assert v.owning_needs_residual(v.rent_work_usd)
    assert v.payback_after_horizon
    s = v.sentence()
    assert s.startswith("owning is cheaper for the planned work")
    assert (
        "against $948,548 to rent the same GPU-hours, ahead only through the $171,606 book "
        "value credited at the end: in cash over 36 months owning pays $1,021,354 against "
        "$948,548 to rent;"
    ) in s
    assert "paying back after 40.3 months, after the 36-month horizon ends" in s
    assert "again only through that book value ($1,021,354 in cash against $948,548)" in s
    # in cash ahead too: nothing to add
    plain = _case(own_residual_usd=100_000.0, payback_months=9.0)
    assert "book value" not in plain.sentence()
    assert "horizon ends" not in plain.sentence()


def test_plan_json_from_before_steady_pricing_reads_back() -> None:
    """Old plan.json stored the break-even and stated rent as derived values of the blended
    price; they are read as stored, and the full-fleet rent follows the same price."""
    old = {
        k: x
        for k, x in _case().to_json().items()
        if k not in {"rent_full_usd", "rent_at_stated_basis", "rent_full_basis", "own_residual_usd"}
    }
    v = RentOrOwn.from_json(old)
    assert v.rent_full_usd == pytest.approx(6.0 * 876_000)
    assert v.breakeven_utilization == pytest.approx(1e6 / 1_752_000)
    assert v.own_residual_usd == 0.0


def test_rentpresent_values_by_hand() -> None:
    """Training rented in its window from the start, serving evenly over the horizon, both
    discounted at the plan's rate: a 30-day run costs more in present value than the same
    dollars spread over three years."""
    demand = Demand("x", 2, 10_000.0, 0.0, 0.0, 3 * HOURS_PER_YEAR, burst_window_hours=720.0)
    tco = {"discount_rate": 0.1, "present_value": 123.0}
    stated_usd = 2.0 * 10 * 3 * HOURS_PER_YEAR * 0.5  # steady use, as the optimiser prices it
    pv = present_values(demand, 2.0, tco, stated_usd)
    g = math.log(1.1)

    def spread(years: float) -> float:
        return (1 - math.exp(-g * years)) / (years * g)

    work = 10_000.0 * spread(720 / HOURS_PER_YEAR) + 2 * 3 * HOURS_PER_YEAR * spread(3.0)
    assert pv["rent_work_pv_usd"] == pytest.approx(2.0 * work)
    assert pv["rent_at_stated_pv_usd"] == pytest.approx(
        2.0 * 10 * 3 * HOURS_PER_YEAR * 0.5 * spread(3.0)
    )
    assert pv["own_pv_usd"] == 123.0
    v = _case(discount_rate=0.1, own_pv_usd=150_000.0, rent_work_pv_usd=550_000.0)
    assert v.cheaper_for_work_pv == "own"  # the present values can disagree with the totals
    assert v.cheaper_for_work == "rent"
    assert RentOrOwn.from_json(v.to_json()) == v
    old = {k: x for k, x in v.to_json().items() if "pv" not in k and k != "discount_rate"}
    assert RentOrOwn.from_json(old).own_pv_usd is None  # plan.json from before present values
