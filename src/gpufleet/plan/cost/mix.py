"""The purchase mix: the cheapest way to buy a `Demand` at given cloud prices.

A linear program rather than a rule of thumb ("reserve the baseline, spot the rest") because
the answer turns on the prices: a 3-year term can beat on-demand for a 1-year horizon, or
lose to it, and Capacity Blocks or spot change what the burst costs. Kept apart from the
price lookup so that the sensitivity can re-solve it at scaled prices without the catalog.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.prices import (
    CAPACITY_BLOCK,
    ON_DEMAND,
    RESERVED_1Y,
    RESERVED_3Y,
    RESERVED_TERM_YEARS,
    SPOT,
)

# LP variables, in order. Hours are in units of one GPU for the whole horizon (hours / H)
# so every coefficient is of order 1.
_R1, _R3, _OD_IN, _OD_OUT, _OD_W, _CB, _SPOT, _Y_BW, _Y_BO, _Y_W = range(10)
_N_VARS = 10


@dataclass(frozen=True)
class _Solution:
    x: tuple[float, ...]
    total_usd: float


def _reserved_paid_hours(demand: Demand, key: str) -> float:
    """Hours a reserved GPU is paid for: the horizon, or its whole term when that is longer."""
    return max(demand.horizon_hours, RESERVED_TERM_YEARS[key] * HOURS_PER_YEAR)


def _solve(
    demand: Demand, prices: Mapping[str, float], fixed: tuple[int, int] | None
) -> _Solution | None:
    h = demand.horizon_hours
    t_in = demand.window_hours / h  # share of the horizon inside the burst window
    t_out = 1.0 - t_in
    b = float(demand.baseline_gpus)
    w = demand.burst_gpu_hours / h
    inflate = 1.0 + demand.spot_overhead_fraction
    cost = np.zeros(_N_VARS)
    upper: list[float | None] = [None] * _N_VARS
    for key, index in ((RESERVED_1Y, _R1), (RESERVED_3Y, _R3)):
        if key in prices:
            cost[index] = prices[key] * _reserved_paid_hours(demand, key)
        else:
            upper[index] = 0.0
    for key, indices in (
        (ON_DEMAND, (_OD_IN, _OD_OUT, _OD_W)),
        (CAPACITY_BLOCK, (_CB,)),
        (SPOT, (_SPOT,)),
    ):
        for index in indices:
            if key in prices:
                cost[index] = prices[key] * h
            else:
                upper[index] = 0.0
    # obtainable capacity: at most the cap's GPUs at once over the burst window
    for cap, index in ((demand.spot_max_gpus, _SPOT), (demand.block_max_gpus, _CB)):
        if cap is not None and upper[index] != 0.0:
            upper[index] = cap * t_in
    bounds: list[tuple[float, float | None]] = [(0.0, u) for u in upper]
    if fixed is not None:
        bounds[_R1] = (float(fixed[0]), float(fixed[0]))
        bounds[_R3] = (float(fixed[1]), float(fixed[1]))
        if (fixed[0] and upper[_R1] == 0.0) or (fixed[1] and upper[_R3] == 0.0):
            return None
    a_ub = np.zeros((8, _N_VARS))
    b_ub = np.zeros(8)
    # reserved hours inside the window feed the baseline there and the burst
    a_ub[0, [_Y_BW, _Y_W]] = 1.0
    a_ub[0, [_R1, _R3]] = -t_in
    # reserved hours outside the window feed only the baseline
    a_ub[1, _Y_BO] = 1.0
    a_ub[1, [_R1, _R3]] = -t_out
    # baseline inside the window: reserved or on-demand, never spot or blocks
    a_ub[2, [_Y_BW, _OD_IN]] = -1.0
    b_ub[2] = -b * t_in
    # baseline outside the window
    a_ub[3, [_Y_BO, _OD_OUT]] = -1.0
    b_ub[3] = -b * t_out
    # burst: reserved, on-demand, capacity blocks, spot net of its overhead
    a_ub[4, [_Y_W, _OD_W, _CB]] = -1.0
    a_ub[4, _SPOT] = -1.0 / inflate
    b_ub[4] = -w
    # spot does at most the interruptible share of the burst
    a_ub[5, _SPOT] = 1.0 / inflate
    b_ub[5] = demand.interruptible_fraction * w
    # burst-only options never exceed the burst
    a_ub[6, _CB] = 1.0
    a_ub[6, _SPOT] = 1.0 / inflate
    b_ub[6] = w
    # blocks only for runs that fit one block
    a_ub[7, _CB] = 1.0
    b_ub[7] = demand.block_fraction * w
    scale = float(np.max(cost)) or 1.0
    result = linprog(cost / scale, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0 or result.x is None:
        return None
    x = tuple(float(v) for v in result.x)
    return _Solution(x, float(np.dot(cost, result.x)))


def _rounded_candidates(relaxed: _Solution, gpus_per_instance: int) -> set[tuple[int, int]]:
    """Whole-instance reservations near the LP optimum: the multiples of the instance's GPUs
    below and above each term and the total (one GPU each for 1-GPU instances)."""
    n = gpus_per_instance

    def around(gpus: float) -> set[int]:
        return {math.floor(gpus / n) * n, math.ceil(gpus / n) * n}

    r1, r3 = max(relaxed.x[_R1], 0.0), max(relaxed.x[_R3], 0.0)
    out = {(a, c) for a in around(r1) for c in around(r3)}
    for total in around(r1 + r3):
        out |= {(total, 0), (0, total)}
    out.add((0, 0))
    return out


def _caps_text(demand: Demand) -> str:
    caps = [
        f"{what} at most {cap:,.0f} GPUs at once"
        for what, cap in (
            ("spot", demand.spot_max_gpus),
            ("capacity blocks", demand.block_max_gpus),
        )
        if cap is not None
    ]
    if demand.block_fraction < 1.0:
        caps.append(f"blocks for {demand.block_fraction:.0%} of the burst (runs that fit one)")
    return f" (obtainable: {'; '.join(caps)})" if caps else ""


def optimise_mix(demand: Demand, prices: Mapping[str, float], log: Assumptions) -> dict[str, float]:
    """The cheapest way to buy `demand` at `prices` (USD per GPU-hour, keys as cloud_prices).

    A linear program solved by HiGHS (scipy.optimize.linprog, method="highs") over: 1- and
    3-year reserved GPUs (paid every hour of the horizon, or of their term when that is
    longer), on-demand GPU-hours, Capacity Block GPU-hours and spot GPU-hours. Constraints:
    the baseline is covered every hour by reserved or on-demand GPUs, never spot or blocks;
    the burst by any of them, with spot at most `interruptible_fraction` of it and each spot
    hour delivering 1 / (1 + spot_overhead_fraction) hours of work, capacity blocks at most
    `block_fraction` of it; spot and blocks at most `spot_max_gpus` / `block_max_gpus` GPUs
    at once over the burst window (what is obtainable); reserved GPUs lend the burst only
    their hours inside the burst window. Reserved GPUs are then made whole instances of
    `demand.instance_gpus`: the LP is re-solved with them fixed at the multiples below and
    above the optimum (the cost is convex in the reserved count, so one of these is the
    whole-instance optimum) and the cheapest is returned. `lp_bound_usd` is the relaxed
    optimum, a lower bound on any purchase.
    Raises ValueError when the prices cannot cover the demand (no on-demand or reserved
    price for a baseline, or burst work with only spot where not all of it may be spot).
    """
    hours = demand.gpu_hours
    out: dict[str, float] = {
        "reserved_1y_gpus": 0.0,
        "reserved_3y_gpus": 0.0,
        "reserved_gpus": 0.0,
        "on_demand_gpu_hours": 0.0,
        "capacity_block_gpu_hours": 0.0,
        "spot_gpu_hours": 0.0,
        "spot_work_gpu_hours": 0.0,
        "reserved_usd": 0.0,
        "on_demand_usd": 0.0,
        "capacity_block_usd": 0.0,
        "spot_usd": 0.0,
        "total_usd": 0.0,
        "lp_bound_usd": 0.0,
        "demand_gpu_hours": hours,
        "instance_gpus": float(demand.instance_gpus),
    }
    if hours <= 0:
        return out
    relaxed = _solve(demand, prices, None)
    if relaxed is None:
        offered = ", ".join(sorted(prices)) or "none"
        raise ValueError(
            f"the prices for {demand.accelerator} ({offered}) cannot cover the demand: the "
            "baseline needs an on-demand or reserved price, and burst work beyond the "
            "interruptible share needs one that is not spot" + _caps_text(demand)
        )
    solutions = [
        s
        for s in (
            _solve(demand, prices, fixed)
            for fixed in sorted(_rounded_candidates(relaxed, demand.instance_gpus))
        )
        if s is not None
    ]
    best = min(solutions, key=lambda s: (s.total_usd, s.x[_R1] + s.x[_R3]))
    h = demand.horizon_hours
    x = best.x
    inflate = 1.0 + demand.spot_overhead_fraction
    r1, r3 = round(x[_R1]), round(x[_R3])
    od_hours = (x[_OD_IN] + x[_OD_OUT] + x[_OD_W]) * h
    out.update(
        reserved_1y_gpus=float(r1),
        reserved_3y_gpus=float(r3),
        reserved_gpus=float(r1 + r3),
        on_demand_gpu_hours=od_hours,
        capacity_block_gpu_hours=x[_CB] * h,
        spot_gpu_hours=x[_SPOT] * h,
        spot_work_gpu_hours=x[_SPOT] * h / inflate,
        reserved_usd=sum(
            n * prices.get(key, 0.0) * _reserved_paid_hours(demand, key)
            for n, key in ((r1, RESERVED_1Y), (r3, RESERVED_3Y))
        ),
        on_demand_usd=od_hours * prices.get(ON_DEMAND, 0.0),
        capacity_block_usd=x[_CB] * h * prices.get(CAPACITY_BLOCK, 0.0),
        spot_usd=x[_SPOT] * h * prices.get(SPOT, 0.0),
        total_usd=best.total_usd,
        lp_bound_usd=relaxed.total_usd,
    )
    out["effective_usd_per_gpu_hour"] = best.total_usd / hours
    whole = (
        f"whole {demand.instance_gpus}-GPU instances" if demand.instance_gpus > 1 else "whole GPUs"
    )
    log.add(
        "purchase mix method",
        f"HiGHS linear program (scipy.optimize.linprog), reserved GPUs rounded to {whole}",
        "gpufleet (derived): minimise reserved + on-demand + capacity-block + spot cost; "
        "baseline never on spot; spot only for the interruptible share of the burst, inflated "
        "by the spot overhead (docs/design/0007-cost-model.md)",
    )
    log.add(
        "reserved capacity payment",
        "every hour of the horizon, or of the whole term when the term is longer",
        "gpufleet assumption: a commitment is paid for its term whether used or not; a "
        "horizon longer than one term is assumed to renew at the same rate",
    )
    if demand.burst_window_hours is None and demand.burst_gpu_hours > 0:
        log.add(
            f"{demand.accelerator} burst window",
            "the whole horizon",
            "gpufleet assumption: without a window, burst work may spread over the horizon, "
            "so reserved GPUs above the baseline can absorb it; give burst_window_hours for "
            "deadline-bound runs",
        )
    elif demand.burst_gpu_hours > 0:
        log.add(
            f"{demand.accelerator} burst window",
            f"{demand.window_hours:,.0f} hours",
            "gpufleet (derived): the hours in which some training run is running (the union "
            "of the runs' spans, each its wall clock with failures); spot and capacity blocks "
            "are obtainable up to their caps at once over these hours, and reserved GPUs lend "
            "the runs only these hours",
        )
    out["burst_window_hours"] = demand.window_hours
    return out
