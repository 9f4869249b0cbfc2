"""Storage: parallel file systems and managed offerings that feed training and hold checkpoints.

Managed Lustre services sell throughput per provisioned TiB, so a tier is a
row of its own (`throughput_mbytes_per_s_per_tib`) and capacity limits are
exact byte counts converted from the GiB or TiB the provider states. Some
providers step capacity in two sizes: `capacity_step_bytes` up to
`coarse_step_from_bytes`, then `coarse_step_bytes`.

On-prem systems and reference designs rarely quote per-TiB rates; what their
sources give is throughput into one client node
(`throughput_gbytes_per_s_per_node`) or a whole cluster
(`cluster_*_gbytes_per_s`). Rows whose sources give no number are kept so the
name resolves and the notes say what is missing.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar

from gpufleet.catalog.lookup import NameIndex
from gpufleet.catalog.table import CatalogRow, load_rows


class Storage(CatalogRow):
    """One storage product tier; empty cells are facts the sources did not give."""

    list_columns: ClassVar[frozenset[str]] = frozenset({"aliases"})
    table_columns: ClassVar[tuple[str, ...]] = (
        "name",
        "kind",
        "throughput_mbytes_per_s_per_tib",
        "throughput_gbytes_per_s_per_node",
        "min_capacity_bytes",
        "max_capacity_bytes",
        "capacity_step_bytes",
        "price_usd_per_gb_month",
    )

    name: str
    display_name: str
    product: str
    kind: str
    tier: str | None = None
    aliases: tuple[str, ...] = ()
    throughput_mbytes_per_s_per_tib: float | None = None
    throughput_step_mbytes_per_s: float | None = None
    throughput_gbytes_per_s_per_node: float | None = None
    cluster_throughput_gbytes_per_s: float | None = None
    cluster_peak_throughput_gbytes_per_s: float | None = None
    min_capacity_bytes: int | None = None
    max_capacity_bytes: int | None = None
    capacity_step_bytes: int | None = None
    coarse_step_from_bytes: int | None = None
    coarse_step_bytes: int | None = None
    price_usd_per_gb_month: float | None = None
    price_notes: str | None = None


@cache
def load_storage() -> tuple[Storage, ...]:
    """All storage rows, parsed once per process (the file ships with the package)."""
    return load_rows("storage.csv", Storage)


@cache
def storage_index() -> NameIndex[Storage]:
    return NameIndex("storage", load_storage())


def get_storage(name: str) -> Storage:
    """Look up a storage tier by canonical name or alias (`AMLFS-Durable-Premium-40`), any case."""
    return storage_index().get(name)
