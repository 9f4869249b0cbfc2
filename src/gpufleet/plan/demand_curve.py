"""The plan's GPU demand hour by hour, and the owned fleet sized from it (issue 27).

A plan used to own the sum of every workload's GPUs: right for one run and a service, wrong
for a year of runs that do not overlap and a service that is busy by day and quiet by night.
Here the demand is an hourly curve over the horizon:

- **serving**: its GPUs at the peak rate (the planner sized them for `request_rate`), scaled
  hour by hour by the daily shape `daily_trough + (1 − daily_trough) · (1 + cos 2π(h − peak)/24)
  / 2` and rounded up to whole replicas (replicas are taken proportional to the rate: the
  queueing model's economies of scale make this slightly pessimistic at the trough);
- **training**: a run's GPUs from its `start` for its wall-clock time with failures.

The owned fleet is the curve's peak or a percentile of its hours (`on_prem.fleet_policy`).
What does not fit is rented: serving hour by hour above the fleet (it cannot wait), and a
training run whole when the fleet has not room for its gang for its whole run (a gang does not
run half on owned GPUs). Serving takes owned GPUs first; training runs are placed in start
order, each where the fleet has room for it at every hour of its run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpufleet.plan.cost.demand import busiest, whole_instances
from gpufleet.plan.model import DemandCurve, WorkloadChoice
from gpufleet.specs.plan import InferenceWorkload, PlanSpec, TrainingWorkload

HOURS_PER_DAY = 24
POLICY_PERCENTILE = {"p99": 99.0, "p95": 95.0, "p90": 90.0, "p75": 75.0, "p50": 50.0}


@dataclass(frozen=True)
class _Run:
    name: str
    gpus: int
    start_h: int
    end_h: int  # exclusive, clipped to the horizon
    gpu_hours: float


def _daily_shape(hours: int, trough: float, peak_hour: int) -> npt.NDArray[np.float64]:
    h = np.arange(hours) % HOURS_PER_DAY
    wave = (1.0 + np.cos(2.0 * np.pi * (h - peak_hour) / HOURS_PER_DAY)) / 2.0
    return trough + (1.0 - trough) * wave


def _serving(
    spec: PlanSpec, choices: Sequence[WorkloadChoice], hours: int
) -> npt.NDArray[np.float64]:
    workloads = {w.name: w for w in spec.workloads}
    total = np.zeros(hours)
    for c in choices:
        w = workloads.get(c.workload)
        if c.kind != "inference" or not isinstance(w, InferenceWorkload):
            continue
        tp = int(c.parallelism.get("tp", 1) or 1)
        replicas = max(1, c.gpus // tp)
        shape = _daily_shape(hours, w.daily_trough, w.peak_hour)
        total += tp * np.ceil(replicas * shape - 1e-9)
    return total


def _runs(spec: PlanSpec, choices: Sequence[WorkloadChoice], hours: int) -> list[_Run]:
    workloads = {w.name: w for w in spec.workloads}
    out: list[_Run] = []
    for c in choices:
        w = workloads.get(c.workload)
        if c.kind != "training" or not isinstance(w, TrainingWorkload):
            continue
        days = float(c.metrics.get("wall_clock_days_with_failures") or 0.0)
        start = min(hours, round(w.start / 3600.0))
        end = min(hours, start + max(1, math.ceil(days * HOURS_PER_DAY)))
        out.append(_Run(c.workload, c.gpus, start, end, c.gpu_hours or 0.0))
    return sorted(out, key=lambda r: (r.start_h, r.name))


def run_spans(spec: PlanSpec, choices: Sequence[WorkloadChoice]) -> dict[str, tuple[int, int]]:
    """Each training run's (start hour, end hour) as the curve places it, by workload name:
    the cost model counts the gangs that run together from these (`Demand.burst_spans`), so
    its GPUs at once are the curve's."""
    return {r.name: (r.start_h, r.end_h) for r in _runs(spec, choices, demand_hours(spec))}


def gpus_at_once(
    spec: PlanSpec, choices: Sequence[WorkloadChoice], gpus_per_instance: int = 1
) -> int:
    """GPUs in use at the busiest hour, each part in whole instances of `gpus_per_instance`
    as the cloud rents them (`Demand.on_instances`): the services' GPUs (they share
    instances, and are rented at their peak rate every hour) and the training gangs that
    run together then (`busiest`). At the curve's peak hour the services are at their peak
    rate, so with one GPU per instance this is the curve's peak wherever a run spans a day;
    the sum of every workload's GPUs only where every run overlaps."""
    n = gpus_per_instance
    serving = sum(c.gpus for c in choices if c.kind == "inference")
    runs = [r for r in _runs(spec, choices, demand_hours(spec)) if r.gpus > 0]
    gangs = [whole_instances(r.gpus, n) for r in runs]
    return whole_instances(serving, n) + busiest(gangs, [(r.start_h, r.end_h) for r in runs])


def demand_hours(spec: PlanSpec) -> int:
    return max(1, round(spec.horizon_years * 365 * HOURS_PER_DAY))


def total_curve(spec: PlanSpec, choices: Sequence[WorkloadChoice]) -> npt.NDArray[np.float64]:
    """GPUs demanded in each hour of the horizon."""
    hours = demand_hours(spec)
    curve = _serving(spec, choices, hours)
    for run in _runs(spec, choices, hours):
        curve[run.start_h : run.end_h] += run.gpus
    return curve


def fleet_for(curve: npt.NDArray[np.float64], policy: str) -> int:
    """The owned fleet the policy reads off the curve (whole GPUs, at least one)."""
    if policy == "peak" or curve.size == 0:
        return max(1, math.ceil(float(curve.max(initial=0.0))))
    return max(1, math.ceil(float(np.percentile(curve, POLICY_PERCENTILE[policy])) - 1e-9))


def held_at_once(curve: DemandCurve) -> int:
    """The most GPUs the owned fleet's work holds at once: the policy's own figure on the
    curve (its peak hour, or the percentile of the hours it owns up to; `fleet_for`), which
    the design rounds up to whole systems. An owned fleet with fewer cannot run the work."""
    if curve.policy == "peak" or curve.policy not in curve.percentile_gpus:
        return max(1, math.ceil(curve.peak_gpus))
    return max(1, math.ceil(curve.percentile_gpus[curve.policy] - 1e-9))


def split(
    spec: PlanSpec, choices: Sequence[WorkloadChoice], fleet_gpus: int, policy: str
) -> DemandCurve:
    """Place the demand on `fleet_gpus` owned GPUs and say what is rented."""
    hours = demand_hours(spec)
    serving = _serving(spec, choices, hours)
    runs = _runs(spec, choices, hours)
    owned = np.minimum(serving, fleet_gpus)
    serving_excess = float(np.sum(serving - owned))
    owned_serving = float(np.sum(owned))
    rented: list[str] = []
    rented_hours = 0.0
    owned_training = 0.0
    curve = serving.copy()
    for run in runs:
        curve[run.start_h : run.end_h] += run.gpus
        window = owned[run.start_h : run.end_h]
        if window.size and float(window.max()) + run.gpus <= fleet_gpus:
            owned[run.start_h : run.end_h] += run.gpus
            owned_training += run.gpu_hours
        else:
            rented.append(run.name)
            rented_hours += run.gpu_hours
    days = math.ceil(hours / HOURS_PER_DAY)
    padded = np.zeros(days * HOURS_PER_DAY)
    padded[:hours] = curve
    daily_max = padded.reshape(days, HOURS_PER_DAY).max(axis=1)
    return DemandCurve(
        policy=policy,
        fleet_gpus=fleet_gpus,
        peak_gpus=float(curve.max(initial=0.0)),
        mean_gpus=float(curve.mean()) if curve.size else 0.0,
        percentile_gpus={
            name: float(np.percentile(curve, q)) for name, q in POLICY_PERCENTILE.items()
        },
        owned_gpu_hours=owned_serving + owned_training,
        rented_gpu_hours=serving_excess + rented_hours,
        rented_serving_gpu_hours=serving_excess,
        rented_runs=rented,
        daily_max_gpus=[float(v) for v in daily_max],
    )
