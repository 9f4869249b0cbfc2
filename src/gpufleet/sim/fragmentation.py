"""The fragmentation experiment of docs/experiments/fragmentation.md: the "fill" experiment of
Weng et al. (FGD, ATC '23) on the bundled openb cluster, run for any placement policy.

Pods sampled with replacement from the openb pod list arrive one by one and are placed at
once by the policy, with no departures, until the requested GPUs reach `max_arrived` (1.3) ×
the cluster's GPUs. Per policy: the allocated share of the cluster against the arrived share
(the curve), and at 100 % arrived the allocated share, the GPUs left unallocated, the pods
that found no room, and the unallocated GPUs against the best of the paper's baselines.
Apart from `sim.experiments` (which lists the experiments and runs the utilisation claims)
because it places pods directly, without the simulator's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from gpufleet.cluster import MILLI, Cluster, Node, State
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched.fgd import Fgd
from gpufleet.sched.framework import PlacementPlugin
from gpufleet.sched.quota import placements_milli, request_milli
from gpufleet.sched.registry import resolve
from gpufleet.sched.requests import (
    FRACTION_STEPS,
    Request,
    fraction_eighths,
    requests_for,
    whole_gpus,
)
from gpufleet.sim.fit_baselines import BASELINES, baseline
from gpufleet.sim.traces import bundled_openb
from gpufleet.sim.workload import Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES

# The paper's baselines (sim.fit_baselines), FGD, and gpufleet's default placement.
FRAGMENTATION_POLICIES: Final = (
    "random-fit",
    "best-fit",
    "dot-product",
    "gpu-packing",
    "fgd",
    "default",
)
POOL: Final = "any-gpu"  # the one accelerator of a pooled cluster (no pod names a GPU type)
MAX_ARRIVED: Final = 1.3  # the paper's curves run past the cluster's capacity
_CHUNK: Final = 4096  # pods drawn at a time


@dataclass(frozen=True, slots=True)
class _Pod:
    """One pod of the trace as the placement sees it: its job, its requests (one per
    acceptable accelerator, in cluster order) and what it asks for, in thousandths of a GPU."""

    job: JobSpec
    requests: tuple[Request, ...]
    milli: int


@dataclass(frozen=True)
class FillSetup:
    """The cluster and pods of a fill experiment, shared by every policy."""

    cluster: Cluster
    pods: tuple[_Pod, ...]
    pooled: bool  # every node under one accelerator name: no pod names a GPU type
    skipped: int  # jobs of the trace that ask for no GPU, or for MIG slices (not placed)

    @property
    def capacity_milli(self) -> int:
        return self.cluster.gpu_count * MILLI


def fill_setup(workload: Workload) -> FillSetup:
    """The trace's own nodes as a flat cluster (every node shares GPUs by fraction, as openb's
    do), and each GPU pod's requests.

    When no pod names a GPU type (the bundled openb pod list: `gpu_spec` is empty on every
    row), every node is put under one accelerator name, so a policy compares all nodes for
    every pod, as the paper's scheduler does; otherwise nodes keep their types, a pod's
    requests are its acceptable types in cluster order, and the first that places wins
    (gpufleet's flavor order).
    """
    if not workload.nodes:
        raise UserError("the fill experiment needs a workload that lists its nodes (openb)")
    jobs = [j for j in workload.jobs if j.gpus or j.gpu_fraction]
    pooled = not any(j.accelerators for j in jobs)
    nodes = tuple(
        Node(
            n.name,
            POOL if pooled else n.accelerator,
            n.gpus,
            capacity=n.capacity,
            fractions=True,
        )
        for n in workload.nodes
    )
    cluster = Cluster(("node",), nodes, name="openb-fill")
    accelerators = list(cluster.accelerators)
    pods: list[_Pod] = []
    for job in jobs:
        spec = job.to_job_spec()
        requests = tuple(requests_for(spec, accelerators))
        if requests:
            milli = request_milli(requests[0])
        elif job.gpus:  # no acceptable type here: it arrives, and always fails
            milli = job.gpus * job.workers * MILLI
        else:  # a share, rounded up to eighths as `requests_for` does
            milli = fraction_eighths(job.gpu_fraction or 1.0) * MILLI // FRACTION_STEPS
        pods.append(_Pod(spec, requests, milli))
    if not pods:
        raise UserError("the workload has no pods asking for whole GPUs or GPU fractions")
    return FillSetup(cluster, tuple(pods), pooled, len(workload.jobs) - len(pods))


def arrivals(setup: FillSetup, seed: int, max_arrived: float = MAX_ARRIVED) -> list[int]:
    """Pod indexes drawn uniformly with replacement (`default_rng(seed)`) until their
    requests reach `max_arrived` × the cluster's GPUs; the same for every policy."""
    rng = np.random.default_rng(seed)
    goal = max_arrived * setup.capacity_milli
    pods = setup.pods
    out: list[int] = []
    total = 0
    while total < goal:
        for i in rng.integers(0, len(pods), size=_CHUNK):
            out.append(int(i))
            total += pods[int(i)].milli
            if total >= goal:
                break
    return out


def fill_policy(name: str, seed: int = 0) -> tuple[PlacementPlugin, bool]:
    """The placement of a policy by name — a paper baseline (`sim.fit_baselines`) or a
    gpufleet profile's placement plugin — and whether it rounds shares up to whole GPUs."""
    if name in BASELINES:
        return baseline(name, seed), False
    if name not in PROFILES:
        raise UnknownNameError("policy", name, [*BASELINES, *PROFILES])
    resolved = resolve(name)
    return resolved.placement, resolved.profile.whole_gpus_only


@dataclass(frozen=True)
class FillResult:
    """One policy's fill: the curve and the state at 100 % arrived and at the end."""

    curve: tuple[tuple[float, float], ...]  # (arrived, allocated) shares of the cluster's GPUs
    at_full: Mapping[str, float]
    at_end: Mapping[str, float]
    seconds: float


def fill(
    setup: FillSetup,
    sequence: Sequence[int],
    plugin: PlacementPlugin,
    *,
    whole_only: bool = False,
    points: int = 20,
) -> FillResult:
    """Place each arriving pod at once (no departures); a pod that fits nowhere fails and is
    skipped. `plugin.observe` sees one request per pod of the trace (FGD learns the mix).

    Arrived and allocated count what the pods ask for (shares in gpufleet's eighths); a
    whole-GPU-only policy holds a whole GPU for a share but is credited the share, so the
    rest of that GPU shows as unallocated (`held_share` says what it holds).
    """
    cluster = setup.cluster
    capacity = setup.capacity_milli
    convert: Callable[[Sequence[Request]], list[Request]] = whole_gpus if whole_only else list
    pods = [(p, tuple(convert(p.requests))) for p in setup.pods]
    plugin = plugin.observe([reqs[0] for _, reqs in pods if reqs])
    state = State(cluster)
    total = sum(setup.pods[i].milli for i in sequence)
    # the k-th point is taken once the arrived requests reach k/points of the whole sequence
    thresholds = [-(-total * k // points) for k in range(1, points + 1)]
    curve: list[tuple[float, float]] = []
    arrived = allocated = held = failed = 0
    at_full: dict[str, float] | None = None
    t0 = time.perf_counter()
    for k, index in enumerate(sequence):
        pod, requests = pods[index]
        arrived += pod.milli
        for request in requests:
            placed = plugin.place(state, pod.job, request)
            if placed.status.ok:
                state.allocate(f"pod-{k}", *(c for p in placed.placements for c in p.claims()))
                allocated += pod.milli
                held += placements_milli(cluster, placed.placements)
                break
        else:
            failed += 1
        while len(curve) < points and arrived >= thresholds[len(curve)]:
            curve.append((arrived / capacity, allocated / capacity))
        if at_full is None and arrived >= capacity:
            at_full = _snapshot(
                capacity, arrived=arrived, allocated=allocated, held=held, failed=failed, pods=k + 1
            )
    seconds = time.perf_counter() - t0
    end = _snapshot(
        capacity,
        arrived=arrived,
        allocated=allocated,
        held=held,
        failed=failed,
        pods=len(sequence),
    )
    return FillResult(tuple(curve), at_full if at_full is not None else end, end, seconds)


def _snapshot(
    capacity: int, *, arrived: int, allocated: int, held: int, failed: int, pods: int
) -> dict[str, float]:
    return {
        "arrived_share": arrived / capacity,
        "allocated_share": allocated / capacity,
        "held_share": held / capacity,
        "unallocated_gpus": (capacity - allocated) / MILLI,
        "failed_pods": failed,
        "pods_arrived": pods,
    }


def fragmentation(
    profiles: Sequence[str] = FRAGMENTATION_POLICIES,
    seed: int = 0,
    points: int = 20,
    *,
    max_arrived: float = MAX_ARRIVED,
    workload: Workload | None = None,
    on_policy: Callable[[str, float], None] | None = None,
) -> dict[str, Any]:
    """The FGD paper's fill experiment on the bundled openb trace (or `workload`, which must
    list its nodes), one result per policy; see the module doc and
    docs/experiments/fragmentation.md.

    `profiles` are the paper's baselines (`random-fit`, `best-fit`, `dot-product`,
    `gpu-packing`) or gpufleet profiles (their placement plugin: `default`, `fgd`, ...).
    Every policy sees the same pods in the same order (drawn with `seed`; `random-fit`
    also draws from `seed`). `points` curve points, evenly spaced in arrived requests up
    to `max_arrived` × the cluster's GPUs. `on_policy(name, seconds)` is called after each
    policy (progress). Returns `results` keyed by policy: `curve` ([arrived, allocated]
    shares of the cluster's GPUs), at 100 % arrived `allocated_share`, `held_share`,
    `unallocated_gpus`, `failed_pods`, `pods_arrived`, `arrived_share`; the same at the
    end with an `_end` suffix; `unallocated_vs_best_baseline` (and `_end`): unallocated
    GPUs ÷ those of the best paper baseline run (`best_baseline`; without one, the best
    policy that is not FGD; None when every policy run is FGD).
    """
    if points < 1:
        raise UserError(f"points must be at least 1, got {points}")
    if max_arrived < 1:
        raise UserError(f"max_arrived must be at least 1 (100 % of the GPUs), got {max_arrived}")
    plugins = {name: fill_policy(name, seed) for name in dict.fromkeys(profiles)}
    if workload is None:
        workload = bundled_openb()
        source = "bundled:openb (openb_pod_list_default, openb_node_list_gpu_node)"
    else:
        source = workload.report.source
    setup = fill_setup(workload)
    sequence = arrivals(setup, seed, max_arrived)
    results: dict[str, dict[str, Any]] = {}
    timings: dict[str, float] = {}
    kinds: dict[str, str] = {}
    for name, (plugin, whole_only) in plugins.items():
        outcome = fill(setup, sequence, plugin, whole_only=whole_only, points=points)
        row: dict[str, Any] = dict(outcome.at_full)
        row.update({f"{k}_end": v for k, v in outcome.at_end.items()})
        row["curve"] = [[a, b] for a, b in outcome.curve]
        results[name] = row
        timings[name] = outcome.seconds
        kinds[name] = (
            "paper baseline"
            if name in BASELINES
            else "fgd"
            if isinstance(plugin, Fgd)
            else "gpufleet profile"
        )
        if on_policy is not None:
            on_policy(name, outcome.seconds)
    best = _best(results, kinds, "unallocated_gpus")
    best_end = _best(results, kinds, "unallocated_gpus_end")
    for row in results.values():
        row["unallocated_vs_best_baseline"] = _ratio(row, results, best, "unallocated_gpus")
        row["unallocated_vs_best_baseline_end"] = _ratio(
            row, results, best_end, "unallocated_gpus_end"
        )
    return {
        "experiment": "fragmentation",
        "scenario": _fill_scenario(
            setup,
            workload,
            source=source,
            seed=seed,
            points=points,
            max_arrived=max_arrived,
            sequence=sequence,
        ),
        "policies": kinds,
        "best_baseline": best,
        "best_baseline_end": best_end,
        "results": results,
        "timings_s": timings,
    }


def _best(
    results: Mapping[str, Mapping[str, Any]], kinds: Mapping[str, str], key: str
) -> str | None:
    """The reference policy: the paper baseline with the fewest unallocated GPUs, or, when no
    paper baseline was run, the best policy that is not FGD; None when there is none."""
    pool = [n for n in results if n in BASELINES] or [n for n in results if kinds[n] != "fgd"]
    runs = [(float(results[n][key]), n) for n in pool]
    return min(runs)[1] if runs else None


def _ratio(
    row: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]], best: str | None, key: str
) -> float | None:
    if best is None:
        return None
    reference = float(results[best][key])
    if reference == 0:
        return None if float(row[key]) else 1.0
    return float(row[key]) / reference


def _fill_scenario(
    setup: FillSetup,
    workload: Workload,
    *,
    source: str,
    seed: int,
    points: int,
    max_arrived: float,
    sequence: Sequence[int],
) -> dict[str, Any]:
    types: dict[str, int] = {}
    for n in workload.nodes:
        types[n.accelerator] = types.get(n.accelerator, 0) + n.gpus
    fractions = sum(1 for p in setup.pods if p.requests and p.requests[0].kind == "fraction")
    exact = sum(j.total_gpus for j in workload.jobs if j.gpus or j.gpu_fraction)
    asked = sum(p.milli for p in setup.pods) / MILLI
    return {
        "source": source,
        "nodes": len(setup.cluster.nodes),
        "gpus": setup.cluster.gpu_count,
        "gpus_by_type": dict(sorted(types.items())),
        "gpu_types_pooled": setup.pooled,
        "trace_pods": len(setup.pods),
        "trace_pods_fractional": fractions,
        "trace_jobs_not_placed": setup.skipped,
        "trace_gpus_requested": round(exact, 3),
        "trace_gpus_requested_in_eighths": asked,
        "fraction_step": "1/8 GPU (gpufleet's share granularity; the trace has thousandths)",
        "seed": seed,
        "points": points,
        "max_arrived": max_arrived,
        "pods_drawn": len(sequence),
        "dimensions": "GPU only (no CPU or memory)",
    }


__all__ = [
    "FRAGMENTATION_POLICIES",
    "FillResult",
    "FillSetup",
    "arrivals",
    "fill",
    "fill_policy",
    "fill_setup",
    "fragmentation",
]
