"""The system bought: which systems.csv row (or a generic node) and what one unit is.

Racks, power and the fabric all size from the same `Shape` (GPUs, nodes, kW, height and NICs
per unit), so the catalog lookups and the fallbacks for what a row lacks are made once here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.catalog.accelerators import Accelerator, get_accelerator
from gpufleet.catalog.systems import System, get_system, load_systems
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions

# The system whose figures stand in for a server catalog row lacks (power, height).
REFERENCE_SYSTEM = "dgx-h100"
GENERIC_NODE_GPUS = 8


@dataclass(frozen=True)
class Shape:
    """What one bought unit (a server, or a whole rack for `rack` rows) is."""

    system: str
    is_rack: bool
    unit_gpus: int
    compute_nodes_per_unit: int
    unit_kw: float
    unit_rack_units: int | None
    nics_per_unit: int
    nic_gbit_per_s: float | None
    scaleup_domain_gpus: int
    scaleout_fabric: str | None


def shape_for(device: Accelerator, name: str | None, log: Assumptions) -> Shape:
    """The system row (given, first server, first rack) or a generic 8-GPU node."""
    if device.kind in ("tpu", "trainium"):
        raise UserError(
            f"{device.name} is sold only as a cloud service; an on-prem design needs a GPU "
            "or Gaudi accelerator"
        )
    row: System | None = None
    if name is not None:
        row = get_system(name)
        if row.accelerator != device.name:
            raise UserError(f"system: {row.name} holds {row.accelerator}, not {device.name}")
        if row.kind not in ("server", "rack"):
            raise UserError(
                f"system: {row.name} is a {row.kind} row; an on-prem design needs a server "
                "or rack row of systems.csv"
            )
    else:
        for kind in ("server", "rack"):
            row = next(
                (r for r in load_systems() if r.accelerator == device.name and r.kind == kind),
                None,
            )
            if row is not None:
                log.add("design.system", row.name, f"first {kind} row with {device.name}")
                break
    if row is None:
        return _generic_shape(device, log)

    is_rack = row.kind == "rack"
    if row.node_max_power_kw is not None:
        unit_kw = row.node_max_power_kw
        typical = ""
        if row.node_typical_power_max_kw is not None:
            typical = (
                f"; typical {row.node_typical_power_min_kw}-{row.node_typical_power_max_kw} kW "
                "not used: power and cooling are provisioned for peak"
            )
        log.add(
            "design.unit_power_kw",
            unit_kw,
            f"systems.csv {row.name} node_max_power_kw (nameplate maximum{typical})",
        )
    else:
        unit_kw = _power_from_tdp(device, row.node_gpus, row.name, log)
    ru = row.node_rack_units
    if ru is None and not is_rack:
        ru = _reference_rack_units(row.name, log)
    nics = row.node_nics
    if nics is None:
        nics = row.node_gpus
        log.add(
            "design.nics_per_unit",
            f"{nics} (one per GPU)",
            f"systems.csv {row.name} gives no node_nics: rail-optimised, one NIC per GPU",
        )
    domain = row.scaleup_domain_gpus or device.scaleup_domain_gpus or 1
    if not is_rack:
        domain = min(domain, row.node_gpus)
    return Shape(
        system=row.name,
        is_rack=is_rack,
        unit_gpus=row.node_gpus,
        compute_nodes_per_unit=row.compute_nodes or 1,
        unit_kw=unit_kw,
        unit_rack_units=ru,
        nics_per_unit=nics,
        nic_gbit_per_s=row.nic_gbit_per_s,
        scaleup_domain_gpus=domain,
        scaleout_fabric=row.scaleout_fabric,
    )


def _generic_shape(device: Accelerator, log: Assumptions) -> Shape:
    """No systems.csv row: an 8-GPU node, one NIC per GPU, power from TDP (see below)."""
    log.add(
        "design.system",
        f"generic {GENERIC_NODE_GPUS}-GPU node",
        f"no server or rack row with {device.name} in systems.csv",
    )
    kw = _power_from_tdp(device, GENERIC_NODE_GPUS, "generic node", log)
    ru = _reference_rack_units("generic node", log)
    log.add(
        "design.nics_per_unit",
        f"{GENERIC_NODE_GPUS} (one per GPU)",
        "generic node: rail-optimised, one NIC per GPU",
    )
    domain = min(device.scaleup_domain_gpus or 1, GENERIC_NODE_GPUS)
    return Shape(
        system=f"generic-{GENERIC_NODE_GPUS}x-{device.name}",
        is_rack=False,
        unit_gpus=GENERIC_NODE_GPUS,
        compute_nodes_per_unit=1,
        unit_kw=kw,
        unit_rack_units=ru,
        nics_per_unit=GENERIC_NODE_GPUS,
        nic_gbit_per_s=None,
        scaleup_domain_gpus=domain,
        scaleout_fabric=None,
    )


def node_overhead_factor() -> float:
    """Server power over the GPUs' TDP, from the reference system: DGX H100 10.2 kW over
    8 × 700 W = 1.82 (CPUs, memory, NICs, NVSwitches, fans, PSU losses)."""
    ref = get_system(REFERENCE_SYSTEM)
    tdp = get_accelerator(ref.accelerator).tdp_w
    if ref.node_max_power_kw is None or tdp is None:  # pragma: no cover - catalog invariant
        raise RuntimeError(f"{REFERENCE_SYSTEM} lacks max power or its GPU's TDP")
    return ref.node_max_power_kw * 1000 / (ref.node_gpus * tdp)


def _power_from_tdp(device: Accelerator, gpus: int, what: str, log: Assumptions) -> float:
    """Unit kW = GPUs × TDP × `node_overhead_factor()`."""
    if device.tdp_w is None:
        raise UserError(
            f"{device.name} has no TDP in accelerators.csv and {what} no power figure; "
            "the rack and power plan cannot be sized"
        )
    factor = node_overhead_factor()
    kw = gpus * device.tdp_w * factor / 1000
    log.add(
        "design.node_overhead_factor",
        f"{factor:.3f}",
        f"{REFERENCE_SYSTEM} node_max_power_kw / (node_gpus × tdp_w) (systems.csv, "
        "accelerators.csv): CPUs, NICs, switches and fans on top of the GPUs",
    )
    log.add(
        "design.unit_power_kw",
        f"{kw:.2f}",
        f"{what}: no node_max_power_kw; {gpus} × {device.tdp_w:.0f} W TDP × {factor:.3f}",
    )
    return kw


def _reference_rack_units(what: str, log: Assumptions) -> int:
    ru = get_system(REFERENCE_SYSTEM).node_rack_units or 8
    log.add(
        "design.unit_rack_units",
        ru,
        f"{what}: no node_rack_units; {REFERENCE_SYSTEM}'s height (systems.csv) assumed",
    )
    return ru
