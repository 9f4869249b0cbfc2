"""Steady use of the owned fleet, rented as the purchase-mix optimiser would buy it (review
of the rent-or-own verdict, defects 1 and 5).

The verdict used to price "the fleet kept u busy" at the planned work's blended price: for
examples/plan-pretrain-70b.yaml an 89-day gang bought on demand, $6.11/GPU-h, so owning
"won above 33.8%"; the optimiser buys 1,439 steady GPUs on 3-year reservations at $2.78, and
owning wins only above about 74%. The other way round, a spot-priced training run made
owning "never win" for 16 GPUs that cost $994,154 to rent every hour and $765,285 to own.
The checks rebuild the steady rent from `optimise_mix` directly (a baseline of whole GPUs,
the fraction as spread work: not the formulation `SteadyRent` uses) and compare.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_num, fmt_pct, fmt_usd, fmt_usd_apart
from gpufleet.plan.cost.breakdown import rent_or_own
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.mix import optimise_mix
from gpufleet.plan.cost.prices import ON_DEMAND, RESERVED_1Y, RESERVED_3Y, SPOT
from gpufleet.plan.cost.steady import SteadyRent, steady_prices
from gpufleet.plan.cost.tco import OnPremInputs
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import plan
from gpufleet.report.render import render_markdown
from gpufleet.specs.load import load
from gpufleet.specs.plan import OnPremPreferences, PlanSpec

from .reviewed import at_reviewed_storage

EXAMPLES = Path(__file__).parents[2] / "examples"
H3 = 3 * HOURS_PER_YEAR  # 26,280 h


def flat_rent_usd(
    gpus: float, horizon_hours: float, prices: Mapping[str, float], instance_gpus: int = 1
) -> float:
    """The optimiser on `gpus` used every hour: whole instances as a baseline (never spot),
    the rest as work spread over the horizon, at on-demand and reserved prices only."""
    whole = math.floor(gpus / instance_gpus) * instance_gpus
    demand = Demand(
        "x",
        whole,
        (gpus - whole) * horizon_hours,
        0.0,
        0.0,
        horizon_hours,
        instance_gpus=instance_gpus,
    )
    allowed = {k: v for k, v in prices.items() if k in (ON_DEMAND, RESERVED_1Y, RESERVED_3Y)}
    return optimise_mix(demand, allowed, Assumptions())["total_usd"]


def test_steady_use_by_hand() -> None:
    """$6 on demand, $2.50 on a 3-year term, $4 on a 1-year one, $0.50 spot; 100 GPUs, 3 y."""
    prices = {ON_DEMAND: 6.0, RESERVED_3Y: 2.5, RESERVED_1Y: 4.0, SPOT: 0.5}
    steady = SteadyRent("x", 100, H3, steady_prices(prices))
    assert SPOT not in steady.prices  # steady use is never put on spot
    at70 = steady.at_utilization(0.7)
    assert at70.total_usd == pytest.approx(70 * 2.5 * H3)
    assert at70.basis == "70 GPUs on 3-year reservations"
    # 70.2 GPUs: the 0.2 is cheaper by the hour ($1.20 a GPU-hour of the horizon) than a
    # 71st reservation ($2.50); 70.5 GPUs: the 71st reservation is cheaper ($3.00 vs $2.50)
    assert steady.price(70.2).total_usd == pytest.approx((70 * 2.5 + 0.2 * 6.0) * H3)
    # the hourly part is an average, said to be one: not "and 0.2 on demand", a fraction
    # of a GPU read as rented
    assert steady.price(70.2).basis == (
        "70 GPUs on 3-year reservations and on average 0.2 GPU on demand"
    )
    assert steady.price(70.5).total_usd == pytest.approx(71 * 2.5 * H3)
    # on demand alone, it is an average too, and "GPUs" only above one
    hourly = SteadyRent("x", 100, H3, {ON_DEMAND: 6.0})
    assert hourly.price(2.5).basis == "on average 2.5 GPUs on demand"
    assert hourly.price(0.8).basis == "on average 0.8 GPU on demand"
    # owning at $12M: 182 reserved GPUs cost $11,957,400, the rest bought by the hour up to
    # 0.27 GPU: 182.27 GPUs' steady use, more than the fleet (never)
    never = steady.breakeven_utilization(12e6)
    assert never == pytest.approx((182 + (12e6 - 182 * 2.5 * H3) / (6.0 * H3)) / 100)
    assert never > 1.0
    # owning at $4M: 60 reserved GPUs ($3,942,000) and 0.37 of one by the hour
    u = steady.breakeven_utilization(4e6)
    assert u == pytest.approx((60 + (4e6 - 60 * 2.5 * H3) / (6.0 * H3)) / 100)
    assert flat_rent_usd(u * 100, H3, prices) == pytest.approx(4e6, abs=0.01)


def _plan(spec_path: Path) -> Plan:
    return plan(load(PlanSpec, spec_path))


@pytest.fixture(scope="module")
def pretrain() -> Plan:
    # on H200, as reviewed (ranked on whole instances, the example now picks H100), at 2,000
    # GB/s of checkpoint storage (reviewed.py)
    spec = at_reviewed_storage(load(PlanSpec, EXAMPLES / "plan-pretrain-70b.yaml"))
    return plan(spec.model_copy(update={"accelerators": ["h200-sxm-141gb"]}))


def _prices(result: Plan) -> dict[str, float]:
    mix = result.cost.mix
    return {
        k: mix[f"price_{k}_usd_per_gpu_hour"]
        for k in (ON_DEMAND, RESERVED_1Y, RESERVED_3Y)
        if f"price_{k}_usd_per_gpu_hour" in mix
    }


def test_pretrain_70b_rents_steady_use_on_reservations(pretrain: Plan) -> None:
    """The reviewer's LP: 0.7 × 2,056 GPUs for 3 years cost less to rent on 3-year
    reservations than the TCO, so renting wins at the stated 70% and the break-even is ~74%.
    Reservations are whole 8-GPU instances (test_instance_granularity.py): 1,440 GPUs."""
    v = RentOrOwn.from_json(pretrain.cost.rent_or_own)
    prices = _prices(pretrain)
    hours = v.horizon_years * HOURS_PER_YEAR
    n = int(pretrain.cost.mix["instance_gpus"])
    assert n == 8
    assert v.rent_at_stated_usd == pytest.approx(
        flat_rent_usd(0.7 * v.fleet_gpus, hours, prices, n), abs=0.01
    )
    assert v.rent_at_stated_basis == "1,440 GPUs on 3-year reservations"
    assert v.rent_at_stated_usd < v.own_usd
    assert v.cheaper_at_stated == "rent"
    assert v.rent_at_stated_usd_per_gpu_hour < 0.5 * v.rent_usd_per_gpu_hour
    assert 0.7 < v.breakeven_utilization < 0.8
    breakeven_gpus = v.breakeven_utilization * v.fleet_gpus
    assert flat_rent_usd(breakeven_gpus, hours, prices, n) == pytest.approx(v.own_usd, abs=0.01)
    assert v.payback_months is None
    assert pretrain.cost.break_even_months is None
    sentence = v.sentence()
    assert "paying back" not in sentence
    assert f"owning wins above {fmt_pct(v.breakeven_utilization)}" in sentence
    assert "on 3-year reservations" in sentence


def test_owning_wins_a_fleet_busy_every_hour_even_when_the_work_ran_on_spot(
    tmp_path: Path,
) -> None:
    """The reviewer's badacc.yaml: an 8B run on spot at $1.28/GPU-h said owning would never
    win; 16 GPUs every hour for 3 years cost $994,154 to rent against $765,285 to own."""
    spec = tmp_path / "badacc.yaml"
    spec.write_text(
        "kind: plan\nname: x\naccelerators: [h100]\nworkloads:\n"
        "  - {name: a, kind: training, model: {preset: llama-3-8b}, training: "
        "{seq_len: 8192, global_batch: 512, tokens: 1T}}\n",
        encoding="utf-8",
    )
    result = _plan(spec)
    v = RentOrOwn.from_json(result.cost.rent_or_own)
    assert result.cost.mix["spot_usd"] > 0  # the planned work itself is on spot
    prices = _prices(result)
    hours = v.horizon_years * HOURS_PER_YEAR
    assert v.rent_full_usd == pytest.approx(flat_rent_usd(v.fleet_gpus, hours, prices), abs=0.01)
    assert v.rent_full_usd == pytest.approx(16 * prices[RESERVED_3Y] * H3)
    assert v.own_usd < v.rent_full_usd
    assert v.breakeven_utilization < 1.0
    assert "would not win" not in v.sentence()
    assert result.summary is not None
    assert not any("would not win" in line for line in result.summary.would_change)


def test_chat_70b_says_owning_wins_only_through_the_residual_value() -> None:
    """Defect 5: owning is cheaper on the TCO but pays back after the 36-month horizon; in
    cash over the horizon it costs more than renting. Every format says so.

    Rented from AWS: its 13 GPUs are 2 whole p5en.48xlarge (8 × H200) on 3-year terms,
    $931,515, between owning's $849,748 TCO and its $1,021,353 in cash. On GCP's cheapest
    offer the same 2 instances cost $1,167,444 (the 16 GPUs the cloud rents, no longer 13
    priced one at a time), so owning wins there in cash too. (On H200, as reviewed: ranked on
    whole instances, the example now picks H100.)"""
    spec = load(PlanSpec, EXAMPLES / "plan-chat-70b.yaml")
    result = plan(
        spec.model_copy(update={"providers": ["aws"], "accelerators": ["h200-sxm-141gb"]})
    )
    v = RentOrOwn.from_json(result.cost.rent_or_own)
    assert v.cheaper_for_work == "own"
    assert v.own_cash_usd == pytest.approx(v.own_usd + result.cost.tco["residual_value"])
    assert v.owning_needs_residual(v.rent_work_usd)
    assert v.payback_after_horizon
    cash = fmt_usd(v.own_cash_usd)
    assert f"in cash over 36 months owning pays {cash}" in v.sentence()
    assert "after the 36-month horizon ends" in v.sentence()
    assert result.summary is not None
    assert any(
        fmt_usd(v.own_residual_usd) in line and cash in line for line in result.summary.would_change
    )
    assert "horizon ends: in cash over the horizon owning pays" in render_markdown(result)


# -- the property: the sentence, the stated figures and the payback agree, in JSON ---------


@st.composite
def _cases(draw: st.DrawFn) -> tuple[RentOrOwn, Mapping[str, float], Mapping[str, float]]:
    od = draw(st.floats(1.0, 10.0))
    prices: dict[str, float] = {ON_DEMAND: od, SPOT: od * draw(st.floats(0.1, 0.5))}
    if draw(st.booleans()):
        prices[RESERVED_3Y] = od * draw(st.floats(0.3, 1.0))
    if draw(st.booleans()):
        prices[RESERVED_1Y] = od * draw(st.floats(0.4, 1.0))
    gpus = draw(st.integers(1, 3000))
    years = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0, 5.0]))
    hours = years * HOURS_PER_YEAR
    u = draw(st.floats(0.05, 1.0))
    own = gpus * hours * od * draw(st.floats(0.1, 1.2))
    capex = own * draw(st.floats(0.3, 0.9))
    tco = {
        "total": own,
        "capex": capex,
        "opex_per_year": (own - capex) / years,
        "residual_value": capex * draw(st.floats(0.0, 0.4)),
        "discount_rate": 0.07,
        "present_value": own,
    }
    demand = Demand("x", draw(st.integers(0, gpus)), draw(st.floats(0.0, 1e6)), 0.5, 0.1, hours)
    on_prem = OnPremInputs(gpus, max(1, gpus // 8), 10.0, 13.0, OnPremPreferences(), u)
    rate = od * draw(st.floats(0.1, 1.0))
    v = rent_or_own(demand, prices, tco, on_prem, rent_rate=rate, log=Assumptions())
    assert v is not None
    return v, prices, tco


@settings(max_examples=40, deadline=None)
@given(_cases())
def test_sentence_stated_figures_and_payback_agree_in_json(
    case: tuple[RentOrOwn, Mapping[str, float], Mapping[str, float]],
) -> None:
    built, prices, tco = case
    data = json.loads(json.dumps(built.to_json()))
    v = RentOrOwn.from_json(data)
    assert v == built
    hours = v.horizon_years * HOURS_PER_YEAR
    u_star, u = data["breakeven_utilization"], data["stated_utilization"]
    # the stated figure and the break-even are the optimiser's, for flat demand
    assert data["rent_at_stated_usd"] == pytest.approx(
        flat_rent_usd(u * v.fleet_gpus, hours, prices), rel=1e-9, abs=0.01
    )
    assert flat_rent_usd(u_star * v.fleet_gpus, hours, prices) == pytest.approx(
        data["own_usd"], rel=1e-9, abs=0.01
    )
    # owning wins at the stated utilisation exactly when it is above the break-even
    own_wins = data["own_usd"] < data["rent_at_stated_usd"]
    assert (data["cheaper_at_stated"] == "own") == own_wins
    if not math.isclose(u, u_star, rel_tol=1e-6):
        assert (u > u_star) == own_wins
    sentence = v.sentence()
    if u_star > 1.0:
        assert "owning would not win even with the fleet busy every hour" in sentence
        # two totals that round to the same dollar print apart, with cents (fmt_usd_apart)
        assert fmt_usd_apart(data["own_usd"], data["rent_full_usd"])[1] in sentence
        assert "paying back" not in sentence
    else:
        assert f"owning wins above {fmt_pct(u_star)} average utilisation" in sentence
        stated = fmt_usd_apart(data["own_usd"], data["rent_at_stated_usd"])[1]
        assert f"against {stated} to rent that use" in sentence
    # the payback rents at the stated steady rate, and is shown only where owning wins
    months = data["payback_months"]
    if months is not None:
        assert data["cheaper_at_stated"] == "own"
        rent_month = data["rent_at_stated_usd"] / (v.horizon_years * 12)
        assert months == pytest.approx(tco["capex"] / (rent_month - tco["opex_per_year"] / 12))
        after = months > data["horizon_years"] * 12
        assert v.payback_after_horizon == after
        if u_star <= 1.0:
            assert f"paying back after {fmt_num(months, 1)} months" in sentence
            assert ("horizon ends" in sentence) == after
    # a win on the TCO that the cash over the horizon does not give says so
    cash = data["own_usd"] + tco["residual_value"]
    assert data["own_cash_usd"] == pytest.approx(cash)
    through = (
        re.search(r"ahead only through the \$[\d,]+(?:\.\d+)? book value", sentence) is not None
    )
    assert through == (
        data["own_usd"] < data["rent_work_usd"] <= cash
        or (u_star <= 1.0 and data["own_usd"] < data["rent_at_stated_usd"] <= cash)
    )
