"""The cluster design: the steps in order, from "N GPUs of X" to the plan's `Design`.

Each step is a module of its own (system, racks and power, fabric, storage); this one only
checks the request, rounds it to whole systems and passes each step what the earlier ones
found.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.storage import load_storage
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design.fabric import size_fabric
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.design.power import power_kw, size_racks
from gpufleet.plan.design.storage import size_storage
from gpufleet.plan.design.system import shape_for
from gpufleet.plan.model import Design
from gpufleet.specs.plan import OnPremPreferences


class SitePowerError(UserError):
    """The designed fleet draws more than the site can supply; says what would fit."""


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

    With `prefs.site_power_kw`, the design also states the largest fleet of the same system
    whose facility power fits the site (fabric and storage power included, found by bisection
    on whole systems), and raises `SitePowerError` when this one does not fit.
    """
    design = _design(
        accelerator,
        gpus,
        prefs,
        need,
        log,
        system,
        scale_out,
        checkpoint_write_target_s,
        checkpoints_retained,
    )
    site_kw = prefs.site_power_kw
    if site_kw is None:
        return design
    unit_gpus = _unit_gpus(accelerator, system)

    def sized(units: int) -> Design:
        return _design(
            accelerator,
            units * unit_gpus,
            prefs,
            need,
            Assumptions(),
            system,
            scale_out,
            checkpoint_write_target_s,
            checkpoints_retained,
        )

    largest = _largest_fitting(sized, site_kw)
    design = design.model_copy(
        update={
            "site_power_kw": site_kw,
            "site_max_gpus": largest.gpus if largest else 0,
            "site_max_racks": largest.racks if largest else 0,
        }
    )
    drawn = design.power_kw["facility"]
    if drawn > site_kw:
        fits = (
            f"holds at most {largest.gpus:,} × {design.accelerator} ({largest.nodes:,} "
            f"{design.system} nodes, {largest.racks:,} racks, "
            f"{largest.power_kw['facility']:,.0f} kW at the facility)"
            if largest
            else f"cannot power one {design.system} ({sized(1).power_kw['facility']:,.0f} kW)"
        )
        raise SitePowerError(
            f"the site's {site_kw:,.0f} kW {fits}; the workloads need {design.gpus:,} GPUs "
            f"drawing {drawn:,.0f} kW at PUE {prefs.pue:g}: raise site_power_kw, lower the PUE, "
            "choose a denser accelerator, or rent the rest"
        )
    log.add(
        "design.site_power",
        f"{drawn:,.0f} of {site_kw:,.0f} kW",
        f"the site would hold up to {design.site_max_gpus:,} GPUs of this system "
        f"({design.site_max_racks:,} racks), fabric and storage power included (derived)",
    )
    return design


def _unit_gpus(accelerator: str, system: str | None) -> int:
    return shape_for(get_accelerator(accelerator), system, Assumptions()).unit_gpus


def _largest_fitting(sized: Callable[[int], Design], site_kw: float) -> Design | None:
    """The design with the most whole systems whose facility power is within `site_kw`
    (power only grows with systems), or None when not even one fits."""
    if sized(1).power_kw["facility"] > site_kw:
        return None
    low, high = 1, 2
    while sized(high).power_kw["facility"] <= site_kw:
        low, high = high, high * 2
    while high - low > 1:  # sized(low) fits, sized(high) does not
        mid = (low + high) // 2
        if sized(mid).power_kw["facility"] <= site_kw:
            low = mid
        else:
            high = mid
    return sized(low)


def _design(  # noqa: PLR0917 - design_cluster's own arguments, passed on
    accelerator: str,
    gpus: int,
    prefs: OnPremPreferences,
    need: TrafficNeed | None,
    log: Assumptions,
    system: str | None,
    scale_out: str | None,
    checkpoint_write_target_s: float,
    checkpoints_retained: int,
) -> Design:
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
        rack_power_stated_kw=prefs.rack_power_kw if rack_kw > prefs.rack_power_kw else None,
        power_kw=power,
        scaleup_domain_gpus=shape.scaleup_domain_gpus,
        fabric=fabric,
        storage=storage,
    )
