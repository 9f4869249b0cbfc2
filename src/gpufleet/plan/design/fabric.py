"""The scale-out fabric: a non-blocking fat-tree, and whether it carries the traffic.

Sized from the unit's NICs and the fabric's switch radix (fabrics.csv), apart from racks and
storage because it is the one part whose answer may be "none": one node, one scale-up domain
or no cross-node traffic needs no fabric at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufleet.catalog.fabrics import Fabric as FabricRow
from gpufleet.catalog.fabrics import get_fabric
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.design.system import Shape
from gpufleet.plan.model import Fabric

DEFAULT_SCALE_OUT = "ib-ndr-400"
# NCCL all-reduce reaches about this fraction of a NIC's line rate (gpufleet assumption).
LINK_EFFICIENCY = 0.8

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


def size_fat_tree(nodes: int, rails: int, radix: int, oversubscription: float = 1.0) -> FatTree:
    """Switches and cables of a rail-optimised fat-tree of `radix`-port switches.

    E = nodes × rails endpoints (NICs), h = radix // 2 (a leaf's down ports).
    - E ≤ radix: one switch, E cables.
    - Else leaves = rails × ceil(nodes / h): each leaf serves one rail (NIC index) of up to h
      nodes; the last leaf of a rail takes what is left (`leaf_ports_down`). A leaf has as
      many up ports as it uses down ports ÷ `oversubscription` (1 = non-blocking): uplinks are
      sized from the ports used, not the ports a leaf has, so a partly filled leaf does not
      buy spines for nodes that are not there (16 DGX H100 nodes at 1:1: 8 leaves with 16
      nodes each, 128 uplinks, 2 spines and 256 cables, not 4 spines and 384 cables).
    - Two levels while leaves ≤ radix (a spine reaches every leaf):
      spines = ceil(uplinks / radix); cables = E + uplinks.
    - Three levels beyond: pods of h leaves (node blocks across all rails, in order); a pod
      has ceil(its leaves' uplinks / h) spines of h down and h up ports, and the spines'
      uplinks (as many as their used down links, 1:1 above the leaves) go to
      ceil(spine uplinks / radix) super-spines; cables = E + leaf uplinks + spine uplinks.
      Beyond radix pods (E > radix³/4) a fourth level would be needed, which is not sized:
      UserError.
    """
    if nodes < 1 or rails < 1 or radix < 2:
        raise ValueError(f"need nodes, rails >= 1 and radix >= 2; got {nodes}, {rails}, {radix}")
    if not oversubscription >= 1.0:
        raise ValueError(f"oversubscription must be >= 1, got {oversubscription}")
    endpoints = nodes * rails
    if endpoints <= radix:
        return FatTree(1, endpoints, 1, 0, 0, 0, endpoints)
    half = radix // 2
    # node ports used on each leaf, node block by node block, every rail's leaf of a block
    down = [d for d in leaf_ports_down(nodes, half) for _ in range(rails)]
    up = [math.ceil(d / oversubscription) for d in down]
    leaves, uplinks = len(down), sum(up)
    if leaves <= radix:
        return FatTree(2, endpoints, leaves, math.ceil(uplinks / radix), 0, 0, endpoints + uplinks)
    pods = math.ceil(leaves / half)
    if pods > radix:
        raise UserError(
            f"{endpoints} NICs exceed a three-level fat-tree of {radix}-port switches "
            f"({radix**3 // 4} endpoints); choose a higher-radix fabric (e.g. ib-xdr-800)"
        )
    spines = sum(math.ceil(sum(up[i : i + half]) / half) for i in range(0, leaves, half))
    supers = math.ceil(uplinks / radix)
    return FatTree(3, endpoints, leaves, spines, supers, pods, endpoints + 2 * uplinks)


def leaf_ports_down(nodes: int, half: int) -> list[int]:
    """Nodes on each leaf of one rail: full leaves of `half`, the last one with the rest."""
    full, rest = divmod(nodes, half)
    return [half] * full + ([rest] if rest else [])


def required_gbit_per_s_per_gpu(need: TrafficNeed) -> float:
    """The average rate at which one GPU must send across nodes: the bytes the chosen layout
    moves over the scale-out network per step and GPU (`need.dp_bytes_per_step`, filled by
    the planner from the step model's own collectives: data-parallel sync or ZeRO-3 gathers,
    context-parallel ring, pipeline sends, expert all-to-all, tensor parallelism that spans
    nodes; `estimate.training_traffic`) × 8 / step time.

    A lower bound, and the one rate that follows from the layout alone: a NIC slower than
    this cannot move the step's bytes within the step's time whatever overlaps, while any
    faster figure depends on how much of the traffic hides under compute, which depends on
    the link itself (the step time was estimated at the estimator's scale-out rate). Bursts
    run above it: the gradient sync, once per step, hides only under the last microbatch's
    backward. The tiers above it (`fabric_verdict`) leave room: 200G at 80 % is 160 Gb/s.
    """
    return need.dp_bytes_per_step * 8 / need.step_time_s / 1e9


def fabric_verdict(
    required: float,
    tp_crosses_nodes: bool,
    available: float,
    fabric_label: str,
    scaleup_domain_gpus: int,
    *,
    basis: str = "",
) -> str:
    """One sentence: the line-rate tier the need calls for, and whether the fabric meets it.

    The tier is the smallest of 200 / 400 / 800 Gb/s per GPU whose usable rate
    (line × `LINK_EFFICIENCY`) covers `required`; tensor parallelism across nodes raises it to
    at least NDR 400 (its all-reduces sit on every layer's critical path). `basis`, when
    given, says where `required` comes from (`traffic_basis`), in brackets after it.
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
    why = f" ({basis})" if basis else ""
    parts = [f"needs {_gbit(required)} Gb/s per GPU{why}: {what}"]
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


def traffic_basis(need: TrafficNeed) -> str:
    """Where the required rate comes from, in the verdict: the bytes, the step, the rule."""
    return (
        f"{need.dp_bytes_per_step / 1e9:,.1f} GB per GPU cross nodes in each "
        f"{need.step_time_s:,.2f} s step: the step's average, a floor; what the step cannot "
        "hide (pipeline sends, the end of the gradient sync) still runs faster on a faster link"
    )


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


def _scale_out_row(shape: Shape, name: str | None, log: Assumptions) -> FabricRow:
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


def size_fabric(
    shape: Shape,
    units: int,
    *,
    installed: int,
    need: TrafficNeed | None,
    scale_out: str | None,
    log: Assumptions,
) -> tuple[Fabric, FatTree]:
    """Size the scale-out fabric, or say why none is needed.

    None is needed when every GPU sits in one node or one scale-up domain, or when there is
    no cross-node traffic (`need` is None: inference replicas inside a node; or a training
    layout whose every group stays inside a scale-up domain, so no byte crosses nodes): then
    front-end Ethernet suffices and the fabric fields are zero.
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
    elif need is None:
        no_fabric = (
            "no cross-node training traffic (inference only): serving replicas stay inside a "
            f"node's {shape.scaleup_domain_gpus}-GPU scale-up domain, so front-end Ethernet "
            "suffices; no scale-out fabric required unless tensor parallelism crosses nodes"
        )
    elif required == 0 and not tp_crosses:
        no_fabric = (
            "no cross-node training traffic: the training layout keeps every collective "
            f"inside a {shape.scaleup_domain_gpus}-GPU scale-up domain, so front-end Ethernet "
            "suffices; no scale-out fabric required"
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
    joined = _fabric_nodes(need, nodes, gpus_per_node, shape, log)
    nic_rate = min(shape.nic_gbit_per_s or port, port)
    available = rails * nic_rate / gpus_per_node
    tree = size_fat_tree(joined, rails, radix)
    log.add("design.oversubscription", "1:1", "non-blocking fat-tree (gpufleet design rule)")
    log.add(
        "design.link_efficiency",
        f"{LINK_EFFICIENCY:.0%} of line rate",
        "assumption: NCCL all-reduce bus bandwidth over IB/RoCE reaches about this share",
    )
    fabric = Fabric(
        name=row.name,
        topology=_topology(tree, rails, radix, row, nodes=joined, gpus_per_node=gpus_per_node)
        + (
            f"; it joins the {joined:,} training nodes, the other {nodes - joined:,} (serving) "
            "on front-end Ethernet"
            if joined < nodes
            else ""
        ),
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
            required,
            tp_crosses,
            available,
            row.display_name,
            shape.scaleup_domain_gpus,
            basis=traffic_basis(need) if need is not None else "",
        ),
    )
    return fabric, tree


def _fabric_nodes(
    need: TrafficNeed | None, nodes: int, gpus_per_node: float, shape: Shape, log: Assumptions
) -> int:
    """The nodes the fabric joins: those `need.fabric_gpus` fill (whole scale-up units), else
    every node."""
    if need is None or need.fabric_gpus is None:
        return nodes
    per_unit = shape.unit_gpus
    units = math.ceil(need.fabric_gpus / per_unit)
    joined = min(nodes, units * shape.compute_nodes_per_unit)
    if joined < nodes:
        log.add(
            "design.fabric_nodes",
            f"{joined:,} of {nodes:,} nodes ({need.fabric_gpus:,} training GPUs at most)",
            "gpufleet design rule: serving replicas stay inside a node's scale-up domain, so "
            "only the nodes that may train join the scale-out fabric",
        )
    return max(joined, 1)


def _topology(
    tree: FatTree, rails: int, radix: int, row: FabricRow, *, nodes: int, gpus_per_node: float
) -> str:
    switch = row.switch_model or f"{radix}-port {row.display_name}"
    if tree.levels == 1:
        return f"single switch: {tree.endpoints} NICs on one {radix}-port switch ({switch})"
    half = radix // 2
    head = f"rail-optimised {'two' if tree.levels == 2 else 'three'}-level fat-tree, 1:1"
    body = (
        f"{rails} rails; {tree.leaves} leaf switches ({_leaf_ports(nodes, half)})"
        f" and {tree.spines} spines"
    )
    if tree.levels == 3:
        # name the step: two levels of these switches hold `most` nodes, and a few GPUs more
        # can cost a whole tier of switches (issue 27: 2 GPUs took 96 switches to 216)
        most = half * (radix // rails)
        body += (
            f" in {tree.pods} pods, plus {tree.super_spines} super-spines (more leaves than "
            f"a {radix}-port spine can reach, so a third level: two levels of these switches "
            f"hold at most {most:,} nodes ({most * gpus_per_node:,.0f} GPUs) and this design "
            f"has {nodes:,} nodes ({nodes * gpus_per_node:,.0f} GPUs); spine_switches counts "
            f"{tree.spines} spines + "
            f"{tree.super_spines} super-spines)"
        )
    return f"{head}: {body}; {radix}-port switches ({switch})"


def _leaf_ports(nodes: int, half: int) -> str:
    """A leaf's ports as used (1:1: as many up as down), naming a partly filled last leaf."""
    ports = leaf_ports_down(nodes, half)
    last = ports[-1]
    if last == half:
        return f"{half} ports down, {half} up"
    if len(ports) == 1:
        return f"{last} of {half} down ports used, {last} up"
    return f"{half} ports down, {half} up; the last of each rail's leaves {last} and {last}"
