"""Resolve a workload's hardware to the numbers the performance models need.

The catalog answers "what is an H100"; the estimators need "how fast can one
GPU of this cluster compute, read memory, talk inside its node and talk
across nodes". This module makes that translation once, recording every
default it takes (system, fabric, GPUs per node) as an assumption.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpufleet.catalog.accelerators import Accelerator, Precision, get_accelerator
from gpufleet.catalog.fabrics import Fabric, get_fabric, load_fabrics
from gpufleet.catalog.instances import load_instances
from gpufleet.catalog.systems import System, get_system, load_systems
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions

# Default scale-out fabric by accelerator when neither a system nor a fabric is
# given: the InfiniBand generation NVIDIA's reference systems pair with it
# (DGX A100: HDR 200, DGX H100/H200/B200: NDR 400 — systems.csv rows).
_SYSTEM_PREFERENCE = ("server", "cloud-instance", "rack")


@dataclass(frozen=True)
class GpuHardware:
    """Per-GPU capabilities of one cluster configuration, in base SI units."""

    accelerator: str
    peak_flops: float  # dense, at the workload's precision
    # Attention and other non-GEMM matrix work stay in 16-bit even in FP8 training
    # (Transformer Engine casts only Linear/GEMM inputs to FP8): dense bf16 peak.
    bf16_peak_flops: float
    memory_bytes: int  # what frameworks can allocate (driver-reported where known)
    memory_bytes_per_s: float
    scaleup_bytes_per_s: float  # unidirectional, per GPU, inside the scale-up domain
    scaleup_domain_gpus: int
    gpus_per_node: int
    scaleout_bytes_per_s: float  # unidirectional, per GPU, across nodes
    system: str | None
    fabric: str | None
    # Scale-up links wired point to point to every peer (AMD's 8-GPU xGMI boards), not
    # through a switch: a collective among k of the domain's GPUs uses only the k − 1
    # links to its peers (`scaleup_share`).
    scaleup_mesh: bool = False

    def scaleup_share(self, ranks: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Share of the per-GPU scale-up bandwidth a group of `ranks` GPUs inside the domain
        can use: 1 behind a switch (NVSwitch, ICI), (k − 1)/(domain − 1) on a full mesh,
        where a GPU reaches each peer over its own link (MI300X: 7 xGMI links of 64 GB/s
        per direction; a 4-GPU group uses 3 of them)."""
        if not self.scaleup_mesh or self.scaleup_domain_gpus <= 2:
            return np.ones(np.shape(ranks))
        k = np.clip(np.asarray(ranks, dtype=np.float64), 2, self.scaleup_domain_gpus)
        return np.asarray((k - 1) / (self.scaleup_domain_gpus - 1), dtype=np.float64)


def resolve_hardware(
    accelerator: str,
    precision: Precision,
    log: Assumptions,
    system: str | None = None,
    scale_out: str | None = None,
) -> GpuHardware:
    device = get_accelerator(accelerator)
    peak = device.dense_flops(precision)
    if peak is None:
        raise UserError(
            f"{device.name} has no published dense {precision} throughput in the catalog; "
            "choose another precision or accelerator"
        )
    sys_row = _system_for(device, system, log)
    fabric = _fabric_for(sys_row, scale_out, log)
    gpus_per_node = sys_row.node_gpus if sys_row else _default_gpus_per_node(device, log)
    domain = device.scaleup_domain_gpus or 1
    if sys_row and sys_row.scaleup_domain_gpus:
        domain = sys_row.scaleup_domain_gpus
    if domain <= 8:
        # A board-level NVLink/NVSwitch domain cannot span more than one node; rack-scale
        # domains (NVL72, TPU pods) can, and keep their size.
        domain = min(domain, gpus_per_node)
    if device.scaleup_bidir_gbytes_per_s is None:
        # No published scale-up link: fall back to the scale-out path inside the node too.
        scaleup = None
        log.add(
            "scaleup_bandwidth",
            "unknown; intra-node traffic uses the scale-out bandwidth",
            f"{device.name} has no scale-up bandwidth in accelerators.csv",
        )
    else:
        scaleup = device.scaleup_bidir_gbytes_per_s * 1e9 / 2
    scaleout = _scaleout_per_gpu(
        device.name, sys_row, fabric, gpus_per_node, log, stated=scale_out is not None
    )
    return GpuHardware(
        accelerator=device.name,
        peak_flops=peak,
        bf16_peak_flops=device.dense_flops("bf16") or device.dense_flops("fp16") or peak,
        memory_bytes=usable_memory_bytes(device, log),
        memory_bytes_per_s=device.memory_bandwidth_gbytes_per_s * 1e9,
        scaleup_bytes_per_s=scaleup if scaleup is not None else scaleout,
        scaleup_domain_gpus=max(1, domain),
        gpus_per_node=gpus_per_node,
        scaleout_bytes_per_s=scaleout,
        system=sys_row.name if sys_row else None,
        fabric=fabric.name if fabric else None,
        scaleup_mesh=_is_mesh(device, log),
    )


def _is_mesh(device: Accelerator, log: Assumptions) -> bool:
    """AMD Infinity Fabric (xGMI) boards connect each GPU directly to every peer (MI300X
    and MI325X platforms: 7 links, fully connected, no switch)."""
    link = (device.scaleup_link or "").lower()
    mesh = "xgmi" in link or "infinity fabric" in link
    if mesh:
        log.add(
            f"scaleup_topology[{device.name}]",
            "full mesh: a collective among k GPUs of the board uses k - 1 of its links",
            f"{device.scaleup_link} (accelerators.csv): point-to-point links, no switch",
        )
    return mesh


def usable_memory_bytes(device: Accelerator, log: Assumptions) -> int:
    """Device memory as the driver reports it, from AWS's DescribeInstanceTypes (the
    `accelerator_memory_bytes` of whole-GPU AWS rows in instances.csv); the datasheet
    figure otherwise. Vendors round capacity (an "80 GB" H100 reports 81,920 MiB), and
    what fits is decided by the reported number.
    """

    reported = [
        r.accelerator_memory_bytes
        for r in load_instances()
        if r.provider == "aws"
        and r.accelerator == device.name
        and r.accelerator_memory_bytes
        and (r.accelerators_count or 0) >= 1
    ]
    if reported:
        value = int(max(reported))
        log.add(
            f"device_memory[{device.name}]",
            f"{value / 2**20:,.0f} MiB",
            "driver-reported size in AWS DescribeInstanceTypes (instances.csv)",
        )
        return value
    if _binary_capacity(device):
        value = device.memory_bytes // 10**9 * 2**30
        log.add(
            f"device_memory[{device.name}]",
            f"{value / 2**30:,.0f} GiB",
            "datasheet 'GB' of HBM read as GiB: stacks of binary-sized DRAM dies, as every "
            "HBM part with a driver-reported size shows (A100, H100, H200 report their "
            "datasheet GB as GiB); no driver-reported size in the catalog",
        )
        return value
    log.add(
        f"device_memory[{device.name}]",
        f"{device.memory_bytes:,} bytes",
        "datasheet capacity (no driver-reported size in the catalog)",
    )
    return device.memory_bytes


def _binary_capacity(device: Accelerator) -> bool:
    """A datasheet capacity that is a round number of decimal GB on stacked (HBM) memory:
    the vendors' "GB" is GiB there. GDDR boards are sold and reported in decimal GB
    (AWS reports an L4's 24 GB as 22,888 MiB), so they keep the datasheet figure."""
    kind = (device.memory_type or "").upper()
    return not kind.startswith("GDDR") and device.memory_bytes % 10**9 == 0


def _system_for(device: Accelerator, name: str | None, log: Assumptions) -> System | None:
    if name is not None:
        row = get_system(name)
        if row.accelerator != device.name:
            raise UserError(
                f"hardware.system: {row.name} holds {row.accelerator}, not {device.name}"
            )
        return row
    for kind in _SYSTEM_PREFERENCE:
        for row in load_systems():
            if row.accelerator == device.name and row.kind == kind and row.node_gpus <= 8:
                log.add("system", row.name, f"first {kind} with {device.name} in systems.csv")
                return row
    return None


def _fabric_for(sys_row: System | None, name: str | None, log: Assumptions) -> Fabric | None:
    if name is not None:
        fabric = get_fabric(name)
        if fabric.category != "scale-out":
            raise UserError(f"hardware.scale_out: {fabric.name} is a {fabric.category} fabric")
        return fabric
    if sys_row and sys_row.scaleout_fabric:
        return get_fabric(sys_row.scaleout_fabric)
    for fabric in load_fabrics():
        if fabric.name == "ib-ndr-400":
            log.add("scale_out", fabric.name, "no system or fabric given; NDR 400 assumed")
            return fabric
    return None


def _stated_fabric_gbit_per_gpu(
    accelerator: str, sys_row: System | None, fabric: Fabric, gpus_per_node: int, log: Assumptions
) -> float | None:
    """Gb/s per GPU on a stated scale-out fabric, or None when fabrics.csv gives no rate.

    A cloud fabric's per-node figure is the instance's network, shared by its GPUs. An
    on-prem fabric's port rate runs on the system's NICs, each at the slower of NIC and port
    (a DGX H100's 400G NICs on HDR 200 ports: 8 × 200 Gb/s), one NIC per GPU where the system
    row names none (rail-optimised), as the plan's fabric design counts them: its per-node
    figure is a DGX's 8 ports, which would give a 72-GPU NVL72 row 44 Gb/s per GPU.
    """
    if fabric.node_gbit_per_s and (fabric.is_cloud or not fabric.port_gbit_per_s):
        rate = fabric.node_gbit_per_s / gpus_per_node
        log.add(
            f"scale_out[{accelerator}]",
            f"{fabric.name}: {rate:,.0f} Gb/s per GPU",
            f"hardware.scale_out; fabrics.csv node_gbit_per_s {fabric.node_gbit_per_s:,.0f} "
            f"over {gpus_per_node} GPUs",
        )
        return rate
    if not fabric.port_gbit_per_s:
        return None
    nics = gpus_per_node
    port = fabric.port_gbit_per_s
    if sys_row is not None and sys_row.node_nics:
        nics = sys_row.node_nics
        port = min(port, sys_row.nic_gbit_per_s or port)
    rate = nics * port / gpus_per_node
    where = f"{sys_row.name}'s {nics} NICs" if sys_row and sys_row.node_nics else "one NIC per GPU"
    log.add(
        f"scale_out[{accelerator}]",
        f"{fabric.name}: {rate:,.0f} Gb/s per GPU",
        f"hardware.scale_out; {where} at {port:,.0f} Gb/s (the slower of NIC and "
        f"{fabric.name} port)",
    )
    return rate


def _default_gpus_per_node(device: Accelerator, log: Assumptions) -> int:
    per_node = min(device.scaleup_domain_gpus or 8, 8)
    log.add("gpus_per_node", per_node, f"no system row for {device.name}; scale-up domain or 8")
    return per_node


def _scaleout_per_gpu(
    accelerator: str,
    sys_row: System | None,
    fabric: Fabric | None,
    gpus_per_node: int,
    log: Assumptions,
    *,
    stated: bool = False,
) -> float:
    """Unidirectional bytes/s one GPU can push across nodes (rail-optimised: NIC per GPU).

    A `hardware.scale_out` the spec states is the network the run uses, so it comes before
    the system row's own NICs (which are the system's default network): a stated HDR 200 on
    a DGX H100 ran at the DGX's 8 × 400 Gb/s before, the same step time as NDR 400.
    """
    if stated and fabric is not None:
        rate = _stated_fabric_gbit_per_gpu(accelerator, sys_row, fabric, gpus_per_node, log)
        if rate is not None:
            return rate * 1e9 / 8
        log.add(
            "scale_out_bandwidth",
            f"{fabric.name}: no bandwidth in fabrics.csv",
            "the system's own network figure is used instead (hardware.scale_out stated)",
        )
    if sys_row is not None:
        if sys_row.node_network_gbit_per_s:
            return sys_row.node_network_gbit_per_s * 1e9 / 8 / gpus_per_node
        if sys_row.node_nics and sys_row.nic_gbit_per_s:
            return sys_row.node_nics * sys_row.nic_gbit_per_s * 1e9 / 8 / gpus_per_node
    if fabric is not None:
        if fabric.node_gbit_per_s:
            return fabric.node_gbit_per_s * 1e9 / 8 / gpus_per_node
        if fabric.port_gbit_per_s:
            log.add("nics_per_gpu", 1, f"{fabric.name}: one port per GPU (rail-optimised) assumed")
            return fabric.port_gbit_per_s * 1e9 / 8
    log.add("scaleout_bandwidth", "400 Gb/s per GPU", "nothing known about the fabric; NDR assumed")
    return 400e9 / 8
