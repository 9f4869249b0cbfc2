"""What a multi-team plan's cluster costs: on-prem TCO from its design, or renting it for the
horizon with the cheapest purchase mix (`plan.cost`); a mix is both pools' cost.

Apart from `fleet` so that the search and the words about it can rank candidates by cost
without the planner's orchestration.
"""

from __future__ import annotations

import math

from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost.breakdown import cost_breakdown
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.tco import NoOnPremPriceError, on_prem_tco
from gpufleet.plan.design.cluster import design_cluster
from gpufleet.plan.fleet_model import (
    ClusterCost,
    SearchResult,
)
from gpufleet.specs.fleet import FleetPlanSpec


def cost_key(r: SearchResult) -> float:
    total = r.cost.total_usd if r.cost else None
    return math.inf if total is None else total


def cluster_cost(
    spec: FleetPlanSpec, accelerator: str, gpus: int, utilization: float | None, log: Assumptions
) -> ClusterCost:
    """What `gpus` GPUs of `accelerator` cost over `horizon_years`: owned (on-prem TCO of the
    cluster design, per delivered GPU-hour at the simulated utilisation) and rented (the
    cheapest purchase mix for that many GPUs held every hour), as the deployment allows."""

    notes: list[str] = []
    years = spec.horizon_years
    use = min(1.0, max(0.01, utilization or 0.0))
    tco_total: float | None = None
    per_hour: float | None = None
    system = nodes = racks = it_kw = None
    if spec.deployment in ("on-prem", "both"):
        try:
            design = design_cluster(accelerator, gpus, spec.on_prem, None, log)
            system, nodes, racks = design.system, design.nodes, design.racks
            it_kw = design.power_kw["it"]
            tco = on_prem_tco(
                accelerator,
                design.gpus,
                design.nodes,
                design.power_kw["it"],
                design.power_kw["facility"],
                spec.on_prem,
                years,
                use,
                log,
                system=design.system if design.system != "generic-8gpu" else None,
            )
            tco_total, per_hour = tco["total"], tco["per_gpu_hour"]
        except (NoOnPremPriceError, UserError, ValueError) as exc:
            notes.append(f"no on-prem TCO: {str(exc).splitlines()[0]}")
    cloud_total: float | None = None
    method: str | None = None
    if spec.deployment in ("cloud", "both"):
        demand = Demand(
            accelerator=accelerator,
            baseline_gpus=gpus,
            burst_gpu_hours=0.0,
            interruptible_fraction=0.0,
            spot_overhead_fraction=0.0,
            horizon_hours=years * HOURS_PER_YEAR,
        )
        try:
            cost = cost_breakdown(
                demand, log, providers=spec.providers, regions=spec.regions, deployment="cloud"
            )
        except (UserError, ValueError) as exc:
            notes.append(f"no cloud price: {str(exc).splitlines()[0]}")
        else:
            if cost.mix.get("total_usd") is not None:
                cloud_total = cost.mix["total_usd"]
                method = (
                    "cheapest purchase mix (reserved and on-demand) for the GPUs held every hour"
                )
            elif cost.on_demand is not None:
                cloud_total, method = cost.on_demand, "on-demand list price, every hour"
            else:
                notes.append(f"no cloud price for {accelerator} in the catalog")
    deployment, total = _deployment(spec, tco_total, cloud_total)
    return ClusterCost(
        deployment=deployment,
        gpus=gpus,
        total_usd=total,
        on_prem_tco_usd=tco_total,
        cloud_usd=cloud_total,
        cloud_method=method,
        per_gpu_hour_usd=per_hour,
        system=system,
        nodes=nodes,
        racks=racks,
        it_power_kw=it_kw,
        notes=notes,
        horizon_years=years,
    )


def _deployment(
    spec: FleetPlanSpec, tco_total: float | None, cloud_total: float | None
) -> tuple[str, float | None]:
    """The deployment the spec asks for, or with `both` the cheaper one that has a price."""
    if spec.deployment == "on-prem":
        return "on-prem", tco_total
    if spec.deployment == "cloud":
        return "cloud", cloud_total
    options = [(t, d) for t, d in ((tco_total, "on-prem"), (cloud_total, "cloud")) if t is not None]
    if not options:
        return "on-prem", None
    total, deployment = min(options)
    return deployment, total


def combined_cost(spec: FleetPlanSpec, a: ClusterCost, b: ClusterCost) -> ClusterCost:
    """Two pools (a mix) as one cluster: totals add (unknown if either is), the deployment
    is chosen for both together, systems and notes are listed side by side."""

    def add(x: float | None, y: float | None) -> float | None:
        return None if x is None or y is None else x + y

    def add_int(x: int | None, y: int | None) -> int | None:
        return None if x is None or y is None else x + y

    tco, cloud = add(a.on_prem_tco_usd, b.on_prem_tco_usd), add(a.cloud_usd, b.cloud_usd)
    deployment, total = _deployment(spec, tco, cloud)
    systems = [x for x in (a.system, b.system) if x]
    return ClusterCost(
        deployment=deployment,
        gpus=add_int(a.gpus, b.gpus),
        total_usd=total,
        on_prem_tco_usd=tco,
        cloud_usd=cloud,
        cloud_method=a.cloud_method or b.cloud_method,
        per_gpu_hour_usd=None,  # two accelerators: see each pool's design
        system=" + ".join(systems) or None,
        nodes=add_int(a.nodes, b.nodes),
        racks=add_int(a.racks, b.racks),
        it_power_kw=add(a.it_power_kw, b.it_power_kw),
        notes=[*a.notes, *b.notes],
        horizon_years=a.horizon_years,
    )
