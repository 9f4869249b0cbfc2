"""The hardware part of a workload spec: which accelerator, how many, in what box."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from gpufleet.catalog.accelerators import Accelerator, get_accelerator
from gpufleet.specs.base import Spec
from gpufleet.specs.names import AcceleratorName, FabricName, SystemName


class HardwareSpec(Spec):
    accelerator: AcceleratorName = Field(
        description="Catalog name or alias, e.g. h100-sxm5-80gb, H100-SXM5-80GB, mi300x."
    )
    count: PositiveInt | None = Field(
        default=None, description="Number of accelerators; chosen by the planner when absent."
    )
    system: SystemName | None = Field(
        default=None, description="Server or rack system, e.g. dgx-h100; defaults from the GPU."
    )
    scale_out: FabricName | None = Field(
        default=None, description="Scale-out fabric per GPU, e.g. ib-ndr-400."
    )

    def device(self) -> Accelerator:
        return get_accelerator(self.accelerator)
