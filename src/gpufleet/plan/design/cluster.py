"""The cluster design: the steps in order, from "N GPUs of X" to the plan's `Design`.

Each step is a module of its own (system, racks and power, fabric, storage); this one only
checks the request, rounds it to whole systems and passes each step what the earlier ones
found.
"""

from __future__ import annotations

import math

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.storage import load_storage
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design.fabric import size_fabric
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.design.power import power_kw, size_racks
from gpufleet.plan.design.storage import size_storage
from gpufleet.plan.design.system import shape_for
from gpufleet.plan.model import Design
from gpufleet.specs.plan import OnPremPreferences


def design_cluster(  # noqa: PLR0917 - the positional signature is the agreed API
    accelerator: str,
    gpus: int,
    prefs: OnPremPreferences,
    need: TrafficNeed | None,
    log: Assumptions,
    system: str | None = None,
    scale_out: str | None = None,
    checkpoint_write_target_s: float = 300.0,
    checkpoints_retained: int = 3,
) -> Design:
    """Size an on-prem cluster of `gpus` accelerators for the traffic in `need`.

    `need=None` means inference only: no gradient traffic and no training data, so no
    scale-out fabric and no shared storage are sized. `system` and `scale_out` override the
    catalog defaults (names or aliases of systems.csv / fabrics.csv rows). Every default
    taken is appended to `log` under a `design.` name.

    `Design.gpus` is the installed count (whole systems); `Design.nodes` counts compute
    nodes (servers; an NVL72 rack has 18 compute trays); `Design.racks` counts compute
    racks only. `power_kw` holds `compute`, `network`, `storage`, `it` and `facility`.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    if not checkpoint_write_target_s > 0:
        raise ValueError(f"checkpoint_write_target_s must be > 0, got {checkpoint_write_target_s}")
    if checkpoints_retained < 0:
        raise ValueError(f"checkpoints_retained must be >= 0, got {checkpoints_retained}")
    device = get_accelerator(accelerator)
    shape = shape_for(device, system, log)
    units = math.ceil(gpus / shape.unit_gpus)
    installed = units * shape.unit_gpus
    nodes = units * shape.compute_nodes_per_unit
    if installed != gpus:
        log.add(
            "design.installed_gpus",
            f"{installed} ({gpus} requested)",
            f"whole systems: ceil({gpus} / {shape.unit_gpus}) = {units} × {shape.unit_gpus} GPUs",
        )

    racks, rack_kw = size_racks(shape, units, prefs, log)
    fabric, tree = size_fabric(
        shape, units, installed=installed, need=need, scale_out=scale_out, log=log
    )
    storage = size_storage(
        need,
        nodes,
        log=log,
        write_target_s=checkpoint_write_target_s,
        retained=checkpoints_retained,
        rows=load_storage(),
    )
    power = power_kw(shape, units, tree=tree, fabric=fabric, storage=storage, prefs=prefs, log=log)
    return Design(
        system=shape.system,
        accelerator=device.name,
        gpus=installed,
        nodes=nodes,
        racks=racks,
        rack_power_kw=rack_kw,
        power_kw=power,
        scaleup_domain_gpus=shape.scaleup_domain_gpus,
        fabric=fabric,
        storage=storage,
    )
