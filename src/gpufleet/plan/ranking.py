"""Rank the feasible accelerators on the cost of the plan each would give, and say why.

The plan's headline is the cost of the deployment it recommends: the optimised purchase mix
when renting, the on-prem TCO when owning (`summary.deployment_cost`). The planner used to
rank on the work's on-demand list price instead, and the two orders can differ: for
`examples/plan-pretrain-70b.yaml` the H100 ranked first at $28,496,319 against the H200's
$28,552,797 on demand, while the H200's optimised mix was the cheaper ($27,839,359 against
$27,861,617), so the summary said "h200 would be recommended if its list-price cost fell by
0.2 %" beside a headline it already beat. So every feasible accelerator is costed as the
plan would cost it (`assemble.cost_and_design` without the tornado and the rent-or-own
verdict, which move no total), ranked on that figure, and the comparison sentences, the
alternatives table and the executive summary all state that one figure and say which it is.

Budgets are held to that same figure (`over_budget`), for the same reason: sizing held them to
the on-demand list price on whole instances, so a service whose on-prem B200 TCO was $456,423
was rejected at $2,994,154 against `budget_usd: 1000000`, while MI300X, with no cloud price,
was never checked and won at $684,232 as "the only accelerator that meets every constraint".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_duration, fmt_pct, fmt_usd, fmt_usd_apart
from gpufleet.plan.assemble import InfeasiblePlanError, cost_and_design
from gpufleet.plan.demand_curve import gpus_at_once
from gpufleet.plan.model import CloudOffer, Portfolio
from gpufleet.plan.summary import LIST_PRICES, cost_noun, deployment_cost, priced_gpus
from gpufleet.specs.plan import PlanSpec

Offers = Callable[[Portfolio], dict[str, list[CloudOffer]]]


def by_list_price(portfolios: Sequence[Portfolio]) -> list[Portfolio]:
    """The feasible portfolios by their work's on-demand list price, then fewer GPUs: the
    order they are costed in, and the tie-break after the plan cost."""
    return sorted(
        (p for p in portfolios if p.feasible),
        key=lambda p: (p.cost_usd is None, p.cost_usd or math.inf, p.peak_gpus),
    )


def plan_cost(spec: PlanSpec, p: Portfolio, offers: Offers) -> tuple[float | None, str, int]:
    """The headline cost of the plan `p` would give, what it is, and the GPUs it pays for:
    the figures the summary would show were it recommended (`summary.deployment_cost` and
    `summary.priced_gpus` of `cost_and_design`)."""
    found = cost_and_design(spec, p, offers(p), Assumptions(), headline_only=True)
    design, _, cost, deployment, _, _ = found
    usd, what = deployment_cost(deployment, p.choices, cost)
    return usd, what, priced_gpus(deployment, gpus_at_once(spec, p.choices), design, cost.mix)


def over_budget(spec: PlanSpec, p: Portfolio) -> list[str]:
    """Why `p`'s plan breaks its workloads' budgets (none: within them), in the figure the
    plan reports. With a budget on every workload the plan's headline (`p.plan_cost_usd`,
    set by `rank`) is held to their sum: the headline is the fleet's, shared instances and
    owned GPUs included, and has no per-workload split to hold each to its own. With budgets
    on only some, the plan's one per-workload figure is held to each: the work at on-demand
    list prices on whole instances (`WorkloadChoice.cost_usd`), the cost its table shows.
    A figure that is missing (no price) never passes: the budget cannot be checked."""
    budgets = {w.name: w.constraints.budget_usd for w in spec.workloads}
    given = {name: usd for name, usd in budgets.items() if usd is not None}
    if not given:
        return []
    if len(given) == len(budgets):
        total = sum(given.values())
        head = (
            f"{next(iter(given))} on {p.accelerator}"
            if len(given) == 1
            else f"{p.accelerator}: the plan's workloads"
        )
        against = "budget_usd" if len(given) == 1 else "their budget_usd together"
        cost = p.plan_cost_usd
        if cost is None:
            return [f"{head}: no plan cost to hold to {against} {fmt_usd(total)} (no price)"]
        if cost <= total:
            return []
        mine, theirs = fmt_usd_apart(cost, total)
        noun = cost_noun(p.plan_cost_what, " for this work")
        return [f"{head}: over budget: the {noun} is {mine} against {against} {theirs}"]
    out: list[str] = []
    for c in p.choices:
        usd = given.get(c.workload)
        if usd is None:
            continue
        if c.cost_usd is None:
            out.append(
                f"{c.workload} on {p.accelerator}: no cloud price to hold to budget_usd "
                f"{fmt_usd(usd)} (only some workloads have a budget, so each is held to its own "
                f"cost {LIST_PRICES} on whole instances)"
            )
        elif c.cost_usd > usd:
            mine, theirs = fmt_usd_apart(c.cost_usd, usd)
            out.append(
                f"{c.workload} on {p.accelerator}: over budget: {mine} {LIST_PRICES} on whole "
                f"instances against budget_usd {theirs} (only some workloads have a budget, so "
                f"each is held to its own cost)"
            )
    return out


def rank(
    spec: PlanSpec,
    feasible: Sequence[Portfolio],
    offers: Offers,
    log: Assumptions,
    tick: Callable[[str], None],
) -> list[Portfolio]:
    """`feasible` (in list-price order) with their plan costs, sorted on them; ties to the
    lower list price, then fewer GPUs. A portfolio whose plan cannot be costed (an owned
    fleet over the site's power, a run past the horizon) drops out with a line in the log;
    when none can be, the plan is infeasible with every candidate's reason, or (a spec error,
    such as a run past the horizon) fails with the first one's, as it always did. One over
    its workloads' budgets (`over_budget`) drops out with the reason in its `failures`;
    when every one does, the list is empty and the planner says why from those."""
    costed: list[Portfolio] = []
    errors: list[UserError] = []
    over: list[str] = []
    for p in feasible:
        tick(f"costing the plan on {p.accelerator}")
        try:
            p.plan_cost_usd, p.plan_cost_what, p.plan_gpus = plan_cost(spec, p, offers)
        except UserError as exc:
            errors.append(exc)
            why = exc.advice if isinstance(exc, InfeasiblePlanError) else [str(exc)]
            log.add(f"ranking[{p.accelerator}]", "left out", " ".join("; ".join(why).split()))
            continue
        broken = over_budget(spec, p)
        if broken:
            p.failures.extend(broken)
            over.extend(broken)
            log.add(f"ranking[{p.accelerator}]", "left out", "; ".join(broken))
            continue
        costed.append(p)
    if not costed:
        if not errors:
            return []  # every one over budget: the planner says why, from their failures
        infeasible = [e for e in errors if isinstance(e, InfeasiblePlanError)]
        if len(infeasible) == len(errors):
            # every candidate's reason, as the sizing's infeasibility advice lists them all
            advice = [a for e in infeasible for a in e.advice] + over
            raise InfeasiblePlanError(advice) from errors[0]
        raise errors[0]
    log.add(
        "accelerator ranking",
        "the headline cost of the plan each accelerator would give",
        "each feasible accelerator's workloads costed as the plan costs the recommendation: "
        "the optimised purchase mix when renting, the on-prem TCO when owning (with "
        "deployment: both, whichever the rent-or-own verdict picks for it); ties to the lower "
        "on-demand list price, then fewer GPUs (plan/ranking.py; gpufleet, derived)",
    )
    order = {id(p): i for i, p in enumerate(costed)}  # list-price order, the tie-break
    return sorted(
        costed,
        key=lambda p: (p.plan_cost_usd is None, p.plan_cost_usd or math.inf, order[id(p)]),
    )


def _figures(best: Portfolio, other: Portfolio) -> str:
    """The two plan costs and which figure each is, named once when they are the same kind."""
    mine, theirs = fmt_usd_apart(best.plan_cost_usd or 0.0, other.plan_cost_usd or 0.0)
    if best.plan_cost_what == other.plan_cost_what:
        return f"{mine} vs {theirs} {best.plan_cost_what}"
    return f"{mine} {best.plan_cost_what} vs {theirs} {other.plan_cost_what}"


def _list_price_note(best: Portfolio, other: Portfolio) -> str:
    """Where the on-demand list price orders the two the other way, that figure too, said
    to be one the plan does not pay, so a reader who meets it elsewhere sees why."""
    bl, ol = best.cost_usd, other.cost_usd
    if best.plan_cost_what == LIST_PRICES or not bl or not ol or bl <= ol:
        return ""
    mine, theirs = fmt_usd_apart(bl, ol)
    return (
        f"; all on demand at list prices it would cost {fmt_pct(bl / ol - 1)} more, {mine} vs "
        f"{theirs}, which the plan does not buy"
    )


def why(best: Portfolio, other: Portfolio) -> list[str]:
    """Plain sentences on why `best` beats `other`, the cost one in the figure they are
    ranked on (the headline cost of the plan each would give)."""
    out: list[str] = []
    bc, oc = best.plan_cost_usd, other.plan_cost_usd
    if bc and oc:
        # never "$2 vs $2" under "costs less"
        out.append(
            # one decimal: "0% less" for a 0.2 % gap read as a tie the verdict then broke
            f"{best.accelerator} costs {fmt_pct(1 - bc / oc)} less than {other.accelerator} for "
            f"the same work ({_figures(best, other)}{_list_price_note(best, other)})"
            if bc < oc
            else f"{best.accelerator} is chosen over {other.accelerator} at similar cost "
            f"({_figures(best, other)})"
        )
    elif bc and oc is None:
        out.append(f"{other.accelerator} has no catalog price, so its cost cannot be compared")
    for b, o in zip(best.choices, other.choices, strict=False):
        if b.kind == "inference":
            bm, om = (
                b.metrics.get("max_concurrency_per_replica"),
                o.metrics.get("max_concurrency_per_replica"),
            )
            b_tp, o_tp = int(b.parallelism.get("tp") or 1), int(o.parallelism.get("tp") or 1)
            if bm and om and b.gpus < o.gpus:
                # per GPU: a replica spans tp GPUs, and replicas of different tp compare only
                # so (118 requests on one H200 against 148 on two H100s is 118 vs 74 per GPU)
                out.append(
                    # the accelerator named once, after "on": the alternatives' copy says
                    # "on the recommendation" in its place
                    f"{b.workload}: each GPU holds {bm / b_tp:,.0f} concurrent requests within "
                    f"the SLO on {best.accelerator} (tp {b_tp}) vs {om / o_tp:,.0f} on "
                    f"{other.accelerator} (tp {o_tp}), so {(1 - b.gpus / o.gpus):.0%} fewer "
                    f"GPUs ({b.gpus} vs {o.gpus})"
                )
        else:
            bt, ot = b.metrics.get("train_time_days"), o.metrics.get("train_time_days")
            if bt and ot:
                out.append(
                    # in the unit a person would say: a 40-minute run is not "0 days"
                    f"{b.workload}: {b.gpus:,} × {best.accelerator} train in "
                    f"{fmt_duration(bt * 86_400.0)} vs {o.gpus:,} × {other.accelerator} in "
                    f"{fmt_duration(ot * 86_400.0)}"
                )
    return out
