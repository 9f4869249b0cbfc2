"""The executive summary: the decision, its cost range, what moves it, what would change it.

The first page of plan.pdf is for the reader who signs: one decision, one number with its
range, the three inputs that move it most and the conditions under which the plan would
recommend something else. Every figure here is read from the plan's own parts (the headline
cost, the tornado, the rent-or-own verdict, the alternatives), and every sentence is
written from those figures, so the summary cannot disagree with the pages behind it.

- **Cost range**: the headline (the deployment's own number, `headline_cost`) with a low
  and a high end that combine the tornado's one-at-a-time swings as independent
  uncertainties: base − √Σ(downside²) and base + √Σ(upside²). A sum of every worst case
  would assume all inputs go wrong together; the largest single swing alone would ignore
  the rest. The method is stated beside the range.
- **Drivers**: the tornado's three widest rows, each with the total at its low and high end.
- **What would change the decision**: first, a training layout at the memory limit
  (`MEMORY_RISK_FRACTION`): the headline's days and cost come from a layout that may not
  run as planned, and the sentence names the next layout with headroom the search found and
  what it costs in days (pretrain-70b's used 149.6 of 151.4 GB per GPU, and only the
  appendix said so). Then the utilisation at which owning and renting cross
  (`plan.cost.verdict`), the cut in its headline cost that would make the cheapest
  alternative accelerator the recommendation (the planner ranks feasible accelerators by the
  headline cost of the plan each would give, `plan.ranking`), and whether the rent-or-own
  call survives the high end of the cost range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.estimate.training_memory import NEAR_LIMIT_FRACTION
from gpufleet.formatting import (
    fmt_label,
    fmt_num,
    fmt_pct,
    fmt_usd,
    fmt_usd_apart,
    format_gb,
)
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.design.power import rack_power_note
from gpufleet.plan.model import (
    Alternative,
    CostBreakdown,
    DemandCurve,
    Design,
    Driver,
    ExecutiveSummary,
    Plan,
    Recommendation,
    WorkloadChoice,
)

RANGE_METHOD = (
    "base ± the root-sum-square of the sensitivity's one-at-a-time swings, the inputs taken "
    "as independent"
)
DRIVERS_SHOWN = 3


LIST_PRICES = "at on-demand list prices"

# A recommended training layout above this share of HBM is a risk to the headline, said in
# the summary and beside the workload. The memory model's "other" term is a flat 2 GiB per
# GPU for the CUDA context, NCCL buffers and allocator fragmentation (estimate/training.py,
# OTHER_RESERVE_BYTES), while PyTorch's caching allocator commonly loses 5-10 % of HBM to
# fragmentation alone: above 95 % the room left beyond that reserve is below the low end of
# that loss, so the layout should be expected not to run until it is tuned. Between the
# estimator's 90 % (NEAR_LIMIT_FRACTION) and this, tuning is expected to work, and the
# appendix's "needs memory engineering" line says so. "With headroom" is the estimator's 90 %.
MEMORY_RISK_FRACTION = 0.95
MEMORY_NEAR_LIMIT = "memory near the limit"


@dataclass(frozen=True)
class RoomierLayout:
    """The layout a plan would take if the recommended one does not fit in practice: the
    cheapest the search found at most `NEAR_LIMIT_FRACTION` of HBM that meets the deadline,
    else the fastest such one (`meets_deadline` False). Figures are the plan's own: wall
    clock with failures, cost at on-demand list prices (None without a price)."""

    gpus: int
    layout: str  # e.g. "tp 8, pp 4, dp 128, recompute selective"
    memory_per_gpu_bytes: float
    wall_clock_days: float
    cost_usd: float | None
    meets_deadline: bool


def memory_near_limit_note(
    *,
    used_bytes: float,
    capacity_bytes: float,
    wall_clock_days: float,
    cost_usd: float | None,
    gpus: int,
    same_gpus: str | None,
    roomier: RoomierLayout | None,
) -> str | None:
    """The workload note for a recommended layout above `MEMORY_RISK_FRACTION` of HBM, from
    its own figures, the estimator's single changes that fit on the same `gpus` (`same_gpus`,
    its own words, memory only) and the roomier layout the search found on another count
    (None at or below the threshold). It starts with `MEMORY_NEAR_LIMIT`, which is how
    `executive_summary` finds it."""
    if not capacity_bytes > 0 or used_bytes <= MEMORY_RISK_FRACTION * capacity_bytes:
        return None
    head = (
        f"{MEMORY_NEAR_LIMIT}: the layout uses {format_gb(used_bytes)} of "
        f"{format_gb(capacity_bytes)} per GPU ({fmt_pct(used_bytes / capacity_bytes)}), above "
        f"the {fmt_pct(MEMORY_RISK_FRACTION)} a plan takes without memory engineering (the "
        "model's flat 2 GiB reserve is below the 5-10 % PyTorch's allocator commonly loses to "
        "fragmentation), so the days and cost here assume tuning makes it run"
    )
    if same_gpus:
        head += f"; on the same {gpus:,} GPUs, {same_gpus}"
    if roomier is None:
        return (
            f"{head}; the search found no other GPU count with a layout within "
            f"{fmt_pct(NEAR_LIMIT_FRACTION)} of memory"
        )
    days = roomier.wall_clock_days - wall_clock_days
    more = f"{abs(days):,.1f} days {'more' if days >= 0 else 'fewer'}"
    if roomier.cost_usd is not None and cost_usd is not None:
        extra = roomier.cost_usd - cost_usd
        more += f", {fmt_usd(abs(extra))} {'more' if extra >= 0 else 'less'} at list prices"
    late = "" if roomier.meets_deadline else ", past the deadline"
    return (
        f"{head}; the next layout with headroom the search found is on {roomier.gpus:,} GPUs "
        f"({roomier.layout}; {format_gb(roomier.memory_per_gpu_bytes)}, "
        f"{fmt_pct(roomier.memory_per_gpu_bytes / capacity_bytes)}): "
        f"{roomier.wall_clock_days:,.1f} days with failures, {more}{late}"
    )


def _memory_risks(rec: Recommendation) -> list[str]:
    """The summary's sentence for each recommended workload whose note says its layout is at
    the memory limit (`memory_near_limit_note`)."""
    out: list[str] = []
    for w in rec.workloads:
        for note in w.notes:
            if note.startswith(MEMORY_NEAR_LIMIT):
                body = note.removeprefix(MEMORY_NEAR_LIMIT).removeprefix(": ")
                out.append(f"Memory near the limit for {w.workload} on {w.accelerator}: {body}")
    return out


def workloads_cost_usd(rec: Recommendation) -> float | None:
    """The recommendation's workload costs at on-demand list prices; None when one is unknown."""
    costs = [w.cost_usd for w in rec.workloads]
    if not costs or any(c is None for c in costs):
        return None
    return float(sum(c for c in costs if c is not None))


def headline_cost(rec: Recommendation, cost: CostBreakdown) -> tuple[float | None, str]:
    """The recommended deployment's own number and what it is (`deployment_cost`)."""
    return deployment_cost(rec.deployment, rec.workloads, cost)


def deployment_cost(
    deployment: str, workloads: Sequence[WorkloadChoice], cost: CostBreakdown
) -> tuple[float | None, str]:
    """A deployment's own number and what it is: the TCO when owning, the optimised mix
    when renting (on-demand only when there is no mix). An on-prem plan's headline used to
    quote an on-demand cloud price (issue 27). The planner ranks accelerators on this same
    figure for each (`plan.ranking`), so the headline and the ranking cannot disagree."""
    years = f"{cost.tco.get('horizon_years', 0):g}"
    if deployment == "on-prem" and "total" in cost.tco:
        return cost.tco["total"], f"on-prem TCO over {years} years"
    if cost.mix.get("total_usd") is not None:
        return cost.mix["total_usd"], "with the optimised purchase mix"
    costs = [w.cost_usd for w in workloads]
    if not costs or any(c is None for c in costs):
        return None, LIST_PRICES
    return float(sum(c for c in costs if c is not None)), LIST_PRICES


def cost_noun(what: str, of: str = "") -> str:
    """A headline's `what` as the noun a sentence names, `of` after the noun: "cost for this
    work with the optimised purchase mix", "on-prem TCO over 3 years for this work"."""
    if what.startswith(("with ", "at ")):
        return f"cost{of} {what}"
    return f"{what}{of}"


def _number(row: Mapping[str, float | str], key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) else None


def _drivers(rows: Sequence[Mapping[str, float | str]]) -> list[Driver]:
    out: list[Driver] = []
    for row in rows:
        low, high = _number(row, "low_usd"), _number(row, "high_usd")
        if low is None or high is None or low == high:
            continue  # a flat row moves nothing
        out.append(
            Driver(
                factor=str(row.get("factor", "?")),
                name=fmt_label(str(row.get("factor", "?")), strip_unit=False),
                low_label=str(row.get("low_label", "")),
                high_label=str(row.get("high_label", "")),
                low_usd=low,
                high_usd=high,
            )
        )
    out.sort(key=lambda d: -abs(d.high_usd - d.low_usd))
    return out


def cost_range(base: float, drivers: Sequence[Driver]) -> tuple[float, float]:
    """(low, high): base ∓ the root-sum-square of each driver's down- and upside."""
    down = math.sqrt(sum(max(0.0, base - min(d.low_usd, d.high_usd)) ** 2 for d in drivers))
    up = math.sqrt(sum(max(0.0, max(d.low_usd, d.high_usd) - base) ** 2 for d in drivers))
    return base - down, base + up


def _decision(
    rec: Recommendation,
    design: Design | None,
    curve: DemandCurve | None,
    cost_text: str,
    mix: Mapping[str, float] | None = None,
) -> str:
    what = f"{rec.total_gpus:,} × {rec.accelerator}"
    at_once = gpus_at_once(rec, curve)
    rented = fleet_gpus(rec, design, curve, mix)
    if rec.deployment != "on-prem" and rented > at_once:
        # the cloud rents whole instances: the decision names what is paid for
        instances = int((mix or {}).get("rented_instances") or 0)
        per = int((mix or {}).get("instance_gpus") or 0)
        across = f", {rec.total_gpus:,} across them" if rec.total_gpus > at_once else ""
        what = (
            f"{rented:,} × {rec.accelerator} ({instances:,} {per}-GPU instances; the "
            f"workloads use {at_once:,} at once{across})"
        )
    elif at_once < rec.total_gpus:
        # runs that do not overlap never need every workload's GPUs at once
        what = (
            f"up to {at_once:,} × {rec.accelerator} at once ({rec.total_gpus:,} "
            "across the workloads)"
        )
    if rec.deployment == "on-prem" and design is not None:
        head = f"Build and own an on-prem cluster of {design.gpus:,} × {rec.accelerator}"
        if design.gpus > at_once:
            head += f" (the workloads need {at_once:,}; whole nodes)"
        elif design.gpus < at_once:
            head += f" (the workloads use {at_once:,} at the busiest hour: the rest rented)"
        head += (
            f": {design.nodes:,} {design.system} node{'s' if design.nodes != 1 else ''}, "
            f"{design.racks:,} rack{'s' if design.racks != 1 else ''}, "
            f"{design.power_kw['facility']:,.0f} kW at the facility"
        )
    elif rec.deployment == "on-prem":
        head = f"Build and own {what} on-prem"
    else:
        head = f"Rent {what}" + (f" on {rec.provider}" if rec.provider else " in the cloud")
    return f"{head}; {cost_text}"


def fleet_gpus(
    rec: Recommendation,
    design: Design | None,
    curve: DemandCurve | None,
    mix: Mapping[str, float] | None,
) -> int:
    """The fleet the decision names: owning, the designed cluster of whole nodes (or the
    GPUs in use at once without a design); renting, the whole instances rented where they
    hold more GPUs than are in use at once, else the GPUs in use at once. Not the
    workloads' GPUs added up: runs that never overlap share it."""
    return priced_gpus(rec.deployment, gpus_at_once(rec, curve), design, mix)


def priced_gpus(
    deployment: str, at_once: int, design: Design | None, mix: Mapping[str, float] | None
) -> int:
    """The GPUs a plan's headline cost pays for (`fleet_gpus`), from its parts: the owned
    cluster's, or the whole instances rented at the busiest hour."""
    if deployment == "on-prem":
        return design.gpus if design is not None else at_once
    return max(at_once, int((mix or {}).get("rented_gpus") or 0))


@dataclass(frozen=True)
class GpuCount:
    """A plan's GPUs as a reader who buys from them needs them: `priced`, those its headline
    cost pays for (whole nodes owned, whole instances rented), first; `used`, those the
    workloads use at the busiest hour; `added_up`, every workload's GPUs added up. The
    Recommendation and the terminal said "12 × h100" beside a Decision and a TCO for 16."""

    priced: int
    used: int
    added_up: int

    @property
    def qualifier(self) -> str:
        """What follows the count: "owned" below the busiest hour (the rest is rented),
        "at once" where the workloads add up to more than they use together."""
        if self.priced < self.used:
            return "owned"
        if self.priced == self.used and self.added_up > self.used:
            return "at once"
        return ""

    @property
    def notes(self) -> list[str]:
        """What the count leaves out: the GPUs used, the rest rented, the sum of workloads."""
        out: list[str] = []
        if self.priced > self.used:
            out.append(f"{self.used:,} used" + (" at once" if self.added_up > self.used else ""))
        elif self.priced < self.used:
            out.append(f"{self.used:,} at the busiest hour: the rest rented")
        if self.added_up > self.used:
            out.append(f"{self.added_up:,} across the workloads")
        return out

    def text(self, accelerator: str | None = None) -> str:
        """'16 × h100 (12 used)', '528 × h100 at once (1,296 across the workloads)',
        '272 × h100 owned (528 at the busiest hour: the rest rented)'."""
        head = f"{self.priced:,}" + (f" × {accelerator}" if accelerator else "")
        head += f" {self.qualifier}" if self.qualifier else ""
        return head + (f" ({'; '.join(self.notes)})" if self.notes else "")


def headline_gpus(
    rec: Recommendation,
    design: Design | None,
    curve: DemandCurve | None,
    mix: Mapping[str, float] | None,
) -> GpuCount:
    """The recommendation's GPUs: those its headline cost pays for (`fleet_gpus`), in use
    at once and added up."""
    return GpuCount(fleet_gpus(rec, design, curve, mix), gpus_at_once(rec, curve), rec.total_gpus)


def alternative_gpus(alt: Alternative) -> GpuCount:
    """An alternative's GPUs as `headline_gpus` counts the recommendation's; a plan.json
    from before they were recorded has only the workloads' GPUs added up."""
    used = alt.gpus_at_once if alt.gpus_at_once is not None else alt.total_gpus
    priced = alt.priced_gpus if alt.priced_gpus is not None else used
    return GpuCount(priced, used, alt.total_gpus)


def fleet_text(plan: Plan) -> str:
    """The plan's headline GPUs in words, as the summary counts them: "16 × h100 (12 used)"
    (the terminal's first line said "12 × h100" beside a decision to buy 16)."""
    rec = plan.recommendation
    return headline_gpus(rec, plan.design, plan.demand_curve, plan.cost.mix).text(rec.accelerator)


def gpus_at_once(rec: Recommendation, curve: DemandCurve | None) -> int:
    """The GPUs the workloads use at the busiest hour: the recommendation's count (the
    services at their peak rate and the runs that overlap, `demand_curve.gpus_at_once`), or,
    in a plan.json from before it was recorded, the demand curve's peak or the sum."""
    if rec.gpus_at_once is not None:
        return rec.gpus_at_once
    if curve is not None:
        return min(rec.total_gpus, math.ceil(curve.peak_gpus - 1e-9))
    return rec.total_gpus


def _busy_every_hour(rate: str) -> str:
    """The full-use rate beside a break-even utilisation, said to be the rate of every hour's
    use: "steady use of it rents at $3.99 per GPU-hour used" beside "less than 15.2% busy"
    read as the rate at 15.2 %, and beside the $4.98 at the stated 80 % as a second price
    for the same thing (chat-70b)."""
    return f"kept busy every hour, it rents at {rate}"


def _rent_or_own_changes(deployment: str, v: RentOrOwn) -> list[str]:
    """When the other way of paying would win, in the verdict's own numbers (the fleet kept
    busy every hour priced as the optimiser would buy it)."""
    u_star, work = v.breakeven_utilization, v.work_utilization
    own, rent = fmt_usd_apart(v.own_usd, v.rent_work_usd)
    fleet = f"an owned fleet of {v.fleet_gpus:,} GPUs"
    steady = v.rate_text(v.rent_full_usd_per_gpu_hour, v.rent_full_basis)
    if deployment == "cloud":
        if v.cheaper_for_work == "own":
            return [
                f"Owning would cost less for the planned work ({own} against {rent} to rent "
                "it); the plan rents because the spec asks for cloud"
            ]
        if u_star > 1.0:
            own_all, full = fmt_usd_apart(v.own_usd, v.rent_full_usd)
            return [
                f"Owning would not win even with {fleet} busy every hour ({own_all} against "
                f"{full} to rent it busy every hour at {steady})"
            ]
        return [
            f"Owning wins only if {fleet} is kept more than {fmt_pct(u_star)} busy on average "
            f"({_busy_every_hour(steady)}); the planned work keeps it {fmt_pct(work)} busy"
        ]
    if v.cheaper_for_work == "rent":
        stated = fmt_pct(v.stated_utilization)
        reach = (
            f"which the stated {stated} clears only if other work fills the fleet"
            if v.cheaper_at_stated == "own"
            else f"which the stated {stated} does not reach"
        )
        return [
            f"Renting the planned GPU-hours would cost less ({rent} against {own} to own): "
            f"owning pays off only above {fmt_pct(u_star)} average utilisation, {reach}"
        ]
    return [
        f"Renting would win if the fleet were less than {fmt_pct(u_star)} busy on average "
        f"({_busy_every_hour(steady)}); the planned work keeps it {fmt_pct(work)} busy"
    ]


def _residual_change(v: RentOrOwn) -> list[str]:
    """Owning ahead of renting the planned work only through the book value the TCO credits
    at the horizon's end: in cash over the horizon it costs more."""
    if not v.owning_needs_residual(v.rent_work_usd):
        return []
    payback = (
        f"; it pays back after {fmt_num(v.payback_months, 1)} months"
        + (" of a " if v.payback_after_horizon else " within the ")
        + f"{fmt_num(v.horizon_months)}-month horizon"
        if v.payback_months is not None
        else ""
    )
    cash, rent = fmt_usd_apart(v.own_cash_usd, v.rent_work_usd)
    return [
        f"Owning beats renting the planned work only through the {fmt_usd(v.own_residual_usd)} "
        f"book value credited at the end of the horizon: in cash over "
        f"{fmt_num(v.horizon_months)} months owning pays {cash} against {rent} to rent{payback}"
    ]


def _present_value_change(v: RentOrOwn) -> list[str]:
    """The planned-work comparison in present value, and whether it gives the same answer."""
    if v.own_pv_usd is None or v.rent_work_pv_usd is None or v.discount_rate <= 0:
        return []
    same = v.cheaper_for_work_pv == v.cheaper_for_work
    winner = "renting" if v.cheaper_for_work_pv == "rent" else "owning"
    own, rent = fmt_usd_apart(v.own_pv_usd, v.rent_work_pv_usd)
    return [
        f"In present value at {fmt_pct(v.discount_rate)} a year owning costs "
        f"{own} against {rent} to rent the planned "
        f"work: {winner} wins " + ("here too" if same else "instead, so the rate decides")
    ]


def alternative_cost(alt: Alternative) -> tuple[float | None, str]:
    """The figure an alternative was ranked on and what it is: the headline cost of the plan
    it would give; a plan.json from before that was ranked on the list price has only that."""
    if alt.plan_cost_usd is not None:
        return alt.plan_cost_usd, alt.plan_cost_what
    return alt.cost_usd, LIST_PRICES


def _accelerator_change(
    rec: Recommendation, alternatives: Sequence[Alternative], headline: tuple[float | None, str]
) -> list[str]:
    """The cut that makes the cheapest alternative the recommendation, in the figure the
    planner ranks on: the headline cost of the plan each accelerator would give
    (`plan.ranking`). A plan.json from before that ranked on the list price is read so."""
    priced = [a for a in alternatives if (alternative_cost(a)[0] or 0.0) > 0]
    if not priced:
        return []
    nearest = min(priced, key=lambda a: alternative_cost(a)[0] or math.inf)
    theirs_usd, theirs_what = alternative_cost(nearest)
    old_plan = nearest.plan_cost_usd is None
    mine_usd, mine_what = (workloads_cost_usd(rec), LIST_PRICES) if old_plan else headline
    if mine_usd is None or theirs_usd is None:
        return []
    cut = 1.0 - mine_usd / theirs_usd
    if cut <= 0:
        return []  # a tie broken by GPU count: no price cut is needed
    theirs, below = fmt_usd_apart(theirs_usd, mine_usd)
    # the recommendation's figure is named when it is another kind (owning against renting)
    against = "" if mine_what == theirs_what else f", the recommendation's {cost_noun(mine_what)}"
    return [
        f"{nearest.accelerator} would be recommended if its "
        f"{cost_noun(theirs_what, ' for this work')} fell "
        f"by more than {fmt_pct(cut)} (from {theirs} to below {below}{against})"
    ]


def _robustness(deployment: str, high: float, v: RentOrOwn) -> list[str]:
    """Whether the rent-or-own call on the planned work survives the cost range's far end."""
    if deployment == "cloud" and v.cheaper_for_work == "rent":
        mine, theirs, other = "renting", "owning", v.own_usd
    elif deployment == "on-prem" and v.cheaper_for_work == "own":
        mine, theirs, other = "owning", "renting the same GPU-hours", v.rent_work_usd
    else:
        return []
    high_text, other_text = fmt_usd_apart(high, other)
    at = f"At the high end of its range ({high_text}) {mine}"
    if high < other:
        return [f"{at} still costs less than {theirs} ({other_text})"]
    return [
        f"{at} would cost more than {theirs} ({other_text}): settle the inputs above "
        "before committing"
    ]


def rentable_alternative(alternatives: Sequence[Alternative]) -> str | None:
    """The cheapest alternative with a cloud price, in words, for a plan whose own
    accelerator could not be rented: ranked on the work at on-demand list prices (the one
    rental figure every rentable alternative has), with its plan's optimised mix where that
    plan rents. None when no alternative has a cloud price."""
    rentable = [a for a in alternatives if a.cost_usd is not None]
    if not rentable:
        return None
    best = min(rentable, key=lambda a: a.cost_usd or math.inf)
    text = (
        f"the cheapest alternative to rent is {best.accelerator}: {fmt_usd(best.cost_usd)} for "
        f"this work {LIST_PRICES}"
    )
    if best.plan_cost_usd is not None and best.plan_cost_what.startswith("with "):
        text += f", {fmt_usd(best.plan_cost_usd)} {best.plan_cost_what}"  # its plan rents
    return text


def caveats(
    cost: CostBreakdown,
    design: Design | None,
    alternatives: Sequence[Alternative],
    cloud_notes: Sequence[str],
) -> list[str]:
    """What the decision rests on that a buyer must check first, each a sentence from its
    numbers: a rack power budget the design could not hold (`rack_power_note`), and renting
    that could not be priced for the accelerator (`cloud_notes`, `plan.cloud_gaps`), with
    the cheapest alternative that can be rented. (Providers left out while another rents
    the accelerator are said in the Cloud options section and the assumptions.)"""
    out: list[str] = []
    rack = rack_power_note(design) if design is not None else None
    if rack is not None:
        out.append(f"Rack power: {rack}")
    if cost.on_demand is None and not cost.mix and cloud_notes:
        other = rentable_alternative(alternatives)
        out.append(
            "Renting was not compared: "
            + "; ".join(cloud_notes)
            + (f"; {other}" if other else "; no alternative accelerator has a cloud price")
        )
    return out


def executive_summary(
    rec: Recommendation,
    alternatives: Sequence[Alternative],
    design: Design | None,
    cost: CostBreakdown,
    curve: DemandCurve | None = None,
    *,
    cloud_notes: Sequence[str] = (),
) -> ExecutiveSummary:
    base, what = headline_cost(rec, cost)
    cost_text = f"{fmt_usd(base)} {what}" if base is not None else "no price for this deployment"
    drivers = _drivers(cost.sensitivity)
    low = high = None
    if base is not None:
        low, high = cost_range(base, drivers)
    # a headline resting on a layout at the memory limit is said first
    changes: list[str] = _memory_risks(rec)
    verdict = RentOrOwn.from_json(cost.rent_or_own) if cost.rent_or_own else None
    if verdict is not None:
        changes += _rent_or_own_changes(rec.deployment, verdict)
        changes += _residual_change(verdict)
        changes += _present_value_change(verdict)
    changes += _accelerator_change(rec, alternatives, (base, what))
    if verdict is not None and low is not None and high is not None:
        changes += _robustness(rec.deployment, high, verdict)
    gpus = headline_gpus(rec, design, curve, cost.mix)
    return ExecutiveSummary(
        decision=_decision(rec, design, curve, cost_text, cost.mix),
        cost_usd=base,
        cost_what=what,
        cost_low_usd=low,
        cost_high_usd=high,
        range_method=RANGE_METHOD,
        drivers=drivers[:DRIVERS_SHOWN],
        would_change=changes,
        headline_gpus=gpus.priced,
        gpus_used_at_once=gpus.used,
        workload_gpus_added_up=gpus.added_up,
        caveats=caveats(cost, design, alternatives, cloud_notes),
    )
