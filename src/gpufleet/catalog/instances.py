"""Cloud instances: one row per (provider, instance type, region) with list prices.

The rows are built by `scripts/build_instances.py` from verbatim copies of SkyPilot's
catalog (data/raw/), never edited by hand, so a price refresh is a reviewable diff of a
generated file. Prices are the providers' public list prices in USD per instance-hour.

`price_scope` says what a price covers, because on GCP it is not always a whole VM:

- `instance`: the whole VM (AWS, Azure, and GCP machine types composed as host + GPUs
  with the formula in `derivation`);
- `slice`: a whole GCP TPU slice (`tpu-v5p-8`, ...);
- `accelerators-only`: GCP GPUs alone (`gcp-gpu:H100x8`), without the host VM;
- `host-only`: a GCP GPU machine type without its GPUs (`gcp-host:a2-highgpu-1g`).

Anything pricing a cluster should use `instance`/`slice` rows (`is_whole_price`); the other
two are kept because they are what the source states and can be composed once a source
gives the machine type's GPU count.

Money is `Decimal` (exact list prices, as the design asks of money); JSON output writes
numbers.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from functools import cache
from typing import ClassVar, Literal, get_args

from pydantic import field_serializer, model_validator

from gpufleet.catalog.accelerators import accelerator_index
from gpufleet.catalog.lookup import normalise
from gpufleet.catalog.table import CatalogRow, load_rows
from gpufleet.errors import UnknownNameError

Provider = Literal["aws", "gcp", "azure"]
PriceScope = Literal["instance", "slice", "accelerators-only", "host-only"]
PROVIDERS: tuple[str, ...] = get_args(Provider)
WHOLE_PRICE_SCOPES: frozenset[str] = frozenset({"instance", "slice"})


class CloudInstance(CatalogRow):
    """A cloud instance type in one region, with its accelerators and list prices."""

    table_columns: ClassVar[tuple[str, ...]] = (
        "provider",
        "name",
        "region",
        "accelerator",
        "accelerators_count",
        "on_demand_usd_per_hour",
        "spot_min_usd_per_hour",
        "price_scope",
    )

    provider: Provider
    name: str
    region: str
    price_scope: PriceScope
    # Canonical gpufleet accelerator, empty when the device is not in the accelerator catalog.
    accelerator: str | None = None
    # The provider's (SkyPilot's) own name for the device, always kept.
    provider_accelerator_name: str | None = None
    # Devices per instance; fractional for partial-GPU types (AWS g6f: 0.125 ...).
    accelerators_count: float | None = None
    host_vcpus: int | None = None
    host_memory_bytes: int | None = None
    # Memory of one device (of the partition for fractional types), from the provider's API.
    accelerator_memory_bytes: int | None = None
    on_demand_usd_per_hour: Decimal | None = None
    spot_min_usd_per_hour: Decimal | None = None
    spot_max_usd_per_hour: Decimal | None = None
    # Zones the region row folds (AWS, GCP); empty where the source has no zones (Azure).
    zones_count: int | None = None
    arch: str | None = None
    derivation: str = ""

    @model_validator(mode="after")
    def _spot_range(self) -> CloudInstance:
        low, high = self.spot_min_usd_per_hour, self.spot_max_usd_per_hour
        if (low is None) != (high is None) or (low is not None and high is not None and low > high):
            raise ValueError(f"spot min {low} and max {high} do not form a range")
        return self

    @field_serializer(
        "on_demand_usd_per_hour", "spot_min_usd_per_hour", "spot_max_usd_per_hour", when_used="json"
    )
    def _money_as_number(self, value: Decimal | None) -> float | None:
        # JSON readers expect numbers; exactness matters in Python, not in a JSON dump.
        return None if value is None else float(value)

    @property
    def is_whole_price(self) -> bool:
        """True when the on-demand price is what running this instance costs."""
        return self.price_scope in WHOLE_PRICE_SCOPES

    @property
    def on_demand_usd_per_accelerator_hour(self) -> Decimal | None:
        """On-demand price divided by accelerators_count, or None when either is unknown."""
        if self.on_demand_usd_per_hour is None or not self.accelerators_count:
            return None
        return self.on_demand_usd_per_hour / Decimal(str(self.accelerators_count))


@cache
def load_instances() -> tuple[CloudInstance, ...]:
    return load_rows("instances.csv", CloudInstance)


@cache
def _by_name() -> dict[tuple[str, str], tuple[CloudInstance, ...]]:
    index: dict[tuple[str, str], list[CloudInstance]] = defaultdict(list)
    for row in load_instances():
        index[(row.provider, normalise(row.name))].append(row)
    return {key: tuple(rows) for key, rows in index.items()}


def _check_provider(provider: str) -> str:
    key = provider.strip().lower()
    if key not in PROVIDERS:
        raise UnknownNameError("cloud provider", provider, PROVIDERS)
    return key


def _accelerator_keys(accelerator: str) -> set[str]:
    """Normalised names a row may carry for `accelerator`: itself and its canonical name."""
    keys = {normalise(accelerator)}
    index = accelerator_index()
    if accelerator in index:
        keys.add(normalise(index.get(accelerator).name))
    return keys


def _matches_accelerator(row: CloudInstance, keys: set[str]) -> bool:
    names = (row.accelerator, row.provider_accelerator_name)
    return any(name is not None and normalise(name) in keys for name in names)


def instances_for(
    accelerator: str | None = None,
    provider: str | None = None,
    region: str | None = None,
) -> tuple[CloudInstance, ...]:
    """Rows matching every filter given, in catalog order (provider, name, region).

    `accelerator` matches the canonical name, any alias the accelerator catalog knows, or the
    provider's raw name (`T4`, `H100-MEGA`), ignoring case. A filter value that no row carries
    at all raises UnknownNameError with suggestions, so a typo is not an empty result; a
    valid combination that nobody sells is an empty tuple.
    """
    everything = load_instances()
    wanted = None if provider is None else _check_provider(provider)
    in_provider = [r for r in everything if wanted is None or r.provider == wanted]
    keys: set[str] | None = None
    if accelerator is not None:
        keys = _accelerator_keys(accelerator)
        if not any(_matches_accelerator(r, keys) for r in everything):
            known = {r.accelerator for r in everything if r.accelerator}
            known |= {
                r.provider_accelerator_name for r in everything if r.provider_accelerator_name
            }
            raise UnknownNameError("cloud accelerator", accelerator, sorted(known))
    region_key: str | None = None
    if region is not None:
        region_key = region.strip().lower()
        known_regions = sorted({r.region for r in in_provider})
        if region_key not in {r.lower() for r in known_regions}:
            raise UnknownNameError("region", region, known_regions)
    return tuple(
        r
        for r in in_provider
        if (keys is None or _matches_accelerator(r, keys))
        and (region_key is None or r.region.lower() == region_key)
    )


def get_instance(provider: str, name: str, region: str | None = None) -> CloudInstance:
    """One instance type of a provider; any case, `_`/space/`-` alike.

    Without `region`, the row of the region with the lowest on-demand price (regions without
    a price last, then by name): specifications do not vary by region, prices do, and the
    cheapest listed region is the useful default. Pass `region` for a specific price.
    """
    wanted = _check_provider(provider)
    rows = _by_name().get((wanted, normalise(name)))
    if rows is None:
        known = sorted({r.name for r in load_instances() if r.provider == wanted})
        raise UnknownNameError(f"{wanted} instance type", name, known)
    if region is None:
        return min(
            rows,
            key=lambda r: (
                r.on_demand_usd_per_hour is None,
                r.on_demand_usd_per_hour or Decimal(0),
                r.region,
            ),
        )
    for row in rows:
        if row.region.lower() == region.strip().lower():
            return row
    raise UnknownNameError(f"region for {rows[0].name}", region, [r.region for r in rows])
