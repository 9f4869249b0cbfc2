"""Accelerators: one row per device (GPU, TPU chip, Trainium chip, Gaudi card).

Dense and 2:4-sparse throughput are separate columns and never mixed: the
estimators use dense figures only; sparse ones are kept so a user comparing
against a datasheet can see which number a vendor quoted.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar, Literal

from pydantic import field_validator

from gpufleet.catalog.lookup import NameIndex
from gpufleet.catalog.table import CatalogRow, load_rows

DeviceKind = Literal["gpu", "tpu", "trainium", "gaudi"]
Precision = Literal["bf16", "fp16", "fp8", "fp4", "tf32", "fp32", "int8"]


class Accelerator(CatalogRow):
    list_columns: ClassVar[frozenset[str]] = frozenset({"aliases"})
    table_columns: ClassVar[tuple[str, ...]] = (
        "name",
        "vendor",
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "memory_bytes",
        "memory_bandwidth_gbytes_per_s",
        "scaleup_bidir_gbytes_per_s",
        "scaleup_domain_gpus",
        "tdp_w",
        "mig_max_instances",
    )

    name: str
    display_name: str
    vendor: str
    kind: DeviceKind
    form_factor: str
    aliases: tuple[str, ...] = ()
    bf16_dense_tflops: float | None = None
    fp16_dense_tflops: float | None = None
    fp8_dense_tflops: float | None = None
    fp4_dense_tflops: float | None = None
    tf32_dense_tflops: float | None = None
    fp32_tflops: float | None = None
    int8_dense_tops: float | None = None
    bf16_sparse_tflops: float | None = None
    fp8_sparse_tflops: float | None = None
    memory_bytes: int
    memory_type: str | None = None
    memory_bandwidth_gbytes_per_s: float
    scaleup_link: str | None = None
    scaleup_bidir_gbytes_per_s: float | None = None
    scaleup_domain_gpus: int | None = None
    tdp_w: float | None = None
    mig_max_instances: int | None = None  # empty (None) when the device has no MIG
    release_year: int | None = None

    @field_validator("mig_max_instances")
    @classmethod
    def _mig_instances_positive(cls, value: int | None) -> int | None:
        """A device without MIG leaves the cell empty: 0 would read as "MIG, zero instances"
        to anything that asks `is not None` (the L40S row once said 0)."""
        if value is not None and value < 1:
            raise ValueError("mig_max_instances is at least 1; leave it empty without MIG")
        return value

    @property
    def supports_mig(self) -> bool:
        return self.mig_max_instances is not None

    def dense_flops(self, precision: Precision) -> float | None:
        """Dense peak in FLOP/s (or OP/s for int8) at a precision; None when unpublished."""
        column = "int8_dense_tops" if precision == "int8" else f"{precision}_dense_tflops"
        if precision == "fp32":
            column = "fp32_tflops"
        value: float | None = getattr(self, column)
        return None if value is None else value * 1e12


@cache
def load_accelerators() -> tuple[Accelerator, ...]:
    return load_rows("accelerators.csv", Accelerator)


@cache
def accelerator_index() -> NameIndex[Accelerator]:
    return NameIndex("accelerator", load_accelerators())


def get_accelerator(name: str) -> Accelerator:
    """Look up an accelerator by canonical name or alias, any case."""
    return accelerator_index().get(name)
