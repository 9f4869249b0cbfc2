"""The catalog's tables by the name `gpufleet catalog <name>` uses.

One line per table; adding a table means adding a line here, nothing in the CLI.
Loaders are imported on use so that `gpufleet --help` stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpufleet.catalog.table import CatalogRow


@dataclass(frozen=True)
class TableEntry:
    name: str
    title: str
    module: str
    loader: str

    def load(self) -> Sequence[CatalogRow]:
        fn: Callable[[], Sequence[CatalogRow]] = getattr(
            importlib.import_module(self.module), self.loader
        )
        return fn()


TABLES: dict[str, TableEntry] = {
    entry.name: entry
    for entry in (
        TableEntry("gpus", "Accelerators", "gpufleet.catalog.accelerators", "load_accelerators"),
        TableEntry("systems", "Systems", "gpufleet.catalog.systems", "load_systems"),
        TableEntry("fabrics", "Fabrics", "gpufleet.catalog.fabrics", "load_fabrics"),
        TableEntry("storage", "Storage", "gpufleet.catalog.storage", "load_storage"),
        TableEntry("mig", "MIG profiles", "gpufleet.catalog.mig", "load_mig_profiles"),
        TableEntry("mig-layouts", "MIG layouts", "gpufleet.catalog.mig", "load_mig_layouts"),
        TableEntry("instances", "Cloud instances", "gpufleet.catalog.instances", "load_instances"),
        TableEntry(
            "commitments",
            "Cloud commitments and discounts",
            "gpufleet.catalog.commitments",
            "load_commitments",
        ),
        TableEntry("models", "Model presets", "gpufleet.catalog.models", "load_model_presets"),
        TableEntry(
            "onprem_costs", "On-prem cost facts", "gpufleet.catalog.onprem", "load_onprem_costs"
        ),
    )
}
