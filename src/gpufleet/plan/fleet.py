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
   the answer's size with exactly those quotas (other splits, then larger sizes, when a
   team misses). The recommendation is the size they hold at, priced there: the cluster the
   exported cluster.yaml and teams.yaml describe (design 0012, "One recommended size").
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
from gpufleet.plan.fleet_cost import cluster_cost, combined_cost, cost_key
from gpufleet.plan.fleet_model import (
    Capacity,
    ClusterCost,
    FleetPlan,
    FleetRecommendation,
    PolicyComparison,
    SearchResult,
    Sensitivity,
    Service,
    SizePoint,
    TeamInput,
)
from gpufleet.plan.fleet_quotas import (
    derive_quotas,
    queue_policies,
    queue_summary,
    queue_variants,
    quota_variant,
    search_quotas,
)
from gpufleet.plan.fleet_search import Bisection, Evaluator, run_searches, runner
from gpufleet.plan.fleet_services import ServiceSizing, service_label
from gpufleet.plan.fleet_setup import (
    Candidate,
    TraceInput,
    Variant,
    candidate_labelled,
    make_variant,
    mixes,
    offered_load,
    prepare_candidate,
    read_team_trace,
)
from gpufleet.plan.fleet_sim import SeedResult
from gpufleet.plan.fleet_words import plan_method, sensitive_to, why_recommended
from gpufleet.plan.model import Assumption
from gpufleet.specs.fleet import FleetPlanSpec, PlanInferenceEntry, PlanTrainingEntry

DEFAULT_SEEDS = 5
# The first size tried: the offered load (mean GPUs the jobs ask for) at this utilisation.
GUESS_UTILISATION = 0.8
# Without max_gpus the search stops at this multiple of the offered load.
MAX_LOAD_MULTIPLE = 8
# the steps of a search started from an informed guess (the arrival sensitivity's)
INFORMED_GROW = 1.1
INFORMED_SHRINK = 0.9


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
    feasible = [c for c in candidates if c.feasible] + mixes(spec, candidates, traces)
    if not feasible:
        raise InfeasibleFleetError([p for c in candidates for p in c.problems])
    seed_list = list(range(seeds))
    with runner(workers, on_done, ray_address) as run:
        ev = Evaluator(spec, run, seed_list, on_submit)
        base = {c.label: make_variant(spec, c, traces, profile=spec.profile) for c in feasible}
        searches = {
            label: (v, _bisection(spec, candidate_labelled(feasible, label), v))
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
                cost_key(r),
                r.gpus or 0,
                r.service_accelerator is not None,  # at a tie, one accelerator is simpler
                spec.accelerators.index(r.accelerator),
            ),
        )
        c = candidate_labelled(feasible, rec.label)
        assert rec.nodes is not None
        n = rec.nodes
        v0 = base[rec.label]
        extra = _extra_searches(spec, c, traces, base_fails_below=_fails(ev, v0, n - 1), nodes=n)
        # the first split, and the queue policies with it, join the first round of the extra
        # searches (more to run at once): the split usually meets the targets
        split = derive_quotas(spec, c, ev.results[(v0.key, n)], rec.gpus or 0).model_copy(
            update={"nodes": n}
        )
        guess = [quota_variant(spec, c, traces, split)]
        guess += list(queue_variants(spec, c, traces, split).values())
        run_searches(ev, extra, also=[(v, n) for v in guess])
        quotas = search_quotas(spec, c, traces=traces, ev=ev, v0=v0, nodes=n)
        queue = queue_policies(spec, c, traces=traces, ev=ev, quotas=quotas, nodes=n)
        more = {key: _search_result(spec, c, ev, vb, log) for key, vb in extra.items()}
        results += list(more.values())
        policies = [
            _policy(r, extra[key][1], rec) for key, r in more.items() if key.startswith("profile:")
        ]
        sens = [_sensitivity(more[k], extra[k][1]) for k in ("down", "up") if k in more]
    # The recommendation is the cluster the exported files describe: the size where the
    # quotas' check run met every target, which may be above the search's answer (no split
    # held there); priced, designed and described at that size. Without such a split it
    # stays the search's answer, and the words say the targets hold with open quotas only.
    size = quotas.nodes if quotas.recommended else n
    point = ev.points[(v0.key, size)]  # open quotas at that size: the answer's table
    cost = rec.cost if size == n else _price(spec, c, v0, point, log)
    # the search's table gains the sizes the quota check simulated (open quotas) above it
    results[results.index(rec)] = rec.model_copy(update={"points": _points(ev, v0)})
    sentences = sensitive_to(rec, point, ev.points.get((v0.key, n - 1)), policies, sens)
    return FleetPlan(
        name=spec.name,
        generated_by=f"gpufleet {__version__}",
        method=plan_method(spec, seed_list, base[feasible[0].label]),
        teams=_team_inputs(spec, traces, base[feasible[0].label]),
        candidates=results,
        recommendation=FleetRecommendation(
            accelerator=rec.accelerator,
            profile=spec.profile,
            nodes=size,
            gpus=point.gpus,
            deployment=cost.deployment if cost else spec.deployment,
            cost_usd=cost.total_usd if cost else None,
            why=why_recommended(rec, met, point, quotas_hold=quotas.recommended),
            service_accelerator=rec.service_accelerator,
            service_gpus=rec.service_gpus,
            cost=cost,
            fair_share_nodes=n,
            fair_share_gpus=rec.gpus,
        ),
        capacity=_capacity(c, ev.results[(v0.key, size)], point),
        quotas=quotas,
        policies=policies,
        queue_policies=queue,
        queue_policy_summary=queue_summary(queue),
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
    points = _points(ev, v)
    n = b.answer
    binding: list[str] = []
    cost: ClusterCost | None = None
    if n is not None:
        below = ev.points.get((v.key, n - 1))
        if below is not None:
            binding = [t.team for t in below.teams if not t.passed]
        cost = _price(spec, c, v, ev.points[(v.key, n)], log)
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


def _points(ev: Evaluator, v: Variant) -> list[SizePoint]:
    """Every size of `v` simulated so far, by size."""
    return sorted((p for (k, _), p in ev.points.items() if k == v.key), key=lambda p: p.nodes)


def _price(
    spec: FleetPlanSpec, c: Candidate, v: Variant, point: SizePoint, log: Assumptions
) -> ClusterCost:
    """What the cluster of `point` costs, at its simulated allocation (a mix: both pools)."""
    cost = cluster_cost(
        spec, c.accelerator, point.nodes * c.gpus_per_node, point.allocation.mean, log
    )
    if v.service_pool is not None:
        acc, _, _ = v.service_pool
        pool = cluster_cost(spec, acc, v.pool_gpus, point.allocation.mean, log)
        cost = combined_cost(spec, cost, pool)
    return cost


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


# -- phase 2 -----------------------------------------------------------------------------


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
        method=plan_method(spec, list(ev.seeds), v),
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
