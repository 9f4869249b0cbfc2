"""Racks and power: how many racks the units fill, and the kW to provision for the cluster.

Planning uses nameplate maximum power, since PDUs, breakers and cooling are provisioned for
peak, not typical draw. The power total is taken last because the IT power adds the fabric's
switches and the storage to the compute.
"""

from __future__ import annotations

import math

from gpufleet.catalog.fabrics import Fabric as FabricRow
from gpufleet.catalog.fabrics import get_fabric
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design.fabric import FatTree
from gpufleet.plan.design.system import Shape
from gpufleet.plan.model import Design, Fabric, Storage
from gpufleet.specs.plan import OnPremPreferences

# Rack space: a standard 42U rack, all of it usable for compute systems (management
# switches and PDUs mounted at the side or in network racks).
RACK_UNITS_USABLE = 42
# Switch power: ~1.7 kW for a 64-port NDR 400 switch (QM9700 class) with optics, scaled by
# port capacity (ports × Gb/s) for other switches. Not in fabrics.csv: a gpufleet assumption.
SWITCH_KW_REFERENCE = 1.7
SWITCH_REFERENCE_GBIT = 64 * 400.0
# Shared storage draws a few percent of a GPU cluster's power (gpufleet assumption).
STORAGE_POWER_FRACTION = 0.03


def size_racks(
    shape: Shape, units: int, prefs: OnPremPreferences, log: Assumptions
) -> tuple[int, float]:
    """Compute racks and the power each must be provisioned for.

    Servers: per rack = max(1, min(floor(rack kW / unit kW), floor(42U / unit U))),
    racks = ceil(units / per rack). Rack rows (NVL72): one unit is one rack. Where one
    unit alone exceeds the preferred rack power, the rack is provisioned for that unit and
    the log says it needs liquid cooling or a higher-density rack.
    """
    budget = prefs.rack_power_kw
    if shape.unit_kw > budget:
        log.add(
            "design.rack_density",
            f"{shape.unit_kw:g} kW per rack",
            f"one {shape.system} draws {shape.unit_kw:g} kW, above the {budget:g} kW rack "
            "preference: it needs liquid cooling or a higher-density rack",
        )
    if shape.is_rack:
        return units, max(budget, shape.unit_kw)
    log.add("design.rack_units_usable", f"{RACK_UNITS_USABLE}U", "assumption: standard 42U rack")
    by_power = math.floor(budget / shape.unit_kw + 1e-9)
    by_space = RACK_UNITS_USABLE // (shape.unit_rack_units or 1)
    per_rack = max(1, min(by_power, by_space))
    log.add(
        "design.units_per_rack",
        per_rack,
        f"max(1, min(floor({budget:g} kW / {shape.unit_kw:g} kW) = {by_power}, "
        f"floor({RACK_UNITS_USABLE}U / {shape.unit_rack_units}U) = {by_space})); "
        "compute racks only, network and storage racks not counted",
    )
    return math.ceil(units / per_rack), max(budget, shape.unit_kw)


def rack_power_note(design: Design) -> str | None:
    """The sentence for a design whose stated rack power budget cannot hold one unit
    (`Design.rack_power_stated_kw`): what was stated, what one unit draws and what the plan
    assumed instead. A 5 kW budget with DGX H100s (10.2 kW each) showed "Rack power budget
    10.2 kW per rack" unmarked; only an appendix row said the racks need liquid cooling."""
    stated = design.rack_power_stated_kw
    if stated is None or design.rack_power_kw <= stated:
        return None
    kw = f"{design.rack_power_kw:,.1f}"
    racks = f"{design.racks:,} rack{'s' if design.racks != 1 else ''}"
    return (
        f"the stated rack power budget of {stated:g} kW cannot hold one {design.system}, "
        f"which draws {kw} kW: the plan assumes {kw} kW racks instead, one {design.system} "
        f"each ({racks}), which need liquid cooling or a higher-density rack; set "
        "on_prem.rack_power_kw to what the site can supply"
    )


def switch_kw(fabric: FabricRow, radix: int) -> float:
    """Power of one switch: 1.7 kW × (radix × port Gb/s) / (64 × 400 Gb/s)."""
    port = fabric.switch_port_gbit_per_s or fabric.port_gbit_per_s or 400.0
    return SWITCH_KW_REFERENCE * radix * port / SWITCH_REFERENCE_GBIT


def power_kw(
    shape: Shape,
    units: int,
    *,
    tree: FatTree,
    fabric: Fabric,
    storage: Storage,
    prefs: OnPremPreferences,
    log: Assumptions,
) -> dict[str, float]:
    """IT = units × unit kW + switches × switch kW + storage; facility = IT × PUE."""
    compute = units * shape.unit_kw
    network = 0.0
    if tree.switches:
        per_switch = switch_kw(get_fabric(fabric.name), fabric.switch_radix)
        network = tree.switches * per_switch
        log.add(
            "design.switch_power_kw",
            f"{per_switch:.2f}",
            f"assumption: ~{SWITCH_KW_REFERENCE} kW per 64-port NDR 400 switch with optics "
            "(QM9700 class, not in fabrics.csv), scaled by ports × port rate",
        )
    storage_kw = 0.0
    if storage.capacity_bytes > 0:
        storage_kw = compute * STORAGE_POWER_FRACTION
        log.add(
            "design.storage_power",
            f"{STORAGE_POWER_FRACTION:.0%} of compute power",
            "assumption: shared all-flash storage draws a few percent of a GPU cluster's "
            "power (no power figure in storage.csv)",
        )
    it = compute + network + storage_kw
    log.add("design.pue", prefs.pue, "on_prem.pue of the plan spec (facility / IT power)")
    return {
        "compute": compute,
        "network": network,
        "storage": storage_kw,
        "it": it,
        "facility": it * prefs.pue,
    }
