"""Cloud prices: one price per GPU-hour for each way of buying an accelerator.

Catalog rows are many per accelerator (instance sizes, regions, programs, sources that
disagree); the purchase mix needs one number per purchase kind. The rules that pick those
numbers, and the log lines that say which row each came from, live here so that the mix
stays a pure optimisation over a price table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from gpufleet.catalog.commitments import Commitment, load_commitments
from gpufleet.catalog.instances import CloudInstance, instances_for
from gpufleet.errors import UnknownNameError
from gpufleet.estimate.assumptions import Assumptions

ON_DEMAND = "on_demand"
SPOT = "spot"
RESERVED_1Y = "reserved_1y"
RESERVED_3Y = "reserved_3y"
CAPACITY_BLOCK = "capacity_block"
RESERVED_TERM_YEARS: dict[str, float] = {RESERVED_1Y: 1.0, RESERVED_3Y: 3.0}

# Source kinds, most trusted first. The on-prem TCO ranks onprem_costs.csv rows the same way.
KIND_RANK: dict[str, int] = {"vendor": 0, "doc": 1, "analyst": 2, "blog/press": 3, "community": 4}
# Programs that discount a commitment of 1 or 3 years, in order of preference per provider:
# the GPU-covering program first (GCP resource CUDs cover GPUs per the vendor row).
_RESERVED_PROGRAMS: dict[str, tuple[str, ...]] = {
    "aws": ("reserved-instance", "savings-plan"),
    "gcp": ("cud-resource", "cud", "cud-spend"),
    "azure": ("reservation", "savings-plan"),
}
# AWS pricing pages name regions; instances.csv uses the codes (AWS Regions and Zones docs).
_AWS_REGION_CODES: dict[str, str] = {
    "US East (N. Virginia)": "us-east-1",
    "US East (Ohio)": "us-east-2",
    "US West (Oregon)": "us-west-2",
    "Asia Pacific (Melbourne)": "ap-southeast-4",
}


def _per_gpu(value: object, row: CloudInstance) -> float | None:
    if value is None or not row.accelerators_count:
        return None
    return float(str(value)) / float(row.accelerators_count)


@cache
def _rows_of(accelerator: str) -> tuple[CloudInstance, ...]:
    """The catalog's rows for `accelerator`, once per process: matching a name scans every
    row of instances.csv, and a plan asks for the same accelerator's prices dozens of times
    (the ranking costs each candidate's plan). The catalog itself is loaded once
    (`load_instances` is cached), so this cannot go stale."""
    try:
        return instances_for(accelerator=accelerator)
    except UnknownNameError:
        return ()


def _priced_rows(
    accelerator: str, providers: Sequence[str], regions: Sequence[str]
) -> list[CloudInstance]:
    rows = _rows_of(accelerator)
    wanted_providers = {p.strip().lower() for p in providers}
    wanted_regions = {r.strip().lower() for r in regions}
    return [
        r
        for r in rows
        if r.provider in wanted_providers
        and (not wanted_regions or r.region.lower() in wanted_regions)
        and r.is_whole_price
        and (r.accelerators_count or 0) >= 1  # fractional-GPU types price a slice
    ]


def holds(row: CloudInstance, min_gpus: int) -> bool:
    """Whether one instance of `row` holds `min_gpus` GPUs: a tensor-parallel group (or any
    group the estimate times on the scale-up link) must sit inside one instance's NVLink
    domain, so an instance smaller than it cannot run the work as estimated."""
    return float(row.accelerators_count or 0) >= max(1, min_gpus)


def too_small(rows: Sequence[CloudInstance], min_gpus: int) -> str:
    """'aws p5.4xlarge (1 GPU)': the instance types of `rows` left out as too small for
    `min_gpus`, for the log; '' when none was."""
    names = sorted(
        {
            f"{r.provider} {r.name} ({_gpus(r)} GPU{'' if _gpus(r) == 1 else 's'})"
            for r in rows
            if not holds(r, min_gpus)
        }
    )
    return ", ".join(names)


def _row_text(row: CloudInstance) -> str:
    return f"instances.csv {row.provider} {row.name} {row.region} ({row.source})"


@dataclass(frozen=True)
class _Discount:
    fraction: float
    row: Commitment
    upper_bound: bool
    longest_term_only: bool


def _discount(
    provider: str, accelerator: str, term_years: float, instance: str | None = None
) -> _Discount | None:
    """The commitment discount to use for a provider and term, or None when none is sourced.

    Rows with a discount for exactly this term come first; an "up to X %" figure stated for
    "1 or 3 years" without saying which is taken for the 3-year term only (a headline
    maximum is reached at the longest term). Then a row for this accelerator (a per-SKU
    committed price: GCP's A3) before a generic one, the priced `instance` before its
    siblings, then by source kind (vendor first), exact figures before upper bounds, the
    provider's preferred program, and the smaller discount.
    """
    programs = _RESERVED_PROGRAMS.get(provider, ())
    found: list[tuple[tuple[int, int, int, int, int, int, float], _Discount]] = []
    for row in load_commitments():
        if row.provider != provider or row.program not in programs:
            continue
        if row.accelerator not in (None, accelerator):
            continue
        if row.discount_fraction is not None:
            fraction, upper = row.discount_fraction, False
        elif row.discount_max_fraction is not None:
            fraction, upper = row.discount_max_fraction, True
        else:
            continue
        if row.term_years is not None:
            if row.term_years != term_years:
                continue
            exact_term, longest_only = 0, False
        elif row.term_max_years is not None:
            if row.term_max_years != term_years:
                continue
            exact_term, longest_only = 1, True
        else:
            continue  # no term stated: cannot tell which commitment it prices
        key = (
            exact_term,
            int(row.accelerator is None),
            int(instance not in row.instance_types),
            KIND_RANK[row.source_kind],
            int(upper),
            programs.index(row.program),
            fraction,
        )
        found.append((key, _Discount(fraction, row, upper, longest_only)))
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


def _discount_text(d: _Discount) -> str:
    parts = [
        f"commitments.csv {d.row.provider} {d.row.program} '{d.row.scope}' "
        f"[{d.row.source_kind}] ({d.row.source})"
    ]
    if d.upper_bound:
        parts.append("an 'up to' figure: an upper bound, not a typical discount")
    if d.longest_term_only:
        parts.append(
            "stated for 1- or 3-year terms without saying which; gpufleet applies it to the "
            "3-year term only"
        )
    if d.row.notes:
        parts.append(f"notes: {d.row.notes}")
    return "; ".join(parts)


def _capacity_block_rows(
    accelerator: str, providers: Sequence[str], regions: Sequence[str]
) -> list[Commitment]:
    if "aws" not in {p.strip().lower() for p in providers}:
        return []
    wanted = {r.strip().lower() for r in regions}
    out = []
    for row in load_commitments():
        if row.program != "capacity-block" or row.accelerator != accelerator:
            continue
        if row.rate_per_accelerator_usd_per_hour is None:
            continue
        codes = {_AWS_REGION_CODES.get(name, name).lower() for name in row.regions}
        if wanted and not codes & wanted:
            continue
        out.append(row)
    return out


def cloud_prices(
    accelerator: str,
    providers: Sequence[str],
    regions: Sequence[str],
    log: Assumptions,
    *,
    min_gpus: int = 1,
) -> dict[str, float]:
    """Lowest price per GPU-hour of each way to buy `accelerator` on instances of at least
    `min_gpus` GPUs (see `_price_table`)."""
    return _price_table(accelerator, providers, regions, log, min_gpus).prices


def cloud_price_sellers(
    accelerator: str, providers: Sequence[str], regions: Sequence[str], *, min_gpus: int = 1
) -> dict[str, str]:
    """The provider behind each price of `cloud_prices` (same rules; nothing logged), so a
    headline names who it priced."""
    return _price_table(accelerator, providers, regions, Assumptions(), min_gpus).sellers


def cloud_price_caveats(
    accelerator: str, providers: Sequence[str], regions: Sequence[str], *, min_gpus: int = 1
) -> dict[str, str]:
    """What a reader must know about a price of `cloud_prices` before relying on it (a
    commitment priced from an "up to" discount is a floor, not a quote), by price key."""
    return _price_table(accelerator, providers, regions, Assumptions(), min_gpus).caveats


@dataclass(frozen=True)
class InstanceOffer:
    """What a price rents: clouds sell whole instances (8 GPUs for every H100/H200 row of
    instances.csv), so the cost of n GPUs is that of ⌈n / gpus⌉ instances."""

    provider: str
    instance: str
    region: str
    gpus: int  # GPUs per instance

    @classmethod
    def of(cls, row: CloudInstance) -> InstanceOffer:
        return cls(row.provider, row.name, row.region, _gpus(row))


def cloud_price_offers(
    accelerator: str, providers: Sequence[str], regions: Sequence[str], *, min_gpus: int = 1
) -> dict[str, InstanceOffer]:
    """The instance behind each price of `cloud_prices` (same rules; nothing logged), so the
    demand can be rounded to what that offer rents."""
    return _price_table(accelerator, providers, regions, Assumptions(), min_gpus).offers


def cloud_on_demand_by_provider(
    accelerator: str, providers: Sequence[str], regions: Sequence[str], *, min_gpus: int = 1
) -> dict[str, tuple[float, InstanceOffer]]:
    """Each provider's own lowest on-demand price per GPU-hour and its instance (same rules
    as `cloud_prices`, whose `on_demand` is the lowest of them), so a saving stated against
    on-demand can say whose price it is and what the provider the mix buys from asks."""
    return _price_table(accelerator, providers, regions, Assumptions(), min_gpus).on_demand


@dataclass(frozen=True)
class _PriceTable:
    prices: dict[str, float]
    sellers: dict[str, str]
    caveats: dict[str, str]
    offers: dict[str, InstanceOffer]
    # each provider's lowest on-demand price per GPU-hour and its instance
    on_demand: dict[str, tuple[float, InstanceOffer]]


_Priced = tuple[float, CloudInstance]


def _cheapest(rows: Sequence[CloudInstance]) -> tuple[dict[str, _Priced], _Priced | None]:
    """Each provider's lowest on-demand price per GPU, and the lowest spot price per GPU,
    with their rows."""
    cheapest_by_provider: dict[str, _Priced] = {}
    best_spot: _Priced | None = None
    for row in rows:
        od = _per_gpu(row.on_demand_usd_per_hour, row)
        if od is not None:
            current = cheapest_by_provider.get(row.provider)
            if current is None or _cheaper(od, row, *current):
                cheapest_by_provider[row.provider] = (od, row)
        spot = _per_gpu(row.spot_min_usd_per_hour, row)
        if spot is not None and (best_spot is None or _cheaper(spot, row, *best_spot)):
            best_spot = (spot, row)
    return cheapest_by_provider, best_spot


def _block_offer(block: Commitment) -> InstanceOffer:
    """The instance a capacity block rents: its GPUs are the block's instance rate over its
    per-accelerator rate (8 for p5.48xlarge)."""
    per_instance = float(block.rate_usd_per_hour or 0)
    per_gpu = float(block.rate_per_accelerator_usd_per_hour or 0)
    gpus = max(1, round(per_instance / per_gpu)) if per_instance > 0 and per_gpu > 0 else 1
    return InstanceOffer("aws", ";".join(block.instance_types), ";".join(block.regions), gpus)


def _gpus(row: CloudInstance) -> int:
    return max(1, round(float(row.accelerators_count or 1)))


def _cheaper(price: float, row: CloudInstance, best: float, best_row: CloudInstance) -> bool:
    """A lower price per GPU, or the same price on a smaller instance (it rents less idle)."""
    return (price, _gpus(row)) < (best, _gpus(best_row))


def _price_table(
    accelerator: str,
    providers: Sequence[str],
    regions: Sequence[str],
    log: Assumptions,
    min_gpus: int = 1,
) -> _PriceTable:
    """Lowest price per GPU-hour of each way to buy `accelerator` in the allowed places, on
    instances of at least `min_gpus` GPUs.

    Keys (each only when some provider prices it): `on_demand` (lowest on-demand list price
    per GPU among whole-instance rows), `spot` (lowest `spot_min_usd_per_hour` per GPU),
    `reserved_1y` and `reserved_3y` (per provider: its lowest on-demand price × (1 − its
    commitment discount for the term); the lowest across providers, those with a sourced
    discount before those with only an "up to" figure), `capacity_block` (AWS
    Capacity Block per-accelerator rate). A provider without a price for the accelerator is
    skipped. At equal prices per GPU the smaller instance wins: the demand is rented in
    whole instances (`offers`), so it leaves fewer GPUs idle. Every row used is logged.

    `min_gpus` is the largest group a workload keeps inside one instance (its tensor-parallel
    group: `plan.cost.instances.instance_floor`): smaller instances cannot run it, so they
    price nothing. The cheapest per GPU is often a 1-GPU instance (p5.4xlarge beside
    p5.48xlarge at the same $6.88, g6e.xlarge at half g6e.48xlarge's price per GPU); priced
    from it, a tensor-parallel run was costed, and rounded to whole instances, on instances
    that cannot hold its group. The price lines say which instances were left out.
    """
    allowed = _priced_rows(accelerator, providers, regions)
    cheapest_by_provider, best_spot = _cheapest([r for r in allowed if holds(r, min_gpus)])
    prices: dict[str, float] = {}
    sellers: dict[str, str] = {}
    where = f"providers {', '.join(providers)}" + (
        f", regions {', '.join(regions)}" if regions else ", any region"
    )
    left_out = too_small(allowed, min_gpus)
    if left_out:
        where += (
            f"; instances of at least {min_gpus} GPUs, to hold the largest group a workload "
            f"keeps inside one instance ({left_out} left out)"
        )
    offers: dict[str, InstanceOffer] = {}
    if cheapest_by_provider:
        od_price, od_row = min(
            cheapest_by_provider.values(), key=lambda item: (item[0], _gpus(item[1]))
        )
        prices[ON_DEMAND] = od_price
        sellers[ON_DEMAND] = od_row.provider
        offers[ON_DEMAND] = InstanceOffer.of(od_row)
        log.add(
            f"{accelerator} on-demand price",
            f"${od_price:.4f}/GPU-h",
            f"lowest on-demand list price per GPU ({where}): {_row_text(od_row)}",
        )
    if best_spot is not None:
        prices[SPOT] = best_spot[0]
        sellers[SPOT] = best_spot[1].provider
        offers[SPOT] = InstanceOffer.of(best_spot[1])
        log.add(
            f"{accelerator} spot price",
            f"${best_spot[0]:.4f}/GPU-h",
            f"lowest spot price per GPU ({where}; spot_min_usd_per_hour, the cheapest zone "
            f"of the region; spot prices move hourly): {_row_text(best_spot[1])}",
        )
    caveats: dict[str, str] = {}
    for key, term in RESERVED_TERM_YEARS.items():
        options: list[tuple[float, str, str, str, CloudInstance]] = []
        for provider, (od, row) in sorted(cheapest_by_provider.items()):
            discount = _discount(provider, accelerator, term, row.name)
            if discount is None:
                log.add(
                    f"{provider} {term:.0f}-year commitment discount",
                    "none sourced",
                    "commitments.csv has no discount figure for this term; the provider is "
                    "left out of the reserved price",
                )
                continue
            price = od * (1.0 - discount.fraction)
            text = (
                f"{provider}: ${od:.4f}/GPU-h on-demand ({row.name} {row.region}) × "
                f"(1 − {discount.fraction:.0%}); {_discount_text(discount)}"
            )
            caveat = (
                f"{provider}'s {term:.0f}-year price uses an 'up to {discount.fraction:.0%}' "
                f"discount ({discount.row.program}, [{discount.row.source_kind}]): an upper "
                "bound, so this price is a floor, not a quote"
                if discount.upper_bound
                else ""
            )
            options.append((price, text, provider, caveat, row))
        if options:
            # a sourced discount beats another provider's "up to" figure, whatever the
            # numbers: an upper bound is a floor on the price, not a price one can buy at
            price, text, seller, caveat, row = min(options, key=lambda o: (bool(o[3]), o[0]))
            prices[key] = price
            sellers[key] = seller
            offers[key] = InstanceOffer.of(row)
            if caveat:
                caveats[key] = caveat
            log.add(f"{accelerator} {key} price", f"${price:.4f}/GPU-h", f"lowest of: {text}")
    blocks = [
        b
        for b in _capacity_block_rows(accelerator, providers, regions)
        if _block_offer(b).gpus >= min_gpus
    ]
    if blocks:
        block = min(blocks, key=lambda r: r.rate_per_accelerator_usd_per_hour or 0)
        rate = float(block.rate_per_accelerator_usd_per_hour or 0)
        prices[CAPACITY_BLOCK] = rate
        sellers[CAPACITY_BLOCK] = "aws"
        offers[CAPACITY_BLOCK] = _block_offer(block)
        log.add(
            f"{accelerator} capacity block price",
            f"${rate:.4f}/GPU-h",
            f"commitments.csv aws capacity-block {';'.join(block.instance_types)} in "
            f"{';'.join(block.regions)} [{block.source_kind}] ({block.source}); used for burst "
            "work only (blocks last days to weeks, booked ahead, rates change with supply)",
        )
    by_provider = {
        provider: (price, InstanceOffer.of(row))
        for provider, (price, row) in sorted(cheapest_by_provider.items())
    }
    return _PriceTable(prices, sellers, caveats, offers, by_provider)
