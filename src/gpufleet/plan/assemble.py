"""Join the sized workloads to a cluster design and a cost breakdown.

The recommended accelerator's peak GPU count gets an on-prem design (when the
plan allows on-prem) and a cost section: cloud on-demand, reserved and spot,
the optimised mix, on-prem TCO and break-even. With `deployment: both` the
cheaper of the optimised cloud mix and on-prem TCO over the horizon wins.
"""

from __future__ import annotations

from typing import Literal

from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost.breakdown import cost_breakdown
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.tco import OnPremInputs
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.design.cluster import SitePowerError, design_cluster
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.model import CloudOffer, CostBreakdown, Design, Portfolio
from gpufleet.specs.plan import PlanSpec

# Extra work a spot reclaim costs a checkpointed run: lost progress since the last
# checkpoint plus the restart (assumption; the goodput model prices on-demand failures).
SPOT_OVERHEAD = 0.10
# Spot pools rarely hold a large gang for weeks: only training runs up to this many GPUs
# are planned on spot (assumption).
SPOT_MAX_GANG_GPUS = 64


def _need(best: Portfolio) -> TrafficNeed | None:
    training = [c for c in best.choices if c.kind == "training"]
    if not training:
        return None
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
    )


def _demand(spec: PlanSpec, best: Portfolio, log: Assumptions) -> Demand:
    horizon = spec.horizon_years * HOURS_PER_YEAR
    baseline = sum(c.gpus for c in best.choices if c.kind == "inference")
    training = [c for c in best.choices if c.kind == "training"]
    burst = sum(c.gpu_hours or 0.0 for c in training)
    small = sum(c.gpu_hours or 0.0 for c in training if c.gpus <= SPOT_MAX_GANG_GPUS)
    log.add(
        "spot_max_gang_gpus",
        SPOT_MAX_GANG_GPUS,
        "spot capacity for large gangs is scarce; larger runs use reserved/on-demand (assumption)",
    )
    window = max(
        (float(c.metrics.get("wall_clock_days_with_failures") or 0.0) * 24 for c in training),
        default=0.0,
    )
    if window > horizon:
        longest = max(training, key=lambda c: c.metrics.get("wall_clock_days_with_failures") or 0)
        raise UserError(
            f"horizon_years: {spec.horizon_years:g} years is shorter than {longest.workload}'s "
            f"run on {longest.accelerator} ({window / 24:,.0f} days with failures); set "
            f"horizon_years to at least {window / HOURS_PER_YEAR:.2f}, or give it a shorter "
            "deadline"
        )
    log.add(
        "spot_overhead_fraction",
        SPOT_OVERHEAD,
        "lost work since the last checkpoint plus restart per reclaim (assumption)",
    )
    return Demand(
        accelerator=best.accelerator,
        baseline_gpus=baseline,
        burst_gpu_hours=burst,
        interruptible_fraction=small / burst if burst > 0 else 0.0,
        spot_overhead_fraction=SPOT_OVERHEAD,
        horizon_hours=horizon,
        burst_window_hours=window if window > 0 else None,
    )


class InfeasiblePlanError(UserError):
    """No accelerator sizes every workload within its constraints; says what would."""

    def __init__(self, advice: list[str]) -> None:
        self.advice = advice
        super().__init__("no plan meets every constraint:\n  " + "\n  ".join(advice))


def cost_and_design(
    spec: PlanSpec, best: Portfolio, cloud: dict[str, list[CloudOffer]], log: Assumptions
) -> tuple[Design | None, CostBreakdown, str, str | None, list[str]]:
    """(design, cost, deployment, provider, extra why-sentences) for the recommendation."""
    extra: list[str] = []
    design: Design | None = None
    if spec.deployment in ("on-prem", "both"):
        try:
            design = design_cluster(
                best.accelerator, best.peak_gpus, spec.on_prem, _need(best), log
            )
        except SitePowerError as exc:
            if spec.deployment == "on-prem":
                raise InfeasiblePlanError([f"on-prem on {best.accelerator}: {exc}"]) from exc
            extra.append(f"renting, because owning does not fit the site: {exc}")
        except UserError as exc:
            extra.append(f"no on-prem design: {exc}")
    on_prem = None
    if design is not None:
        on_prem = OnPremInputs(
            gpus=design.gpus,
            nodes=design.nodes,
            it_power_kw=design.power_kw["it"],
            facility_power_kw=design.power_kw["facility"],
            prefs=spec.on_prem,
            utilization=spec.expected_utilization,
            system=design.system if design.system != "generic-8gpu" else None,
        )
    demand = _demand(spec, best, log)
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
        if deployment == "cloud" and tco_total is not None:
            # The tornado should describe the recommended way of paying.
            cost = cost_breakdown(
                demand,
                Assumptions(),
                providers=spec.providers,
                regions=spec.regions,
                on_prem=on_prem,
                deployment="cloud",
            )
    provider = None
    if deployment == "cloud" and cost.mix_by_provider:
        # the provider the optimised mix buys most from: the one the headline priced
        provider = next(iter(cost.mix_by_provider))
        share = cost.mix_by_provider[provider] / sum(cost.mix_by_provider.values())
        extra.append(f"the optimised mix buys {share:.1%} of its cost from {provider}")
    elif deployment == "cloud" and cloud:
        provider = min(cloud, key=lambda p: cloud[p][0].on_demand_usd_per_hour or float("inf"))
    return design, cost, deployment, provider, extra
