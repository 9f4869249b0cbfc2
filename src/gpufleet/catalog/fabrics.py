"""Fabrics: the scale-up links inside a node or rack and the scale-out networks between nodes.

Collective-communication estimates need the link rate, and the classic error
is reading a Gb/s line rate as GB/s. So scale-out rates are bits
(`*_gbit_per_s`, `switch_capacity_tbit_per_s`) and the per-GPU scale-up figure
is bytes (`scaleup_bidir_gbytes_per_s_per_gpu`, both directions summed, as
vendors state it); the two never share a column.

Cloud fabrics (`is_cloud`) are rows of their own because a provider fixes the
NIC count and speed per instance type; their per-node figures are instance
totals. For TPU rows "per GPU" means per TPU chip. `node_switches` counts
scale-up switch chips in one 8-GPU HGX/DGX baseboard.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar, Literal

from gpufleet.catalog.lookup import NameIndex
from gpufleet.catalog.table import CatalogRow, load_rows

FabricCategory = Literal["scale-up", "scale-out"]


class Fabric(CatalogRow):
    """One interconnect; empty cells are facts the sources did not give."""

    list_columns: ClassVar[frozenset[str]] = frozenset({"aliases"})
    table_columns: ClassVar[tuple[str, ...]] = (
        "name",
        "category",
        "port_gbit_per_s",
        "node_ports",
        "node_gbit_per_s",
        "scaleup_bidir_gbytes_per_s_per_gpu",
        "switch_radix_ports",
        "switch_capacity_tbit_per_s",
        "switch_latency_ns",
    )

    name: str
    display_name: str
    category: FabricCategory
    is_cloud: bool
    aliases: tuple[str, ...] = ()
    topology: str | None = None
    port_gbit_per_s: float | None = None
    node_ports: int | None = None
    node_gbit_per_s: float | None = None
    scaleup_bidir_gbytes_per_s_per_gpu: float | None = None
    scaleup_links_per_gpu: int | None = None
    switch_model: str | None = None
    node_switches: int | None = None
    switch_radix_ports: int | None = None
    switch_port_gbit_per_s: float | None = None
    switch_capacity_tbit_per_s: float | None = None
    switch_latency_ns: float | None = None


@cache
def load_fabrics() -> tuple[Fabric, ...]:
    """All fabrics, parsed once per process (the file ships with the package)."""
    return load_rows("fabrics.csv", Fabric)


@cache
def fabric_index() -> NameIndex[Fabric]:
    return NameIndex("fabric", load_fabrics())


def get_fabric(name: str) -> Fabric:
    """Look up a fabric by canonical name or alias (`NDR`, `NVLink gen4`), any case."""
    return fabric_index().get(name)
