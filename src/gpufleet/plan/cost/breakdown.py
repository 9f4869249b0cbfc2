"""The plan's cost section: every way of paying for one accelerator's demand, side by side.

The one entry point the planners call. It runs the other modules in order (prices, mix, TCO,
break-even, sensitivity), turns their expected failures (no price to cover the demand, no
purchase price for the accelerator) into notes in the log, and fills `CostBreakdown`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

from gpufleet.catalog.instances import PROVIDERS
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_count, fmt_duration
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.instances import on_whole_instances, rented_counts
from gpufleet.plan.cost.mix import optimise_mix
from gpufleet.plan.cost.prices import (
    CAPACITY_BLOCK,
    ON_DEMAND,
    RESERVED_1Y,
    RESERVED_3Y,
    RESERVED_TERM_YEARS,
    SPOT,
    cloud_on_demand_by_provider,
    cloud_price_caveats,
    cloud_price_offers,
    cloud_price_sellers,
    cloud_prices,
)
from gpufleet.plan.cost.reference import on_demand_reference
from gpufleet.plan.cost.steady import SteadyRent, steady_prices
from gpufleet.plan.cost.tco import (
    Asset,
    NoOnPremPriceError,
    OnPremInputs,
    break_even_months,
    on_prem_tco,
    owned_assets,
    spread_factor,
)
from gpufleet.plan.cost.tornado import (
    DEFAULT_FACTORS,
    Factor,
    FailureHours,
    SensitivityInputs,
    sensitivity,
)
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.model import CostBreakdown


def _spot_max_cost(demand: Demand, prices: Mapping[str, float]) -> float | None:
    """Every spot-eligible burst hour on spot (with its overhead), the rest on-demand."""
    eligible = demand.interruptible_fraction * demand.burst_gpu_hours
    if eligible <= 0 or SPOT not in prices or ON_DEMAND not in prices:
        return None
    rest = demand.gpu_hours - eligible
    return (
        eligible * (1.0 + demand.spot_overhead_fraction) * prices[SPOT] + rest * prices[ON_DEMAND]
    )


def cost_breakdown(
    demand: Demand,
    log: Assumptions,
    *,
    providers: Sequence[str] = PROVIDERS,
    regions: Sequence[str] = (),
    on_prem: OnPremInputs | None = None,
    deployment: Literal["cloud", "on-prem"] | None = None,
    failure_hours: FailureHours | None = None,
    factors: Sequence[Factor] = DEFAULT_FACTORS,
    verdict: bool = True,
    min_gpus: int = 1,
) -> CostBreakdown:
    """The plan's cost section for one accelerator's demand.

    Every cloud figure prices the GPUs rented: `demand` in whole instances of the offer
    priced (`plan/cost/instances.py`; the mix then says `rented_gpu_hours`, `rented_gpus`,
    `rented_instances`, `idle_gpus` and `instance_gpus`, while `demand_gpu_hours` and
    `effective_usd_per_gpu_hour` stay those of the work). on_demand: all rented GPU-hours at
    the on-demand price. reserved: the cheapest purchase of reserved GPUs alone (whole
    instances, either term). spot: every spot-eligible burst hour on spot with its overhead
    and the rest on-demand (None when nothing may run on spot). mix: `optimise_mix` plus the
    prices used (`price_<kind>_usd_per_gpu_hour`). savings_vs_on_demand = 1 − mix total /
    on-demand total. tco: `on_prem_tco` when on-prem inputs are given (empty, with a note in
    the log, when the accelerator has no purchase price). rent_or_own: `rent_or_own` (the
    planned work at the mix's total, or on-demand without a mix, per GPU-hour of the work;
    the fleet's steady use at the optimiser's price for it); break_even_months: its payback,
    shown only where owning wins. sensitivity: the tornado for `deployment` (default:
    on-prem when a TCO exists, else cloud); sensitivity_alternative: the other
    deployment's, when it is priced. `verdict=False` leaves rent_or_own and the payback
    out (the ranking costs every candidate's plan for its total alone, `plan.ranking`).
    `min_gpus`: every price comes from instances of at least this many GPUs, the largest
    group the work keeps inside one instance (`plan.cost.instances.instance_floor`).
    """
    prices = bookable(
        cloud_prices(demand.accelerator, providers, regions, log, min_gpus=min_gpus), demand, log
    )
    # every cloud figure prices what is rented: whole instances of the offer priced
    rented = on_whole_instances(
        demand, cloud_price_offers(demand.accelerator, providers, regions, min_gpus=min_gpus), log
    )
    hours = demand.gpu_hours
    on_demand = prices[ON_DEMAND] * rented.gpu_hours if ON_DEMAND in prices else None
    mix: dict[str, float] = {}
    if prices:
        try:
            mix = optimise_mix(rented, prices, log)
        except ValueError as exc:
            log.add(f"{demand.accelerator} purchase mix", "not computed", str(exc))
    reserved_prices = {k: v for k, v in prices.items() if k in RESERVED_TERM_YEARS}
    reserved, reserved_gpus = _reserved_only(rented, reserved_prices, log)
    spot = _spot_max_cost(rented, prices)
    savings: float | None = None
    if mix and on_demand:
        savings = max(0.0, 1.0 - mix["total_usd"] / on_demand)
    if mix:
        # the work's GPU-hours and its price per GPU-hour, the idle GPUs' cost included
        mix.update(
            demand_gpu_hours=hours,
            rented_gpu_hours=rented.gpu_hours,
            effective_usd_per_gpu_hour=mix["total_usd"] / hours if hours > 0 else 0.0,
        )
        mix.update(rented_counts(demand, rented))
        mix.update({f"price_{k}_usd_per_gpu_hour": v for k, v in sorted(prices.items())})
    tco: dict[str, float] = {}
    if on_prem is not None:
        try:
            tco = on_prem_tco(
                demand.accelerator,
                on_prem.gpus,
                on_prem.nodes,
                on_prem.it_power_kw,
                on_prem.facility_power_kw,
                on_prem.prefs,
                demand.horizon_hours / HOURS_PER_YEAR,
                on_prem.utilization,
                log,
                system=on_prem.system,
                storage_capex_usd=on_prem.storage_capex_usd,
                network_capex_usd=on_prem.network_capex_usd,
                burst_rent_usd=on_prem.burst_rent_usd,
                # delivered GPU-hours count the planned work the owned fleet serves, the
                # figure the demand table shows, where it is more than the stated share
                served_gpu_hours=on_prem.served_gpu_hours(hours),
            )
        except NoOnPremPriceError as exc:
            log.add(f"{demand.accelerator} on-prem TCO", "not computed", str(exc))
    # per GPU-hour of the work: what the idle GPUs of its instances cost is in the rate
    rent_rate: float | None = None
    if mix and hours > 0:
        rent_rate = mix["total_usd"] / hours
    elif on_demand is not None and hours > 0:
        rent_rate = on_demand / hours
    elif ON_DEMAND in prices:
        rent_rate = prices[ON_DEMAND]
    decided: RentOrOwn | None = None
    if verdict and tco and on_prem is not None and rent_rate is not None:
        # the work itself (its GPU-hours, how busy it keeps the fleet), rented in instances
        work = replace(demand, instance_gpus=rented.instance_gpus)
        decided = rent_or_own(work, prices, tco, on_prem, rent_rate=rent_rate, log=log)
    break_even = decided.payback_months if decided is not None else None
    rows, other_rows = _tornados(
        deployment or ("on-prem" if tco else "cloud"),
        {"on-prem": bool(tco), "cloud": bool(mix)},
        SensitivityInputs("cloud", demand, prices, on_prem, failure_hours),
        factors,
        log,
        rented=rented,
    )
    sellers = cloud_price_sellers(demand.accelerator, providers, regions, min_gpus=min_gpus)
    by_provider = spend_by_provider(mix, sellers)
    caveats = {
        k: v
        for k, v in cloud_price_caveats(
            demand.accelerator, providers, regions, min_gpus=min_gpus
        ).items()
        if k in prices
    }
    if savings is not None and on_demand is not None and ON_DEMAND in sellers:
        # the saving is against the cheapest provider's on-demand: say whose, and what the
        # provider the mix buys from asks, beside a decision that may name that one
        caveats[ON_DEMAND] = on_demand_reference(
            on_demand,
            sellers[ON_DEMAND],
            cloud_on_demand_by_provider(demand.accelerator, providers, regions, min_gpus=min_gpus),
            by_provider,
        )
    return CostBreakdown(
        on_demand=on_demand,
        reserved=reserved,
        reserved_gpus=reserved_gpus,
        spot=spot,
        mix=mix,
        savings_vs_on_demand=savings,
        mix_by_provider=by_provider,
        price_caveats=caveats,
        tco=tco,
        break_even_months=break_even,
        sensitivity=rows,
        sensitivity_alternative=other_rows,
        rent_or_own=decided.to_json() if decided is not None else {},
    )


def _reserved_only(
    rented: Demand, prices: Mapping[str, float], log: Assumptions
) -> tuple[float | None, float | None]:
    """(total, GPUs) of renting everything on reservations alone: the GPUs in use at the
    busiest hour (`Demand.gpus_at_once`, whole instances) reserved for the horizon at the
    cheapest term, which runs every hour's work, and no fewer, since a gang runs whole.
    The mix's linear program, given reserved prices alone, sized the reservation to fit
    every run's GPU-hours into one burst window, as if the runs all ran together:
    year-of-runs reserved 1,064 GPUs, twice the 528 it ever uses at once ($34.8 M). It
    stands in only when the gangs are not known. (None, None) without a reserved price."""
    if not prices:
        return None, None
    at_once = rented.gpus_at_once
    if at_once is None:
        mix = optimise_mix(rented, prices, Assumptions())
        return mix["total_usd"], mix["reserved_gpus"]
    flat = Demand(
        accelerator=rented.accelerator,
        baseline_gpus=at_once,
        burst_gpu_hours=0.0,
        interruptible_fraction=0.0,
        spot_overhead_fraction=0.0,
        horizon_hours=rented.horizon_hours,
        instance_gpus=rented.instance_gpus,
    )
    mix = optimise_mix(flat, prices, Assumptions())
    held = {k: mix[f"{k}_gpus"] for k in (RESERVED_1Y, RESERVED_3Y) if mix[f"{k}_gpus"] > 0}
    if not held or not rented.burst_gangs:  # nothing to rent, or the baseline alone
        return mix["total_usd"], float(at_once)
    terms = (
        f"on {RESERVED_TERM_YEARS[next(iter(held))]:g}-year terms"
        if len(held) == 1
        else "("
        + ", ".join(f"{fmt_count(n)} on {RESERVED_TERM_YEARS[k]:g}-year" for k, n in held.items())
        + " terms)"
    )
    log.add(
        "reserved option",
        f"{fmt_count(at_once)} GPUs {terms}, those in use at the busiest hour",
        "gpufleet (derived): the Reserved / committed total reserves what is in use at once "
        "(whole instances) for the whole horizon at the cheapest term, as the runs are "
        "scheduled; runs that do not overlap share the reservation",
    )
    return mix["total_usd"], float(at_once)


def rent_or_own(
    demand: Demand,
    prices: Mapping[str, float],
    tco: Mapping[str, float],
    on_prem: OnPremInputs,
    *,
    rent_rate: float,
    log: Assumptions,
) -> RentOrOwn | None:
    """Both rent-or-own comparisons (`plan/cost/verdict.py`). The planned work is rented at
    `rent_rate`, its blended price; the fleet kept busy at the stated utilisation, and the
    break-even utilisation, at what the optimiser pays for that steady use
    (`plan/cost/steady.py`), and the payback at that steady rate. The rent of the demand
    above the fleet (`on_prem.burst_rent_usd`, in the TCO) is on both sides of the
    steady-use comparison: in the rent at the stated and at full use and their present
    value, so the break-even is where the fleet's own costs cross, and the payback (whose
    monthly burst rent would cancel) leaves it out of both. Year-of-runs had owning and the
    break-even with it, renting at 70 % and the payback without it. None (with a note) when no
    price may buy steady use: the mix never puts work that runs every hour on spot."""
    steady = SteadyRent(
        demand.accelerator,
        on_prem.gpus,
        demand.horizon_hours,
        steady_prices(prices),
        instance_gpus=demand.instance_gpus,
    )
    if not steady.prices:
        log.add(
            "rent or own",
            "not computed",
            f"no on-demand or reserved price for {demand.accelerator}: steady use of the "
            "fleet cannot be rented without spot, which the mix keeps to interruptible work",
        )
        return None
    u = on_prem.utilization
    # the demand above the fleet is rented whether the fleet is owned or rented: the TCO
    # holds it, so the steady-use side carries it too, and every figure below (totals,
    # break-even, payback, cash) compares the fleet on one basis
    burst = on_prem.burst_rent_usd
    stated = steady.at_utilization(u)
    full = steady.at_utilization(1.0)
    built = tco.get("capex_facility", 0.0)
    hardware, building = owned_assets(tco["capex"] - built, built, on_prem.prefs)
    payback = break_even_months(
        tco, stated.usd_per_gpu_hour, on_prem.gpus, u, assets=(hardware, building)
    )
    once = break_even_months(
        tco, stated.usd_per_gpu_hour, on_prem.gpus, u, assets=(Asset(tco["capex"], math.inf),)
    )
    if payback is None and once is not None:
        again = min(
            (a.life_years * 12.0, what)
            for a, what in ((hardware, "hardware"), (building, "facility"))
            if a.cost_usd > 0
        )
        log.add(
            "payback",
            "never",
            f"the savings at the stated utilization would repay the day-one capex in month "
            f"{once:.0f}, but the {again[1]} is bought again in month {again[0]:.0f}, before "
            "that, and each replacement comes before the last purchase is repaid",
        )
    log.add(
        "rent-or-own steady use",
        f"{u:.0%} of {on_prem.gpus:,} GPUs every hour at ${stated.usd_per_gpu_hour:.4f}/GPU-h "
        f"({stated.basis})",
        "the purchase-mix optimiser on that flat demand: on-demand or reserved, never spot "
        "or capacity blocks (as the mix's baseline); the break-even utilisation is solved "
        "against the same optimiser and the payback rents at this rate (derived)",
    )
    verdict = RentOrOwn(
        fleet_gpus=on_prem.gpus,
        horizon_years=demand.horizon_hours / HOURS_PER_YEAR,
        rent_usd_per_gpu_hour=rent_rate,
        own_usd=tco["total"],
        work_gpu_hours=demand.gpu_hours,
        rent_work_usd=rent_rate * demand.gpu_hours,
        stated_utilization=u,
        payback_months=payback,
        **present_values(demand, rent_rate, tco, stated.total_usd + burst),
        own_burst_rent_usd=burst,
        owned_work_gpu_hours=on_prem.owned_work_gpu_hours,
        rent_at_stated_usd=stated.total_usd + burst,
        rent_at_stated_basis=stated.basis,
        rent_full_usd=full.total_usd + burst,
        rent_full_basis=full.basis,
        # steady rent + burst = TCO (which holds the burst): the fleet's own break-even
        breakeven_utilization=steady.breakeven_utilization(tco["total"] - burst),
        own_residual_usd=tco.get("residual_value", 0.0),
        own_replacement_usd=tco.get("replacement_purchases", 0.0),
        own_burst_gpu_hours=on_prem.burst_gpu_hours if burst else 0.0,
    )
    if payback is not None and verdict.cheaper_at_stated == "rent":
        # the cash view pays back (capex once, no horizon) while over the horizon the TCO
        # costs more than renting the same hours: a payback next to "rent" would contradict
        log.add(
            "payback",
            "not shown",
            f"the cash view pays back in month {payback:.0f}, but over the "
            f"{verdict.horizon_years:g}-year horizon owning costs more than renting the same "
            "GPU-hours at the stated utilization",
        )
        verdict = replace(verdict, payback_months=None)
    return verdict


def present_values(
    demand: Demand, rent_rate: float, tco: Mapping[str, float], rent_at_stated_usd: float
) -> dict[str, float]:
    """Both sides in present value at the TCO's discount rate: the planned work's rent paid
    as it runs (training in its window from the start, serving evenly), steady use at the
    stated utilisation (`rent_at_stated_usd`) evenly, owning as `on_prem_tco` discounts it."""
    rate = tco["discount_rate"]
    years = demand.horizon_hours / HOURS_PER_YEAR
    window_years = demand.window_hours / HOURS_PER_YEAR
    work = demand.burst_gpu_hours * spread_factor(window_years, rate) + (
        demand.baseline_gpus * demand.horizon_hours * spread_factor(years, rate)
    )
    return {
        "discount_rate": rate,
        "own_pv_usd": tco["present_value"],
        "rent_work_pv_usd": rent_rate * work,
        "rent_at_stated_pv_usd": rent_at_stated_usd * spread_factor(years, rate),
    }


Tornado = list[dict[str, float | str]]


def _tornados(
    chosen: Literal["cloud", "on-prem"],
    priced: Mapping[str, bool],
    inputs: SensitivityInputs,
    factors: Sequence[Factor],
    log: Assumptions,
    *,
    rented: Demand,
) -> tuple[Tornado, Tornado]:
    """The chosen deployment's tornado and the other's, each around its own base (empty
    where that deployment has no price). Renting does not move with utilisation or
    electricity, owning does: a reader weighing the two needs both. Renting's is built on
    the `rented` demand (whole instances), owning's on the work itself."""

    def deployed(deployment: Literal["cloud", "on-prem"]) -> SensitivityInputs:
        demand = rented if deployment == "cloud" else inputs.demand
        return replace(inputs, deployment=deployment, demand=demand)

    other: Literal["cloud", "on-prem"] = "cloud" if chosen == "on-prem" else "on-prem"
    rows: Tornado = []
    if priced[chosen]:
        rows = sensitivity(deployed(chosen), factors, log)
    other_rows: Tornado = []
    if priced[other]:
        other_rows = sensitivity(deployed(other), factors)
    return rows, other_rows


def spend_by_provider(mix: Mapping[str, float], sellers: Mapping[str, str]) -> dict[str, float]:
    """The optimised mix's dollars by the provider selling each part (`spend_by_kind`), so
    a headline names who it priced."""
    out: dict[str, float] = {}
    for kind, usd in spend_by_kind(mix).items():
        if kind in sellers:
            out[sellers[kind]] = out.get(sellers[kind], 0.0) + usd
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def spend_by_kind(mix: Mapping[str, float]) -> dict[str, float]:
    """The optimised mix's dollars by way of buying (price keys; reservations split between
    the terms by GPUs × price), largest first: the offer it spends most on is the one a
    sentence about what the plan rents names."""
    out: dict[str, float] = {}

    def add(kind: str, usd: float) -> None:
        if usd > 0:
            out[kind] = out.get(kind, 0.0) + usd

    add(ON_DEMAND, mix.get("on_demand_usd", 0.0))
    add(SPOT, mix.get("spot_usd", 0.0))
    add(CAPACITY_BLOCK, mix.get("capacity_block_usd", 0.0))
    terms = {
        RESERVED_1Y: mix.get("reserved_1y_gpus", 0.0)
        * mix.get("price_reserved_1y_usd_per_gpu_hour", 0.0),
        RESERVED_3Y: mix.get("reserved_3y_gpus", 0.0)
        * mix.get("price_reserved_3y_usd_per_gpu_hour", 0.0),
    }
    weight = sum(terms.values())
    for kind, part in terms.items():
        if weight > 0:
            add(kind, mix.get("reserved_usd", 0.0) * part / weight)
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


# EC2 Capacity Blocks are sold for 1 to 182 days (7-day increments past 14 days), booked
# up to eight weeks ahead, paid up front, never modified or cancelled (AWS EC2 user guide,
# "Capacity Blocks for ML" [vendor]; gpueconomics.com, "Understanding AWS Capacity Blocks for
# GPUs" [blog/press], for the 182-day maximum).
CAPACITY_BLOCK_MAX_DAYS = 182.0


def bookable(prices: dict[str, float], demand: Demand, log: Assumptions) -> dict[str, float]:
    """The prices the mix may use: a capacity block only for burst work whose run fits one
    block (a longer run cannot be covered by the blocks' fixed windows), and said to be a
    booking made weeks ahead, not capacity that is simply there."""
    if CAPACITY_BLOCK not in prices:
        return prices
    window_days = demand.window_hours / 24.0
    if demand.burst_gpu_hours <= 0:
        return prices
    if window_days > CAPACITY_BLOCK_MAX_DAYS:
        log.add(
            "capacity blocks",
            "not used",
            f"the training window ({window_days:,.0f} days) is longer than the longest EC2 "
            f"Capacity Block ({CAPACITY_BLOCK_MAX_DAYS:.0f} days)",
        )
        return {k: v for k, v in prices.items() if k != CAPACITY_BLOCK}
    log.add(
        "capacity blocks",
        "one block of up to "
        + (f"{window_days:,.0f} days" if window_days >= 1 else fmt_duration(window_days * 86_400)),
        "booked up to eight weeks ahead at the price of the day, paid up front, not "
        "modifiable or cancellable; AWS does not publish how many instances a block can "
        "hold, so whether the gang size is obtainable must be confirmed with AWS",
    )
    return prices
