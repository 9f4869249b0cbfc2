"""A GPU-hour price per accelerator, for ranking candidates by cost.

The capacity plan prices clusters in full (providers, regions, commitments);
the search needs one number per accelerator to compare layouts: the lowest
on-demand list price per GPU-hour among whole-instance catalog rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpufleet.catalog.instances import load_instances


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


@cache
def cheapest_gpu_hour(accelerator: str) -> GpuHourPrice | None:
    best: GpuHourPrice | None = None
    for row in load_instances():
        if row.accelerator != accelerator or not row.is_whole_price:
            continue
        if row.on_demand_usd_per_hour is None or not row.accelerators_count:
            continue
        if row.accelerators_count < 1:
            continue  # fractional-GPU instances price a slice, not a GPU
        price = float(row.on_demand_usd_per_hour) / float(row.accelerators_count)
        if best is None or price < best.usd_per_gpu_hour:
            best = GpuHourPrice(price, row.name, row.provider, row.region)
    return best
