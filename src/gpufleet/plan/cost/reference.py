"""Whose on-demand price the optimised mix's saving is measured against, in words.

A CFO review found pretrain-8b's report saying "The optimised mix saves 8.7 % against
on-demand prices" under a decision that rents AWS capacity blocks, while the on-demand
figure was GCP's a3-highgpu-8g at $5.38/GPU-h: read beside "Rent … on aws", it looked like
AWS's saving against AWS's own on-demand ($6.88/GPU-h, which would make it 28.5 %).

The saving stays against the cheapest on-demand list price where the plan may rent: that is
the no-commitment alternative a buyer would otherwise take, the plan's On-demand total, and
the conservative figure (a dearer provider's list price would flatter the mix). What changes
is that the sentence names it: the provider, instance, region and rate, the total it gives,
and, where the mix buys most from another provider, that provider's own lowest on-demand
rate, so nobody reads one provider's saving against another's price. The clause is written
once, when the plan is costed, and stored in plan.json (`cost.price_caveats["on_demand"]`);
the Markdown, HTML and PDF print it as stored.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.formatting import fmt_pct, fmt_usd, fmt_usd_rate
from gpufleet.plan.cost.prices import InstanceOffer


def _where(offer: InstanceOffer) -> str:
    return f"{offer.instance} in {offer.region.replace(';', ' or ')}"


def on_demand_reference(
    on_demand_usd: float,
    seller: str,
    by_provider: Mapping[str, tuple[float, InstanceOffer]],
    mix_by_provider: Mapping[str, float],
) -> str:
    """'on-demand at the cheapest provider where the plan may rent, gcp a3-highgpu-8g in
    us-central1 at $5.38/GPU-h ($3,075,800 for the same GPU-hours)' and, where the mix
    spends most with another provider, '; the mix buys 100.0% of its cost from aws, whose
    lowest on-demand price is $6.88/GPU-h (p5.48xlarge in us-east-1)'.

    `on_demand_usd` is the On-demand total the saving divides by; `seller` the provider
    whose price it is (`cloud_price_sellers`); `by_provider` each provider's own lowest
    on-demand price and instance (`cloud_on_demand_by_provider`); `mix_by_provider` the
    mix's dollars by provider, largest first (`spend_by_provider`)."""
    rate, offer = by_provider[seller]
    head = (
        "on-demand at the cheapest provider where the plan may rent, "
        if len(by_provider) > 1
        else "on-demand at "
    )
    text = (
        f"{head}{seller} {_where(offer)} at {fmt_usd_rate(rate)}/GPU-h "
        f"({fmt_usd(on_demand_usd)} for the same GPU-hours)"
    )
    total = sum(mix_by_provider.values())
    buyer = next(iter(mix_by_provider), None)
    if buyer is None or buyer == seller or total <= 0:
        return text
    share = fmt_pct(mix_by_provider[buyer] / total)
    own = by_provider.get(buyer)
    if own is None:
        return (
            text
            + f"; the mix buys {share} of its cost from {buyer}, which has no on-demand price here"
        )
    return text + (
        f"; the mix buys {share} of its cost from {buyer}, whose lowest on-demand price is "
        f"{fmt_usd_rate(own[0])}/GPU-h ({_where(own[1])})"
    )
