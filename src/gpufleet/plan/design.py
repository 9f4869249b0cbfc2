"""On-prem cluster design: systems, racks, power, the scale-out fabric and storage.

`design_cluster` turns "N GPUs of accelerator X" plus what the workloads move
across nodes (`TrafficNeed`) into the `Design` part of a plan. Every number
is either a catalog cell (systems.csv, fabrics.csv, storage.csv,
accelerators.csv) or a default recorded in the `Assumptions` log with its
basis; the formulas are in each helper's docstring and in
docs/design/0006-cluster-design.md.

Shape of the computation:

1. **System.** The given row, else the first `server` row of systems.csv for
   the accelerator, else its first `rack` row (GB200 NVL72), else a generic
   8-GPU node. Whole systems are bought: `units = ceil(gpus / node_gpus)`.
2. **Racks and power.** Planning uses nameplate maximum power, since PDUs,
   breakers and cooling are provisioned for peak, not typical draw.
3. **Fabric.** A rail-optimised, non-blocking fat-tree (one, two or three
   switch levels) from the switch radix, and a verdict comparing the per-GPU
   bandwidth the gradient all-reduce needs with what the fabric gives.
4. **Storage.** Capacity, read and checkpoint-write rates, and a product
   sized from whatever figure its storage.csv row provides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.catalog.accelerators import Accelerator, get_accelerator
from gpufleet.catalog.fabrics import Fabric as FabricRow
from gpufleet.catalog.fabrics import get_fabric
from gpufleet.catalog.storage import Storage as StorageRow
from gpufleet.catalog.storage import load_storage
from gpufleet.catalog.systems import System, get_system, load_systems
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.model import Design, Fabric, Storage
from gpufleet.specs.plan import OnPremPreferences

# Rack space: a standard 42U rack, all of it usable for compute systems (management
# switches and PDUs mounted at the side or in network racks).
RACK_UNITS_USABLE = 42
# The system whose figures stand in for a server catalog row lacks (power, height).
REFERENCE_SYSTEM = "dgx-h100"
DEFAULT_SCALE_OUT = "ib-ndr-400"
GENERIC_NODE_GPUS = 8
# Switch power: ~1.7 kW for a 64-port NDR 400 switch (QM9700 class) with optics, scaled by
# port capacity (ports × Gb/s) for other switches. Not in fabrics.csv: a gpufleet assumption.
SWITCH_KW_REFERENCE = 1.7
SWITCH_REFERENCE_GBIT = 64 * 400.0
# Shared storage draws a few percent of a GPU cluster's power (gpufleet assumption).
STORAGE_POWER_FRACTION = 0.03
STORAGE_HEADROOM = 0.20
# Token ids as stored for training: int32 once the vocabulary exceeds uint16
# (Megatron-LM indexed datasets; Llama 3's 128k vocabulary needs more than 16 bits).
DEFAULT_BYTES_PER_TOKEN = 4.0
# NCCL all-reduce reaches about this fraction of a NIC's line rate (gpufleet assumption).
LINK_EFFICIENCY = 0.8
TIB = 2**40
GB = 1e9

# Switch radix for on-prem fabrics whose fabrics.csv row gives none (gpufleet assumptions).
_ASSUMED_RADIX: dict[str, tuple[int, str]] = {
    "ib-hdr-200": (
        40,
        "assumption: NVIDIA Quantum QM8700 HDR switch, 40 ports of 200 Gb/s "
        "(vendor product brief; not in fabrics.csv)",
    ),
    "roce-v2": (
        64,
        "assumption: Spectrum-4 SN5400 as 64 ports of 400 GbE, i.e. the 51.2 Tb/s of "
        "fabrics.csv counted both ways / (2 × 400 Gb/s)",
    ),
}
_DEFAULT_RADIX = 64

# Per-GPU line rate tiers for the verdict: (Gb/s, what to buy).
_TIERS: tuple[tuple[float, str], ...] = (
    (200.0, "200G RoCE or InfiniBand HDR suffices"),
    (400.0, "InfiniBand NDR 400 (or 400G RoCE) required"),
    (800.0, "InfiniBand XDR 800 (or 800G Ethernet) required"),
)
_TP_MIN_TIER = 1  # tensor parallelism across nodes: NDR 400 or faster


@dataclass(frozen=True)
class TrafficNeed:
    """What the workloads move across nodes and read/write, per GPU and per cluster.

    `dp_bytes_per_step` is the gradient volume each GPU all-reduces per step (its
    data-parallel shard of the gradients); `step_time_s` the training step time.
    `checkpoint_bytes` is one full checkpoint; `dataset_bytes` the training set on disk;
    `tokens_per_s` the cluster's training throughput; `bytes_per_token` the on-disk size of
    one token (None: `DEFAULT_BYTES_PER_TOKEN`, logged).
    """

    dp_bytes_per_step: float
    step_time_s: float
    tp_crosses_nodes: bool
    checkpoint_bytes: float
    dataset_bytes: float
    tokens_per_s: float
    bytes_per_token: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step_time_s) and self.step_time_s > 0):
            raise ValueError(f"step_time_s must be > 0, got {self.step_time_s}")
        for name in ("dp_bytes_per_step", "checkpoint_bytes", "dataset_bytes", "tokens_per_s"):
            value: float = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.bytes_per_token is not None and not self.bytes_per_token > 0:
            raise ValueError(f"bytes_per_token must be > 0, got {self.bytes_per_token}")


@dataclass(frozen=True)
class FatTree:
    """Switch counts of a non-blocking (1:1) fat-tree; `spines` excludes `super_spines`."""

    levels: int  # 0: no fabric, 1: single switch, 2: leaf/spine, 3: leaf/spine/super-spine
    endpoints: int
    leaves: int
    spines: int
    super_spines: int
    pods: int
    cables: int

    @property
    def switches(self) -> int:
        return self.leaves + self.spines + self.super_spines


@dataclass(frozen=True)
class _Shape:
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
    shape = _shape_for(device, system, log)
    units = math.ceil(gpus / shape.unit_gpus)
    installed = units * shape.unit_gpus
    nodes = units * shape.compute_nodes_per_unit
    if installed != gpus:
        log.add(
            "design.installed_gpus",
            f"{installed} ({gpus} requested)",
            f"whole systems: ceil({gpus} / {shape.unit_gpus}) = {units} × {shape.unit_gpus} GPUs",
        )

    racks, rack_kw = _racks(shape, units, prefs, log)
    fabric, tree = _fabric(
        shape, units, installed=installed, need=need, scale_out=scale_out, log=log
    )
    storage = _storage(
        need,
        nodes,
        log=log,
        write_target_s=checkpoint_write_target_s,
        retained=checkpoints_retained,
        rows=load_storage(),
    )
    power = _power(shape, units, tree=tree, fabric=fabric, storage=storage, prefs=prefs, log=log)
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


# --- system ------------------------------------------------------------------------------


def _shape_for(device: Accelerator, name: str | None, log: Assumptions) -> _Shape:
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
    return _Shape(
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


def _generic_shape(device: Accelerator, log: Assumptions) -> _Shape:
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
    return _Shape(
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


# --- racks and power ---------------------------------------------------------------------


def _racks(
    shape: _Shape, units: int, prefs: OnPremPreferences, log: Assumptions
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


def switch_kw(fabric: FabricRow, radix: int) -> float:
    """Power of one switch: 1.7 kW × (radix × port Gb/s) / (64 × 400 Gb/s)."""
    port = fabric.switch_port_gbit_per_s or fabric.port_gbit_per_s or 400.0
    return SWITCH_KW_REFERENCE * radix * port / SWITCH_REFERENCE_GBIT


def _power(
    shape: _Shape,
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


# --- fabric ------------------------------------------------------------------------------


def size_fat_tree(nodes: int, rails: int, radix: int) -> FatTree:
    """Switches and cables of a rail-optimised, non-blocking fat-tree of `radix`-port switches.

    E = nodes × rails endpoints (NICs), h = radix // 2.
    - E ≤ radix: one switch, E cables.
    - Else leaves = rails × ceil(nodes / h): each leaf serves one rail (NIC index) of up to h
      nodes on h down ports and has h up ports (1:1). This equals ceil(E / h) when nodes is a
      multiple of h.
    - Two levels while leaves ≤ radix: spines = ceil(leaves × h / radix);
      cables = E + leaves × h.
    - Three levels beyond: pods of h leaves with h spines each (pods = ceil(leaves / h),
      spines = pods × h); super-spines = ceil(spines × h / radix);
      cables = E + leaves × h + spines × h. Beyond radix pods (E > radix³/4) a fourth level
      would be needed, which is not sized: UserError.
    """
    if nodes < 1 or rails < 1 or radix < 2:
        raise ValueError(f"need nodes, rails >= 1 and radix >= 2; got {nodes}, {rails}, {radix}")
    endpoints = nodes * rails
    if endpoints <= radix:
        return FatTree(1, endpoints, 1, 0, 0, 0, endpoints)
    half = radix // 2
    leaves = rails * math.ceil(nodes / half)
    if leaves <= radix:
        spines = math.ceil(leaves * half / radix)
        return FatTree(2, endpoints, leaves, spines, 0, 0, endpoints + leaves * half)
    pods = math.ceil(leaves / half)
    if pods > radix:
        raise UserError(
            f"{endpoints} NICs exceed a three-level fat-tree of {radix}-port switches "
            f"({radix**3 // 4} endpoints); choose a higher-radix fabric (e.g. ib-xdr-800)"
        )
    spines = pods * half
    supers = math.ceil(spines * half / radix)
    cables = endpoints + leaves * half + spines * half
    return FatTree(3, endpoints, leaves, spines, supers, pods, cables)


def required_gbit_per_s_per_gpu(need: TrafficNeed) -> float:
    """Ring all-reduce: each GPU sends ~2 × its gradient bytes per step; to finish within
    one step (full overlap with compute) it needs dp_bytes × 2 × 8 / step_time bit/s."""
    return need.dp_bytes_per_step * 2 * 8 / need.step_time_s / 1e9


def fabric_verdict(
    required: float,
    tp_crosses_nodes: bool,
    available: float,
    fabric_label: str,
    scaleup_domain_gpus: int,
) -> str:
    """One sentence: the line-rate tier the need calls for, and whether the fabric meets it.

    The tier is the smallest of 200 / 400 / 800 Gb/s per GPU whose usable rate
    (line × `LINK_EFFICIENCY`) covers `required`; tensor parallelism across nodes raises it to
    at least NDR 400 (its all-reduces sit on every layer's critical path).
    """
    line_needed = required / LINK_EFFICIENCY
    tier = next((i for i, (rate, _) in enumerate(_TIERS) if rate >= line_needed), None)
    if tier is not None and tp_crosses_nodes:
        tier = max(tier, _TP_MIN_TIER)
    if tier is None:
        what = (
            "more than one 800G NIC per GPU can carry: cut cross-node traffic (larger "
            "per-GPU batch, gradient accumulation, more TP/PP inside the scale-up domain)"
        )
    else:
        what = _TIERS[tier][1]
    parts = [f"needs {_gbit(required)} Gb/s per GPU: {what}"]
    if tp_crosses_nodes:
        parts.append(
            "tensor parallelism crosses nodes, so its per-layer all-reduces ride the fabric; "
            f"keep TP within the {scaleup_domain_gpus}-GPU scale-up domain where possible"
        )
    meets = available * LINK_EFFICIENCY >= required
    if tp_crosses_nodes:
        meets = meets and available >= _TIERS[_TP_MIN_TIER][0]
    parts.append(
        f"the designed fabric ({fabric_label}) gives {_gbit(available)} Gb/s per GPU"
        + (", enough" if meets else ", too little: choose a faster fabric")
    )
    return "; ".join(parts)


def _gbit(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == 0 else f"{value:.1f}"


def _radix(fabric: FabricRow, log: Assumptions) -> int:
    if fabric.switch_radix_ports:
        log.add(
            "design.switch_radix",
            fabric.switch_radix_ports,
            f"fabrics.csv {fabric.name} switch_radix_ports ({fabric.switch_model})",
        )
        return fabric.switch_radix_ports
    radix, source = _ASSUMED_RADIX.get(
        fabric.name,
        (_DEFAULT_RADIX, f"assumption: {fabric.name} gives no radix; 64-port switch assumed"),
    )
    log.add("design.switch_radix", radix, source)
    return radix


def _scale_out_row(shape: _Shape, name: str | None, log: Assumptions) -> FabricRow:
    if name is not None:
        row = get_fabric(name)
        if row.category != "scale-out" or row.is_cloud:
            kind = "cloud" if row.is_cloud else row.category
            raise UserError(f"scale_out: {row.name} is a {kind} fabric, not an on-prem scale-out")
        return row
    if shape.scaleout_fabric is not None:
        row = get_fabric(shape.scaleout_fabric)
        log.add("design.scale_out", row.name, f"systems.csv {shape.system} scaleout_fabric")
        return row
    log.add(
        "design.scale_out",
        DEFAULT_SCALE_OUT,
        f"{shape.system} names no scale-out fabric; InfiniBand NDR 400 assumed "
        "(the fabric of NVIDIA's DGX H100/H200/B200 rows)",
    )
    return get_fabric(DEFAULT_SCALE_OUT)


def _fabric(
    shape: _Shape,
    units: int,
    *,
    installed: int,
    need: TrafficNeed | None,
    scale_out: str | None,
    log: Assumptions,
) -> tuple[Fabric, FatTree]:
    """Size the scale-out fabric, or say why none is needed.

    None is needed when every GPU sits in one node or one scale-up domain, or when there is
    no cross-node traffic (`need` is None: inference replicas inside a node, or a need with
    no gradient bytes and TP inside the node): then front-end Ethernet suffices and the
    fabric fields are zero.
    """
    required = required_gbit_per_s_per_gpu(need) if need is not None else 0.0
    tp_crosses = need is not None and need.tp_crosses_nodes
    no_fabric: str | None = None
    if units * shape.compute_nodes_per_unit == 1:
        no_fabric = f"all {installed} GPUs sit in one node: no scale-out fabric required"
    elif installed <= shape.scaleup_domain_gpus:
        no_fabric = (
            f"all {installed} GPUs sit in one {shape.scaleup_domain_gpus}-GPU scale-up domain: "
            "no scale-out fabric required"
        )
    elif need is None or (required == 0 and not tp_crosses):
        no_fabric = (
            "no cross-node training traffic (inference only): serving replicas stay inside a "
            f"node's {shape.scaleup_domain_gpus}-GPU scale-up domain, so front-end Ethernet "
            "suffices; no scale-out fabric required unless tensor parallelism crosses nodes"
        )
    if no_fabric is not None:
        fabric = Fabric(
            name="none",
            topology="no scale-out fabric (front-end Ethernet only, not sized)",
            port_gbit_per_s=0.0,
            nics=0,
            leaf_switches=0,
            spine_switches=0,
            switch_radix=0,
            oversubscription=1.0,
            cables=0,
            required_gbit_per_s_per_gpu=required,
            available_gbit_per_s_per_gpu=0.0,
            verdict=no_fabric,
        )
        return fabric, FatTree(0, 0, 0, 0, 0, 0, 0)

    row = _scale_out_row(shape, scale_out, log)
    port = row.port_gbit_per_s or row.switch_port_gbit_per_s or shape.nic_gbit_per_s
    if port is None:  # pragma: no cover - every on-prem fabric row has a port rate
        raise UserError(f"scale_out: {row.name} has no port rate in fabrics.csv")
    radix = _radix(row, log)
    nodes = units * shape.compute_nodes_per_unit
    rails = max(1, shape.nics_per_unit // shape.compute_nodes_per_unit)
    gpus_per_node = shape.unit_gpus / shape.compute_nodes_per_unit
    nic_rate = min(shape.nic_gbit_per_s or port, port)
    available = rails * nic_rate / gpus_per_node
    tree = size_fat_tree(nodes, rails, radix)
    log.add("design.oversubscription", "1:1", "non-blocking fat-tree (gpufleet design rule)")
    log.add(
        "design.link_efficiency",
        f"{LINK_EFFICIENCY:.0%} of line rate",
        "assumption: NCCL all-reduce bus bandwidth over IB/RoCE reaches about this share",
    )
    fabric = Fabric(
        name=row.name,
        topology=_topology(tree, rails, radix, row),
        port_gbit_per_s=port,
        nics=tree.endpoints,
        leaf_switches=tree.leaves,
        spine_switches=tree.spines + tree.super_spines,
        switch_radix=radix,
        oversubscription=1.0,
        cables=tree.cables,
        required_gbit_per_s_per_gpu=required,
        available_gbit_per_s_per_gpu=available,
        verdict=fabric_verdict(
            required, tp_crosses, available, row.display_name, shape.scaleup_domain_gpus
        ),
    )
    return fabric, tree


def _topology(tree: FatTree, rails: int, radix: int, row: FabricRow) -> str:
    switch = row.switch_model or f"{radix}-port {row.display_name}"
    if tree.levels == 1:
        return f"single switch: {tree.endpoints} NICs on one {radix}-port switch ({switch})"
    half = radix // 2
    head = f"rail-optimised {'two' if tree.levels == 2 else 'three'}-level fat-tree, 1:1"
    body = (
        f"{rails} rails; {tree.leaves} leaf switches ({half} ports down, {half} up)"
        f" and {tree.spines} spines"
    )
    if tree.levels == 3:
        body += (
            f" in {tree.pods} pods, plus {tree.super_spines} super-spines (more leaves than "
            f"a {radix}-port spine can reach, so a third level; spine_switches counts "
            f"{tree.spines} spines + {tree.super_spines} super-spines)"
        )
    return f"{head}: {body}; {radix}-port switches ({switch})"


# --- storage -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Option:
    row: StorageRow
    rank: int  # 0: sized per TiB, 1: per client node, 2: per cluster
    feasible: bool
    headroom: float  # capability / need
    units: float
    note: str


def _storage(
    need: TrafficNeed | None,
    nodes: int,
    *,
    log: Assumptions,
    write_target_s: float,
    retained: int,
    rows: Sequence[StorageRow],
) -> Storage:
    """Capacity, throughput and a sized on-prem product.

    capacity = (dataset + checkpoint × retained) × 1.2; read = tokens/s × bytes/token;
    checkpoint write = checkpoint bytes / target write time. See `choose_storage`.
    """
    if need is None:
        return Storage(
            capacity_bytes=0.0,
            dataset_bytes=0.0,
            checkpoint_bytes=0.0,
            checkpoints_retained=0,
            read_gbytes_per_s=0.0,
            checkpoint_write_gbytes_per_s=0.0,
            choice="none",
            units=None,
            rationale=(
                "inference only: no training data or checkpoints, so no shared parallel file "
                "system is sized; model weights load from local NVMe or an object store"
            ),
        )
    bpt = need.bytes_per_token
    if bpt is None:
        bpt = DEFAULT_BYTES_PER_TOKEN
        log.add(
            "design.bytes_per_token",
            bpt,
            "assumption: tokenized data as int32 ids (Megatron-LM indexed datasets use int32 "
            "once the vocabulary exceeds uint16, e.g. Llama 3's 128k)",
        )
    log.add(
        "design.storage_headroom",
        f"{STORAGE_HEADROOM:.0%}",
        "assumption: free space on top of dataset and retained checkpoints",
    )
    log.add(
        "design.checkpoint_write_target_s",
        write_target_s,
        f"target time to write one checkpoint; {retained} retained",
    )
    capacity = (need.dataset_bytes + need.checkpoint_bytes * retained) * (1 + STORAGE_HEADROOM)
    read = need.tokens_per_s * bpt / GB
    write = need.checkpoint_bytes / write_target_s / GB
    choice, units, rationale = choose_storage(capacity, read, write, nodes, rows)
    return Storage(
        capacity_bytes=capacity,
        dataset_bytes=need.dataset_bytes,
        checkpoint_bytes=need.checkpoint_bytes,
        checkpoints_retained=retained,
        read_gbytes_per_s=read,
        checkpoint_write_gbytes_per_s=write,
        choice=choice,
        units=units,
        rationale=rationale,
    )


def choose_storage(
    capacity_bytes: float,
    read_gbytes_per_s: float,
    write_gbytes_per_s: float,
    nodes: int,
    rows: Sequence[StorageRow],
) -> tuple[str, float | None, str]:
    """Pick an on-prem product (storage.csv `kind` containing "on-prem") and size it.

    The rate to sustain is max(read, checkpoint write): the checkpoint burst and the data
    reads do not overlap in a synchronous checkpoint. By the figure the row provides:
    - MB/s per TiB: TiB = max(capacity, rate / per-TiB rate), raised to the row's minimum
      and capacity step; feasible within its maximum; units = TiB.
    - GB/s per client node: feasible when rate / nodes fits; units = capacity in TiB (no
      per-appliance figure, so the appliance count comes from a vendor quote).
    - GB/s per cluster: feasible when the rate fits; units = capacity in TiB.
    Rows without any figure are skipped and named. The first feasible row in that order
    (then catalog order) wins; if none is feasible, the one with the most headroom.
    Returns (choice, units, rationale).
    """
    rate = max(read_gbytes_per_s, write_gbytes_per_s)
    cap_tib = capacity_bytes / TIB
    options: list[_Option] = []
    skipped: list[str] = []
    for row in rows:
        if "on-prem" not in row.kind:
            continue
        option = _size_option(row, cap_tib, rate, nodes)
        if option is None:
            skipped.append(row.display_name)
        else:
            options.append(option)
    need_text = (
        f"needs {cap_tib:,.1f} TiB, {read_gbytes_per_s:,.2f} GB/s read and "
        f"{write_gbytes_per_s:,.2f} GB/s checkpoint write"
    )
    skip_text = (
        f" Skipped for lack of throughput figures in storage.csv: {', '.join(skipped)}."
        if skipped
        else ""
    )
    if not options:
        return (
            "none",
            cap_tib,
            f"{need_text}; no on-prem product in storage.csv has a throughput figure, so "
            f"only capacity is sized (TiB).{skip_text}",
        )
    feasible = [o for o in options if o.feasible]
    if feasible:
        best = min(feasible, key=lambda o: o.rank)
        verdict = "meets it"
    else:
        best = max(options, key=lambda o: o.headroom)
        verdict = "falls short; more appliances or another product are needed"
    return (
        best.row.name,
        best.units,
        f"{need_text}: {best.row.display_name} {verdict} ({best.note}).{skip_text}",
    )


def _size_option(row: StorageRow, cap_tib: float, rate: float, nodes: int) -> _Option | None:
    if row.throughput_mbytes_per_s_per_tib:
        tib = max(cap_tib, rate * 1000 / row.throughput_mbytes_per_s_per_tib)
        tib = _round_capacity(row, tib * TIB) / TIB
        head = math.inf
        if row.max_capacity_bytes is not None:
            head = row.max_capacity_bytes / (tib * TIB)
        note = (
            f"{tib:,.1f} TiB at {row.throughput_mbytes_per_s_per_tib:g} MB/s per TiB gives "
            f"{tib * row.throughput_mbytes_per_s_per_tib / 1000:,.1f} GB/s; units are TiB"
        )
        return _Option(row, 0, head >= 1, head, tib, note)
    if row.throughput_gbytes_per_s_per_node:
        per_node = rate / nodes
        head = math.inf if per_node == 0 else row.throughput_gbytes_per_s_per_node / per_node
        note = (
            f"its source gives ~{row.throughput_gbytes_per_s_per_node:g} GB/s per client node, "
            f"this plan needs {per_node:,.2f} GB/s per node; no per-appliance figure, so units "
            "are TiB provisioned and the appliance count needs a vendor quote"
        )
        return _Option(row, 1, head >= 1, head, cap_tib, note)
    if row.cluster_throughput_gbytes_per_s:
        head = math.inf if rate == 0 else row.cluster_throughput_gbytes_per_s / rate
        note = (
            f"~{row.cluster_throughput_gbytes_per_s:g} GB/s for the whole cluster; units are "
            "TiB provisioned"
        )
        return _Option(row, 2, head >= 1, head, cap_tib, note)
    return None


def _round_capacity(row: StorageRow, need_bytes: float) -> float:
    """Raise to the row's minimum, then to its capacity step (coarse step past its threshold)."""
    value = max(need_bytes, float(row.min_capacity_bytes or 0))
    step = row.capacity_step_bytes
    if not step:
        return value
    coarse_from, coarse = row.coarse_step_from_bytes, row.coarse_step_bytes
    if coarse_from and coarse and value > coarse_from:
        return coarse_from + math.ceil((value - coarse_from) / coarse) * coarse
    return float(math.ceil(value / step) * step)
