"""What renting a fleet's steady use would cost, and the utilisation at which owning wins.

The rent-or-own comparison "if other work keeps the fleet u busy" needs the price of renting
u × the owned fleet every hour of the horizon. That is not the planned work's blended price:
a 2,048-GPU, 89-day gang is bought on demand at $6/GPU-h, while 1,439 GPUs used every hour
for three years are bought on a 3-year commitment at under half that (issue: review of the
rent-or-own verdict, defect 1). So the flat demand is priced by the same optimiser as the
plan (`optimise_mix`) and the break-even is solved against it, never against a rate borrowed
from other work.

Steady use follows the mix's own policy for work that runs every hour (its baseline): never
on spot, never in capacity blocks, so it is priced at on-demand and the reserved terms only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_count, fmt_num
from gpufleet.plan.cost.demand import Demand
from gpufleet.plan.cost.mix import optimise_mix
from gpufleet.plan.cost.prices import ON_DEMAND, RESERVED_1Y, RESERVED_3Y

# the kinds the mix may use for work that runs every hour (its baseline)
STEADY_KINDS: tuple[str, ...] = (RESERVED_3Y, RESERVED_1Y, ON_DEMAND)
_SHOWN_GPUS = 0.005  # on-demand GPUs below this round to nothing in the words

# the break-even solve stops within half a cent of the TCO or after this many evaluations
# (regula falsi on a piecewise-linear cost converges in a handful)
_TOLERANCE_USD = 0.005
_MAX_EVALUATIONS = 60


@dataclass(frozen=True)
class SteadyPrice:
    """Renting `gpus` GPUs' worth of steady use: the optimiser's total and how it is bought."""

    gpus: float
    total_usd: float
    gpu_hours: float
    basis: str  # what was bought, e.g. "1,439 GPUs on 3-year reservations and 0.2 on demand"

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.total_usd / self.gpu_hours if self.gpu_hours > 0 else 0.0


@dataclass(frozen=True)
class SteadyRent:
    """The purchase-mix optimiser applied to a flat demand on the owned fleet's accelerator."""

    accelerator: str
    fleet_gpus: int
    horizon_hours: float
    prices: Mapping[str, float]  # the steady kinds only (`steady_prices`)
    # GPUs per rented instance: reservations are whole instances, the rest on-demand hours
    # (use that averages part of an instance rents one part of the time)
    instance_gpus: int = 1

    def price(self, gpus: float) -> SteadyPrice:
        """`gpus` GPUs (fractional: an average) used every hour of the horizon, bought at
        least cost. The hours are given as burst work without a window, which the mix may
        spread over the horizon, so that a fraction of a GPU is on-demand or rounds up to a
        whole reservation, whichever is cheaper; nothing of it may go on spot or a block."""
        hours = max(0.0, gpus) * self.horizon_hours
        demand = Demand(
            self.accelerator,
            baseline_gpus=0,
            burst_gpu_hours=hours,
            interruptible_fraction=0.0,
            spot_overhead_fraction=0.0,
            horizon_hours=self.horizon_hours,
            block_fraction=0.0,
            instance_gpus=self.instance_gpus,
        )
        mix = optimise_mix(demand, self.prices, Assumptions())
        return SteadyPrice(gpus, mix["total_usd"], hours, self._basis(mix))

    def at_utilization(self, utilization: float) -> SteadyPrice:
        return self.price(self.fleet_gpus * utilization)

    def breakeven_utilization(self, own_usd: float) -> float:
        """The average utilisation u at which renting u × the fleet steadily costs `own_usd`
        (above it owning wins). Above 1 when even every hour of the fleet costs less to rent.

        The optimiser's cost is non-decreasing and piecewise linear in the GPUs used (whole
        instances reserved for the horizon, the rest on demand by the hour), so the root is
        bracketed around own / (cost per GPU) and regula falsi finds it there.
        """
        if own_usd <= 0:
            return 0.0
        full = self.price(float(self.fleet_gpus)).total_usd
        if full <= 0:
            return math.inf
        guess = self.fleet_gpus * own_usd / full
        gpus = _solve_increasing(
            lambda g: self.price(g).total_usd - own_usd, max(0.0, math.floor(guess)), guess
        )
        return gpus / self.fleet_gpus

    def _basis(self, mix: Mapping[str, float]) -> str:
        """What the optimiser bought, in GPUs, e.g. "1,439 GPUs on 3-year reservations and
        on average 0.2 GPU on demand": whole reservations, and the GPUs bought by the hour.

        The hourly part is an average over the horizon (GPU-hours ÷ hours), so it is said to
        be one: "and 0.8 on demand" beside whole reservations read as a fraction of a GPU
        rented, which nobody can rent."""
        parts = [
            f"{fmt_count(mix[key])} GPU{'s' if mix[key] != 1 else ''} on {term} reservations"
            for key, term in (("reserved_3y_gpus", "3-year"), ("reserved_1y_gpus", "1-year"))
            if mix[key] > 0
        ]
        on_demand_gpus = mix["on_demand_gpu_hours"] / self.horizon_hours
        if on_demand_gpus >= _SHOWN_GPUS:
            what = fmt_num(on_demand_gpus)
            unit = "GPU" if float(what.replace(",", "")) <= 1 else "GPUs"
            parts.append(f"on average {what} {unit} on demand")
        return " and ".join(parts) if parts else "nothing"


def steady_prices(prices: Mapping[str, float]) -> dict[str, float]:
    """The prices steady use may be bought at: the mix's baseline kinds (no spot, no blocks)."""
    return {kind: prices[kind] for kind in STEADY_KINDS if kind in prices}


def _solve_increasing(f: Callable[[float], float], low: float, guess: float) -> float:
    """x ≥ 0 with f(x) ≈ 0 for a continuous non-decreasing f, starting from the whole
    numbers around `guess` (regula falsi, Illinois variant, after widening the bracket)."""
    lo, hi = low, max(low + 1.0, math.floor(guess) + 1.0)
    f_lo, f_hi = f(lo), f(hi)
    evaluations = 2
    while f_lo > 0 and lo > 0 and evaluations < _MAX_EVALUATIONS:
        lo, hi, f_hi = max(0.0, lo - 1.0), lo, f_lo
        f_lo = f(lo)
        evaluations += 1
    while f_hi < 0 and evaluations < _MAX_EVALUATIONS:
        lo, f_lo, hi = hi, f_hi, hi * 2.0
        f_hi = f(hi)
        evaluations += 1
    if f_lo >= 0:
        return lo
    side = 0
    while evaluations < _MAX_EVALUATIONS:
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo) if f_hi != f_lo else (lo + hi) / 2.0
        fx = f(x)
        evaluations += 1
        if abs(fx) <= _TOLERANCE_USD or hi - lo <= 1e-12 * max(1.0, hi):
            return x
        if fx < 0:
            lo, f_lo = x, fx
            if side == -1:
                f_hi /= 2.0
            side = -1
        else:
            hi, f_hi = x, fx
            if side == 1:
                f_lo /= 2.0
            side = 1
    return (lo + hi) / 2.0
