"""Host memory as a second memory tier: optimizer-state offload (ZeRO-Offload, FSDP CPUOffload).

A layout whose fp32 master weights and Adam moments do not fit in HBM can still run when
they live in host memory and the optimizer step runs on the CPU: each step the gradient
shard goes to the host and the updated bf16 weights come back over the host link. That is
what DeepSpeed's `offload_optimizer: cpu` (Ren et al. 2021, ZeRO-Offload) and FSDP's
`CPUOffload` do. The model prices it as traffic over the host link plus the CPU's
optimizer step, overlapped with nothing (DeepSpeed's one-step delayed update is opt-in
and changes the optimizer's semantics, so it is not assumed).

Everything here is a named assumption with its source (`offload_assumptions`), not a
silent constant: the catalog has each system's host memory but no host-link bandwidth.
This module imports nothing from the training model so `training.evaluate` can use it.
"""

from __future__ import annotations

from gpufleet.catalog.systems import get_system
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.hardware import GpuHardware

OFFLOAD_CODES: dict[str, int] = {"none": 0, "optimizer": 1}
GB = 1e9
# Host link per GPU, per direction. PCIe Gen5 x16: 32 GT/s × 16 lanes ≈ 64 GB/s (PCI-SIG
# PCIe 5.0 Base Specification); Gen4 x16 half that (A100 platforms). NVLink-C2C between
# Grace and Hopper/Blackwell: 900 GB/s bidirectional, 450 GB/s per direction (NVIDIA GH200
# and GB200 datasheets).
PCIE_GEN5_X16_BYTES_PER_S = 64 * GB
PCIE_GEN4_X16_BYTES_PER_S = 32 * GB
NVLINK_C2C_BYTES_PER_S = 450 * GB
# Share of the link's rate that pinned-memory copies reach (assumption: cudaMemcpy of
# pinned buffers commonly measures ~50-55 GB/s on a 64 GB/s Gen5 x16 link).
HOST_LINK_EFFICIENCY = 0.8
# Optimizer-state bytes the CPU Adam step streams per second for one GPU's shard
# (assumption: a dual-socket DDR5 host streams ~300-600 GB/s shared by 8 GPUs, and
# DeepSpeed's vectorised CPUAdam (Ren et al. 2021 §4.1) reaches a fraction of it).
CPU_OPTIMIZER_BYTES_PER_S = 20 * GB
# Host memory kept for the OS, data-loader workers, page cache and pinned staging buffers.
HOST_RESERVE_FRACTION = 0.2
# Host memory per GPU when the system row does not give it: DGX H100's 2 TiB over 8 GPUs.
DEFAULT_HOST_BYTES_PER_GPU = 2 * 2**40 // 8


def host_link_bytes_per_s(hw: GpuHardware) -> float:
    """Per-direction bandwidth between one GPU and host memory (bytes/s), before efficiency."""
    name = hw.accelerator.lower()
    if name.startswith(("gb200", "gh200")):
        return NVLINK_C2C_BYTES_PER_S
    if name.startswith("a100"):
        return PCIE_GEN4_X16_BYTES_PER_S
    return PCIE_GEN5_X16_BYTES_PER_S


def _host_bytes_per_gpu_raw(hw: GpuHardware) -> tuple[float, str]:
    if hw.system is not None:
        row = get_system(hw.system)
        if row.system_memory_bytes:
            return row.system_memory_bytes / max(row.node_gpus, 1), f"systems.csv {row.name}"
    return float(DEFAULT_HOST_BYTES_PER_GPU), "no host memory in the catalog: DGX H100's 2 TiB / 8"


def host_memory_per_gpu_bytes(hw: GpuHardware) -> float:
    """Host memory one GPU's offloaded state may use: the system's host memory divided by
    its GPUs, less `HOST_RESERVE_FRACTION`."""
    raw, _ = _host_bytes_per_gpu_raw(hw)
    return raw * (1 - HOST_RESERVE_FRACTION)


def offload_assumptions(hw: GpuHardware, log: Assumptions) -> None:
    """Record the figures an offloaded layout's memory and time rest on."""
    link = host_link_bytes_per_s(hw)
    if link == NVLINK_C2C_BYTES_PER_S:
        source = "NVIDIA GH200/GB200 datasheets: NVLink-C2C 900 GB/s bidirectional (assumption)"
    elif link == PCIE_GEN4_X16_BYTES_PER_S:
        source = "PCI-SIG PCIe 4.0: 16 GT/s × 16 lanes"
    else:
        source = "PCI-SIG PCIe 5.0: 32 GT/s × 16 lanes"
    log.add(f"host_link[{hw.accelerator}]", f"{link / GB:.0f} GB/s per direction", source)
    log.add(
        "host_link_efficiency",
        HOST_LINK_EFFICIENCY,
        "assumption: pinned-memory copies reach ~50-55 GB/s on PCIe Gen5 x16",
    )
    log.add(
        "cpu_optimizer_rate",
        f"{CPU_OPTIMIZER_BYTES_PER_S / GB:.0f} GB/s of optimizer state per GPU",
        "assumption: DDR5 host bandwidth shared by 8 GPUs; DeepSpeed CPUAdam (Ren et al. 2021)",
    )
    raw, where = _host_bytes_per_gpu_raw(hw)
    log.add(
        f"host_memory_per_gpu[{hw.accelerator}]",
        f"{raw / GB:.0f} GB less {HOST_RESERVE_FRACTION:.0%} reserve",
        where,
    )
    log.add(
        "offload_overlap",
        "none",
        "host traffic and CPU step serialised after the backward (no delayed update)",
    )
