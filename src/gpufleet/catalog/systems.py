"""Systems: the boxes accelerators come in (servers, racks, cloud instances, scalable units).

A capacity plan buys or rents whole systems, not GPUs, so power, rack space,
NICs and host memory are per system. Each row names its `accelerator` (a key
of the accelerators table) and its `scaleup_fabric`/`scaleout_fabric` (keys of
the fabrics table) so a plan can join the three without string matching.

`kind` says what one row counts: `node_gpus`, power and rack units are per
server or cloud instance, per rack for `rack` rows (GB200 NVL72) and per
scalable unit for `scalable-unit` rows; `compute_nodes` is how many compute
nodes (servers, trays) that is. `node_gpus` counts accelerators of any kind,
Trainium chips included. `nic_gbit_per_s` is per NIC; where a source gives only
an instance total it goes to `node_network_gbit_per_s` instead.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar, Literal

from gpufleet.catalog.lookup import NameIndex
from gpufleet.catalog.table import CatalogRow, load_rows

SystemKind = Literal["server", "rack", "cloud-instance", "scalable-unit"]


class System(CatalogRow):
    """One system shape; empty cells are facts the sources did not give."""

    list_columns: ClassVar[frozenset[str]] = frozenset({"aliases"})
    table_columns: ClassVar[tuple[str, ...]] = (
        "name",
        "kind",
        "accelerator",
        "node_gpus",
        "scaleup_domain_gpus",
        "node_max_power_kw",
        "node_rack_units",
        "node_nics",
        "nic_gbit_per_s",
        "system_memory_bytes",
    )

    name: str
    display_name: str
    kind: SystemKind
    aliases: tuple[str, ...] = ()
    accelerator: str
    node_gpus: int
    compute_nodes: int | None = None
    has_nvswitch: bool | None = None
    scaleup_domain_gpus: int | None = None
    scaleup_fabric: str | None = None
    scaleout_fabric: str | None = None
    node_max_power_kw: float | None = None
    node_typical_power_min_kw: float | None = None
    node_typical_power_max_kw: float | None = None
    node_rack_units: int | None = None
    node_nics: int | None = None
    nic_gbit_per_s: float | None = None
    node_network_gbit_per_s: float | None = None
    cpu: str | None = None
    node_vcpus: int | None = None
    system_memory_bytes: int | None = None
    local_nvme_bytes: int | None = None


@cache
def load_systems() -> tuple[System, ...]:
    """All systems, parsed once per process (the file ships with the package)."""
    return load_rows("systems.csv", System)


@cache
def system_index() -> NameIndex[System]:
    return NameIndex("system", load_systems())


def get_system(name: str) -> System:
    """Look up a system by canonical name or alias (`p5.48xlarge`, `DGX H100`), any case."""
    return system_index().get(name)
