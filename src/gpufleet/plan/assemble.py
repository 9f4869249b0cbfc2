"""Join the sized workloads to a cluster design and a cost breakdown.

The recommended accelerator's peak GPU count gets an on-prem design (when the
plan allows on-prem) and a cost section: cloud on-demand, reserved and spot,
the optimised mix, on-prem TCO and break-even. With `deployment: both` the
cheaper of the optimised cloud mix and on-prem TCO over the horizon wins.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Literal

from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.goodput import Goodput, default_reliability, goodput
from gpufleet.formatting import fmt_duration
from gpufleet.plan.cloud_gaps import cloud_gaps
from gpufleet.plan.cost.breakdown import bookable, cost_breakdown
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.instances import instance_floor, on_whole_instances
from gpufleet.plan.cost.mix import optimise_mix
from gpufleet.plan.cost.prices import cloud_price_offers, cloud_prices
from gpufleet.plan.cost.tco import OnPremInputs
from gpufleet.plan.cost.tornado import DEFAULT_FACTORS, FAILURE_RATE
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.demand_curve import fleet_for, held_at_once, run_spans, split, total_curve
from gpufleet.plan.design.cluster import SitePowerError, design_cluster
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.model import (
    CloudOffer,
    CostBreakdown,
    DemandCurve,
    Design,
    Portfolio,
    WorkloadChoice,
)
from gpufleet.plan.spot import RunInputs, spot_overhead_fraction
from gpufleet.specs.plan import PlanSpec, TrainingWorkload
from gpufleet.specs.training import Reliability

# the failure-rate row's ends (`DEFAULT_FACTORS`): the GPU-hours are computed at these
FAILURE_LOW, FAILURE_HIGH = next((f.low, f.high) for f in DEFAULT_FACTORS if f.name == FAILURE_RATE)

SERVING_IN_NODE_GPUS = 8


def _need(best: Portfolio, fleet_gpus: int | None = None) -> TrafficNeed | None:
    """What the fleet's training asks of the fabric and storage (None: inference only). With
    `fleet_gpus`, the fabric joins only the GPUs left after the services' (which stay inside
    a node): the 70B plan's 3 serving GPUs took its fabric from two levels to three."""
    training = [c for c in best.choices if c.kind == "training"]
    if not training:
        return None
    # replicas of up to 8 GPUs stay inside a node (every catalog system's node has 8 or more)
    serving = sum(
        c.gpus
        for c in best.choices
        if c.kind == "inference" and int(c.parallelism.get("tp") or 1) <= SERVING_IN_NODE_GPUS
    )
    fabric_gpus = None
    if fleet_gpus is not None and serving and fleet_gpus - serving >= 1:
        fabric_gpus = fleet_gpus - serving
    big = max(training, key=lambda c: c.gpus)
    m = big.design_inputs

    def f(key: str) -> float:
        value = m.get(key)
        return float(value) if value is not None else 0.0

    return TrafficNeed(
        dp_bytes_per_step=f("dp_bytes_per_step"),
        step_time_s=max(f("step_time_s"), 1e-6),
        tp_crosses_nodes=bool(f("tp_crosses_nodes")),
        checkpoint_bytes=f("checkpoint_bytes"),
        dataset_bytes=sum(c.design_inputs.get("dataset_bytes", 0.0) for c in training),
        tokens_per_s=f("tokens_per_s"),
        fabric_gpus=fabric_gpus,
    )


# Without a deadline a training run is planned to finish within this (assumption); spot is
# held to the same date (`_spot_overheads`), so both read this one figure.
DEFAULT_DEADLINE_S = 90 * 86_400.0


def training_deadline_s(w: TrainingWorkload) -> float:
    """The date a training run must finish by: its own deadline, else the planner's default."""
    return w.constraints.deadline if w.constraints.deadline is not None else DEFAULT_DEADLINE_S


def _spot_overheads(
    spec: PlanSpec, training: list[WorkloadChoice]
) -> tuple[dict[str, float], list[str]]:
    """Each spot-eligible run's extra GPU-hours on spot (`plan.spot`), and a sentence per run
    held to its deadline on spot: its days there, and why it is kept off spot if it misses.

    Eligible: the run fits the spot pool, still makes progress when reclaimed, and its wall
    clock on spot (the on-demand wall clock with failures × (1 + the overhead): the same gang
    doing the extra GPU-hours) meets its deadline. The sizing held the on-demand run to the
    deadline; without the last test the purchase mix could buy it on spot and finish weeks
    late while the plan said the run met its constraints.
    """
    deadlines = {
        w.name: training_deadline_s(w) for w in spec.workloads if isinstance(w, TrainingWorkload)
    }
    reliability = {w.name: w.reliability for w in spec.workloads if isinstance(w, TrainingWorkload)}
    out: dict[str, float] = {}
    notes: list[str] = []
    for c in training:
        days = c.metrics.get("train_time_days")
        if c.gpus > spec.cloud.spot_max_gpus or not days:
            continue
        overhead = spot_overhead_fraction(
            gpus=c.gpus,
            ideal_time_s=float(days) * 86_400.0,
            checkpoint_bytes=c.design_inputs.get("checkpoint_bytes", 0.0),
            reclaims_per_node_day=spec.cloud.spot_reclaims_per_node_day,
            run=_as_sized(c, reliability.get(c.workload)),
        )
        if overhead is None:
            continue
        wall_days = float(c.metrics.get("wall_clock_days_with_failures") or days)
        spot_days = wall_days * (1.0 + overhead)
        deadline_days = deadlines.get(c.workload, DEFAULT_DEADLINE_S) / 86_400.0
        if spot_days > deadline_days:
            notes.append(
                f"{c.workload} on {c.gpus:,} GPUs would take {_days(spot_days)} on spot "
                f"({_days(wall_days)} × {1.0 + overhead:.4f} for reclaims) against its "
                f"{deadline_days:,.0f}-day deadline, so it is not put on spot"
            )
            continue
        notes.append(
            f"{c.workload} {_days(spot_days)} on spot within its {deadline_days:,.0f}-day deadline"
        )
        out[c.workload] = overhead
    return out, notes


def _as_sized(c: WorkloadChoice, rel: Reliability | None) -> RunInputs:
    """The goodput inputs a run was sized with (`plan.spot.RunInputs`): the storage the
    plan designs for it (the stated one, if any: `checkpoint_write_bytes_per_s`) and the
    workload's reliability inputs."""
    storage = c.design_inputs.get("checkpoint_write_bytes_per_s")
    return RunInputs(
        storage_bytes_per_s=storage if storage else None,
        gpu_mtbf_s=rel.gpu_mtbf if rel else None,
        restart_s=rel.restart_overhead if rel else None,
        checkpoint_interval_s=rel.checkpoint_interval if rel else None,
    )


def _days(days: float) -> str:
    """A run's length: days to one decimal, below a day in hours or minutes (never
    "0.0 days")."""
    return f"{days:,.1f} days" if days >= 1 else fmt_duration(days * 86_400.0)


def _demand(spec: PlanSpec, best: Portfolio, log: Assumptions) -> Demand:
    horizon = spec.horizon_years * HOURS_PER_YEAR
    baseline = sum(c.gpus for c in best.choices if c.kind == "inference")
    training = [c for c in best.choices if c.kind == "training"]
    burst = sum(c.gpu_hours or 0.0 for c in training)
    cloud = spec.cloud
    overheads, deadline_notes = _spot_overheads(spec, training)
    hours = {c.workload: c.gpu_hours or 0.0 for c in training}
    spot_hours = sum(hours[name] for name in overheads)
    overhead = (
        sum(hours[name] * o for name, o in overheads.items()) / spot_hours if spot_hours else 0.0
    )
    block_hours = sum(
        hours[c.workload] for c in training if c.gpus <= cloud.capacity_block_max_gpus
    )
    origin = "given in the plan spec" if "cloud" in spec.model_fields_set else "gpufleet default"
    log.add(
        "spot obtainable",
        f"at most {cloud.spot_max_gpus:,} GPUs at once; larger gangs never on spot",
        f"{origin} (no sourced figure: spot pools rarely hold a large gang for weeks)",
    )
    log.add(
        "spot reclaims",
        f"{cloud.spot_reclaims_per_node_day:g} per node-day",
        f"{origin} (no sourced rate); each reclaim stops the whole gang",
    )
    log.add(
        "spot_overhead_fraction",
        f"{overhead:.2%}",
        "extra GPU-hours on spot, GPU-hour-weighted over the runs that may use it: the goodput "
        "model with nodes × reclaims per node-hour added as interruptions (plan/spot.py); "
        + (
            ", ".join(f"{name} {o:.2%}" for name, o in sorted(overheads.items()))
            if overheads
            else "no run may use spot"
            if deadline_notes
            else "no run fits the spot pool"
        ),
    )
    if deadline_notes:  # only where a run was held to its deadline on spot
        log.add(
            "spot deadline",
            "a run is bought on spot only if it meets its deadline there",
            "gpufleet (derived): the wall clock on spot is the on-demand wall clock with "
            "failures × (1 + the run's spot overhead), held to the deadline the sizing met; "
            + "; ".join(deadline_notes),
        )
    log.add(
        "capacity block obtainable",
        f"at most {cloud.capacity_block_max_gpus:,} GPUs per block; larger gangs never on blocks",
        f"{origin} (no sourced size limit: the catalog's sources state durations, 7-182 days, "
        "and booking up to 8 weeks ahead, not sizes)",
    )
    starts = {w.name: w.start / 3600.0 for w in spec.workloads if isinstance(w, TrainingWorkload)}
    spans = run_spans(spec, training)
    window = _burst_window_hours(training, spans)
    for c in training:
        end_h = (
            starts.get(c.workload, 0.0)
            + float(c.metrics.get("wall_clock_days_with_failures") or 0.0) * 24
        )
        if starts.get(c.workload, 0.0) > 0 and end_h > horizon:
            raise UserError(
                f"workloads: {c.workload} starts at day {starts[c.workload] / 24:,.0f} and runs "
                f"{(end_h - starts[c.workload]) / 24:,.0f} days on {c.accelerator}, past the "
                f"{spec.horizon_years:g}-year horizon; start it earlier or raise horizon_years"
            )
    longest_h = max((_run_hours(c) for c in training), default=0.0)
    if longest_h > horizon:
        longest = max(training, key=_run_hours)
        raise UserError(
            f"horizon_years: {spec.horizon_years:g} years is shorter than {longest.workload}'s "
            f"run on {longest.accelerator} ({longest_h / 24:,.0f} days with failures); set "
            f"horizon_years to at least {longest_h / HOURS_PER_YEAR:.2f}, or give it a shorter "
            "deadline"
        )
    return Demand(
        accelerator=best.accelerator,
        baseline_gpus=baseline,
        burst_gpu_hours=burst,
        interruptible_fraction=spot_hours / burst if burst > 0 else 0.0,
        spot_overhead_fraction=overhead,
        horizon_hours=horizon,
        burst_window_hours=window if window > 0 else None,
        spot_max_gpus=float(cloud.spot_max_gpus),
        block_max_gpus=float(cloud.capacity_block_max_gpus),
        block_fraction=block_hours / burst if burst > 0 else 1.0,
        # each training run rents whole instances for its gang (`Demand.on_instances`)
        burst_gangs=tuple((c.gpus, c.gpu_hours or 0.0) for c in training),
        # when each runs, as the demand curve places it: the gangs at once are the curve's
        burst_spans=tuple(spans[c.workload] for c in training),
    )


def _run_hours(c: WorkloadChoice) -> float:
    """A training run's wall clock with failures, in hours."""
    return float(c.metrics.get("wall_clock_days_with_failures") or 0.0) * 24


def _burst_window_hours(
    training: Sequence[WorkloadChoice], spans: Mapping[str, tuple[int, int]]
) -> float:
    """Hours in which some training run is running: the union of the runs' spans, each from
    the hour the demand curve starts it for its exact wall clock. The purchase mix obtains
    at most its spot and block caps at once over these hours, and reserved GPUs lend the
    runs only these hours. The longest run alone (the window before) put every run of a
    year inside one run's weeks: year-of-runs' three 8B runs, which never overlap the 70B
    sweep, found no capacity block left and were bought on demand ($147,023 more)."""
    intervals = sorted(
        (float(spans[c.workload][0]), spans[c.workload][0] + _run_hours(c))
        for c in training
        if c.workload in spans
    )
    total, end = 0.0, -math.inf
    for start, stop in intervals:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _failure_hours(spec: PlanSpec, best: Portfolio) -> tuple[float, float] | None:
    """The training GPU-hours at failure rate ×0.5 and ×2, relative to the plan's, for the
    tornado's failure-rate row (`SensitivityInputs.failure_hours`); None without training
    or where a run makes no progress at ×2.

    Each run's GPU-hours are ∝ 1 / its goodput (`estimate.goodput`, as the sizing ran it:
    the workload's own reliability inputs, else the defaults), so its multiplier at m is
    goodput at the plan's failure rate ÷ goodput with the per-GPU MTBF ÷ m; the plan's is
    the runs' multipliers weighted by their GPU-hours, which scales the burst the tornado
    scales (the sum of the runs' GPU-hours). No plan passed one before, so the row the
    guide promises was never shown: pretrain-405b runs at 92.3 % goodput.
    """
    workloads = {w.name: w for w in spec.workloads if isinstance(w, TrainingWorkload)}
    runs = [
        (c, workloads[c.workload])
        for c in best.choices
        if c.kind == "training"
        and c.workload in workloads
        and (c.gpu_hours or 0.0) > 0
        and float(c.metrics.get("train_time_days") or 0.0) > 0
    ]
    if not runs:
        return None
    base_mtbf = default_reliability().gpu_mtbf_s
    weight = sum(c.gpu_hours or 0.0 for c, _ in runs)
    out: list[float] = []
    for m in (FAILURE_LOW, FAILURE_HIGH):
        total = 0.0
        for c, w in runs:
            rel = w.reliability

            def run(
                mtbf_scale: float, c: WorkloadChoice = c, rel: Reliability | None = rel
            ) -> Goodput:
                sized = _as_sized(c, rel)
                return goodput(
                    gpus=c.gpus,
                    ideal_time_s=float(c.metrics["train_time_days"] or 0.0) * 86_400.0,
                    checkpoint_bytes=c.design_inputs.get("checkpoint_bytes", 0.0),
                    storage_bytes_per_s=sized.storage_bytes_per_s,
                    gpu_mtbf_s=(sized.gpu_mtbf_s or base_mtbf) * mtbf_scale,
                    restart_s=sized.restart_s,
                    checkpoint_interval_s=sized.checkpoint_interval_s,
                )

            at_base, at_m = run(1.0), run(1.0 / m)
            if at_base.breakdown or at_m.breakdown:
                return None
            total += (c.gpu_hours or 0.0) * float(at_base.fraction) / float(at_m.fraction)
        out.append(total / weight)
    return out[0], out[1]


class InfeasiblePlanError(UserError):
    """No accelerator sizes every workload within its constraints; says what would."""

    def __init__(self, advice: list[str]) -> None:
        self.advice = advice
        super().__init__("no plan meets every constraint:\n  " + "\n  ".join(advice))


def _rent_above_fleet(spec: PlanSpec, best: Portfolio, curve: DemandCurve) -> float | None:
    """What renting the demand above the owned fleet costs, None without a cloud price.

    The training runs rented whole are priced as the plan's rental mix prices the work
    (`_demand` on those runs alone, then `bookable` prices and `on_whole_instances`): each
    run's gang, span and time window, its spot share and its capacity-block share. Priced as
    GPU-hours free to spread over the horizon, year-of-runs' sweep-70b (a 512-GPU gang for
    24.7 days) came to $1,140,866 as 34 GPUs on 1-year reservations plus capacity-block
    hours, which cannot run the gang; with its window and gang it is $1,492,801. The serving
    hours above the fleet come every day of the horizon, so they are priced apart as burst
    work over the horizon, never on spot or blocks (a service cannot be interrupted or wait
    for a booking), and the two totals are added.
    """
    runs = set(curve.rented_runs)
    rented = [c for c in best.choices if c.kind == "training" and c.workload in runs]
    horizon = spec.horizon_years * HOURS_PER_YEAR
    parts: list[Demand] = []
    if rented:
        parts.append(_demand(spec, dataclasses.replace(best, choices=rented), Assumptions()))
    if curve.rented_serving_gpu_hours > 0:
        parts.append(
            Demand(
                accelerator=best.accelerator,
                baseline_gpus=0,
                burst_gpu_hours=curve.rented_serving_gpu_hours,
                interruptible_fraction=0.0,
                spot_overhead_fraction=0.0,
                horizon_hours=horizon,
                block_fraction=0.0,
            )
        )
    floor = instance_floor(best.choices).gpus
    offers = cloud_price_offers(best.accelerator, spec.providers, spec.regions, min_gpus=floor)
    total = 0.0
    for demand in parts:
        log = Assumptions()
        prices = bookable(
            cloud_prices(best.accelerator, spec.providers, spec.regions, log, min_gpus=floor),
            demand,
            log,
        )
        if not prices:
            return None
        try:
            total += optimise_mix(on_whole_instances(demand, offers, log), prices, log)["total_usd"]
        except ValueError:
            return None
    return total


def _owned_fleet(
    spec: PlanSpec, best: Portfolio, log: Assumptions, extra: list[str]
) -> tuple[Design | None, DemandCurve | None]:
    """The owned fleet the demand curve and the policy ask for, designed, and how the demand
    splits between it and renting (`plan.demand_curve`)."""
    policy = spec.on_prem.fleet_policy
    fleet = fleet_for(total_curve(spec, best.choices), policy)
    try:
        design = design_cluster(best.accelerator, fleet, spec.on_prem, _need(best, fleet), log)
    except SitePowerError as exc:
        if spec.deployment == "on-prem":
            raise InfeasiblePlanError([f"on-prem on {best.accelerator}: {exc}"]) from exc
        extra.append(f"renting, because owning does not fit the site: {exc}")
        return None, None
    except UserError as exc:
        extra.append(f"no on-prem design: {exc}")
        return None, None
    curve = split(spec, best.choices, design.gpus, policy)
    if curve.rented_gpu_hours > 0:
        rent = _rent_above_fleet(spec, best, curve)
        curve = curve.model_copy(update={"rent_usd": rent})
        if rent is None:
            extra.append(
                f"{curve.rented_gpu_hours:,.0f} GPU-hours above the owned fleet have no cloud "
                "price where this plan may rent: they are not costed"
            )
    origin = (
        "given in the plan spec"
        if "fleet_policy" in spec.on_prem.model_fields_set
        else "gpufleet default: own the peak"
    )
    log.add(
        "on-prem fleet policy",
        f"{policy}: {fleet:,} GPUs ({curve.peak_gpus:,.0f} at the peak hour)",
        f"{origin}; the hourly demand curve and the split are in plan/demand_curve.py",
    )
    return design, curve


def _relog_sensitivity(log: Assumptions, fresh: Assumptions) -> None:
    """Put the tornado lines of `fresh` (a recomputed cost) in place of those in `log`: the
    log keeps the first line of each name, and the first tornado was owning's, priced before
    the verdict chose renting (pretrain-405b's said "on-prem total cost" above a tornado of
    the rental mix)."""
    lines = [a for a in fresh.items if a.name.startswith(_TORNADO_LINES)]
    at = next((i for i, a in enumerate(log.items) if a.name.startswith(_TORNADO_LINES)), None)
    if at is None:
        log.items.extend(lines)
        return
    rest = [a for a in log.items[at:] if not a.name.startswith(_TORNADO_LINES)]
    log.items[at:] = lines + rest


# the names of the log lines a tornado writes (`plan/cost/tornado.py`)
_TORNADO_LINES = "sensitivity"


def _unpriced(spec: PlanSpec, best: Portfolio) -> str:
    """Why renting has no price for `best` (`plan.cloud_gaps`): `deployment: both` became
    owning with nothing said but "No cloud options: this plan does not consider renting"."""
    gaps = cloud_gaps(best.accelerator, spec.providers, spec.regions)
    if not gaps.rentable:
        return gaps.unpriced_reason()
    return (
        f"no instance of {best.accelerator} that holds the work has a cloud price where this "
        "plan may rent (see the assumptions), so renting could not be priced for it"
    )


def cost_and_design(
    spec: PlanSpec,
    best: Portfolio,
    cloud: dict[str, list[CloudOffer]],
    log: Assumptions,
    *,
    headline_only: bool = False,
) -> tuple[Design | None, DemandCurve | None, CostBreakdown, str, str | None, list[str]]:
    """(design, demand curve, cost, deployment, provider, extra why-sentences) for the
    recommendation.

    `headline_only` leaves out the tornado and the rent-or-own verdict, which move no total:
    the ranking (`plan.ranking`) costs every candidate for its headline alone, and they were
    two thirds of that time. The deployment is the same without the verdict: it picks owning
    when the TCO is below renting the work (`RentOrOwn.cheaper_for_work`: the mix's total, or
    on-demand without one), the comparison made below when there is no verdict."""
    factors = () if headline_only else DEFAULT_FACTORS
    extra: list[str] = []
    design: Design | None = None
    curve: DemandCurve | None = None
    if spec.deployment in ("on-prem", "both"):
        design, curve = _owned_fleet(spec, best, log, extra)
    on_prem = None
    if design is not None:
        renting = curve is not None and curve.rented_gpu_hours > 0
        on_prem = OnPremInputs(
            gpus=design.gpus,
            nodes=design.nodes,
            it_power_kw=design.power_kw["it"],
            facility_power_kw=design.power_kw["facility"],
            prefs=spec.on_prem,
            utilization=spec.expected_utilization,
            system=design.system if design.system != "generic-8gpu" else None,
            # the network share prices the scale-out fabric: none is designed for serving
            # that stays inside its nodes (the chat plan paid $62,402 for "Fabric none")
            network_capex_usd=0.0 if design.fabric.name == "none" else None,
            burst_rent_usd=(curve.rent_usd or 0.0) if curve is not None else 0.0,
            # the demand table's "Served by the owned fleet", renting or not: the TCO's
            # delivered GPU-hours and the verdict's utilisation read this one figure
            owned_work_gpu_hours=curve.owned_gpu_hours if curve is not None else None,
            burst_gpu_hours=curve.rented_gpu_hours if renting and curve else None,
            held_gpus=held_at_once(curve) if curve is not None else None,
        )
    demand = _demand(spec, best, log)
    failure_hours = None if headline_only else _failure_hours(spec, best)
    mode: Literal["cloud", "on-prem"] | None = None
    if spec.deployment == "cloud":
        mode = "cloud"
    elif spec.deployment == "on-prem" and on_prem is not None:
        mode = "on-prem"
    cost = cost_breakdown(
        demand,
        log,
        providers=spec.providers,
        regions=spec.regions,
        on_prem=on_prem,
        deployment=mode,
        factors=factors,
        verdict=not headline_only,
        failure_hours=failure_hours,
        min_gpus=instance_floor(best.choices).gpus,
    )
    cloud_total = cost.mix.get("total_usd") if cost.mix else cost.on_demand
    tco_total = cost.tco.get("total") if cost.tco else None
    deployment = spec.deployment
    if deployment == "both":
        if cloud_total is not None and tco_total is not None:
            deployment = "on-prem" if tco_total < cloud_total else "cloud"
            if cost.rent_or_own:
                # the choice and its sentence read the same numbers (plan.cost.verdict)
                verdict = RentOrOwn.from_json(cost.rent_or_own)
                deployment = "on-prem" if verdict.cheaper_for_work == "own" else "cloud"
                extra.append(verdict.sentence())
        else:
            deployment = "cloud" if cloud_total is not None else "on-prem"
            if cloud_total is None and not headline_only:
                extra.append(f"owning, without comparing renting: {_unpriced(spec, best)}")
        if deployment == "cloud" and tco_total is not None and not headline_only:
            # The tornado should describe the recommended way of paying, and so its log
            # lines: the first tornado's said "on-prem total cost" above a rental tornado.
            fresh = Assumptions()
            cost = cost_breakdown(
                demand,
                fresh,
                providers=spec.providers,
                regions=spec.regions,
                on_prem=on_prem,
                deployment="cloud",
                failure_hours=failure_hours,
                min_gpus=instance_floor(best.choices).gpus,
            )
            _relog_sensitivity(log, fresh)
    provider = None
    if deployment == "cloud" and cost.mix_by_provider:
        # the provider the optimised mix buys most from: the one the headline priced
        provider = next(iter(cost.mix_by_provider))
        share = cost.mix_by_provider[provider] / sum(cost.mix_by_provider.values())
        extra.append(f"the optimised mix buys {share:.1%} of its cost from {provider}")
    elif deployment == "cloud" and cloud:
        provider = min(cloud, key=lambda p: cloud[p][0].on_demand_usd_per_hour or float("inf"))
    return design, curve, cost, deployment, provider, extra
