"""Rent or own, on one basis at a time, and the sentence that says which, written from the
numbers it summarises so that it cannot contradict them (issue 27).

Two comparisons, each on the same GPU-hours for both sides:

- **the planned work**: renting exactly the GPU-hours the plan's workloads need (the
  optimised mix, or on-demand without one) against owning the fleet they need at their peak
  for the horizon (the TCO). The work keeps that fleet `work_utilization` busy; the rest of
  the TCO buys idle capacity, shown as such.
- **the fleet kept busy at the stated utilisation** (`expected_utilization`): renting
  utilisation × the fleet every hour of the horizon, priced by the purchase-mix optimiser for
  that flat demand (`plan/cost/steady.py`: reserved terms where they are cheaper, never spot),
  against the same TCO. Not at the planned work's blended price: that is what a short gang
  bought on demand costs, not steady use (review of the verdict, defect 1).
  `breakeven_utilization` is where the two cross, solved against the same optimiser: owning
  wins above it. `payback_months` is the cash view of the same comparison (capex on day one,
  then opex against that rent each month).

The TCO credits the hardware's book value left at the horizon's end (`own_residual_usd`).
Where owning is cheaper only through that credit, i.e. its cash over the horizon is not
below the rent, the sentence says so with both cash figures, and a payback after the horizon
says it falls after the horizon (defect 5).

A `deployment: both` plan is decided on the planned work: that is the demand the plan knows.
The sentence then says what utilisation would make owning win, and whether the stated one
does (other work would have to fill the fleet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, asdict, dataclass, fields
from typing import Any, Literal

from gpufleet.formatting import fmt_count, fmt_num, fmt_pct, fmt_usd, fmt_usd_apart, fmt_usd_rate
from gpufleet.plan.cost.demand import HOURS_PER_YEAR

Side = Literal["own", "rent"]


@dataclass(frozen=True)
class RentOrOwn:
    fleet_gpus: int
    horizon_years: float
    # the planned work's blended price: the mix's total / its GPU-hours (or on-demand)
    rent_usd_per_gpu_hour: float
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
    _: KW_ONLY
    # steady use of the fleet, priced by the optimiser for a flat demand (`SteadyRent`):
    # stated utilisation × the fleet, and the whole fleet, every hour of the horizon, with
    # what it buys in words; the break-even utilisation solved against the same optimiser
    # both include `own_burst_rent_usd`, as `own_usd` does: the demand above the fleet is
    # rented whichever way the fleet is paid for, so each side carries it (one basis for the
    # totals, the break-even, the payback and the cash figures)
    rent_at_stated_usd: float
    rent_at_stated_basis: str
    rent_full_usd: float
    rent_full_basis: str
    breakeven_utilization: float  # above it owning wins (> 1: not even busy every hour)
    own_residual_usd: float = 0.0  # book value the TCO credits at the horizon's end
    # buying the hardware (or the facility) again when the horizon outlives it: in own_usd
    own_replacement_usd: float = 0.0
    # the GPU-hours `own_burst_rent_usd` pays for (the work above the owned fleet,
    # `plan.demand_curve`); None where the planner did not say (plan.json from before it did)
    own_burst_gpu_hours: float | None = None

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
    def horizon_months(self) -> float:
        return self.horizon_years * 12.0

    @property
    def rent_at_stated_usd_per_gpu_hour(self) -> float:
        """The steady-use rate at the stated utilisation (what the payback rents at)."""
        hours = self.fleet_hours * self.stated_utilization
        steady = self.rent_at_stated_usd - self.own_burst_rent_usd
        return steady / hours if hours > 0 else 0.0

    @property
    def rent_full_usd_per_gpu_hour(self) -> float:
        steady = self.rent_full_usd - self.own_burst_rent_usd
        return steady / self.fleet_hours if self.fleet_hours else 0.0

    @property
    def burst_gpu_hours(self) -> float | None:
        """The GPU-hours above the owned fleet that both sides rent: 0 without a burst rent,
        None where the rent is known and its GPU-hours are not."""
        if not self.own_burst_rent_usd:
            return 0.0
        return self.own_burst_gpu_hours

    @property
    def stated_fleet_gpu_hours(self) -> float:
        """The fleet's own steady use at the stated utilisation (what the steady rate buys)."""
        return self.fleet_hours * self.stated_utilization

    @property
    def rent_at_stated_gpu_hours(self) -> float | None:
        """Every GPU-hour the stated-utilisation column pays for, on each side: the fleet's
        steady use and the burst above it. The table showed the first alone beside totals
        that held both (year-of-runs: 1,667,904 GPU-h beside $7,773,719, which holds
        $1,492,801 for 303,662 GPU-h above the fleet). None where the burst's hours are not
        known."""
        burst = self.burst_gpu_hours
        return None if burst is None else self.stated_fleet_gpu_hours + burst

    @property
    def burst_usd_per_gpu_hour(self) -> float | None:
        """What a GPU-hour above the fleet costs to rent (None without one, or its hours)."""
        burst = self.burst_gpu_hours
        return self.own_burst_rent_usd / burst if burst else None

    def same_hours_text(self) -> str:
        """The sentence above the side-by-side table, from its numbers: that each column puts
        the same GPU-hours on both sides and, where owning rents the demand above the fleet,
        how many GPU-hours that is and that both sides pay for them (the plain sentence read
        as if the GPU-hours row were all of them, and the totals did not add up from it)."""
        text = "Each column puts the same GPU-hours on both sides"
        if not self.own_burst_rent_usd:
            return text
        burst = self.burst_gpu_hours
        above = f"above the owned fleet's {self.fleet_gpus:,} GPUs"
        which = (
            f", with the demand {above} rented on both sides"
            if burst is None
            else f", {fmt_count(round(burst))} GPU-hours of them {above}, which both sides rent"
        )
        return text + (
            f"{which} ({fmt_usd(self.own_burst_rent_usd)} in the TCO and in the rent at the "
            "stated utilisation; the rent of the planned work buys them in its mix)"
        )

    def _burst_clause(self) -> str:
        """', plus $b renting the demand above the fleet, on both sides': says that the
        steady-use total carries the burst rent as owning does (empty without one)."""
        if not self.own_burst_rent_usd:
            return ""
        return (
            f", plus {fmt_usd(self.own_burst_rent_usd)} renting the demand above the fleet "
            "on both sides"
        )

    @property
    def own_cash_usd(self) -> float:
        """What owning pays over the horizon without the residual credit: purchases and opex."""
        return self.own_usd + self.own_residual_usd

    @property
    def payback_after_horizon(self) -> bool:
        return self.payback_months is not None and self.payback_months > self.horizon_months

    def owning_needs_residual(self, rent_usd: float) -> bool:
        """Owning costs less than `rent_usd` over the horizon, but not in cash: only the
        book value credited at the end puts it ahead."""
        return self.own_usd < rent_usd <= self.own_cash_usd

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
        # plan.json from before steady use was priced by the optimiser: it rented every hour
        # at the planned work's blended price, and its break-even and stated figures say so
        full_hours = values["fleet_gpus"] * float(values["horizon_years"]) * HOURS_PER_YEAR
        values.setdefault("rent_full_usd", float(values["rent_usd_per_gpu_hour"]) * full_hours)
        values.setdefault("rent_at_stated_basis", "")
        values.setdefault("rent_full_basis", "")
        return cls(**values)

    def to_json(self) -> dict[str, float | str | None]:
        out: dict[str, float | str | None] = asdict(self)
        for name in (
            "work_utilization",
            "own_idle_usd",
            "rent_at_stated_usd_per_gpu_hour",
            "rent_full_usd_per_gpu_hour",
            "rent_at_stated_gpu_hours",
            "burst_usd_per_gpu_hour",
            "own_cash_usd",
            "cheaper_for_work",
            "cheaper_at_stated",
            "cheaper_for_work_pv",
            "cheaper_at_stated_pv",
        ):
            out[name] = getattr(self, name)
        return out

    def _residual_clause(self, rent_usd: float, *, again: bool = False) -> str:
        """', ahead only through …' where owning wins on the TCO but not in cash."""
        if not self.owning_needs_residual(rent_usd):
            return ""
        cash, rent = fmt_usd_apart(self.own_cash_usd, rent_usd)
        if again:
            return f", again only through that book value ({cash} in cash against {rent})"
        return (
            f", ahead only through the {fmt_usd(self.own_residual_usd)} book value credited at "
            f"the end: in cash over {fmt_num(self.horizon_months)} months owning pays "
            f"{cash} against {rent} to rent"
        )

    def payback_text(self) -> str:
        """'paying back after m months' and, past the horizon, that it is."""
        if self.payback_months is None:
            return ""
        text = f"paying back after {fmt_num(self.payback_months, 1)} months"
        if self.payback_after_horizon:
            text += f", after the {fmt_num(self.horizon_months)}-month horizon ends"
        return text

    @staticmethod
    def rate_text(usd_per_gpu_hour: float, basis: str) -> str:
        """A steady-use rate per GPU-hour *used*: at 80 % use of whole reserved instances it
        is the full-use rate ÷ 0.8 ($4.98 against $3.99 for chat-70b), which read as two
        prices for one thing while neither said what it was per."""
        rate = f"{fmt_usd_rate(usd_per_gpu_hour)} per GPU-hour used"
        return rate + (f" as {basis}" if basis else "")

    def sentence(self) -> str:
        """The verdict, from the numbers above and nothing else."""
        years = f"{self.horizon_years:g} year{'s' if self.horizon_years != 1 else ''}"
        head = "renting" if self.cheaper_for_work == "rent" else "owning"
        own, rent = fmt_usd_apart(self.own_usd, self.rent_work_usd)
        out = (
            f"{head} is cheaper for the planned work, which keeps {self.fleet_gpus:,} owned "
            f"GPUs {fmt_pct(self.work_utilization)} busy over {years}: owning costs "
            f"{own} ({fmt_usd(self.own_idle_usd)} of it idle capacity"
            + (
                f", {fmt_usd(self.own_burst_rent_usd)} renting the demand above the fleet"
                if self.own_burst_rent_usd
                else ""
            )
            + (
                f"; buying the fleet again within the horizon, {fmt_usd(self.own_replacement_usd)}"
                ", included"
                if self.own_replacement_usd
                else ""
            )
            + f") against {rent} to rent the same GPU-hours"
            + self._residual_clause(self.rent_work_usd)
        )
        u_star = self.breakeven_utilization
        if u_star > 1.0:
            own, full = fmt_usd_apart(self.own_usd, self.rent_full_usd)
            return out + (
                "; owning would not win even with the fleet busy every hour ("
                f"{own} owned against {full} to rent "
                "it busy every hour at "
                + self.rate_text(self.rent_full_usd_per_gpu_hour, self.rent_full_basis)
                + self._burst_clause()
                + ")"
            )
        own, stated = fmt_usd_apart(self.own_usd, self.rent_at_stated_usd)
        at = (
            f"at the stated {fmt_pct(self.stated_utilization)}: {own} "
            f"owned against {stated} to rent that use steadily at "
            + self.rate_text(self.rent_at_stated_usd_per_gpu_hour, self.rent_at_stated_basis)
            + self._burst_clause()
        )
        if self.payback_months is not None and self.cheaper_at_stated == "own":
            at += ", " + self.payback_text()
        at += self._residual_clause(
            self.rent_at_stated_usd, again=self.owning_needs_residual(self.rent_work_usd)
        )
        if self.cheaper_for_work == "rent" and self.cheaper_at_stated == "own":
            at += ", if other work keeps the fleet that busy"
        return out + f"; owning wins above {fmt_pct(u_star)} average utilisation ({at})"
