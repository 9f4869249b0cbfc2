"""Rent or own, on one basis at a time, and the sentence that says which, written from the
numbers it summarises so that it cannot contradict them (issue 27).

Two comparisons, each on the same GPU-hours for both sides:

- **the planned work**: renting exactly the GPU-hours the plan's workloads need (the
  optimised mix, or on-demand without one) against owning the fleet they need at their peak
  for the horizon (the TCO). The work keeps that fleet `work_utilization` busy; the rest of
  the TCO buys idle capacity, shown as such.
- **the fleet kept busy at the stated utilisation** (`expected_utilization`): renting
  gpus × utilisation × the horizon's hours at the same blended price, against the same TCO.
  `breakeven_utilization` is where the two cross: owning wins above it. `payback_months` is
  the cash view of the same comparison (capex on day one, then opex against rent each
  month): a payback inside the horizon implies owning wins at the stated utilisation, since
  the TCO counts at most the capex and the opex over the horizon.

A `deployment: both` plan is decided on the planned work: that is the demand the plan knows.
The sentence then says what utilisation would make owning win, and whether the stated one
does (other work would have to fill the fleet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from gpufleet.formatting import fmt_num, fmt_pct, fmt_usd
from gpufleet.plan.cost.demand import HOURS_PER_YEAR

Side = Literal["own", "rent"]


@dataclass(frozen=True)
class RentOrOwn:
    fleet_gpus: int
    horizon_years: float
    rent_usd_per_gpu_hour: float  # blended: the mix's total / its GPU-hours (or on-demand)
    own_usd: float  # TCO over the horizon
    work_gpu_hours: float
    rent_work_usd: float  # renting the planned work's GPU-hours
    stated_utilization: float
    payback_months: float | None  # cash view at the stated utilisation (None: never, ≤ 10 y)
    # present values at `discount_rate` (None in plan.json files from before they existed):
    # purchases when made, rent and opex when paid; the verdict itself is on the totals
    discount_rate: float = 0.0
    own_pv_usd: float | None = None
    rent_work_pv_usd: float | None = None
    rent_at_stated_pv_usd: float | None = None
    # a fleet smaller than the peak (`on_prem.fleet_policy`): owning includes renting the rest
    own_burst_rent_usd: float = 0.0
    owned_work_gpu_hours: float | None = None  # the part of the work the owned fleet serves

    @property
    def fleet_hours(self) -> float:
        return self.fleet_gpus * self.horizon_years * HOURS_PER_YEAR

    @property
    def work_utilization(self) -> float:
        """How busy the planned work alone keeps the owned fleet over the horizon."""
        owned = (
            self.work_gpu_hours if self.owned_work_gpu_hours is None else self.owned_work_gpu_hours
        )
        return min(1.0, owned / self.fleet_hours) if self.fleet_hours else 0.0

    @property
    def own_idle_usd(self) -> float:
        """The share of the TCO that buys capacity the planned work leaves idle (the rented
        bursts are never idle)."""
        return (self.own_usd - self.own_burst_rent_usd) * (1.0 - self.work_utilization)

    @property
    def rent_at_stated_usd(self) -> float:
        return self.rent_usd_per_gpu_hour * self.fleet_hours * self.stated_utilization

    @property
    def breakeven_utilization(self) -> float:
        """Average utilisation above which owning costs less than renting the same hours."""
        full = self.rent_usd_per_gpu_hour * self.fleet_hours
        return self.own_usd / full if full > 0 else float("inf")

    @property
    def cheaper_for_work(self) -> Side:
        return "own" if self.own_usd < self.rent_work_usd else "rent"

    @property
    def cheaper_at_stated(self) -> Side:
        return "own" if self.own_usd < self.rent_at_stated_usd else "rent"

    @property
    def cheaper_for_work_pv(self) -> Side | None:
        """The planned-work comparison in present values (None without them)."""
        if self.own_pv_usd is None or self.rent_work_pv_usd is None:
            return None
        return "own" if self.own_pv_usd < self.rent_work_pv_usd else "rent"

    @property
    def cheaper_at_stated_pv(self) -> Side | None:
        if self.own_pv_usd is None or self.rent_at_stated_pv_usd is None:
            return None
        return "own" if self.own_pv_usd < self.rent_at_stated_pv_usd else "rent"

    @classmethod
    def from_json(cls, data: Mapping[str, float | str | None]) -> RentOrOwn:
        """Back from `to_json` (as stored in plan.json): the stored fields only; the derived
        ones are recomputed, never trusted."""
        values: dict[str, Any] = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["fleet_gpus"] = int(values["fleet_gpus"])
        return cls(**values)

    def to_json(self) -> dict[str, float | str | None]:
        out: dict[str, float | str | None] = asdict(self)
        for name in (
            "work_utilization",
            "own_idle_usd",
            "rent_at_stated_usd",
            "breakeven_utilization",
            "cheaper_for_work",
            "cheaper_at_stated",
            "cheaper_for_work_pv",
            "cheaper_at_stated_pv",
        ):
            out[name] = getattr(self, name)
        return out

    def sentence(self) -> str:
        """The verdict, from the numbers above and nothing else."""
        years = f"{self.horizon_years:g} year{'s' if self.horizon_years != 1 else ''}"
        head = "renting" if self.cheaper_for_work == "rent" else "owning"
        out = (
            f"{head} is cheaper for the planned work, which keeps {self.fleet_gpus:,} owned "
            f"GPUs {fmt_pct(self.work_utilization)} busy over {years}: owning costs "
            f"{fmt_usd(self.own_usd)} ({fmt_usd(self.own_idle_usd)} of it idle capacity"
            + (
                f", {fmt_usd(self.own_burst_rent_usd)} renting the demand above the fleet"
                if self.own_burst_rent_usd
                else ""
            )
            + f") against {fmt_usd(self.rent_work_usd)} to rent the same GPU-hours"
        )
        u_star = self.breakeven_utilization
        if u_star > 1.0:
            return out + "; owning would not win even with the fleet busy every hour"
        at = (
            f"at the stated {fmt_pct(self.stated_utilization)}: {fmt_usd(self.own_usd)} "
            f"owned against {fmt_usd(self.rent_at_stated_usd)} rented"
        )
        if self.payback_months is not None and self.cheaper_at_stated == "own":
            at += f", paying back after {fmt_num(self.payback_months, 1)} months"
        if self.cheaper_for_work == "rent" and self.cheaper_at_stated == "own":
            at += ", if other work keeps the fleet that busy"
        return out + f"; owning wins above {fmt_pct(u_star)} average utilisation ({at})"
