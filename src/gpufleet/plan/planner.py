"""The capacity planner: from a plan spec to a complete, sourced `Plan`.

Per candidate accelerator, each workload is sized by its estimator's search
(training: the cheapest layout that meets the deadline; inference: the
cheapest configuration that meets the SLOs at the request rate). The
accelerator whose plan costs least wins, on the headline the plan would show
for it (the optimised mix when renting, the TCO when owning; `plan.ranking`);
the runners-up are kept as alternatives with sentences saying why they lose.
The winner then gets an on-prem design, cloud offers, a cost breakdown
(on-demand, reserved, spot, an optimised mix, TCO and break-even) and a first
quota proposal per team.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import ValidationError

from gpufleet import __version__
from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.pricing import GpuHourPrice, PriceScope, cheapest_gpu_hour, no_price_reason
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.goodput import checkpoint_write_rule
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import TRAINING_STATE_BYTES_PER_PARAM
from gpufleet.estimate.training_estimate import TrainingEstimate, estimate_training
from gpufleet.estimate.training_memory import MEMORY_ENGINEERING, NEAR_LIMIT_FRACTION
from gpufleet.estimate.training_search import (
    POWER_OF_TWO_COUNTS,
    Candidate,
    Constraints,
    search_training,
)
from gpufleet.formatting import fmt_duration
from gpufleet.plan.assemble import (
    DEFAULT_DEADLINE_S,
    InfeasiblePlanError,
    cost_and_design,
    training_deadline_s,
)
from gpufleet.plan.cloud_gaps import cloud_gaps
from gpufleet.plan.cost.demand import HOURS_PER_YEAR
from gpufleet.plan.cost.instances import instance_floor, priced_on_instances, rented_offer
from gpufleet.plan.cost.prices import cloud_price_offers
from gpufleet.plan.cost.tco import NoOnPremPriceError, hardware_price
from gpufleet.plan.demand_curve import gpus_at_once
from gpufleet.plan.design.storage import checkpoint_storage_as_costed
from gpufleet.plan.inference_search import ONE_NODE_ONLY, search_inference
from gpufleet.plan.model import (
    Alternative,
    Assumption,
    Plan,
    Portfolio,
    Recommendation,
    TeamQuota,
    WorkloadChoice,
)
from gpufleet.plan.ranking import by_list_price, rank
from gpufleet.plan.ranking import why as why_best
from gpufleet.plan.renting import cloud_offers, rented_sentence
from gpufleet.plan.summary import (
    MEMORY_RISK_FRACTION,
    RoomierLayout,
    executive_summary,
    memory_near_limit_note,
)
from gpufleet.plan.within_limits import serving_within_limits, training_parallelism
from gpufleet.specs.inference import InferenceSpec, ServingParams
from gpufleet.specs.plan import InferenceWorkload, PlanSpec, TrainingWorkload
from gpufleet.specs.training import Reliability, TrainingSpec

__all__ = ["DEFAULT_ACCELERATORS", "InfeasiblePlanError", "plan", "serving_on"]

DEFAULT_ACCELERATORS = (
    "h100-sxm5-80gb",
    "h200-sxm-141gb",
    "b200-sxm-192gb",
    "a100-sxm4-80gb",
    "mi300x",
)
# A plan's services run on a production engine unless the spec names one (issue 27: the
# default was plain Hugging Face generation, several times slower than what anyone deploys).
PLAN_ENGINE = "vllm"
Progress = Callable[[str], None]


def plan(spec: PlanSpec, progress: Progress | None = None) -> Plan:
    tick = progress or (lambda _msg: None)
    log = Assumptions()
    accelerators = _candidates(spec)
    portfolios: list[Portfolio] = []
    for name in accelerators:
        portfolio = Portfolio(name)
        for workload in spec.workloads:
            tick(f"{workload.name} on {name}")
            allowed = workload.constraints.accelerators
            if allowed and name not in allowed:
                portfolio.failures.append(f"{workload.name}: {name} is not in its accelerators")
                continue
            try:
                choice = (
                    _size_training(spec, workload, name, log)
                    if isinstance(workload, TrainingWorkload)
                    else _size_inference(spec, workload, name, log)
                )
            except (UserError, ValidationError) as exc:
                portfolio.failures.append(f"{workload.name} on {name}: {_first_line(exc)}")
                continue
            if not choice.meets_constraints:
                portfolio.failures.append(f"{workload.name} on {name}: " + "; ".join(choice.notes))
            portfolio.choices.append(choice)
        # ranked on what the plan's cost rents: whole instances of the offer it prices
        floor = instance_floor(portfolio.choices).gpus
        found = rented_offer(cloud_price_offers(name, spec.providers, spec.regions, min_gpus=floor))
        if found is not None:
            portfolio.choices = priced_on_instances(portfolio.choices, found[1].gpus)
        portfolios.append(portfolio)
    tick("comparing accelerators")
    log.add(
        "on-demand list price of the work",
        "on whole instances",
        "on-demand price per GPU-hour × the GPUs rented: the instances of the offer the plan's "
        "cost prices (plan/cost/instances.py), services sharing theirs (gpufleet, derived); "
        "shown beside the plan cost, and the ranking's tie-break",
    )
    feasible = by_list_price(portfolios)
    if not feasible:
        raise InfeasiblePlanError(_infeasible_advice(spec, portfolios))
    # ranked on the headline each would give, the figure the summary shows (plan/ranking.py)
    # budgets are held there too, to that headline: one over them leaves with its failure
    ranked = rank(spec, feasible, lambda p: cloud_offers(spec, p), log, tick)
    if not ranked:
        raise InfeasiblePlanError(_infeasible_advice(spec, portfolios))
    best, rest = ranked[0], ranked[1:4]
    return _assemble(spec, best, rest, log, tick)


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
    return str(exc).splitlines()[0]


def _candidates(spec: PlanSpec) -> list[str]:
    names = list(spec.accelerators) or list(DEFAULT_ACCELERATORS)
    for w in spec.workloads:
        if w.hardware is not None and w.hardware.accelerator not in names:
            names.append(w.hardware.accelerator)
    return [get_accelerator(n).name for n in names]


def _size_training(
    spec: PlanSpec, w: TrainingWorkload, accelerator: str, log: Assumptions
) -> WorkloadChoice:

    if w.training.tokens is None:
        raise UserError(f"workloads.{w.name}.training.tokens: a plan needs the token budget")
    base = TrainingSpec.model_validate(
        {
            "kind": "training",
            "name": w.name,
            "model": w.model.model_dump(),
            "training": w.training.model_dump(),
            "hardware": {"accelerator": accelerator},
            "reliability": _reliability_data(w.reliability),
        }
    )
    deadline = training_deadline_s(w)
    if w.constraints.deadline is None:
        log.add(
            f"deadline[{w.name}]",
            f"{DEFAULT_DEADLINE_S / 86_400:.0f} days",
            "no deadline given (assumption)",
        )
    scope = price_scope(spec)
    unpriced = _unpriced(spec, accelerator, scope)
    if unpriced is not None:
        return _unmet(w.name, "training", accelerator, unpriced)
    # no budget_usd here: it is held to the plan's headline cost once costed (plan.ranking)
    limits = Constraints(max_gpus=w.constraints.max_gpus, deadline_s=deadline, scope=scope)
    # Every whole-server count that splits (`training_search.gpu_counts_for`, ~9 % apart),
    # not only powers of two: once goodput was costed at the checkpoint storage the plan
    # designs, 2,048 H200s missed the 70B run's 90 days by 1.4 and the next power of two
    # doubled the fleet (4,096 H100s for 52.5 days, $28.3 M); 2,560 make it in 80 days for
    # $27.1 M. A deadline is met by the cheapest layout, not the cheapest on a coarse grid.
    result = search_training(base, [accelerator], gpu_counts=None, constraints=limits, top_k=50)
    for a in result.assumptions.frozen():
        log.add(a.name, a.value, a.source)
    if not result.pareto:
        return _unmet(w.name, "training", accelerator, _why_no_layout(base, accelerator, limits))
    price = cheapest_gpu_hour(accelerator, scope)
    checkpoint_bytes = float(parameter_count(base.model).total * TRAINING_STATE_BYTES_PER_PARAM)
    write_for = checkpoint_write_rule(w.reliability, checkpoint_bytes)
    pick, est, on_time = _cheapest_on_time(base, result.pareto, deadline, write_for)
    if not on_time:
        return _unmet(w.name, "training", accelerator, _late(pick, est, deadline))
    same_gpus = None
    for reason in est.reasons:
        if reason.startswith(MEMORY_ENGINEERING):  # near the HBM limit: say so, with options
            head, _, rest = reason.partition(": ")
            log.add(f"memory[{w.name} on {accelerator}]", head, rest)
            same_gpus = rest.partition("; ")[2] or None
    hours = est.gpu_hours_with_failures or est.gpu_hours
    cost = None if price is None or hours is None else hours * price.usd_per_gpu_hour
    note = None
    capacity = float(est.memory_capacity_bytes)
    if est.memory_per_gpu_bytes.total > MEMORY_RISK_FRACTION * capacity:
        roomy = [c for c in result.top if c.memory_bytes <= NEAR_LIMIT_FRACTION * capacity]
        note = memory_near_limit_note(
            used_bytes=float(est.memory_per_gpu_bytes.total),
            capacity_bytes=capacity,
            wall_clock_days=est.wall_clock_days_with_failures or est.train_time_days or 0.0,
            cost_usd=cost,
            gpus=pick.gpus,
            same_gpus=same_gpus,
            roomier=_roomier(base, roomy, deadline, write_for, price),
        )
    return WorkloadChoice(
        workload=w.name,
        kind="training",
        accelerator=accelerator,
        gpus=pick.gpus,
        parallelism=est.parallelism.model_dump(
            # offload shows only where it is used, so fitting plans read as before
            exclude={"chosen_by", "microbatches_per_step"}
            | ({"offload"} if est.parallelism.offload == "none" else set())
        ),
        metrics={
            "train_time_days": est.train_time_days,
            "wall_clock_days_with_failures": est.wall_clock_days_with_failures,
            "mfu": est.mfu,
            "tokens_per_s": est.tokens_per_s,
            "goodput_fraction": est.goodput_fraction,
            "memory_per_gpu_bytes": float(est.memory_per_gpu_bytes.total),
            "step_time_s": est.step_time_s,
        },
        design_inputs={
            "step_time_s": est.step_time_s,
            "tokens_per_s": est.tokens_per_s,
            # every byte a GPU sends across nodes per step, as the step model moves it (DP,
            # ZeRO-3 gathers, CP ring, PP sends, EP all-to-all, TP that spans nodes): the key
            # keeps its name, TrafficNeed's field (design/fabric.py reads it)
            "dp_bytes_per_step": est.scaleout_bytes_per_gpu_per_step.total,
            "checkpoint_bytes": float(
                parameter_count(base.model).total * TRAINING_STATE_BYTES_PER_PARAM
            ),
            "dataset_bytes": float(w.training.tokens) * 4,
            # the storage its goodput was computed at, which the design builds (_assemble)
            "checkpoint_write_bytes_per_s": write_for(pick.gpus),
            "checkpoint_interval_s": est.checkpoint_interval_s or 0.0,
            "tp_crosses_nodes": float(est.scaleout_bytes_per_gpu_per_step.tp > 0),
        },
        gpu_hours=hours,
        cost_usd=cost,
        meets_constraints=True,
        notes=[note] if note else [],
    )


def _reliability_data(
    rel: Reliability | None, write_bytes_per_s: float | None = None
) -> dict[str, object] | None:
    """`rel` as spec data that reads back as itself, its checkpoint storage (or
    `write_bytes_per_s`) written with its unit: a bare number is GB/s while a Reliability
    dumps bytes/s, so a dump read back multiplied the rate by 10^9 (a plan stating
    `checkpoint_storage: 21.6GB/s` was costed at 2.2e19 B/s: 94.6 % goodput, not 73 %)."""
    if rel is None and write_bytes_per_s is None:
        return None
    data: dict[str, object] = rel.model_dump() if rel is not None else {}
    rate = write_bytes_per_s
    if rate is None and rel is not None:
        rate = rel.checkpoint_storage
    data["checkpoint_storage"] = None if rate is None else f"{float(rate)!r}B/s"
    return data


def _layout_spec(base: TrainingSpec, pick: Candidate, write_bytes_per_s: float) -> TrainingSpec:
    """`base` on the searched layout `pick`, its checkpoints written at `write_bytes_per_s`."""
    data = base.model_dump()
    data["hardware"]["count"] = pick.gpus
    data["parallelism"] = training_parallelism(pick)
    data["reliability"] = _reliability_data(base.reliability, write_bytes_per_s)
    return TrainingSpec.model_validate(data)


def _cheapest_on_time(
    base: TrainingSpec,
    front: Sequence[Candidate],
    deadline_s: float,
    write_for: Callable[[int], float],
) -> tuple[Candidate, TrainingEstimate, bool]:
    """The cheapest layout of `front` whose wall clock with failures meets the deadline, with
    its estimate and True; else the fastest with False. Each layout's goodput is at the
    storage the plan would build for its GPU count (`write_for`), the bandwidth growing with
    the GPUs, so `within_limits.cheapest_on_time`, which estimates every layout with one
    spec (and reads a stated storage rate back from its dump × 10^9), is not used here."""
    closest: tuple[Candidate, TrainingEstimate, float] | None = None
    for pick in sorted(front, key=lambda c: (c.cost_usd or math.inf, c.gpus)):
        est = estimate_training(_layout_spec(base, pick, write_for(pick.gpus)))
        days = est.wall_clock_days_with_failures
        if days is None or days * 86_400.0 <= deadline_s:
            return pick, est, True
        if closest is None or days < closest[2]:
            closest = (pick, est, days)
    assert closest is not None, "the front is never empty here"
    return closest[0], closest[1], False


def _late(pick: Candidate, est: TrainingEstimate, deadline_s: float) -> str:
    days = est.wall_clock_days_with_failures or 0.0
    return (
        f"misses the deadline with failures: the fastest layout ({pick.gpus:,} GPUs) "
        f"needs {fmt_duration(days * 86_400.0)} with failures and restarts against "
        f"{fmt_duration(deadline_s)}"
    )


def _roomier(
    base: TrainingSpec,
    roomy: Sequence[Candidate],
    deadline_s: float,
    write_for: Callable[[int], float],
    price: GpuHourPrice | None,
) -> RoomierLayout | None:
    """The layout the plan would fall back to if the recommended one does not fit in memory
    in practice: of the search's layouts within `NEAR_LIMIT_FRACTION` of HBM, the cheapest on
    time, else the fastest (`_cheapest_on_time`); None without one. The search keeps the
    fastest layout per GPU count, so a roomier layout on the same count is not among them:
    the estimator's single changes in the appendix name those."""
    if not roomy:
        return None
    pick, est, on_time = _cheapest_on_time(base, roomy, deadline_s, write_for)
    hours = est.gpu_hours_with_failures or est.gpu_hours
    p = est.parallelism
    return RoomierLayout(
        gpus=pick.gpus,
        layout=f"tp {p.tp}, pp {p.pp}, dp {p.dp}, zero {p.zero_stage}, recompute {p.recompute}",
        memory_per_gpu_bytes=float(est.memory_per_gpu_bytes.total),
        wall_clock_days=est.wall_clock_days_with_failures or est.train_time_days or 0.0,
        cost_usd=None if price is None or hours is None else hours * price.usd_per_gpu_hour,
        meets_deadline=on_time,
    )


def _why_no_layout(base: TrainingSpec, accelerator: str, limits: Constraints) -> str:
    """Which constraint binds when no layout meets them all, from searches with one relaxed:
    max_gpus below the smallest count the plan sizes (no layout was even tried, so blaming
    memory would send the user the wrong way), else the fastest layout within max_gpus (the
    deadline binds), else nothing fits in memory. The budget never binds here: it is held
    after costing (`plan.ranking.over_budget`)."""
    smallest = POWER_OF_TWO_COUNTS[0]
    if limits.max_gpus is not None and limits.max_gpus < smallest:
        return (
            f"max_gpus {limits.max_gpus:,} is below one server of {smallest} GPUs: a plan "
            f"sizes training on whole {smallest}-GPU servers ({smallest:,} to "
            f"{POWER_OF_TWO_COUNTS[-1]:,} GPUs); set max_gpus to at least {smallest}"
        )
    fastest = search_training(
        base,
        [accelerator],
        gpu_counts=POWER_OF_TWO_COUNTS,
        constraints=Constraints(max_gpus=limits.max_gpus, scope=limits.scope),
        top_k=1,
    ).top
    best_time = fastest[0].train_time_s if fastest else None
    if not fastest or best_time is None:
        return "no layout fits in memory"
    return (
        f"misses the deadline: the fastest layout ({fastest[0].gpus:,} GPUs) needs "
        f"{fmt_duration(best_time)}"
    )


def price_scope(spec: PlanSpec) -> PriceScope:
    """Where the plan may buy GPU-hours: its providers and regions."""
    return PriceScope(tuple(spec.providers), tuple(spec.regions))


def _unpriced(spec: PlanSpec, accelerator: str, scope: PriceScope) -> str | None:
    """Why `accelerator` cannot be planned without a price where the plan buys it: a cloud
    deployment rents it, an on-prem one buys it. An unpriced accelerator is never taken as
    free; with `deployment: both` a budget is held to the headline the plan costs it at, and
    one with no headline is dropped there (`plan.ranking.over_budget`)."""
    if spec.deployment == "on-prem":
        try:
            hardware_price(accelerator)
        except NoOnPremPriceError as exc:
            return f"{exc} (an on-prem plan buys it)"
        return None
    if cheapest_gpu_hour(accelerator, scope) is not None:
        return None
    if spec.deployment == "cloud":
        return f"{no_price_reason(accelerator, scope)} (a cloud plan rents it)"
    return None


def _unmet(
    workload: str, kind: Literal["training", "inference"], accelerator: str, note: str
) -> WorkloadChoice:
    return WorkloadChoice(
        workload=workload,
        kind=kind,
        accelerator=accelerator,
        gpus=0,
        parallelism={},
        metrics={},
        gpu_hours=None,
        cost_usd=None,
        meets_constraints=False,
        notes=[note],
    )


def _size_inference(
    spec: PlanSpec, w: InferenceWorkload, accelerator: str, log: Assumptions
) -> WorkloadChoice:
    asked = w.serving
    if "engine" not in asked.model_fields_set:
        asked = asked.model_copy(update={"engine": PLAN_ENGINE})
        log.add(
            f"engine[{w.name}]",
            PLAN_ENGINE,
            "not given in the spec: a plan sizes a production service (continuous batching, "
            "paged KV cache); `engine: generic` models plain Hugging Face generation",
        )
    serving = serving_on(asked, accelerator, w.name, log)
    engine, precision = serving.engine, serving.precision
    inf = InferenceSpec.model_validate(
        {
            "kind": "inference",
            "name": w.name,
            "model": w.model.model_dump(),
            "serving": serving.model_dump(),
            "hardware": {"accelerator": accelerator},
        }
    )
    scope = price_scope(spec)
    unpriced = _unpriced(spec, accelerator, scope)
    if unpriced is not None:
        return _unmet(w.name, "inference", accelerator, unpriced)
    result = search_inference(inf, [accelerator], precisions=[precision], top_k=50, scope=scope)
    for a in result.assumptions.frozen():
        log.add(a.name, a.value, a.source)
    if not result.top:
        return _unmet(w.name, "inference", accelerator, f"cannot serve it: {result.why_none()}")
    price = cheapest_gpu_hour(accelerator, scope)
    picked = serving_within_limits(result.top, w.constraints)
    if isinstance(picked, str):
        return _unmet(w.name, "inference", accelerator, picked)
    c = picked
    hours = c.gpus * HOURS_PER_YEAR * spec.horizon_years
    return WorkloadChoice(
        workload=w.name,
        kind="inference",
        accelerator=accelerator,
        gpus=c.gpus,
        parallelism=c.plan_parallelism(engine),
        metrics=c.plan_metrics(),
        gpu_hours=hours,
        cost_usd=None if price is None else hours * price.usd_per_gpu_hour,
        meets_constraints=True,
    )


def serving_on(
    serving: ServingParams, accelerator: str, label: str, log: Assumptions
) -> ServingParams:
    """The serving parameters as they can run on `accelerator`: TensorRT-LLM falls back to
    vLLM off NVIDIA, FP8 weights to INT8 (and an FP8 KV cache to BF16) without FP8 units;
    each change is logged under `label`."""
    engine = serving.engine
    device = get_accelerator(accelerator)
    if engine == "tensorrt-llm" and device.vendor != "NVIDIA":
        engine = "vllm"
        log.add(f"engine[{label}@{accelerator}]", "vllm", "TensorRT-LLM runs on NVIDIA only")
    precision = serving.precision
    if precision == "fp8" and device.fp8_dense_tflops is None:
        precision = "int8"
        log.add(
            f"precision[{label}@{accelerator}]",
            "int8 weights, bf16 KV",
            f"{accelerator} has no FP8 matrix units",
        )
    kv = serving.kv_precision
    if kv == "fp8" and precision != "fp8":
        kv = "bf16"
    return serving.model_copy(update={"engine": engine, "precision": precision, "kv_precision": kv})


def _infeasible_advice(spec: PlanSpec, portfolios: Sequence[Portfolio]) -> list[str]:
    advice: list[str] = []
    for p in portfolios:
        advice.extend(p.failures)
    budgets = [w.constraints.budget_usd for w in spec.workloads if w.constraints.budget_usd]
    if budgets:
        advice.append(
            "a larger budget_usd may help: a budget caps the plan's headline cost (the "
            "optimised purchase mix when renting, the on-prem TCO when owning)"
        )
    if any(
        "no cloud price" in f or "no on-prem purchase price" in f
        for p in portfolios
        for f in p.failures
    ):
        advice.append(
            "an accelerator without a price where the plan buys cannot be planned: allow "
            "other accelerators, providers or regions, or deployment: both"
        )
    advice.extend(_remedies(spec, portfolios))
    return advice


def _remedies(spec: PlanSpec, portfolios: Sequence[Portfolio] = ()) -> list[str]:
    """What the spec could relax, from its own workloads: a max_gpus below one server must
    rise whatever else changes; a deadline and max_gpus bind only training runs here (the
    serving search reads neither), SLOs only services; a line names only what applies."""
    smallest = POWER_OF_TWO_COUNTS[0]
    training = [w for w in spec.workloads if isinstance(w, TrainingWorkload)]
    tiny = [w.name for w in training if (w.constraints.max_gpus or smallest) < smallest]
    sized = [w for w in training if w.name not in tiny]
    serving = any(isinstance(w, InferenceWorkload) for w in spec.workloads)
    # an SLO cannot make weights fit: offer it unless every serving failure is memory-bound
    unserved = [f for p in portfolios for f in p.failures if "cannot serve it" in f]
    slo_may_help = serving and not (unserved and all(ONE_NODE_ONLY in f for f in unserved))
    out: list[str] = []
    if tiny:
        out.append(
            f"to make it feasible: set max_gpus to at least {smallest} (one server) for "
            + _list(tiny, "and")
        )
    options: list[str] = []
    if sized:
        options.append("extend the deadline")
    if any(w.constraints.max_gpus is not None for w in sized):
        options.append("raise max_gpus")
    if sized or serving:
        options.append("allow more accelerators")
    if slo_may_help:
        options.append("relax the serving SLOs")
    if options:
        out.append(("otherwise: " if tiny else "to make it feasible: ") + _list(options))
    return out


def _list(items: Sequence[str], word: str = "or") -> str:
    """A serial list, "a, b, or c": remedies read as alternatives, names with "and"."""
    if len(items) < 3:
        return f" {word} ".join(items)
    return ", ".join(items[:-1]) + f", {word} " + items[-1]


def _teams(spec: PlanSpec, best: Portfolio) -> list[TeamQuota]:
    by_team: dict[str, list[WorkloadChoice]] = {}
    named = {w.name: (w.team or w.name) for w in spec.workloads}
    for c in best.choices:
        by_team.setdefault(named[c.workload], []).append(c)
    if not any(w.team for w in spec.workloads):
        return []  # the multi-tenant view is for specs that name teams
    horizon_h = spec.horizon_years * HOURS_PER_YEAR
    out = []
    for team, choices in sorted(by_team.items()):
        steady = sum(c.gpus for c in choices if c.kind == "inference")
        training_peak = sum(c.gpus for c in choices if c.kind == "training")
        training_avg = sum((c.gpu_hours or 0) / horizon_h for c in choices if c.kind == "training")
        guaranteed = steady + math.ceil(training_avg)
        out.append(
            TeamQuota(
                team=team,
                demand_gpus=steady + training_avg,
                guaranteed_gpus=guaranteed,
                burst_gpus=max(0, steady + training_peak - guaranteed),
                method=(
                    "guaranteed = inference GPUs + average training GPUs over the horizon; "
                    "burst up to the training peak by borrowing (analytical; the simulation-"
                    "based sizing is a later issue)"
                ),
            )
        )
    return out


def _with_checkpoint_storage(spec: PlanSpec, best: Portfolio) -> PlanSpec:
    """`spec` with each training run's checkpoint storage set to the rate its goodput used
    (`checkpoint_write_bytes_per_s` in its design inputs)."""
    rates = {
        c.workload: c.design_inputs["checkpoint_write_bytes_per_s"]
        for c in best.choices
        if c.kind == "training" and c.design_inputs.get("checkpoint_write_bytes_per_s")
    }
    workloads = [
        w.model_copy(
            update={
                "reliability": Reliability.model_validate(
                    _reliability_data(w.reliability, rates[w.name])
                )
            }
        )
        if isinstance(w, TrainingWorkload) and w.name in rates
        else w
        for w in spec.workloads
    ]
    return spec.model_copy(update={"workloads": workloads})


def _assemble(
    spec: PlanSpec, best: Portfolio, rest: list[Portfolio], log: Assumptions, tick: Progress
) -> Plan:
    tick("designing the cluster and pricing it")
    gpus = best.peak_gpus
    cloud = cloud_offers(spec, best, log)
    cloud_notes = cloud_gaps(best.accelerator, spec.providers, spec.regions).sentences()
    for note in cloud_notes:
        log.add("cloud providers", "left out" if cloud else "none", f"instances.csv: {note}")
    # the tornado's failure-rate row re-runs each run's goodput from its spec: at the storage
    # the plan builds for it, held fixed while the failure rate moves
    built = _with_checkpoint_storage(spec, best)
    design, curve, cost, deployment, provider, extra = cost_and_design(built, best, cloud, log)
    given = {
        w.name
        for w in spec.workloads
        if isinstance(w, TrainingWorkload) and w.reliability and w.reliability.checkpoint_storage
    }
    design = checkpoint_storage_as_costed(design, best.choices, given, log)
    why = why_best(best, rest[0]) if rest else ["the only accelerator that meets every constraint"]
    rented = rented_sentence(spec, best, cost, provider) if deployment == "cloud" else ""
    why = ([rented] if rented else []) + why + extra
    recommendation = Recommendation(
        accelerator=best.accelerator,
        deployment=deployment,
        provider=provider,
        workloads=best.choices,
        total_gpus=gpus,
        why=why,
        gpus_at_once=gpus_at_once(spec, best.choices),
    )
    alternatives = [
        Alternative(
            accelerator=p.accelerator,
            workloads=p.choices,
            total_gpus=p.peak_gpus,
            cost_usd=p.cost_usd,
            compared=[
                s.replace(best.accelerator, "the recommendation", 1) for s in why_best(best, p)
            ],
            plan_cost_usd=p.plan_cost_usd,
            plan_cost_what=p.plan_cost_what,
            priced_gpus=p.plan_gpus,
            gpus_at_once=gpus_at_once(spec, p.choices),
        )
        for p in rest
    ]
    return Plan(
        name=spec.name,
        generated_by=f"gpufleet {__version__}",
        recommendation=recommendation,
        summary=executive_summary(
            recommendation, alternatives, design, cost, curve, cloud_notes=cloud_notes
        ),
        alternatives=alternatives,
        design=design,
        demand_curve=curve,
        cloud=cloud,
        cloud_notes=cloud_notes,
        cost=cost,
        teams=_teams(spec, best),
        infeasible=[],
        assumptions=[Assumption(name=a.name, value=a.value, source=a.source) for a in log.frozen()],
    )
