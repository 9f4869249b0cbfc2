"""Cost model: the purchase-mix LP against brute force, TCO and break-even by hand, tornado.

The brute-force oracle prices every whole number of 1- and 3-year reserved GPUs on a grid and
fills what is left greedily (cheapest option first, spot capped at the interruptible share),
which is the optimum for a fixed reservation; the LP must bound every grid point from below
and its whole-GPU answer must equal the grid's best.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pytest

from gpufleet.catalog.columns import TEXT_COLUMNS, unit_of
from gpufleet.catalog.onprem import OnPremCost, load_onprem_costs
from gpufleet.catalog.table import data_file
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost import (
    CAPACITY_BLOCK,
    HOURS_PER_YEAR,
    NETWORK_FRACTION_OF_SYSTEMS,
    ON_DEMAND,
    RESERVED_1Y,
    RESERVED_3Y,
    SPOT,
    Demand,
    Factor,
    NoOnPremPriceError,
    OnPremInputs,
    SensitivityInputs,
    break_even_months,
    cloud_prices,
    cost_breakdown,
    hardware_price,
    on_prem_tco,
    optimise_mix,
    sensitivity,
)
from gpufleet.plan.cost.breakdown import CAPACITY_BLOCK_MAX_DAYS, bookable
from gpufleet.plan.cost.prices import cloud_price_caveats, cloud_price_sellers
from gpufleet.plan.cost.tco import Asset, colocation_usd_per_kw_month, spread_factor
from gpufleet.plan.spot import spot_overhead_fraction
from gpufleet.specs.plan import OnPremPreferences

H100 = "h100-sxm5-80gb"
H200 = "h200-sxm-141gb"
TERM_HOURS = {RESERVED_1Y: HOURS_PER_YEAR, RESERVED_3Y: 3 * HOURS_PER_YEAR}


# --------------------------------------------------------------------------- oracle


def grid_cost(demand: Demand, prices: Mapping[str, float], r1: int, r3: int) -> float:
    """Cheapest purchase with exactly r1 + r3 reserved GPUs, by hand."""
    if (r1 and RESERVED_1Y not in prices) or (r3 and RESERVED_3Y not in prices):
        return math.inf
    h = demand.horizon_hours
    cost = sum(
        n * prices[key] * max(h, TERM_HOURS[key])
        for n, key in ((r1, RESERVED_1Y), (r3, RESERVED_3Y))
        if n
    )
    reserved = r1 + r3
    short = max(0, demand.baseline_gpus - reserved) * h
    if short > 0:
        if ON_DEMAND not in prices:
            return math.inf
        cost += short * prices[ON_DEMAND]
    free = max(0, reserved - demand.baseline_gpus) * demand.window_hours
    left = max(0.0, demand.burst_gpu_hours - free)
    inflate = 1.0 + demand.spot_overhead_fraction
    options = []  # (price per hour of work, cap in hours of work)
    if SPOT in prices:
        cap = demand.interruptible_fraction * demand.burst_gpu_hours
        options.append((prices[SPOT] * inflate, cap))
    if CAPACITY_BLOCK in prices:
        options.append((prices[CAPACITY_BLOCK], math.inf))
    if ON_DEMAND in prices:
        options.append((prices[ON_DEMAND], math.inf))
    for price, cap in sorted(options):
        take = min(left, cap)
        cost += take * price
        left -= take
    return cost if left <= 1e-9 else math.inf


def random_case(seed: int) -> tuple[Demand, dict[str, float]]:
    rng = np.random.default_rng(seed)
    od = float(rng.uniform(2.0, 6.0))
    prices = {
        ON_DEMAND: od,
        RESERVED_1Y: od * float(rng.uniform(0.5, 0.95)),
        RESERVED_3Y: od * float(rng.uniform(0.3, 0.7)),
        SPOT: od * float(rng.uniform(0.15, 0.9)),
        CAPACITY_BLOCK: od * float(rng.uniform(0.7, 1.1)),
    }
    for key in (RESERVED_1Y, RESERVED_3Y, SPOT, CAPACITY_BLOCK):
        if rng.random() < 0.25:
            del prices[key]
    horizon = float(rng.choice([2_000.0, HOURS_PER_YEAR, 3 * HOURS_PER_YEAR]))
    window = None if rng.random() < 0.5 else horizon * float(rng.uniform(0.1, 1.0))
    demand = Demand(
        accelerator="test",
        baseline_gpus=int(rng.integers(0, 7)),
        burst_gpu_hours=float(rng.uniform(0.0, 6.0)) * (window or horizon),
        interruptible_fraction=float(rng.choice([0.0, 0.5, 1.0])),
        spot_overhead_fraction=float(rng.uniform(0.0, 0.2)),
        horizon_hours=horizon,
        burst_window_hours=window,
    )
    return demand, prices


# --------------------------------------------------------------------------- the LP


@pytest.mark.parametrize("seed", range(40))
def test_lp_matches_brute_force_on_a_grid(seed: int) -> None:
    demand, prices = random_case(seed)
    mix = optimise_mix(demand, prices, Assumptions())
    top = demand.baseline_gpus + math.ceil(demand.burst_gpu_hours / demand.window_hours) + 2
    grid = [grid_cost(demand, prices, a, b) for a in range(top + 1) for b in range(top + 1)]
    best = min(grid)
    tol = 1e-6 * max(best, 1.0)
    assert all(mix["lp_bound_usd"] <= g + tol for g in grid)
    assert all(mix["total_usd"] <= g + tol for g in grid)
    assert mix["total_usd"] == pytest.approx(best, rel=1e-6, abs=1e-6)
    # the reported mix is whole GPUs and adds up to the total
    assert mix["reserved_1y_gpus"] == int(mix["reserved_1y_gpus"])
    assert mix["reserved_3y_gpus"] == int(mix["reserved_3y_gpus"])
    parts = mix["reserved_usd"] + mix["on_demand_usd"] + mix["capacity_block_usd"]
    assert parts + mix["spot_usd"] == pytest.approx(mix["total_usd"], rel=1e-9, abs=1e-6)


def test_steady_baseline_goes_to_the_cheaper_commitment() -> None:
    demand = Demand("test", 4, 0.0, 0.0, 0.05, 3 * HOURS_PER_YEAR)
    prices = {ON_DEMAND: 4.0, RESERVED_1Y: 3.0, RESERVED_3Y: 2.0}
    mix = optimise_mix(demand, prices, Assumptions())
    assert mix["reserved_3y_gpus"] == 4
    assert mix["on_demand_gpu_hours"] == pytest.approx(0.0, abs=1e-6)
    assert mix["total_usd"] == pytest.approx(4 * 2.0 * 3 * HOURS_PER_YEAR)


def test_a_three_year_term_is_paid_in_full_on_a_short_horizon() -> None:
    # 3y at $1/h for 26,280 h costs more than 1 year on-demand at $2/h: stay on-demand.
    demand = Demand("test", 1, 0.0, 0.0, 0.0, HOURS_PER_YEAR)
    mix = optimise_mix(demand, {ON_DEMAND: 2.0, RESERVED_3Y: 1.0}, Assumptions())
    assert mix["reserved_gpus"] == 0
    assert mix["total_usd"] == pytest.approx(2.0 * HOURS_PER_YEAR)


@pytest.mark.parametrize("burst", [0.0, 50_000.0])
def test_inference_baseline_is_never_on_spot(burst: float) -> None:
    demand = Demand("test", 10, burst, 1.0 if burst else 0.0, 0.05, HOURS_PER_YEAR)
    prices = {ON_DEMAND: 4.0, RESERVED_1Y: 3.0, SPOT: 0.1, CAPACITY_BLOCK: 0.2}
    mix = optimise_mix(demand, prices, Assumptions())
    covered = mix["reserved_gpus"] * demand.horizon_hours + mix["on_demand_gpu_hours"]
    assert covered >= demand.baseline_gpus * demand.horizon_hours - 1e-6
    assert mix["spot_work_gpu_hours"] <= burst + 1e-6
    assert mix["capacity_block_gpu_hours"] + mix["spot_work_gpu_hours"] <= burst + 1e-6
    if burst == 0:
        assert mix["spot_gpu_hours"] == pytest.approx(0.0, abs=1e-6)
    else:  # the cheap spot does all the burst, with its overhead paid
        assert mix["spot_gpu_hours"] == pytest.approx(burst * 1.05)


def test_spot_is_never_used_when_nothing_is_interruptible() -> None:
    demand = Demand("test", 0, 80_000.0, 0.0, 0.05, HOURS_PER_YEAR)
    mix = optimise_mix(demand, {ON_DEMAND: 4.0, SPOT: 0.01}, Assumptions())
    assert mix["spot_gpu_hours"] == pytest.approx(0.0, abs=1e-6)
    assert mix["on_demand_gpu_hours"] == pytest.approx(80_000.0)


def test_spot_overhead_can_make_spot_lose() -> None:
    # $3.9 × 1.05 > $4: spot costs more per hour of work than on-demand.
    demand = Demand("test", 0, 10_000.0, 1.0, 0.05, HOURS_PER_YEAR)
    mix = optimise_mix(demand, {ON_DEMAND: 4.0, SPOT: 3.9}, Assumptions())
    assert mix["spot_gpu_hours"] == pytest.approx(0.0, abs=1e-6)


def test_a_burst_window_stops_reserved_gpus_from_absorbing_a_deadline_run() -> None:
    # 100 GPUs for 30 days: spread over 3 years it is ~2.7 reserved GPUs; in a 30-day window
    # reserving 100 GPUs for 3 years costs more than renting them on-demand for the window.
    hours = 100 * 720.0
    spread = Demand("test", 0, hours, 0.0, 0.0, 3 * HOURS_PER_YEAR)
    windowed = Demand("test", 0, hours, 0.0, 0.0, 3 * HOURS_PER_YEAR, burst_window_hours=720.0)
    prices = {ON_DEMAND: 4.0, RESERVED_3Y: 2.0}
    assert optimise_mix(spread, prices, Assumptions())["reserved_gpus"] > 0
    mix = optimise_mix(windowed, prices, Assumptions())
    assert mix["reserved_gpus"] == 0
    assert mix["total_usd"] == pytest.approx(hours * 4.0)


@pytest.mark.parametrize("seed", range(20))
def test_savings_against_on_demand_are_never_negative(seed: int) -> None:
    demand, prices = random_case(seed)
    if demand.gpu_hours == 0:
        return
    mix = optimise_mix(demand, prices, Assumptions())
    on_demand = prices[ON_DEMAND] * demand.gpu_hours
    assert 1.0 - mix["total_usd"] / on_demand >= -1e-9


def test_uncoverable_demand_is_a_clear_error() -> None:
    demand = Demand("test", 2, 0.0, 0.0, 0.0, HOURS_PER_YEAR)
    with pytest.raises(ValueError, match="baseline needs an on-demand or reserved price"):
        optimise_mix(demand, {SPOT: 1.0}, Assumptions())


def test_demand_rejects_impossible_inputs() -> None:
    with pytest.raises(ValueError, match="interruptible_fraction"):
        Demand("test", 1, 0.0, 1.5, 0.0, 100.0)
    with pytest.raises(ValueError, match="burst_window_hours"):
        Demand("test", 1, 10.0, 0.0, 0.0, 100.0, burst_window_hours=200.0)


# --------------------------------------------------------------------------- cloud prices


def test_cloud_prices_read_instances_and_commitments() -> None:
    log = Assumptions()
    prices = cloud_prices(H100, ["aws", "gcp", "azure"], [], log)
    assert set(prices) == {ON_DEMAND, SPOT, RESERVED_1Y, RESERVED_3Y, CAPACITY_BLOCK}
    assert prices[SPOT] < prices[RESERVED_3Y] < prices[RESERVED_1Y] < prices[ON_DEMAND]
    assert prices[CAPACITY_BLOCK] == pytest.approx(4.916)  # the vendor per-GPU rate
    notes = {a.name: a.source for a in log.frozen()}
    # GCP's per-SKU CUD wins the 3-year price; AWS's "up to 72%" would be a bound, not a price
    assert "gcp cud-resource" in notes[f"{H100} reserved_3y price"]
    assert "aws 1-year commitment discount" in notes
    aws = Assumptions()
    cloud_prices(H100, ["aws"], [], aws)
    assert "upper bound" in {a.name: a.source for a in aws.frozen()}[f"{H100} reserved_3y price"]


def test_cloud_prices_respect_providers_and_regions() -> None:
    log = Assumptions()
    azure = cloud_prices(H100, ["azure"], [], log)
    assert CAPACITY_BLOCK not in azure
    assert azure[ON_DEMAND] == pytest.approx(98.32 / 8)
    ohio = cloud_prices(H100, ["aws"], ["us-east-2"], log)
    assert CAPACITY_BLOCK in ohio  # the Capacity Block page names US East (Ohio)
    assert cloud_prices(H100, ["aws"], ["ap-northeast-1"], log).get(CAPACITY_BLOCK) is None


def test_an_accelerator_no_cloud_sells_has_no_prices() -> None:
    assert cloud_prices("mi300x", ["aws", "gcp", "azure"], [], Assumptions()) == {}


# --------------------------------------------------------------------------- on-prem


PREFS = OnPremPreferences(
    pue=1.3,
    electricity_usd_per_kwh=0.10,
    colocation_usd_per_kw_month=50.0,
    depreciation_years=4.0,
    staff_fte_per_100_nodes=1.5,
    fte_usd_per_year=200_000.0,
    support_fraction_per_year=0.1,
)


def test_tco_by_hand_for_two_dgx_h100() -> None:
    tco = on_prem_tco(H100, 16, 2, 20.4, 26.52, PREFS, 3.0, 0.7, Assumptions())
    systems = 2 * 270_000.0  # SemiAnalysis DGX H100 estimate, the analyst row
    network = 0.10 * systems
    capex = systems + network
    power = 26.52 * 8_760 * 0.10
    colocation = 50.0 * 20.4 * 12
    support = 0.1 * capex
    staff = 1.5 * 2 / 100 * 200_000.0
    opex = power + colocation + support + staff
    total = (capex / 4.0 + opex) * 3.0
    assert tco["capex_systems"] == pytest.approx(540_000.0)
    assert tco["capex"] == pytest.approx(594_000.0)
    assert tco["opex_power_per_year"] == pytest.approx(23_231.52)
    assert tco["opex_colocation_per_year"] == pytest.approx(12_240.0)
    assert tco["opex_support_per_year"] == pytest.approx(59_400.0)
    assert tco["opex_staff_per_year"] == pytest.approx(6_000.0)
    assert tco["opex_per_year"] == pytest.approx(opex) == pytest.approx(100_871.52)
    assert tco["depreciation_per_year"] == pytest.approx(148_500.0)
    assert tco["total"] == pytest.approx(total) == pytest.approx(748_114.56)
    assert tco["per_gpu_hour"] == pytest.approx(748_114.56 / (16 * 3 * 8_760 * 0.7))
    assert NETWORK_FRACTION_OF_SYSTEMS == 0.10


def test_accelerator_only_prices_add_a_host_per_node() -> None:
    price = hardware_price(H200)
    assert price.basis == "accelerator + host"
    assert price.per_gpu_usd == pytest.approx(35_000.0)
    assert price.host_per_node_usd == pytest.approx(32_010.0)  # DGX H100 non-GPU BOM
    tco = on_prem_tco(H200, 16, 2, 20.4, 26.52, PREFS, 3.0, 0.7, Assumptions())
    assert tco["capex_systems"] == pytest.approx(16 * 35_000.0 + 2 * 32_010.0)


def test_given_network_and_storage_capex_replace_the_assumption() -> None:
    tco = on_prem_tco(
        H100,
        16,
        2,
        20.4,
        26.52,
        PREFS,
        3.0,
        0.7,
        Assumptions(),
        network_capex_usd=1_000.0,
        storage_capex_usd=2_000.0,
    )
    assert tco["capex"] == pytest.approx(540_000.0 + 3_000.0)


def test_an_accelerator_without_a_purchase_price_is_a_clear_error() -> None:
    with pytest.raises(NoOnPremPriceError, match="no on-prem purchase price for mi325x") as exc:
        on_prem_tco("mi325x", 8, 1, 10.0, 13.0, PREFS, 3.0, 0.7, Assumptions())
    assert isinstance(exc.value, ValueError)
    assert isinstance(exc.value, UserError)


BOUGHT = (Asset(594_000.0, 4.0),)  # the hardware, bought again every 4 years


def test_break_even_by_hand() -> None:
    tco = {"capex": 594_000.0, "opex_per_year": 100_871.52}
    months = break_even_months(tco, 6.0, 16, 0.7, assets=BOUGHT)
    rent = 6.0 * 16 * 0.7 * 730.0  # 49,056 a month
    assert months == pytest.approx(594_000.0 / (rent - 100_871.52 / 12))
    assert months == pytest.approx(14.612, abs=1e-3)


def test_break_even_is_none_when_cloud_stays_cheaper() -> None:
    tco = {"capex": 594_000.0, "opex_per_year": 100_871.52}
    assert break_even_months(tco, 0.5, 16, 0.7, assets=BOUGHT) is None  # rent below opex
    assert break_even_months(tco, 1.0, 16, 0.7, assets=BOUGHT) is None  # $8,176 < $8,406
    # crossing at ~154 months > 120
    assert break_even_months(tco, 1.5, 16, 0.7, assets=(Asset(594_000.0, 20.0),)) is None
    # ~94 months on hardware that lasts 10 years; on the 4-year hardware the fleet is
    # bought again in month 48, before it, and the savings never catch up
    once = 594_000.0 / (1.8 * 16 * 0.7 * 730.0 - 100_871.52 / 12)
    assert break_even_months(tco, 1.8, 16, 0.7, assets=(Asset(594_000.0, 10.0),)) == (
        pytest.approx(once)
    )
    assert break_even_months(tco, 1.8, 16, 0.7, assets=BOUGHT) is None


# --------------------------------------------------------------------------- tornado


def money(rows: list[dict[str, float | str]]) -> dict[str, dict[str, float]]:
    """Tornado rows by factor, with only their USD columns (as floats)."""
    return {
        str(r["factor"]): {k: float(v) for k, v in r.items() if k.endswith("_usd")} for r in rows
    }


def on_prem_inputs() -> OnPremInputs:
    return OnPremInputs(
        gpus=16, nodes=2, it_power_kw=20.4, facility_power_kw=26.52, prefs=PREFS, utilization=0.7
    )


def test_tornado_rows_are_ordered_by_swing() -> None:
    demand = Demand(H100, 8, 50_000.0, 0.8, 0.05, 3 * HOURS_PER_YEAR)
    inputs = SensitivityInputs("on-prem", demand, {}, on_prem_inputs(), failure_hours=(0.9, 1.3))
    rows = sensitivity(inputs)
    swings = [float(r["swing_usd"]) for r in rows]
    assert swings == sorted(swings, reverse=True)
    assert {r["factor"] for r in rows} == {
        "utilization",
        "gpu_price",
        "mfu",
        "failure_rate",
        "electricity_price",
    }
    base = on_prem_tco(H100, 16, 2, 20.4, 26.52, PREFS, 3.0, 0.7, Assumptions())["total"]
    by_name = money(rows)
    for row in by_name.values():
        assert row["base_usd"] == pytest.approx(base)
        assert row["swing_usd"] == pytest.approx(abs(row["high_usd"] - row["low_usd"]))
    # higher utilization: a smaller fleet for the same work; lower MFU: more GPU-hours
    assert by_name["utilization"]["high_usd"] < base < by_name["utilization"]["low_usd"]
    assert by_name["mfu"]["low_usd"] > base > by_name["mfu"]["high_usd"]
    assert by_name["gpu_price"]["low_usd"] < base < by_name["gpu_price"]["high_usd"]


def test_cloud_tornado_ignores_electricity_and_scales_with_price() -> None:
    demand = Demand("test", 4, 20_000.0, 0.5, 0.05, HOURS_PER_YEAR)
    prices = {ON_DEMAND: 4.0, RESERVED_1Y: 3.0, SPOT: 1.5}
    rows = sensitivity(SensitivityInputs("cloud", demand, prices))
    by_name = money(rows)
    assert "failure_rate" not in by_name  # no goodput overhead supplied
    # a rented GPU-hour's price includes its power and does not depend on a fleet's
    # utilisation: those rows would be flat, so they are left out, not shown as zero swings
    assert set(by_name) == {"gpu_price", "mfu"}
    base = by_name["gpu_price"]["base_usd"]
    assert by_name["gpu_price"]["low_usd"] == pytest.approx(0.7 * base)
    assert by_name["gpu_price"]["high_usd"] == pytest.approx(1.3 * base)
    assert rows[0]["factor"] == "gpu_price"


def test_failure_rate_accepts_a_callable_or_a_precomputed_pair() -> None:
    demand = Demand("test", 0, 20_000.0, 0.0, 0.0, HOURS_PER_YEAR)
    prices = {ON_DEMAND: 4.0}
    factors = [Factor("failure_rate", 0.5, 2.0)]
    as_pair = sensitivity(SensitivityInputs("cloud", demand, prices, None, (0.9, 1.25)), factors)
    as_call = sensitivity(
        SensitivityInputs("cloud", demand, prices, None, lambda m: 1.0 + 0.2 * (m - 1.0) ** 3),
        factors,
    )
    assert as_pair[0]["low_usd"] == pytest.approx(0.9 * 80_000.0)
    assert as_pair[0]["high_usd"] == pytest.approx(1.25 * 80_000.0)
    assert as_call[0]["low_usd"] == pytest.approx((1.0 - 0.2 * 0.125) * 80_000.0)
    assert as_call[0]["high_usd"] == pytest.approx(1.2 * 80_000.0)


# --------------------------------------------------------------------------- breakdown


def test_cost_breakdown_assembles_every_part() -> None:
    log = Assumptions()
    demand = Demand(H100, 8, 50_000.0, 0.8, 0.05, 3 * HOURS_PER_YEAR, burst_window_hours=720.0)
    cost = cost_breakdown(
        demand, log, providers=["aws", "gcp"], on_prem=on_prem_inputs(), failure_hours=(0.9, 1.3)
    )
    assert cost.on_demand is not None
    assert cost.reserved is not None
    assert cost.spot is not None
    assert cost.on_demand == pytest.approx(cost.mix["price_on_demand_usd_per_gpu_hour"] * 260_240)
    assert cost.savings_vs_on_demand is not None
    assert cost.savings_vs_on_demand >= 0
    assert cost.savings_vs_on_demand == pytest.approx(1 - cost.mix["total_usd"] / cost.on_demand)
    assert cost.tco["capex"] > 0
    assert cost.sensitivity
    assert cost.sensitivity[0]["factor"] == "gpu_price"
    names = {a.name for a in log.frozen()}
    assert {"on-prem PUE", "on-prem network capex", f"{H100} on-demand price"} <= names
    assert all(a.source for a in log.frozen())
    cost.model_dump_json()  # the plan serialises it


def test_cost_breakdown_notes_a_missing_purchase_price() -> None:
    log = Assumptions()
    demand = Demand("l40s", 4, 0.0, 0.0, 0.0, HOURS_PER_YEAR)
    cost = cost_breakdown(demand, log, on_prem=on_prem_inputs())
    assert cost.tco == {}
    assert cost.break_even_months is None
    assert cost.spot is None  # nothing may run on spot
    note = next(a for a in log.frozen() if a.name == "l40s on-prem TCO")
    assert "no on-prem purchase price" in note.source
    assert cost.sensitivity  # falls back to the cloud tornado


# --------------------------------------------------------------------------- catalog


def test_onprem_costs_rows_are_sourced_and_unit_named() -> None:
    rows = load_onprem_costs()
    assert len(rows) == 45
    assert all(r.source and str(r.retrieved) == "2026-11-29" for r in rows)
    header = next(csv.reader(io.StringIO(data_file("onprem_costs.csv"))))
    assert set(header) == set(OnPremCost.model_fields)
    text = {"item", "accelerator", "system", "unit_basis", "source_kind"}
    for column in header:
        if column in text or column in TEXT_COLUMNS:
            continue
        assert unit_of(column) is not None or column in OnPremCost.dimensionless_columns, column


def test_onprem_rows_keep_values_in_the_columns_of_their_basis() -> None:
    base = {"item": "pue", "source": "x", "source_kind": "analyst", "retrieved": "2026-11-29"}
    with pytest.raises(ValueError, match="needs pue_low"):
        OnPremCost.model_validate({**base, "unit_basis": "ratio"})
    with pytest.raises(ValueError, match="value_low_usd"):
        OnPremCost.model_validate(
            {**base, "unit_basis": "ratio", "pue_low": 1.2, "value_low_usd": 1}
        )
    row = OnPremCost.model_validate(
        {**base, "unit_basis": "ratio", "pue_low": 1.4, "pue_high": 1.6}
    )
    assert row.low == 1.4
    assert row.high == 1.6
    assert row.mid == pytest.approx(1.5)


def test_capacity_blocks_only_for_runs_that_fit_one_block() -> None:
    """An 88-day, 2,048-GPU block was 'simply available' (issue 27): a block is now used only
    where the run fits the longest one sold (182 days), and said to be a booking."""
    prices = {ON_DEMAND: 5.0, CAPACITY_BLOCK: 4.9}

    def demand(days: float) -> Demand:
        return Demand(H100, 0, 1e6, 0.0, 0.1, 3 * 8760.0, burst_window_hours=days * 24)

    log = Assumptions()
    assert CAPACITY_BLOCK in bookable(prices, demand(88), log)
    assert any(a.name == "capacity blocks" and "booked" in a.source for a in log.items)
    long_log = Assumptions()
    assert CAPACITY_BLOCK not in bookable(prices, demand(CAPACITY_BLOCK_MAX_DAYS + 1), long_log)
    assert any(a.value == "not used" for a in long_log.items)


# --------------------------------------------------------------------------- facility, NPV


def test_default_colocation_is_the_sourced_midpoint() -> None:
    prefs = OnPremPreferences()
    assert prefs.facility == "colocation"
    # onprem_costs.csv: $450-$900 per kW-year -> $56.25 per kW-month
    assert colocation_usd_per_kw_month(prefs) == pytest.approx(675.0 / 12)
    tco = on_prem_tco(H100, 16, 2, 20.4, 26.52, prefs, 3.0, 0.7, Assumptions())
    assert tco["opex_colocation_per_year"] == pytest.approx(56.25 * 20.4 * 12)


def test_a_built_facility_by_hand() -> None:
    prefs = PREFS.model_copy(update={"facility": "build", "facility_build_usd_per_mw": 10e6})
    tco = on_prem_tco(H100, 16, 2, 20.4, 26.52, prefs, 3.0, 0.7, Assumptions())
    hardware = 594_000.0  # two DGX H100 and the network share, as above
    building = 10e6 * 20.4 / 1000  # per MW of IT power
    assert tco["capex_facility"] == pytest.approx(204_000.0)
    assert tco["capex"] == pytest.approx(hardware + building)
    assert tco["opex_colocation_per_year"] == 0
    assert tco["opex_support_per_year"] == pytest.approx(0.1 * hardware)  # not on the building
    assert tco["depreciation_per_year"] == pytest.approx(hardware / 4 + building / 15)
    # capex less what is left at the end, plus three years of opex
    residual = hardware * (1 - 3 / 4) + building * (1 - 3 / 15)
    assert tco["residual_value"] == pytest.approx(residual)
    assert tco["total"] == pytest.approx(hardware + building - residual + 3 * tco["opex_per_year"])


def test_an_existing_building_costs_nothing_but_power_and_people() -> None:
    prefs = PREFS.model_copy(update={"facility": "existing"})
    tco = on_prem_tco(H100, 16, 2, 20.4, 26.52, prefs, 3.0, 0.7, Assumptions())
    assert tco["capex_facility"] == 0
    assert tco["opex_colocation_per_year"] == 0


def test_present_value_by_hand() -> None:
    """Zero rate: the present value is the total. 10 %: the purchases, the residual at the
    horizon's end and the opex spread evenly, each discounted on its own."""
    zero = PREFS.model_copy(update={"discount_rate": 0.0})
    tco = on_prem_tco(H100, 16, 2, 20.4, 26.52, zero, 3.0, 0.7, Assumptions())
    assert tco["present_value"] == pytest.approx(tco["total"])
    ten = PREFS.model_copy(update={"discount_rate": 0.10})
    tco = on_prem_tco(H100, 16, 2, 20.4, 26.52, ten, 3.0, 0.7, Assumptions())
    capex, opex = 594_000.0, tco["opex_per_year"]
    # ∫0^3 opex e^{-t ln 1.1} dt
    opex_pv = opex * (1 - 1.1**-3) / math.log(1.1)
    assert tco["present_value"] == pytest.approx(capex - capex / 4 * 1.1**-3 + opex_pv)


def test_an_asset_outlived_by_the_horizon_is_bought_again() -> None:
    a = Asset(100.0, 4.0)
    assert a.purchase_years(9.0) == [0.0, 4.0, 8.0]
    assert a.residual_usd(9.0) == pytest.approx(75.0)
    assert a.present_usd(9.0, 0.0) == pytest.approx(100.0 * 9 / 4)  # straight line
    assert a.present_usd(4.0, 0.0) == pytest.approx(100.0)  # no second purchase at the end
    assert spread_factor(3.0, 0.0) == 1.0


# --------------------------------------------------------------------------- obtainable


def test_spot_and_blocks_stay_within_what_is_obtainable() -> None:
    """A burst of 720 h × 100 GPUs (window 720 h) that spot and blocks could carry whole:
    capped at 8 spot GPUs and 16 block GPUs at once, the rest is bought on demand."""
    prices = {ON_DEMAND: 4.0, SPOT: 1.0, CAPACITY_BLOCK: 2.0}
    free = Demand("x", 0, 72_000.0, 1.0, 0.0, HOURS_PER_YEAR, burst_window_hours=720.0)
    assert optimise_mix(free, prices, Assumptions())["spot_gpu_hours"] == pytest.approx(72_000.0)
    capped = Demand(
        "x",
        0,
        72_000.0,
        1.0,
        0.0,
        HOURS_PER_YEAR,
        burst_window_hours=720.0,
        spot_max_gpus=8.0,
        block_max_gpus=16.0,
    )
    mix = optimise_mix(capped, prices, Assumptions())
    assert mix["spot_gpu_hours"] == pytest.approx(8 * 720.0)
    assert mix["capacity_block_gpu_hours"] == pytest.approx(16 * 720.0)
    assert mix["on_demand_gpu_hours"] == pytest.approx(72_000.0 - 24 * 720.0)
    assert mix["total_usd"] == pytest.approx(8 * 720 * 1.0 + 16 * 720 * 2.0 + 76 * 720 * 4.0)


def test_a_gang_too_big_for_a_block_never_runs_on_one() -> None:
    prices = {ON_DEMAND: 4.0, CAPACITY_BLOCK: 2.0}
    demand = Demand("x", 0, 10_000.0, 0.0, 0.0, HOURS_PER_YEAR, block_fraction=0.25)
    mix = optimise_mix(demand, prices, Assumptions())
    assert mix["capacity_block_gpu_hours"] == pytest.approx(2_500.0)
    with pytest.raises(ValueError, match="obtainable: capacity blocks at most 0 GPUs"):
        optimise_mix(replace(demand, block_max_gpus=0.0), {CAPACITY_BLOCK: 2.0}, Assumptions())


def test_spot_overhead_grows_with_the_gang_and_the_reclaim_rate() -> None:
    def overhead(gpus: int, rate: float) -> float | None:
        return spot_overhead_fraction(
            gpus=gpus, ideal_time_s=10 * 86_400.0, checkpoint_bytes=1e12, reclaims_per_node_day=rate
        )

    small, big = overhead(8, 0.1), overhead(64, 0.1)
    assert small is not None
    assert big is not None
    assert 0 < small < big  # a reclaim of any of the gang's nodes stops all of them
    rare = overhead(64, 1e-6)
    assert rare is not None
    assert rare < 1e-4
    often = overhead(64, 1.0)
    assert often is not None
    assert often > big
    assert overhead(64, 10_000.0) is None  # reclaimed faster than it can checkpoint


def test_a_sourced_commitment_beats_another_providers_up_to_figure() -> None:
    """H100: GCP's per-SKU 1-year CUD (30.6 %) is used, not Azure's 'up to 72 %' floor."""
    log = Assumptions()
    prices = cloud_prices(H100, ["aws", "gcp", "azure"], [], log)
    sellers = cloud_price_sellers(H100, ["aws", "gcp", "azure"], [])
    assert sellers["reserved_1y"] == "gcp"
    assert prices["reserved_1y"] == pytest.approx(prices[ON_DEMAND] * (1 - 0.3063), rel=1e-3)
    assert cloud_price_caveats(H100, ["aws", "gcp", "azure"], []) == {}


def test_a_price_resting_on_an_up_to_figure_says_so() -> None:
    caveats = cloud_price_caveats("a100-sxm4-80gb", ["aws", "gcp", "azure"], [])
    assert "an upper bound, so this price is a floor" in caveats["reserved_3y"]
    demand = Demand("a100-sxm4-80gb", 8, 0.0, 0.0, 0.0, 3 * HOURS_PER_YEAR)
    cost = cost_breakdown(demand, Assumptions())
    # plus the on-demand reference the mix's saving is against (test_on_demand_reference.py)
    assert {k: v for k, v in cost.price_caveats.items() if k != ON_DEMAND} == caveats


def test_a_fleet_its_work_fills_every_hour_does_not_shrink_with_utilization() -> None:
    """chat-70b: 8 GPUs serve around the clock (baseline 8 of a 16-GPU fleet here would be
    half); +20 % utilization priced a fleet smaller than the GPUs the work holds every hour
    (6.67 of 8). The fleet's floor is the baseline: the high end is the base cost. Nor does
    it grow at -20 %: its work fills every hour of it, so it delivers every hour whatever the
    stated utilization (the TCO's delivered GPU-hours, docs/design/0007; until the CFO
    review the low end priced 16 × 0.7 ÷ 0.56 = 20 GPUs, base ÷ 0.8)."""
    demand = Demand(H100, 16, 0.0, 0.0, 0.0, 3 * HOURS_PER_YEAR)
    rows = sensitivity(SensitivityInputs("on-prem", demand, {}, on_prem_inputs()))
    row = money(rows)["utilization"]
    assert row["high_usd"] == pytest.approx(row["base_usd"])
    assert row["low_usd"] == pytest.approx(row["base_usd"])
