"""The multi-team plan's sentences and method notes, each written from the numbers it
summarises (the search results and intervals), so a verdict cannot contradict its table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpufleet.formatting import fmt_duration
from gpufleet.plan.fleet_cost import cost_key
from gpufleet.plan.fleet_model import (
    Interval,
    PolicyComparison,
    SearchResult,
    Sensitivity,
    SizePoint,
)
from gpufleet.plan.fleet_setup import Variant
from gpufleet.sim.compare import CONFIDENCE
from gpufleet.sim.engine import SimConfig
from gpufleet.specs.fleet import FleetPlanSpec


def _what(rec: SearchResult, nodes: int, gpus: int) -> str:
    """A size of the recommended candidate: GPUs and nodes, a mix's two pools apart."""
    if rec.service_accelerator is None:
        return f"{gpus:,} × {rec.accelerator} ({nodes} nodes)"
    return (
        f"{gpus - rec.service_gpus:,} × {rec.accelerator} ({nodes} nodes) for training and "
        f"batch + {rec.service_gpus:,} × {rec.service_accelerator} for the services"
    )


def why_recommended(
    rec: SearchResult,
    met: Sequence[SearchResult],
    answer: SizePoint,
    *,
    quotas_hold: bool,
) -> list[str]:
    """Why this cluster: `rec` is the search's answer with open quotas, `answer` the size
    recommended (larger when no quota split held the targets at the search's answer).
    Candidates are ranked at their search answers, so the comparison with the others is
    said to be at open quotas when the sizes differ."""
    cheapest = len(met) > 1 and math.isfinite(cost_key(rec))
    found = _what(rec, rec.nodes or 0, rec.gpus or 0)
    grown = answer.nodes != rec.nodes
    if not grown:
        out = [
            f"{found} is the smallest size of this candidate found where every team meets "
            f"its targets under the {rec.profile} profile"
            + ("" if quotas_hold else " with open quotas (fair share alone)")
            + (", and the cheapest of the candidates that pass" if cheapest else "")
        ]
        if not quotas_hold:
            out.append(
                "no quota split tried keeps every team within its targets, so the quotas "
                "shown are not a recommendation (see the quotas)"
            )
    else:
        price = (
            ""
            if rec.cost is None or rec.cost.total_usd is None
            else f", for ${rec.cost.total_usd:,.0f} {rec.cost.period}"
        )
        out = [
            f"{_what(rec, answer.nodes, answer.gpus)} is the smallest size tried where "
            f"a quota split, the recommended quotas, keeps every team within its targets "
            f"under the {rec.profile} profile (a check run on the same seeds)",
            f"with open quotas (fair share alone) {found} would meet every target{price}, "
            "but no quota split tried held them at that size"
            + (
                "; it is the cheapest of the candidates that pass, each compared at its "
                "size with open quotas"
                if cheapest
                else ""
            ),
        ]
    for other in met:
        if other is rec or other.gpus is None:
            continue
        a, b = cost_key(rec), cost_key(other)
        if math.isfinite(a) and math.isfinite(b):
            out.append(
                f"{other.label} needs {other.gpus:,} GPUs and costs ${b:,.0f} vs "
                f"${a:,.0f} {_period(rec)} ({(b - a) / a:+.0%})"
                + (f" for {rec.gpus:,} GPUs, both with open quotas" if grown else "")
            )
        else:
            out.append(f"{other.label} needs {other.gpus:,} GPUs (no comparable price)")
    return out


def _period(rec: SearchResult) -> str:
    """The period a cost of the plan covers ("over 3 years", `ClusterCost.period`): every
    candidate is priced over the spec's horizon_years, not the simulated window."""
    return rec.cost.period if rec.cost is not None else "over the plan's horizon_years"


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


def sensitive_to(
    rec: SearchResult,
    answer: SizePoint,
    below: SizePoint | None,
    policies: Sequence[PolicyComparison],
    sens: Sequence[Sensitivity],
) -> list[str]:
    """Which targets bind and what moves the answer. `rec` is the search with open quotas
    (`below` its size one node under its answer), `answer` the recommended size (open
    quotas); when the quotas made it larger, the first sentence says so, and the binding
    teams and the changes, all from searches with open quotas, compare with the search's."""
    out: list[str] = []
    if answer.nodes != rec.nodes:
        out.append(
            f"the quotas set the size: with open quotas (fair share alone) "
            f"{_gpus_text(rec, rec.gpus or 0)} ({_searched_nodes(rec, rec.nodes)}) meet every "
            f"target but no quota split tried held them there; the recommended "
            f"{_gpus_text(rec, answer.gpus)} ({answer.nodes} nodes) are the smallest size "
            f"tried where one does. What binds and the changes below are from the searches "
            f"with open quotas, against {_gpus_text(rec, rec.gpus or 0)}"
        )
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
    for t in answer.teams:
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
            money = (
                "" if p.extra_cost_usd is None else f", {p.extra_cost_usd:+,.0f} USD {_period(rec)}"
            )
            out.append(
                f"under {p.profile} it needs {p.gpus:,} GPUs ({p.extra_gpus:+,} GPUs{money})"
            )
    return out


def plan_method(
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
