"""The tornado: how the chosen deployment's total cost moves with one uncertain input.

A plan's headline cost rests on inputs nobody knows well (utilization, GPU prices, MFU,
failure rate, electricity). The tornado re-runs the purchase mix or the TCO with one input at
each end of a stated range, so the reader sees which guess matters; it reuses the other
modules' calculations with fresh, throwaway assumption logs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.cost.demand import HOURS_PER_YEAR, Demand
from gpufleet.plan.cost.mix import optimise_mix
from gpufleet.plan.cost.tco import OnPremInputs, delivered_gpu_hours, on_prem_tco


@dataclass(frozen=True)
class Factor:
    """One tornado input: multipliers of its base value at the low and the high end."""

    name: str
    low: float
    high: float


UTILIZATION = "utilization"
GPU_PRICE = "gpu_price"
MFU = "mfu"
FAILURE_RATE = "failure_rate"
ELECTRICITY = "electricity_price"
DEFAULT_FACTORS: tuple[Factor, ...] = (
    Factor(UTILIZATION, 0.8, 1.2),
    Factor(GPU_PRICE, 0.7, 1.3),
    Factor(MFU, 0.85, 1.15),
    Factor(FAILURE_RATE, 0.5, 2.0),
    Factor(ELECTRICITY, 0.5, 1.5),
)
# What moves a rented total: a rented GPU-hour costs the same however busy the rest of a fleet
# is, and its price includes the power, so utilisation and electricity apply to owning only
APPLIES: Mapping[str, frozenset[str]] = {
    "cloud": frozenset({GPU_PRICE, MFU, FAILURE_RATE}),
    "on-prem": frozenset({UTILIZATION, GPU_PRICE, MFU, FAILURE_RATE, ELECTRICITY}),
}
# GPU-hours of training at a failure-rate multiplier, relative to the base (1.0 at 1.0):
# a callable (e.g. from the goodput model) or the precomputed (at low, at high) pair.
FailureHours = Callable[[float], float] | tuple[float, float]


@dataclass(frozen=True)
class SensitivityInputs:
    """Everything one tornado recomputes: the deployment's cost at the base and each end.

    Cloud: the optimised mix total for the demand. On-prem: cost per delivered GPU-hour ×
    the GPU-hours to deliver (the fleet's at the base, `delivered_gpu_hours`: gpus × horizon
    × utilization, or the planned work it serves where that is more), so that a higher
    utilization means a smaller fleet for the same work, but never one smaller than
    the GPUs the work holds at once (`held_gpus`: a fleet set by its peak is no cheaper run
    busier). MFU and failure rate scale the burst (training) GPU-hours; the baseline is not
    scaled.
    """

    deployment: Literal["cloud", "on-prem"]
    demand: Demand
    prices: Mapping[str, float]
    on_prem: OnPremInputs | None = None
    failure_hours: FailureHours | None = None


def _failure_multiplier(inputs: SensitivityInputs, factor: Factor, setting: float) -> float:
    fh = inputs.failure_hours
    if setting == 1.0 or fh is None:
        return 1.0
    if callable(fh):
        return float(fh(setting))
    low, high = fh
    if setting == factor.low:
        return low
    if setting == factor.high:
        return high
    raise ValueError(f"failure-rate multiplier {setting} has no precomputed GPU-hours")


def _scenario_cost(inputs: SensitivityInputs, settings: Mapping[str, float], train: float) -> float:
    """Total cost with every input at its base × `settings`; training hours × `train`."""
    demand = inputs.demand
    scaled = replace(demand, burst_gpu_hours=demand.burst_gpu_hours * train)
    price = settings.get(GPU_PRICE, 1.0)
    if inputs.deployment == "cloud":
        prices = {k: v * price for k, v in inputs.prices.items()}
        return optimise_mix(scaled, prices, Assumptions())["total_usd"]
    op = inputs.on_prem
    if op is None:
        raise ValueError("an on-prem sensitivity needs on-prem inputs")
    prefs = op.prefs.model_copy(
        update={
            "electricity_usd_per_kwh": op.prefs.electricity_usd_per_kwh
            * settings.get(ELECTRICITY, 1.0)
        }
    )
    utilization = min(1.0, op.utilization * settings.get(UTILIZATION, 1.0))
    horizon_years = demand.horizon_hours / HOURS_PER_YEAR
    tco = on_prem_tco(
        demand.accelerator,
        op.gpus,
        op.nodes,
        op.it_power_kw,
        op.facility_power_kw,
        prefs,
        horizon_years,
        utilization,
        Assumptions(),
        system=op.system,
        storage_capex_usd=op.storage_capex_usd,
        network_capex_usd=op.network_capex_usd,
        gpu_price_scale=price,
    )
    owning = tco["total"]  # the fleet's (no rent above it is passed: it is added below)
    total_hours = demand.gpu_hours
    burst_share = demand.burst_gpu_hours / total_hours if total_hours > 0 else 0.0
    work = 1.0 + burst_share * (train - 1.0)  # the work, relative to the base
    # the owned fleet for this much work at this utilization, relative to the base's
    fleet = owned_fleet(inputs, utilization, work) / op.gpus if op.gpus else 1.0
    # demand above the owned fleet is rented: it moves with cloud prices and training hours
    rented = op.burst_rent_usd * price * train
    return owning * fleet + rented


def held_gpus(inputs: SensitivityInputs) -> int:
    """The fewest GPUs an owned fleet may have: the most its work holds at once, in whole
    nodes (`OnPremInputs.held_gpus`; else the demand's GPUs at the busiest hour, else the
    GPUs it holds every hour), at most the fleet. A gang runs whole: the 8B run of a
    144-GPU plan needs 128 GPUs at once, and +20 % utilization priced 120."""
    op = inputs.on_prem
    if op is None or op.gpus <= 0:
        return 0
    per_node = op.gpus / op.nodes if op.nodes > 0 else 1.0
    return min(op.gpus, math.ceil(_at_once(inputs) / per_node - 1e-9) * round(per_node))


def _at_once(inputs: SensitivityInputs) -> int:
    """The GPUs the owned fleet's work holds at once, before rounding to whole nodes."""
    op = inputs.on_prem
    if op is not None and op.held_gpus is not None:
        return op.held_gpus
    at_once = inputs.demand.gpus_at_once
    return at_once if at_once is not None else inputs.demand.baseline_gpus


def owned_fleet(inputs: SensitivityInputs, utilization: float, work: float = 1.0) -> float:
    """The owned GPUs that deliver `work` × the base's GPU-hours at `utilization`: a less
    busy fleet, or more work, needs more GPUs, a busier one or less work fewer, but never
    fewer than `held_gpus`, so a fleet set by its peak is no cheaper when run busier or
    when its runs take fewer GPU-hours (a faster run holds the same gang). How busy is
    `busy_share`: the utilization, or the share of its hours its planned work fills where
    that is more."""
    op = inputs.on_prem
    if op is None:
        raise ValueError("an on-prem sensitivity needs on-prem inputs")
    return max(
        op.gpus * busy_share(inputs) / busy_share(inputs, utilization) * work,
        float(held_gpus(inputs)),
    )


def busy_share(inputs: SensitivityInputs, utilization: float | None = None) -> float:
    """The share of its hours the base fleet delivers at `utilization` (the stated one when
    None): `delivered_gpu_hours`, the TCO's own rule, ÷ the hours it holds. The planned work
    it serves is a floor, so a fleet that work holds every hour (a service sized for its
    request rate) is as busy at any stated utilization, and needs no more GPUs at a lower
    one: chat-70b's 8 GPUs, all serving every hour, priced 10 at -20 %."""
    op = inputs.on_prem
    if op is None or op.gpus <= 0:
        raise ValueError("an on-prem sensitivity needs on-prem inputs")
    hours = inputs.demand.horizon_hours
    u = op.utilization if utilization is None else utilization
    served = op.served_gpu_hours(inputs.demand.gpu_hours)
    return delivered_gpu_hours(op.gpus, hours, u, served) / (op.gpus * hours)


def _fleet_labels(inputs: SensitivityInputs, factor: Factor) -> tuple[str, str, str]:
    """(low label, high label, note) of the on-prem utilization row: the owned fleet each
    end prices, and what the row varies, from the numbers it uses."""
    op = inputs.on_prem
    if op is None:
        raise ValueError("an on-prem sensitivity needs on-prem inputs")
    held = held_gpus(inputs)
    labels: list[str] = []
    for setting in (factor.low, factor.high):
        u = min(1.0, op.utilization * setting)
        at_floor = op.gpus * busy_share(inputs) / busy_share(inputs, u) < held
        labels.append(
            f"{_label(factor.name, setting)}: {owned_fleet(inputs, u):,.0f} GPUs"
            + (" (no fewer: in use at once)" if at_floor else "")
        )
    need = _at_once(inputs)
    nodes = f", {held:,} in whole nodes" if need < held else ""
    # the share of its hours the planned work fills: where it is above an end's utilization,
    # the fleet is that busy there whatever the stated utilization, and the note says so
    floor = busy_share(inputs, 0.0)
    low, high = (min(1.0, op.utilization * x) for x in (factor.low, factor.high))
    if floor >= high:
        note = (
            f"the owned fleet that delivers the same GPU-hours: its {op.gpus:,} GPUs, whose "
            f"planned work fills {floor:.0%} of their hours, more than the utilization at "
            f"either end ({low:.0%}, {high:.0%}), never fewer than the {need:,} GPUs its work "
            f"holds at once{nodes}"
        )
    else:
        busy = (
            f"the utilization, or the {floor:.0%} of its hours its planned work fills where "
            "that is more"
            if floor > low
            else "the utilization"
        )
        note = (
            f"the owned fleet that delivers the same GPU-hours: {op.gpus:,} GPUs × "
            f"{busy_share(inputs):.0%} ÷ {busy}, never fewer than the {need:,} GPUs its "
            f"work holds at once{nodes}"
        )
    return labels[0], labels[1], note


def _label(factor: str, multiplier: float) -> str:
    if factor == FAILURE_RATE:
        return f"×{multiplier:g}"
    return f"{(multiplier - 1.0) * 100:+.0f} %"


def sensitivity(
    inputs: SensitivityInputs,
    factors: Sequence[Factor] = DEFAULT_FACTORS,
    log: Assumptions | None = None,
) -> list[dict[str, float | str]]:
    """Tornado rows: the deployment's total cost with one factor at its low and high end.

    utilization × (1 ± 20 %) (capped at 1; on-prem only: cloud rents the hours it uses; its
    labels name the owned fleet each end prices and its `note` what the row varies), GPU
    price × (1 ± 30 %) (cloud prices or the systems' purchase price), MFU × (1 ± 15 %)
    (training GPU-hours ÷ the multiplier), failure rate × 0.5 / × 2 (training GPU-hours ×
    `failure_hours`; the row is left out when it is not given), electricity × (1 ± 50 %)
    (on-prem only). Factors that do not apply to the deployment (`APPLIES`) are left out
    rather than shown as flat rows. Each row: factor, low_label, high_label, low_usd,
    high_usd, base_usd, swing_usd = |high − low|; rows ordered by swing, largest first.
    """
    base = _scenario_cost(inputs, {}, 1.0)
    rows: list[dict[str, float | str]] = []
    applies = APPLIES[inputs.deployment]
    for factor in factors:
        if factor.name not in applies:
            continue
        if factor.name == FAILURE_RATE and inputs.failure_hours is None:
            if log is not None:
                log.add(
                    "sensitivity: failure rate",
                    "left out",
                    "no goodput overhead was supplied for failure-rate multipliers",
                )
            continue
        ends: list[float] = []
        for setting in (factor.low, factor.high):
            if factor.name == MFU:
                ends.append(_scenario_cost(inputs, {}, 1.0 / setting))
            elif factor.name == FAILURE_RATE:
                train = _failure_multiplier(inputs, factor, setting)
                ends.append(_scenario_cost(inputs, {}, train))
            else:
                ends.append(_scenario_cost(inputs, {factor.name: setting}, 1.0))
        row: dict[str, float | str] = {
            "factor": factor.name,
            "low_label": _label(factor.name, factor.low),
            "high_label": _label(factor.name, factor.high),
            "low_usd": ends[0],
            "high_usd": ends[1],
            "base_usd": base,
            "swing_usd": abs(ends[1] - ends[0]),
        }
        if factor.name == UTILIZATION and inputs.deployment == "on-prem":
            # what an owned fleet's utilization moves: its size for the same work
            row["low_label"], row["high_label"], row["note"] = _fleet_labels(inputs, factor)
        rows.append(row)
    rows.sort(key=lambda r: -float(r["swing_usd"]))
    if log is not None:
        log.add(
            "sensitivity method",
            f"{inputs.deployment} total cost, one factor at a time",
            "gpufleet (derived): utilization ±20 %, GPU price ±30 %, MFU ±15 %, failure rate "
            "×0.5/×2, electricity ±50 % (docs/design/0007-cost-model.md)",
        )
        for row in rows:
            if "note" in row:
                log.add(
                    f"sensitivity: {row['factor']}",
                    f"{row['low_label']}; {row['high_label']}",
                    f"gpufleet (derived): {row['note']}",
                )
    return rows
