"""A GPU-hour price per accelerator, for ranking candidates by cost.

The capacity plan prices clusters in full (providers, regions, commitments);
the search needs one number per accelerator to compare layouts: the lowest
on-demand list price per GPU-hour among whole-instance catalog rows, within the
providers and regions a plan allows (`PriceScope`). An accelerator with no such row has
no price there: callers say so and never treat it as free.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from gpufleet.catalog.instances import PROVIDERS, CloudInstance, load_instances


@dataclass(frozen=True)
class PriceScope:
    """Where GPU-hours may be bought: these providers and regions (empty: any)."""

    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()

    def admits(self, provider: str, region: str) -> bool:
        return (not self.providers or provider in self.providers) and (
            not self.regions or region in self.regions
        )

    def describe(self) -> str:
        """'in aws, gcp', 'in eu-west-3', 'in azure in eastus' or '' (anywhere)."""
        parts = []
        if self.providers and set(self.providers) != set(PROVIDERS):
            parts.append("in " + ", ".join(self.providers))
        if self.regions:
            parts.append("in " + ", ".join(self.regions))
        return " ".join(parts)


ANYWHERE = PriceScope()


@dataclass(frozen=True)
class GpuHourPrice:
    usd_per_gpu_hour: float
    instance: str
    provider: str
    region: str

    @property
    def source(self) -> str:
        return (
            f"lowest on-demand list price per GPU in instances.csv: {self.provider} "
            f"{self.instance} in {self.region}"
        )


def _gpu_hour_rows(accelerator: str) -> Iterator[tuple[float, CloudInstance]]:
    """(on-demand $ per GPU-hour, row) of every whole-instance row pricing the accelerator;
    fractional-GPU instances price a slice, not a GPU, and are left out."""
    for row in load_instances():
        if row.accelerator != accelerator or not row.is_whole_price:
            continue
        if row.on_demand_usd_per_hour is None or not row.accelerators_count:
            continue
        if row.accelerators_count < 1:
            continue
        yield float(row.on_demand_usd_per_hour) / float(row.accelerators_count), row


@cache
def cheapest_gpu_hour(accelerator: str, scope: PriceScope = ANYWHERE) -> GpuHourPrice | None:
    best: GpuHourPrice | None = None
    for price, row in _gpu_hour_rows(accelerator):
        if scope.admits(row.provider, row.region) and (
            best is None or price < best.usd_per_gpu_hour
        ):
            best = GpuHourPrice(price, row.name, row.provider, row.region)
    return best


def offered_in(accelerator: str, providers: tuple[str, ...] = ()) -> list[str]:
    """'provider region' pairs with an on-demand price for the accelerator, cheapest first:
    what to suggest when a plan's regions have none."""
    prices: dict[str, float] = {}
    for price, row in _gpu_hour_rows(accelerator):
        if not providers or row.provider in providers:
            key = f"{row.provider} {row.region}"
            prices[key] = min(price, prices.get(key, price))
    return sorted(prices, key=lambda k: (prices[k], k))


def no_price_reason(accelerator: str, scope: PriceScope) -> str:
    """Why an accelerator has no GPU-hour price in `scope`, and where it has one."""
    head = " ".join(
        part for part in (f"no cloud price for {accelerator}", scope.describe()) if part
    )
    offered = offered_in(accelerator, scope.providers if scope.regions else ())
    if not offered:
        return f"{head} in the catalog"
    shown = ", ".join(offered[:4]) + (f" and {len(offered) - 4} more" if len(offered) > 4 else "")
    return f"{head}; it is offered in {shown}"
