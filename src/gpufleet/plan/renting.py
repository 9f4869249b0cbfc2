"""What renting the recommendation rents: the Cloud options table and the sentence that names
the instances the plan pays for.

Both count whole instances in use at the busiest hour (`demand_curve.gpus_at_once`), as the
cost model prices them (`plan/cost/instances.py`). They counted the sum of every workload's
GPUs before, as if every run overlapped: year-of-runs listed 162 instances for 1,296 GPUs
and said "the workloads use 1,296 at once", where its demand curve peaks at 528.

The sentence names the offer the plan's cost buys: the one the optimised mix spends most on
with the provider the decision names (`cost.breakdown.spend_by_kind`). It named the
on-demand offer before, whatever the mix bought: pretrain-8b said "Rent … on aws" and "100%
of its cost from aws" beside "64 × 8-GPU a3-highgpu-8g (gcp us-central1)".
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.catalog.instances import CloudInstance, load_instances
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.formatting import fmt_pct
from gpufleet.plan.cost.breakdown import spend_by_kind
from gpufleet.plan.cost.instances import InstanceFloor, instance_floor, rented_offer
from gpufleet.plan.cost.prices import (
    CAPACITY_BLOCK,
    ON_DEMAND,
    RESERVED_1Y,
    RESERVED_3Y,
    SPOT,
    InstanceOffer,
    cloud_price_offers,
    cloud_price_sellers,
    holds,
    too_small,
)
from gpufleet.plan.demand_curve import gpus_at_once
from gpufleet.plan.model import CloudOffer, CostBreakdown, Portfolio
from gpufleet.specs.plan import PlanSpec

NETWORKING = {
    "aws": "cluster placement group with EFA (p4d/p5: 400-3,200 Gb/s per instance)",
    "gcp": "compact placement policy with GPUDirect-TCPX/TCPXO (A3) or RoCE (A3 Ultra/A4)",
    "azure": "InfiniBand-connected ND-series scale set (NDR 400 per GPU on ND H100 v5)",
}

# how each price buys, as a sentence names it
BOUGHT_AS = {
    ON_DEMAND: "on demand",
    RESERVED_1Y: "on 1-year reservations",
    RESERVED_3Y: "on 3-year reservations",
    SPOT: "on spot",
    CAPACITY_BLOCK: "in capacity blocks",
}


def _listed_rows(spec: PlanSpec, accelerator: str, provider: str) -> list[CloudInstance]:
    """The provider's whole-instance rows of the accelerator with an on-demand price, in the
    plan's regions."""
    return [
        r
        for r in load_instances()
        if r.provider == provider
        and r.accelerator == accelerator
        and r.is_whole_price
        and (r.accelerators_count or 0) >= 1
        and r.on_demand_usd_per_hour is not None
        and (not spec.regions or r.region in spec.regions)
    ]


def _log_left_out(
    accelerator: str, floor: InstanceFloor, rows: list[CloudInstance], log: Assumptions
) -> None:
    """One log line naming the instance types the table leaves out as too small, and why."""
    log.add(
        f"{accelerator} cloud options",
        f"instances of at least {floor.gpus} GPUs",
        f"{too_small(rows, floor.gpus)} left out: {floor.why} must sit inside one "
        "instance, on its scale-up link (NVLink or xGMI), as its time and cost were "
        "estimated, so every price and table row of this plan rents instances that hold it "
        "(gpufleet assumption)",
    )


def cloud_offers(
    spec: PlanSpec, best: Portfolio, log: Assumptions | None = None
) -> dict[str, list[CloudOffer]]:
    """Each provider's instances of the accelerator that can hold the work's largest
    node-local group (`instance_floor`: a tensor-parallel group of 4 cannot run on 1-GPU
    p5.4xlarge, which the table listed as the cheapest way to rent 2,563 H100s), cheapest
    first, each with the instances in use at the busiest hour and their hourly prices
    together. `log`, when given, says which instance types were left out as too small."""
    accelerator = best.accelerator
    floor = instance_floor(best.choices)
    offers: dict[str, list[CloudOffer]] = {}
    small: list[CloudInstance] = []
    for provider in spec.providers:
        listed = _listed_rows(spec, accelerator, provider)
        rows = [r for r in listed if holds(r, floor.gpus)]
        small += [r for r in listed if not holds(r, floor.gpus)]
        cheapest: dict[str, CloudOffer] = {}
        for r in rows:
            count = float(r.accelerators_count or 1)
            instances = gpus_at_once(spec, best.choices, round(count)) // round(count)
            offer = CloudOffer(
                provider=provider,
                instance=r.name,
                region=r.region,
                instances=instances,
                gpus=int(instances * count),
                on_demand_usd_per_hour=float(r.on_demand_usd_per_hour or 0) * instances,
                spot_usd_per_hour=(
                    None
                    if r.spot_min_usd_per_hour is None
                    else float(r.spot_min_usd_per_hour) * instances
                ),
                networking=NETWORKING[provider],
            )
            current = cheapest.get(r.name)
            if current is None or (offer.on_demand_usd_per_hour or 0) < (
                current.on_demand_usd_per_hour or 0
            ):
                cheapest[r.name] = offer
        if cheapest:
            by_price = sorted(cheapest.values(), key=lambda o: o.on_demand_usd_per_hour or 0)
            offers[provider] = by_price
    if small and log is not None:
        _log_left_out(accelerator, floor, small, log)
    return offers


def _bought(
    cost: CostBreakdown,
    offers: Mapping[str, InstanceOffer],
    sellers: Mapping[str, str],
    provider: str | None,
) -> tuple[str, InstanceOffer, float] | None:
    """(price key, offer, share of the mix's cost) of the offer the optimised mix spends most
    on from `provider` (the decision's); None without a mix or a seller."""
    spend = spend_by_kind(cost.mix)
    total = sum(spend.values())
    for kind, usd in spend.items():  # largest first
        if kind in offers and sellers.get(kind) == provider and total > 0:
            return kind, offers[kind], usd / total
    return None


def _where(offer: InstanceOffer) -> str:
    """'a3-highgpu-8g (gcp us-central1)'; a capacity block lists its instance types and
    regions with ';' (commitments.csv)."""
    instance = offer.instance.replace(";", " or ")
    return f"{instance} ({offer.provider} {offer.region.replace(';', ' or ')})"


def rented_sentence(
    spec: PlanSpec, best: Portfolio, cost: CostBreakdown, provider: str | None
) -> str:
    """What renting rents, in the Cloud options table's own numbers: the whole instances in
    use at the busiest hour, the GPUs used then and those left idle and paid for; '' when
    the price is per GPU. It names the offer the mix spends most on from `provider` when
    its instances are the size the cost is rounded to, else it says that the instance named
    is the on-demand reference the cost is rounded to."""
    floor = instance_floor(best.choices).gpus
    offers = cloud_price_offers(best.accelerator, spec.providers, spec.regions, min_gpus=floor)
    found = rented_offer(offers)
    if found is None or found[1].gpus == 1:
        return ""
    n = found[1].gpus
    used = gpus_at_once(spec, best.choices)
    rented = gpus_at_once(spec, best.choices, n)
    sellers = cloud_price_sellers(best.accelerator, spec.providers, spec.regions, min_gpus=floor)
    bought = _bought(cost, offers, sellers, provider)
    if bought is not None and bought[1].gpus == n:
        kind, offer, share = bought
        how = f", {BOUGHT_AS[kind]}: the optimised mix's largest part, {fmt_pct(share)} of its cost"
    else:
        offer = found[1]
        how = (
            ""
            if bought is None
            else ", the on-demand offer the cost is rounded to (the optimised mix's largest "
            f"part is bought {BOUGHT_AS[bought[0]]}, {_where(bought[1])})"
        )
    idle = rented - used
    across = best.peak_gpus
    return (
        f"renting takes {rented:,} × {best.accelerator} as {rented // n:,} × {n}-GPU "
        f"{_where(offer)}{how}; whole instances: the workloads use {used:,} at once"
        + (f" ({across:,} added up across them)" if across > used else "")
        + (f", so {idle:,} GPUs are idle and paid for" if idle else "")
    )
