"""Whole instances: what the cloud rents for a demand counted in GPUs.

Prices are per GPU-hour (an instance's price over its GPUs), but a cloud rents whole
instances: every H100 and H200 row of instances.csv has 8 GPUs, so 13 GPUs are 2 instances
and 16 GPUs are paid for. Pricing the GPUs one at a time understated every cloud cost of a
plan (chat-70b: on-demand $2.11 M for 13 GPUs where its own Cloud options table rents 2
instances at $98.72/h, $2.59 M over 3 years). So the demand is rounded to whole instances of
the offer priced before anything prices it, and the plan says how many it rents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_count
from gpufleet.plan.cost.demand import Demand, whole_instances
from gpufleet.plan.cost.prices import (
    CAPACITY_BLOCK,
    ON_DEMAND,
    RESERVED_1Y,
    RESERVED_3Y,
    SPOT,
    InstanceOffer,
)
from gpufleet.plan.model import WorkloadChoice


@dataclass(frozen=True)
class InstanceFloor:
    """The fewest GPUs one rented instance must have for a plan's work on one accelerator
    (`min_gpus` of the price table and the Cloud options table), and the group that sets it:
    "pretrain-70b's tensor-parallel group of 4"; "" at 1 GPU."""

    gpus: int = 1
    why: str = ""


def _axis(parallelism: Mapping[str, int | str | bool], key: str) -> int:
    value = parallelism.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return 1
    return value


def node_local_group(choice: WorkloadChoice) -> tuple[int, str]:
    """(GPUs, what) of the largest group of `choice` that must sit inside one instance.

    Its tensor-parallel group always: a replica's (the serving search keeps a replica on
    one node) or a training run's (the search keeps tp within the scale-up domain). A
    training run also keeps inside one instance every larger span, in Megatron rank order,
    that the estimator times on the scale-up link (`estimate.training._bandwidths`: a group
    within the accelerator's scale-up domain runs on NVLink, a larger one on the network):
    tensor × context, tensor × expert, a small run's whole data-parallel ring, or two
    pipeline neighbours. Split across instances, such a group would run at network speed,
    not at the speed its time and cost were estimated at. (1, "") for a choice not sized.
    """
    if choice.gpus <= 0:
        return 1, ""
    p = choice.parallelism
    tp = min(_axis(p, "tp"), choice.gpus)
    if choice.kind == "inference":
        return tp, f"replica's tensor-parallel group of {tp}"
    cp, ep, dp, pp = (_axis(p, k) for k in ("cp", "ep", "dp", "pp"))
    two_stages = tp * cp * dp * min(pp, 2)
    spans = [
        (tp * cp, f"tensor × context-parallel group of {tp * cp}"),
        (tp * ep, f"tensor × expert-parallel group of {tp * ep}"),
        (tp * cp * dp, f"data-parallel ring of {tp * cp * dp} GPUs"),
        (two_stages, f"pair of pipeline stages, {two_stages} GPUs"),
    ]
    domain = get_accelerator(choice.accelerator).scaleup_domain_gpus or 1
    inside = [(n, what) for n, what in spans if n <= min(domain, choice.gpus)]
    # the first of the largest: the plainest name for a span several axes give
    return max([(tp, f"tensor-parallel group of {tp}"), *inside], key=lambda s: s[0])


def instance_floor(choices: Sequence[WorkloadChoice]) -> InstanceFloor:
    """The fewest GPUs per instance that every one of `choices` (one accelerator's work) can
    run on: the largest group any of them keeps inside one instance (`node_local_group`).

    One size for all of them: the plan rents one offer per accelerator and the services
    share its instances, so a tp=1 service beside a tp=8 run is rented on instances that fit
    the run. Per workload would price the service on smaller instances, but no plan rents
    two instance types of one accelerator."""
    best = InstanceFloor()
    for c in choices:
        gpus, what = node_local_group(c)
        if gpus > best.gpus:
            best = InstanceFloor(gpus, f"{c.workload}'s {what}")
    return best


# The offer whose instances the demand is rented in: on-demand (the plan's Cloud options
# table lists its instances), else the kind that would carry the baseline, else the burst's
_BASIS = (ON_DEMAND, RESERVED_3Y, RESERVED_1Y, SPOT, CAPACITY_BLOCK)


def rented_offer(offers: Mapping[str, InstanceOffer]) -> tuple[str, InstanceOffer] | None:
    """(price key, offer) whose instances the demand is rounded to; None without a price."""
    for key in _BASIS:
        if key in offers:
            return key, offers[key]
    return None


def _plural(count: float, word: str) -> str:
    return f"{fmt_count(count)} {word}{'' if count == 1 else 's'}"


def rented_counts(demand: Demand, rented: Demand) -> dict[str, float]:
    """GPUs and instances rented at the busiest hour (`Demand.gpus_at_once`: the baseline
    and the gangs that run together then, the basis of the Cloud options table), and the
    GPUs of them left idle. Empty when the burst's gangs are not known: its GPUs at once
    cannot be told from its GPU-hours. The sum of every gang's GPUs was counted before,
    though runs that never overlap are never rented together (year-of-runs: 1,296 GPUs as
    162 instances, where 528 are in use at once)."""
    used, gpus = demand.gpus_at_once, rented.gpus_at_once
    if used is None or gpus is None:
        return {}
    return {
        "rented_gpus": float(gpus),
        "rented_instances": float(gpus // rented.instance_gpus),
        "idle_gpus": float(gpus - used),
    }


def on_whole_instances(
    demand: Demand, offers: Mapping[str, InstanceOffer], log: Assumptions
) -> Demand:
    """`demand` rounded to whole instances of the offer it is rented in (`Demand.on_instances`),
    with a log line that says how many GPUs and instances that is and how many sit idle."""
    found = rented_offer(offers)
    if found is None:
        return demand
    key, offer = found
    n = offer.gpus
    rented = demand.on_instances(n)
    if demand.gpu_hours <= 0:
        return rented
    name = f"{demand.accelerator} rented instances"
    what = f"{n}-GPU {offer.instance} instance"
    where = f"({offer.provider} {offer.region})"
    others = sorted(
        f"{k} on {o.instance} ({o.gpus} GPUs)" for k, o in offers.items() if o.gpus != n
    )
    source = (
        f"instances.csv: the cloud rents whole instances, and the {key.replace('_', '-')} "
        f"offer {offer.instance} has {_plural(n, 'GPU')}; every cloud cost (on-demand, "
        "reserved, spot, the mix, renting the planned work, the sensitivity) prices the GPUs "
        "rented and the mix reserves whole instances; the services share instances, each "
        "training gang rounds up on its own, and the instances counted are those in use at "
        "the busiest hour: runs that do not overlap are rented in turn (gpufleet assumption)"
        + (
            f"; the other prices rent other sizes ({', '.join(others)}), rounded to {n} too"
            if others
            else ""
        )
    )
    counts = rented_counts(demand, rented)
    if n == 1:
        log.add(name, f"per GPU: {offer.instance} {where} rents 1 GPU per instance", source)
    elif counts:
        used = counts["rented_gpus"] - counts["idle_gpus"]
        instances = counts["rented_instances"]
        log.add(
            name,
            f"{_plural(used, 'GPU')} in use at once rented as {fmt_count(instances)} × {what}"
            f"{'' if instances == 1 else 's'} {where}: {_plural(counts['idle_gpus'], 'GPU')} idle",
            source,
        )
    else:
        instances = rented.baseline_gpus // n
        log.add(
            name,
            f"the {_plural(demand.baseline_gpus, 'GPU')} used every hour rented as "
            f"{fmt_count(instances)} × {what}{'' if instances == 1 else 's'} {where}; the "
            f"burst's {fmt_count(demand.burst_gpu_hours)} GPU-hours priced as given",
            source + "; the burst's gang sizes were not given, so it is not rounded",
        )
    return rented


def priced_on_instances(
    choices: Sequence[WorkloadChoice], gpus_per_instance: int
) -> list[WorkloadChoice]:
    """Each choice's list-price cost as the plan's own cost rents it (`Demand.on_instances`):
    the services share instances, so their GPUs round up once and the idle GPUs' cost is
    split between them by GPUs; each training gang rounds up on its own. The accelerators
    are ranked on these costs, so the ranking pays for what the chosen plan pays for (13 H200
    and 16 H100 are both 2 × 8-GPU instances). The GPUs and GPU-hours stay the work's;
    `rented_gpus` says what the cost pays for, so the Workloads table can say why a service's
    cost per GPU-hour is above the list price (shared-cluster's product-chat: 12.4 GPUs paid
    for, 7 used)."""
    n = gpus_per_instance
    serving = sum(c.gpus for c in choices if c.kind == "inference" and c.gpus > 0)
    serving_scale = whole_instances(serving, n) / serving if serving else 1.0
    out: list[WorkloadChoice] = []
    for c in choices:
        if c.cost_usd is None or c.gpus <= 0:
            out.append(c)
            continue
        scale = serving_scale if c.kind == "inference" else whole_instances(c.gpus, n) / c.gpus
        out.append(
            c.model_copy(update={"cost_usd": c.cost_usd * scale, "rented_gpus": c.gpus * scale})
        )
    return out
