"""Multi-team capacity planning by simulation: the smallest cluster where every team gets its
service level, its cost, quotas, and how much the scheduling policy changes the answer.

Method (docs/design/0012-multi-tenant-plan.md):

1. Each candidate accelerator gets its services sized by the inference estimator and its
   MIG GPUs cut (`plan.fleet_setup`), then a bisection over whole nodes (`plan.
   fleet_search`) with every size simulated on the same seeds 0 … n−1 (common random
   numbers: the same workloads at every size and for every profile), judged by every
   team's targets (`fleet_search.assess`).
   With `mixes` (default) and services, each ordered pair of candidates is searched as
   well: services on one accelerator (a pool fixed at their peak), training and batch on
   the other (the size searched; `fleet_setup.mix_candidate`).
2. Each candidate's smallest passing cluster is priced (on-prem TCO from the cluster
   design, or renting it for the horizon with the cheapest purchase mix; `plan.cost`; a
   mix is both pools' cost), and the cheapest is recommended.
3. On the recommended candidate: the same search for each comparison profile
   (`k8s-default` by default), and for training arrivals × (1 ± `arrival_sensitivity`);
   quotas derived from each team's simulated use at the answer, then verified by running
   the answer's size with exactly those quotas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpufleet import __version__
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_duration
from gpufleet.plan.cost.breakdown import cost_breakdown
from gpufleet.plan.cost.demand import Demand
from gpufleet.plan.cost.tco import NoOnPremPriceError, on_prem_tco
from gpufleet.plan.design.cluster import design_cluster
from gpufleet.plan.fleet_model import (
    Capacity,
    ClusterCost,
    FleetPlan,
    FleetRecommendation,
    Interval,
    PolicyComparison,
    QueuePolicy,
    Quotas,
    SearchResult,
    Sensitivity,
    Service,
    SizePoint,
    TeamInput,
    TeamQuota,
    mix_label,
)
from gpufleet.plan.fleet_search import Bisection, Evaluator, run_searches, runner
from gpufleet.plan.fleet_setup import (
    Candidate,
    ServiceSizing,
    TraceInput,
    Variant,
    make_variant,
    mix_candidate,
    offered_load,
    prepare_candidate,
    read_team_trace,
    service_label,
)
from gpufleet.plan.fleet_sim import SeedResult
from gpufleet.plan.model import Assumption
from gpufleet.sim.compare import CONFIDENCE
from gpufleet.sim.engine import SimConfig
from gpufleet.specs.fleet import FleetPlanSpec, PlanInferenceEntry, PlanTrainingEntry
from gpufleet.specs.profiles import PROFILES

DEFAULT_SEEDS = 5
# The first size tried: the offered load (mean GPUs the jobs ask for) at this utilisation.
GUESS_UTILISATION = 0.8
# Without max_gpus the search stops at this multiple of the offered load.
MAX_LOAD_MULTIPLE = 8
HOURS_PER_YEAR = 8_760.0
# the steps of a search started from an informed guess (the arrival sensitivity's)
INFORMED_GROW = 1.1
INFORMED_SHRINK = 0.9
QUOTA_METHOD = (
    "Kueue-style: the guarantees partition the cluster and every team is in one cohort, "
    "lending its idle guarantee and borrowing up to its burst limit. Guaranteed = the "
    "team's services at their peak (MIG slices by compute share, rounded up) + its share of "
    "the remaining GPUs in proportion to the mean GPUs its training and batch jobs held "
    "over [warmup, horizon] at the recommended size (mean over seeds; whole GPUs by largest "
    "remainder). Burst limit = the 99th percentile over time of all the GPUs it held (the "
    "largest over seeds, rounded up), at least its guarantee, at most the cluster. Sizing "
    "ran with open quotas (each team guaranteed the whole cluster, fair share by weight); "
    "the recommended size is then simulated again with exactly these quotas (same seeds). "
    "When a team misses a target with them, two more splits are tried: the same "
    "guarantees with no burst limit, then guarantees in proportion to each team's 99th "
    "percentile of GPUs held (its peaks) with no burst limit; when none meets every target, "
    "the same at up to three larger sizes, each 5 % of the nodes apart. In a mix, "
    "the service pool is split among the teams with services (their peaks, the rest in "
    "proportion to them) and the training pool by training use alone; the burst limit "
    "caps the training pool."
)


@dataclass(frozen=True)
class QuotaRule:
    """One way to split the cluster into quotas (`_quotas`), tried in `QUOTA_RULES` order."""

    name: str
    by_peak: bool  # training guarantees by the 99th percentile held, not the mean
    open_burst: bool  # no burst limit (the whole cluster)
    text: str


QUOTA_RULES = (
    QuotaRule("mean", by_peak=False, open_burst=False, text="guarantees by mean use, burst at p99"),
    QuotaRule(
        "mean-open", by_peak=False, open_burst=True, text="guarantees by mean use, no burst limit"
    ),
    QuotaRule(
        "peak-open", by_peak=True, open_burst=True, text="guarantees by peak use, no burst limit"
    ),
)
QUOTA_LARGER_SIZES = 3  # sizes beyond the answer tried when no split meets the targets there
QUOTA_SIZE_STEP = 0.05  # ... each this share of the answer's nodes apart (at least one node)

Tick = Callable[[int], None]


class InfeasibleFleetError(UserError):
    """No candidate accelerator can run every team's jobs; says why per accelerator."""

    def __init__(self, advice: list[str]) -> None:
        self.advice = advice
        super().__init__(
            "no candidate accelerator can run every team's jobs:\n  " + "\n  ".join(advice)
        )


def plan_fleet(
    spec: FleetPlanSpec,
    base_dir: Path,
    *,
    seeds: int = DEFAULT_SEEDS,
    workers: int = 1,
    on_submit: Tick | None = None,
    on_done: Tick | None = None,
    ray_address: str | None = None,
) -> FleetPlan:
    """Size, price and check a shared cluster for `spec` (see the module docstring).

    `base_dir` resolves trace paths; `on_submit(n)` / `on_done(n)` count simulations as
    they are queued and finish (a progress bar). The result does not depend on `workers`,
    nor on `ray_address` (the simulations run on that Ray cluster instead of a local pool:
    `fleet_search.ray_runner`).
    """
    if seeds < 1:
        raise UserError(f"--seeds: must be at least 1, got {seeds}")
    log = Assumptions()
    traces = [read_team_trace(t, base_dir) for t in spec.teams if t.trace is not None]
    candidates = [prepare_candidate(spec, acc, traces, log) for acc in spec.accelerators]
    feasible = [c for c in candidates if c.feasible] + _mixes(spec, candidates, traces)
    if not feasible:
        raise InfeasibleFleetError([p for c in candidates for p in c.problems])
    seed_list = list(range(seeds))
    with runner(workers, on_done, ray_address) as run:
        ev = Evaluator(spec, run, seed_list, on_submit)
        base = {c.label: make_variant(spec, c, traces, profile=spec.profile) for c in feasible}
        searches = {
            label: (v, _bisection(spec, _candidate(feasible, label), v))
            for label, v in base.items()
        }
        run_searches(ev, searches)
        results = [_search_result(spec, c, ev, searches[c.label], log) for c in feasible]
        results += [_infeasible(c) for c in candidates if not c.feasible]
        met = [r for r in results if r.status == "met"]
        if not met:
            return _unmet_plan(spec, log, results, traces, ev)
        rec = min(
            met,
            key=lambda r: (
                _cost_key(r),
                r.gpus or 0,
                r.service_accelerator is not None,  # at a tie, one accelerator is simpler
                spec.accelerators.index(r.accelerator),
            ),
        )
        c = _candidate(feasible, rec.label)
        assert rec.nodes is not None
        n = rec.nodes
        v0 = base[rec.label]
        extra = _extra_searches(spec, c, traces, base_fails_below=_fails(ev, v0, n - 1), nodes=n)
        # the first split, and the queue policies with it, join the first round of the extra
        # searches (more to run at once): the split usually meets the targets
        split = _quotas(spec, c, ev.results[(v0.key, n)], rec.gpus or 0).model_copy(
            update={"nodes": n}
        )
        guess = [_quota_variant(spec, c, traces, split)]
        guess += list(_queue_variants(spec, c, traces, split).values())
        run_searches(ev, extra, also=[(v, n) for v in guess])
        quotas = _search_quotas(spec, c, traces=traces, ev=ev, v0=v0, nodes=n)
        queue = _queue_policies(spec, c, traces=traces, ev=ev, quotas=quotas, nodes=n)
        more = {key: _search_result(spec, c, ev, vb, log) for key, vb in extra.items()}
        results += list(more.values())
        policies = [
            _policy(r, extra[key][1], rec) for key, r in more.items() if key.startswith("profile:")
        ]
        sens = [_sensitivity(more[k], extra[k][1]) for k in ("down", "up") if k in more]
    point = ev.points[(v0.key, n)]
    sentences = _sensitive_to(rec, point, ev.points.get((v0.key, n - 1)), policies, sens)
    return FleetPlan(
        name=spec.name,
        generated_by=f"gpufleet {__version__}",
        method=_method(spec, seed_list, base[feasible[0].label]),
        teams=_team_inputs(spec, traces, base[feasible[0].label]),
        candidates=results,
        recommendation=FleetRecommendation(
            accelerator=rec.accelerator,
            profile=spec.profile,
            nodes=n,
            gpus=rec.gpus or 0,
            deployment=rec.cost.deployment if rec.cost else spec.deployment,
            cost_usd=rec.cost.total_usd if rec.cost else None,
            why=_why(rec, met),
            service_accelerator=rec.service_accelerator,
            service_gpus=rec.service_gpus,
        ),
        capacity=_capacity(c, ev.results[(v0.key, n)], point),
        quotas=quotas,
        policies=policies,
        queue_policies=queue,
        queue_policy_summary=_queue_summary(queue),
        sensitivity=sens,
        sensitive_to=sentences,
        assumptions=[Assumption(name=a.name, value=a.value, source=a.source) for a in log.frozen()],
    )


@dataclass(frozen=True)
class Sweep:
    """Fixed sizes of one accelerator, every seed each (a what-if; benchmarks time it)."""

    accelerator: str
    points: list[SizePoint]
    simulations: int
    jobs_per_seed: float
    wall_s: float
    cpu_s: float  # CPU seconds of the simulations themselves, summed over workers


def sweep(
    spec: FleetPlanSpec,
    base_dir: Path,
    nodes: Sequence[int],
    *,
    accelerator: str | None = None,
    seeds: int = DEFAULT_SEEDS,
    workers: int = 1,
    on_done: Tick | None = None,
    ray_address: str | None = None,
) -> Sweep:
    """Every size in `nodes` on seeds 0 … `seeds` − 1 under the spec's profile, no search
    (on the Ray cluster at `ray_address` when given, as `plan_fleet`)."""
    import time

    t0 = time.perf_counter()
    log = Assumptions()
    traces = [read_team_trace(t, base_dir) for t in spec.teams if t.trace is not None]
    c = prepare_candidate(spec, accelerator or spec.accelerators[0], traces, log)
    if not c.feasible:
        raise InfeasibleFleetError(list(c.problems))
    v = make_variant(spec, c, traces, profile=spec.profile)
    with runner(workers, on_done, ray_address) as run:
        ev = Evaluator(spec, run, list(range(seeds)), staged=False)
        ev.evaluate([(v, n) for n in nodes])
        cpu = run.cpu_s
        runs = run.runs
    points = [ev.points[(v.key, n)] for n in nodes]
    return Sweep(
        accelerator=c.accelerator,
        points=points,
        simulations=runs,
        jobs_per_seed=float(np.mean([p.jobs_per_seed for p in points])),
        wall_s=time.perf_counter() - t0,
        cpu_s=cpu,
    )


def _candidate(cands: Sequence[Candidate], label: str) -> Candidate:
    return next(c for c in cands if c.label == label)


def _mixes(
    spec: FleetPlanSpec, candidates: Sequence[Candidate], traces: Sequence[TraceInput]
) -> list[Candidate]:
    """Every feasible mix: services on one candidate, training and batch on another (only
    when the spec has both kinds of work and does not turn mixes off)."""
    jobs = any(isinstance(e, PlanTrainingEntry) for t in spec.teams for e in t.workloads) or any(
        j.kind != "inference" for t in traces for j in t.jobs
    )
    if not spec.mixes or not jobs:
        return []
    out = []
    for training in candidates:
        for services in candidates:
            mix = mix_candidate(training, services)
            if mix is not None and mix.feasible:
                out.append(mix)
    return out


def _cost_key(r: SearchResult) -> float:
    total = r.cost.total_usd if r.cost else None
    return math.inf if total is None else total


def _fails(ev: Evaluator, v: Variant, nodes: int) -> bool:
    point = ev.points.get((v.key, nodes))
    return point is not None and not point.passed


def _extra_searches(
    spec: FleetPlanSpec,
    c: Candidate,
    traces: Sequence[TraceInput],
    *,
    base_fails_below: bool,
    nodes: int,
) -> dict[str, tuple[Variant, Bisection]]:
    """The searches around the answer (`nodes`): each comparison profile, and training
    arrivals x (1 +- arrival_sensitivity), which start from what the base load showed (more
    arrivals fail where it failed, fewer pass where it passed: assumed monotone)."""
    extra: dict[str, tuple[Variant, Bisection]] = {}
    for profile in dict.fromkeys(p for p in spec.compare_profiles if p != spec.profile):
        v = make_variant(spec, c, traces, profile=profile)
        extra[f"profile:{profile}"] = (v, _bisection(spec, c, v, guess=nodes))
    s = spec.arrival_sensitivity
    if s > 0:
        # first guesses in proportion to the load: with the base's bound known, the gap to
        # halve is small
        up = make_variant(spec, c, traces, profile=spec.profile, arrival_scale=1 + s)
        b_up = _bisection(spec, c, up, guess=math.ceil(nodes * (1 + s)))
        b_up.grow, b_up.shrink = INFORMED_GROW, INFORMED_SHRINK
        if base_fails_below:
            b_up.fail = nodes - 1
        extra["up"] = (up, b_up)
        down = make_variant(spec, c, traces, profile=spec.profile, arrival_scale=1 - s)
        b_down = _bisection(spec, c, down, guess=max(1, math.floor(nodes * (1 - s))))
        b_down.ok = nodes
        b_down.grow, b_down.shrink = INFORMED_GROW, INFORMED_SHRINK
        extra["down"] = (down, b_down)
    return extra


def _bisection(
    spec: FleetPlanSpec, c: Candidate, v: Variant, guess: int | None = None
) -> Bisection:
    offered = offered_load(v, training_only=c.service_pool is not None).mean_gpus
    start = math.ceil(offered / (GUESS_UTILISATION * c.gpus_per_node))
    if spec.max_gpus is not None:
        top = max(0, spec.max_gpus - v.pool_gpus) // c.gpus_per_node
    else:
        top = math.ceil(MAX_LOAD_MULTIPLE * max(offered, 1.0) / c.gpus_per_node)
    top = max(top, c.min_nodes)
    return Bisection(c.min_nodes, top, guess if guess is not None else max(start, c.min_nodes))


def _search_result(
    spec: FleetPlanSpec,
    c: Candidate,
    ev: Evaluator,
    search: tuple[Variant, Bisection],
    log: Assumptions,
) -> SearchResult:
    v, b = search
    if b.answer is not None:
        ev.evaluate([(v, b.answer)])  # a bound taken as known (the -x% search's) never ran
    points = sorted((p for (k, _), p in ev.points.items() if k == v.key), key=lambda p: p.nodes)
    n = b.answer
    binding: list[str] = []
    cost: ClusterCost | None = None
    if n is not None:
        below = ev.points.get((v.key, n - 1))
        if below is not None:
            binding = [t.team for t in below.teams if not t.passed]
        point = ev.points[(v.key, n)]
        cost = cluster_cost(spec, c.accelerator, n * c.gpus_per_node, point.allocation.mean, log)
        if v.service_pool is not None:
            acc, _, _ = v.service_pool
            pool = cluster_cost(spec, acc, v.pool_gpus, point.allocation.mean, log)
            cost = combined_cost(spec, cost, pool)
    status = "met" if n is not None else "not met"
    problems = (
        []
        if n is not None
        else [
            f"no size up to {b.max_nodes * c.gpus_per_node + v.pool_gpus:,} GPUs met every target"
        ]
    )
    return SearchResult(
        accelerator=c.accelerator,
        profile=v.profile,
        arrival_scale=v.arrival_scale,
        status=status,
        nodes=n,
        gpus=None if n is None else n * c.gpus_per_node + v.pool_gpus,
        gpus_per_node=c.gpus_per_node,
        searched_nodes=list(b.order),
        points=points,
        binding=binding,
        cost=cost,
        problems=problems,
        services=[_service(s) for s in c.services],
        mig_gpus=c.mig_gpus,
        service_accelerator=None if c.service_pool is None else c.service_pool.accelerator,
        service_gpus=v.pool_gpus,
    )


def _infeasible(c: Candidate) -> SearchResult:
    return SearchResult(
        accelerator=c.accelerator,
        profile="",
        arrival_scale=1.0,
        status="infeasible",
        nodes=None,
        gpus=None,
        gpus_per_node=c.gpus_per_node,
        searched_nodes=[],
        points=[],
        binding=[],
        cost=None,
        problems=list(c.problems),
        services=[_service(s) for s in c.services],
        mig_gpus=c.mig_gpus,
    )


def _service(s: object) -> Service:

    assert isinstance(s, ServiceSizing)
    return Service(
        team=s.team,
        service=s.service,
        model=s.model,
        accelerator=s.accelerator,
        request_rate=s.request_rate,
        replicas=s.replicas,
        gpus_per_replica=s.tp if s.mig_profile is None else 0,
        mig_profile=s.mig_profile,
        gpu_equivalent=s.gpu_equivalent,
        ttft_ms=s.ttft_ms,
        tpot_ms=s.tpot_ms,
        how=s.how,
    )


# -- cost --------------------------------------------------------------------------------


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
    )


# -- phase 2 -----------------------------------------------------------------------------


def _quotas(
    spec: FleetPlanSpec,
    c: Candidate,
    rows: Sequence[SeedResult],
    gpus: int,
    rule: QuotaRule = QUOTA_RULES[0],
) -> Quotas:
    inference_peak: dict[str, float] = {}
    for s in c.services:
        inference_peak[s.team] = inference_peak.get(s.team, 0.0) + s.quota_gpus
    stats: dict[str, tuple[float, float, float]] = {}
    for team in spec.teams:
        seeds = [r.teams[team.name] for r in rows]
        held = float(np.mean([t.held_mean for t in seeds]))
        inf_held = float(np.mean([t.inference_held_mean for t in seeds]))
        p99 = max(t.held_p99 for t in seeds)
        stats[team.name] = (held, max(0.0, held - inf_held), p99)
    peak = {t.name: math.ceil(inference_peak.get(t.name, 0.0) - 1e-9) for t in spec.teams}
    notes: list[str] = []
    pool = c.pool_gpus  # a mix's service pool (0 without)
    room = gpus - sum(peak.values()) if pool == 0 else pool - sum(peak.values())
    if room < 0:
        notes.append("the services' peaks alone exceed their GPUs; guarantees cover them first")
    if rule.by_peak:  # the GPUs a team's jobs hold at their peaks, less its services'
        training_use = {n: max(0.0, st[2] - peak[n]) for n, st in stats.items()}
    else:
        training_use = {n: st[1] for n, st in stats.items()}
    if pool == 0:
        service = peak
        training = split_whole(max(0, room), training_use)
    else:
        extra = split_whole(max(0, room), {n: inference_peak.get(n, 0.0) for n in stats})
        service = {n: peak[n] + extra[n] for n in stats}
        training = split_whole(gpus - pool, training_use)
    teams = []
    for name, (held, _, p99) in stats.items():
        guaranteed = service[name] + training[name]
        by_acc: dict[str, int] = {}
        if c.service_pool is not None:
            by_acc = {c.accelerator: training[name], c.service_pool.accelerator: service[name]}
        teams.append(
            TeamQuota(
                team=name,
                guaranteed_gpus=guaranteed,
                burst_limit_gpus=gpus
                if rule.open_burst
                else min(gpus, max(guaranteed, math.ceil(p99 - 1e-9))),
                mean_gpus_held=held,
                p99_gpus_held=p99,
                inference_peak_gpus=inference_peak.get(name, 0.0),
                guaranteed_by_accelerator=by_acc,
            )
        )
    return Quotas(
        method=QUOTA_METHOD, teams=teams, verified=None, notes=notes, gpus=gpus, rule=rule.name
    )


def _quota_variant(
    spec: FleetPlanSpec,
    c: Candidate,
    traces: Sequence[TraceInput],
    quotas: Quotas,
    profile: str | None = None,
) -> Variant:
    training, service = _variant_quotas(c, quotas)
    return make_variant(
        spec,
        c,
        traces,
        profile=profile or spec.profile,
        quotas=training,
        service_quotas=service,
        tag=f"|quotas:{quotas.rule}",
    )


def _search_quotas(
    spec: FleetPlanSpec,
    c: Candidate,
    *,
    traces: Sequence[TraceInput],
    ev: Evaluator,
    v0: Variant,
    nodes: int,
) -> Quotas:
    """The first split of `QUOTA_RULES` whose check run meets every target at the answer's
    size, else at the next larger sizes; each check is a simulation on the plan's seeds (common
    random numbers with the sizing). The result says which, in `verdict`."""
    step = max(1, round(nodes * QUOTA_SIZE_STEP))
    sizes = [nodes + k * step for k in range(QUOTA_LARGER_SIZES + 1)]
    first: Quotas | None = None
    misses: list[str] = []
    for size in sizes:
        ev.evaluate([(v0, size)])  # open-quota use at this size, what the splits derive from
        rows = ev.results[(v0.key, size)]
        splits = [
            _quotas(spec, c, rows, rows[0].gpus, rule).model_copy(update={"nodes": size})
            for rule in QUOTA_RULES
        ]
        variants = [_quota_variant(spec, c, traces, q) for q in splits]
        ev.evaluate([(variants[0], size)])  # the first split usually meets the targets
        if not ev.points[(variants[0].key, size)].passed:
            ev.evaluate([(v, size) for v in variants[1:]])  # else the others, at once
        for rule, split, v in zip(QUOTA_RULES, splits, variants, strict=True):
            point = ev.points[(v.key, size)]
            q = split.model_copy(update={"verified": point})
            if first is None:
                first = q
            if point.passed:
                verdict = _quota_verdict(q, nodes_gpus=ev.results[(v0.key, nodes)][0].gpus)
                return q.model_copy(
                    update={
                        "verdict": verdict,
                        "tried": [*misses, f"{q.gpus:,} GPUs, {rule.text}: meets every target"],
                        "notes": [*q.notes, verdict],
                    }
                )
            short = ", ".join(t.team for t in point.teams if not t.passed)
            misses.append(f"{q.gpus:,} GPUs, {rule.text}: {short} miss")
    assert first is not None
    assert first.verified is not None
    largest = ev.results[(v0.key, sizes[-1])][0].gpus
    failing = "; ".join(
        f"{t.team}: {', '.join(t.reasons)}" for t in first.verified.teams if not t.passed
    )
    verdict = (
        f"not a recommendation: no quota split tried meets every target at {first.gpus:,} to "
        f"{largest:,} GPUs, so the size above assumes no hard quotas (fair share only); the "
        f"split shown is the first tried, and with it {failing}"
    )
    return first.model_copy(
        update={"verdict": verdict, "tried": misses, "notes": [*first.notes, verdict]}
    )


def _queue_variants(
    spec: FleetPlanSpec, c: Candidate, traces: Sequence[TraceInput], quotas: Quotas | None
) -> dict[str, Variant]:
    """`spec.queue_policies` as variants: with `quotas` in force, or open quotas (None)."""
    return {
        p: make_variant(spec, c, traces, profile=p)
        if quotas is None
        else _quota_variant(spec, c, traces, quotas, profile=p)
        for p in dict.fromkeys(spec.queue_policies)
    }


def _queue_policies(
    spec: FleetPlanSpec,
    c: Candidate,
    *,
    traces: Sequence[TraceInput],
    ev: Evaluator,
    quotas: Quotas,
    nodes: int,
) -> list[QueuePolicy]:
    """Each queue policy at the quotas' size with those quotas in force (open quotas at the
    answer's size when no split was verified), on the plan's seeds."""

    kept = quotas.recommended
    size = quotas.nodes if kept else nodes
    variants = _queue_variants(spec, c, traces, quotas if kept else None)
    ev.evaluate([(v, size) for v in variants.values()])
    return [
        QueuePolicy(
            profile=p,
            queue_order=PROFILES[p].queue_order,
            preemption=list(PROFILES[p].preemption),
            quotas="the recommended quotas" if kept else "open quotas",
            point=ev.points[(v.key, size)],
        )
        for p, v in variants.items()
    ]


def _queue_summary(rows: Sequence[QueuePolicy]) -> str:
    """One sentence from the rows: which policies keep every target, and who misses where."""
    if not rows:
        return ""
    parts = []
    for r in rows:
        pt = r.point
        alloc = f"allocation {pt.allocation.mean:.1%}" if pt.allocation.mean is not None else ""
        if pt.passed:
            parts.append(f"{r.profile} ({r.queue_order}) meets every target, {alloc}")
        else:
            misses = "; ".join(
                f"{t.team}: {', '.join(t.reasons)}" for t in pt.teams if not t.passed
            )
            parts.append(f"{r.profile} ({r.queue_order}) misses ({misses}), {alloc}")
    return f"At {rows[0].point.gpus:,} GPUs with {rows[0].quotas}: " + "; ".join(parts)


def quota_check_variant(
    spec: FleetPlanSpec, base_dir: Path, plan: FleetPlan
) -> tuple[Variant, int]:
    """The simulation that checks a plan's printed quotas (`plan.quotas`, as read back from
    plan.json): the recommended candidate with exactly those quotas, and its size in nodes.
    Run it on the plan's seeds (`fleet_sim.run_seed`) and `assess` it to repeat the check."""
    rec = plan.recommendation
    if plan.quotas is None or rec is None:
        raise UserError("the plan has no quotas to check (no accelerator met the targets)")
    log = Assumptions()
    traces = [read_team_trace(t, base_dir) for t in spec.teams if t.trace is not None]
    candidates = [prepare_candidate(spec, acc, traces, log) for acc in spec.accelerators]
    label = mix_label(rec.accelerator, rec.service_accelerator)
    c = _candidate([*candidates, *_mixes(spec, candidates, traces)], label)
    return _quota_variant(spec, c, traces, plan.quotas), plan.quotas.nodes


def _quota_verdict(q: Quotas, nodes_gpus: int) -> str:
    """The sentence a reader sees first about the quotas, from the numbers it summarises."""
    if q.gpus == nodes_gpus:
        return (
            f"verified: with these quotas every team meets its targets at {q.gpus:,} GPUs "
            "(a check run on the same seeds)"
        )
    return (
        f"no quota split tried meets every target at {nodes_gpus:,} GPUs (the size found "
        f"without quotas); {q.gpus:,} GPUs do, with these quotas (a check run on the same seeds)"
    )


def _variant_quotas(
    c: Candidate, quotas: Quotas
) -> tuple[dict[str, tuple[int, int]], dict[str, int] | None]:
    """The quotas as a variant runs them: (guaranteed, limit) of the searched accelerator
    per team, and a mix's service-pool guarantees (the burst limit less those caps the
    training pool)."""
    if c.service_pool is None:
        return {q.team: (q.guaranteed_gpus, q.burst_limit_gpus) for q in quotas.teams}, None
    acc, svc = c.accelerator, c.service_pool.accelerator
    training = {
        q.team: (
            q.guaranteed_by_accelerator[acc],
            max(
                q.guaranteed_by_accelerator[acc],
                q.burst_limit_gpus - q.guaranteed_by_accelerator[svc],
            ),
        )
        for q in quotas.teams
    }
    return training, {q.team: q.guaranteed_by_accelerator[svc] for q in quotas.teams}


def split_whole(total: int, weights: dict[str, float]) -> dict[str, int]:
    """`total` whole GPUs split in proportion to `weights` (largest remainders; ties by
    name), summing to `total`; equal weights when all are zero."""
    names = sorted(weights)
    if not names:
        return {}
    w = {n: max(0.0, weights[n]) for n in names}
    mass = math.fsum(w.values())
    if mass <= 0:
        w, mass = dict.fromkeys(names, 1.0), float(len(names))
    exact = {n: total * w[n] / mass for n in names}
    out = {n: math.floor(exact[n]) for n in names}
    left = total - sum(out.values())
    for n in sorted(names, key=lambda n: (-(exact[n] - out[n]), n))[:left]:
        out[n] += 1
    return out


def _status(r: SearchResult, b: Bisection) -> str:
    return (
        r.status if r.status == "met" else f"not met within {b.max_nodes * r.gpus_per_node:,} GPUs"
    )


def _policy(r: SearchResult, b: Bisection, rec: SearchResult) -> PolicyComparison:
    cost = r.cost.total_usd if r.cost else None
    base = rec.cost.total_usd if rec.cost else None
    return PolicyComparison(
        profile=r.profile,
        status=_status(r, b),
        nodes=r.nodes,
        gpus=r.gpus,
        cost_usd=cost,
        extra_gpus=None if r.gpus is None or rec.gpus is None else r.gpus - rec.gpus,
        extra_cost_usd=None if cost is None or base is None else cost - base,
    )


def _sensitivity(r: SearchResult, b: Bisection) -> Sensitivity:
    return Sensitivity(
        arrival_scale=r.arrival_scale,
        status=_status(r, b),
        nodes=r.nodes,
        gpus=r.gpus,
        cost_usd=r.cost.total_usd if r.cost else None,
    )


def _capacity(c: Candidate, rows: Sequence[SeedResult], point: SizePoint) -> Capacity:
    whole_inference = sum(s.replicas * s.tp for s in c.services if s.mig_profile is None)
    if c.service_pool is None:
        free = point.gpus - c.mig_gpus - whole_inference
    else:
        free = point.gpus - c.pool_gpus  # the services have their own pool
    fit: dict[str, int] = {}
    for name in rows[0].teams:
        sizes = [r.teams[name].median_job_gpus for r in rows]
        known = [s for s in sizes if s is not None and s > 0]
        if known:
            fit[name] = int(max(0, free) // float(np.median(known)))
    return Capacity(
        running_jobs_mean=point.running_jobs_mean,
        running_jobs_p95=point.running_jobs_p95,
        running_jobs_max=point.running_jobs_max,
        median_jobs_at_once=fit,
    )


# -- words -------------------------------------------------------------------------------


def _why(rec: SearchResult, met: Sequence[SearchResult]) -> list[str]:
    if rec.service_accelerator is None:
        what = f"{rec.gpus:,} × {rec.accelerator} ({rec.nodes} nodes)"
    else:
        trained = (rec.gpus or 0) - rec.service_gpus
        what = (
            f"{trained:,} × {rec.accelerator} ({rec.nodes} nodes) for training and batch + "
            f"{rec.service_gpus:,} × {rec.service_accelerator} for the services"
        )
    cheapest = len(met) > 1 and math.isfinite(_cost_key(rec))
    out = [
        f"{what} is the smallest size of this candidate found where every team meets its "
        f"targets under the {rec.profile} profile"
        + (", and the cheapest of the candidates that pass" if cheapest else "")
    ]
    for other in met:
        if other is rec or other.gpus is None:
            continue
        a, b = _cost_key(rec), _cost_key(other)
        if math.isfinite(a) and math.isfinite(b):
            out.append(
                f"{other.label} needs {other.gpus:,} GPUs and costs ${b:,.0f} vs "
                f"${a:,.0f} ({(b - a) / a:+.0%})"
            )
        else:
            out.append(f"{other.label} needs {other.gpus:,} GPUs (no comparable price)")
    return out


def _upper_wait(i: Interval | None) -> float | None:
    if i is None:
        return None
    return i.high if i.high is not None else i.mean


def _hours(seconds: float | None) -> str:

    return fmt_duration(seconds)


def _searched_pool(rec: SearchResult) -> str:
    """In a mix only the training pool is searched: say which accelerator's node it is."""
    return "" if rec.service_accelerator is None else f"{rec.accelerator} "


def _searched_nodes(rec: SearchResult, nodes: int | None) -> str:
    text = f"{nodes} {_searched_pool(rec)}nodes"
    if rec.service_accelerator is None:
        return text
    return f"{text} (with the {rec.service_gpus:,} × {rec.service_accelerator} service pool)"


def _gpus_text(rec: SearchResult, gpus: int) -> str:
    """A size point's GPUs; in a mix split by pool, since the service pool's size is fixed."""
    if rec.service_accelerator is None:
        return f"{gpus:,} GPUs"
    return (
        f"{gpus - rec.service_gpus:,} × {rec.accelerator} + {rec.service_gpus:,} × "
        f"{rec.service_accelerator}"
    )


def _sensitive_to(
    rec: SearchResult,
    point: SizePoint,
    below: SizePoint | None,
    policies: Sequence[PolicyComparison],
    sens: Sequence[Sensitivity],
) -> list[str]:
    out: list[str] = []
    if below is None:
        out.append(
            f"no target binds: {_searched_nodes(rec, rec.nodes)} is the smallest cluster that "
            "holds the largest gang and the services, and it meets every target"
        )
    else:
        for t in below.teams:
            if not t.passed:
                out.append(
                    f"{t.team}'s target binds: one {_searched_pool(rec)}node fewer "
                    f"({_gpus_text(rec, below.gpus)}) it misses: " + "; ".join(t.reasons)
                )
    margins = []
    for t in point.teams:
        upper = _upper_wait(t.wait_p95_s)
        if upper is not None and t.wait_target_s:
            margins.append((upper / t.wait_target_s, upper, t))
    for ratio, upper, t in sorted(margins, key=lambda m: -m[0])[:3]:
        out.append(
            f"at the answer {t.team}'s p95 wait is at most {_hours(upper)} ({ratio:.0%} of its "
            f"{_hours(t.wait_target_s)} target, upper 95 % bound)"
        )
    for s in sens:
        change = f"{s.arrival_scale - 1:+.0%} training arrivals"
        if s.nodes is None:
            out.append(f"{change}: {s.status}")
        else:
            delta = (s.gpus or 0) - (rec.gpus or 0)
            out.append(
                f"{change}: {_gpus_text(rec, s.gpus or 0)} ({delta:+,} GPUs, "
                f"{s.nodes} {_searched_pool(rec)}nodes)"
            )
    for p in policies:
        if p.gpus is None:
            out.append(
                f"under {p.profile} no cluster up to the search limit meets every target "
                f"({p.status})"
            )
        else:
            money = "" if p.extra_cost_usd is None else f", {p.extra_cost_usd:+,.0f} USD"
            out.append(
                f"under {p.profile} it needs {p.gpus:,} GPUs ({p.extra_gpus:+,} GPUs{money})"
            )
    return out


def _method(
    spec: FleetPlanSpec, seeds: list[int], v: Variant
) -> dict[str, str | float | int | list[int]]:

    cfg = SimConfig()
    return {
        "profile": spec.profile,
        "seeds": seeds,
        "confidence": CONFIDENCE,
        "wait_statistic": (
            "per team and seed, the 95th percentile of the queue wait (first start − "
            "submission) of its training and batch jobs arriving in [warmup, horizon); a job "
            "not started by the end counts with the wait it had by then; the target is met "
            "when the upper end of the two-sided 95 % Student-t interval of the mean over "
            "seeds is within it (one seed: the value itself)"
        ),
        "long_run_check": (
            "each team's long runs (its jobs in the top decile of requested GPU-hours per "
            "seed) must have a p95 wait, pooled over seeds, within long_run_wait_p95 "
            "(default 2 × wait_p95): a cluster cannot meet the wait target by starving them"
        ),
        "slo_statistic": (
            "services are sized by the inference estimator for the latency SLO at the peak "
            "request rate; in the simulation they must hold their GPUs for at least "
            "slo_attainment of the wanted time (lower end of the 95 % interval over seeds)"
        ),
        "search": (
            "bisection over whole nodes: start at the offered load ÷ 0.8, step × 2/3 down "
            "while sizes pass and × 1.5 up while they fail, then halve the gap to one node; "
            "it assumes more nodes never make a team's service worse; every size is "
            "simulated on the same seeds (the same workloads at every size and profile)"
        ),
        "sensitivity": (
            "the search again with training arrivals × (1 ± "
            f"{spec.arrival_sensitivity:g}), inference load unchanged; it starts from the "
            "answer and, for higher arrivals, assumes the size one node below the answer, which "
            "fails at the base load, fails too"
        ),
        "durations": (
            "training and batch durations as given, on every candidate"
            if spec.durations_on is None
            else f"training and batch durations (and trace run times) as measured on "
            f"{spec.durations_on}, scaled on each candidate by the ratio of dense BF16 "
            "throughput (a faster GPU finishes the same job sooner)"
        ),
        "horizon_s": v.horizon_s,
        "warmup_s": v.warmup_s,
        "run_end_s": v.end_s,
        "cycle_interval_s": cfg.cycle_interval_s,
        "restart_overhead_s": cfg.restart_overhead_s,
        "failures": "none simulated (no GPU failures or spot reclaims)",
        "topology": "flat: nodes of the accelerator's default system, no leaf or spine limits",
        "mixes": (
            "each ordered pair of candidates also as a mix: services on one accelerator, in "
            "a pool of whole nodes fixed at their peak (as the profile runs them), training "
            "and batch on the other, whose size is searched; every job is pinned to its "
            "pool, so training never uses an idle service GPU"
            if spec.mixes
            else "not searched (mixes: false)"
        ),
        "quotas_while_sizing": (
            "open: every team guaranteed the whole cluster; fair share by weight"
        ),
    }


def _team_inputs(spec: FleetPlanSpec, traces: Sequence[TraceInput], v: Variant) -> list[TeamInput]:
    load = offered_load(v).by_team
    by_team = {t.team: t for t in traces}
    out = []
    for team in spec.teams:
        lines = []
        for entry in team.workloads:
            if isinstance(entry, PlanTrainingEntry):
                lines.append(
                    f"{entry.kind} '{entry.name or entry.kind}': {entry.arrivals_per_day:g}/day, "
                    f"GPUs {'/'.join(map(str, entry.gpus.choices))}"
                )
            elif isinstance(entry, PlanInferenceEntry):
                lines.append(
                    f"inference '{service_label(entry)}': {entry.model.name} at "
                    f"{entry.request_rate:g} req/s"
                    + (f", diurnal trough {entry.diurnal.trough_ratio:g}" if entry.diurnal else "")
                )
        trace = by_team.get(team.name)
        if trace is not None:
            lines.append(f"trace {trace.source}: {len(trace.jobs):,} jobs")
        out.append(
            TeamInput(
                team=team.name,
                priority=team.priority,
                fair_share_weight=team.fair_share_weight,
                wait_target_s=team.targets.wait_p95,
                long_run_target_s=team.targets.long_run_limit_s,
                slo_target=team.targets.slo_attainment,
                workloads=lines,
                offered_gpus=load.get(team.name, 0.0),
                trace=list(trace.report_lines) if trace is not None else [],
            )
        )
    return out


def _unmet_plan(
    spec: FleetPlanSpec,
    log: Assumptions,
    results: list[SearchResult],
    traces: Sequence[TraceInput],
    ev: Evaluator,
) -> FleetPlan:
    v = next(iter(ev.variants.values()))
    return FleetPlan(
        name=spec.name,
        generated_by=f"gpufleet {__version__}",
        method=_method(spec, list(ev.seeds), v),
        teams=_team_inputs(spec, traces, v),
        candidates=results,
        recommendation=None,
        capacity=None,
        quotas=None,
        policies=[],
        sensitivity=[],
        sensitive_to=[
            "no candidate met every target within the search limit: raise max_gpus, relax a "
            "target, or lower the load"
        ],
        assumptions=[Assumption(name=a.name, value=a.value, source=a.source) for a in log.frozen()],
    )
