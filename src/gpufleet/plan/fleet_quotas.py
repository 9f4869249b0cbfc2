"""Phase 2 of the multi-team plan: quotas derived from what each team held at the answer,
verified by simulating exactly them, and the queue policies compared under them.

Apart from `fleet` (the search and the plan it assembles) because it is its own method with
its own rules (`QUOTA_RULES`, `QUOTA_METHOD`), run after the size is known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.fleet_model import (
    FleetPlan,
    QueuePolicy,
    Quotas,
    TeamQuota,
    mix_label,
)
from gpufleet.plan.fleet_search import Evaluator
from gpufleet.plan.fleet_setup import (
    Candidate,
    TraceInput,
    Variant,
    candidate_labelled,
    make_variant,
    mixes,
    prepare_candidate,
    read_team_trace,
)
from gpufleet.plan.fleet_sim import SeedResult
from gpufleet.specs.fleet import FleetPlanSpec
from gpufleet.specs.profiles import PROFILES

QUOTA_METHOD = (
    "Kueue-style: the guarantees partition the cluster and every team is in one cohort, "
    "lending its idle guarantee and borrowing up to its burst limit. Guaranteed = the "
    "team's services at their peak (MIG slices by compute share, rounded up) + its share of "
    "the remaining GPUs in proportion to the mean GPUs its training and batch jobs held "
    "over [warmup, horizon] with open quotas at the size split (mean over seeds; whole GPUs "
    "by largest remainder). Burst limit = the 99th percentile over time of all the GPUs it "
    "held (the largest over seeds, rounded up), at least its guarantee, at most the cluster. "
    "Sizing ran with open quotas (each team guaranteed the whole cluster, fair share by "
    "weight); "
    "the size found is then simulated again with exactly these quotas (same seeds). When a "
    "team misses a target with them, two more splits are tried: the same guarantees with no "
    "burst limit, then guarantees in proportion to each team's 99th percentile of GPUs held "
    "(its peaks) with no burst limit; when none meets every target, the same at up to three "
    "larger sizes, each 5 % of the nodes apart. The recommended cluster (its cost, its "
    "cluster.yaml) is the size where a split first meets every target. In a mix, the "
    "service pool is split among the teams with services (their peaks, the rest in "
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


def derive_quotas(
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


def quota_variant(
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


def search_quotas(
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
            derive_quotas(spec, c, rows, rows[0].gpus, rule).model_copy(update={"nodes": size})
            for rule in QUOTA_RULES
        ]
        variants = [quota_variant(spec, c, traces, q) for q in splits]
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


def queue_variants(
    spec: FleetPlanSpec, c: Candidate, traces: Sequence[TraceInput], quotas: Quotas | None
) -> dict[str, Variant]:
    """`spec.queue_policies` as variants: with `quotas` in force, or open quotas (None)."""
    return {
        p: make_variant(spec, c, traces, profile=p)
        if quotas is None
        else quota_variant(spec, c, traces, quotas, profile=p)
        for p in dict.fromkeys(spec.queue_policies)
    }


def queue_policies(
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
    variants = queue_variants(spec, c, traces, quotas if kept else None)
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


def queue_summary(rows: Sequence[QueuePolicy]) -> str:
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
    c = candidate_labelled([*candidates, *mixes(spec, candidates, traces)], label)
    return quota_variant(spec, c, traces, plan.quotas), plan.quotas.nodes


def _quota_verdict(q: Quotas, nodes_gpus: int) -> str:
    """The sentence a reader sees first about the quotas, from the numbers it summarises."""
    if q.gpus == nodes_gpus:
        return (
            f"verified: with these quotas every team meets its targets at {q.gpus:,} GPUs "
            "(a check run on the same seeds)"
        )
    return (
        f"no quota split tried meets every target at {nodes_gpus:,} GPUs (the size found "
        f"without quotas); {q.gpus:,} GPUs do, with these quotas (a check run on the same "
        f"seeds), so the recommendation is {q.gpus:,} GPUs"
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
