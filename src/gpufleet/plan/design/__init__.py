"""On-prem cluster design: systems, racks, power, the scale-out fabric and storage.

`design_cluster` turns "N GPUs of accelerator X" plus what the workloads move
across nodes (`TrafficNeed`) into the `Design` part of a plan. Every number
is either a catalog cell (systems.csv, fabrics.csv, storage.csv,
accelerators.csv) or a default recorded in the `Assumptions` log with its
basis; the formulas are in each helper's docstring and in
docs/design/0006-cluster-design.md.

Shape of the computation (`cluster.design_cluster` runs the steps; one module each):

1. **System** (`system`). The given row, else the first `server` row of
   systems.csv for the accelerator, else its first `rack` row (GB200 NVL72),
   else a generic 8-GPU node. Whole systems are bought:
   `units = ceil(gpus / node_gpus)`.
2. **Racks and power** (`power`). Planning uses nameplate maximum power, since
   PDUs, breakers and cooling are provisioned for peak, not typical draw.
3. **Fabric** (`fabric`). A rail-optimised, non-blocking fat-tree (one, two or
   three switch levels) from the switch radix, and a verdict comparing the
   per-GPU bandwidth the gradient all-reduce needs with what the fabric gives.
4. **Storage** (`storage`). Capacity, read and checkpoint-write rates, and a
   product sized from whatever figure its storage.csv row provides.

`need` holds `TrafficNeed`, which the fabric and the storage both read.
"""

from gpufleet.plan.design.cluster import design_cluster
from gpufleet.plan.design.fabric import (
    FatTree,
    fabric_verdict,
    required_gbit_per_s_per_gpu,
    size_fat_tree,
)
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.design.storage import choose_storage
from gpufleet.plan.design.system import node_overhead_factor

__all__ = [
    "FatTree",
    "TrafficNeed",
    "choose_storage",
    "design_cluster",
    "fabric_verdict",
    "node_overhead_factor",
    "required_gbit_per_s_per_gpu",
    "size_fat_tree",
]
