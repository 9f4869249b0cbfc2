"""Efficiency parameters and framework profiles, loaded from estimate/data/*.yaml.

Kept as data so that a calibration run rewrites numbers, not code, and a
reader can see each value's source and the physical range it was held to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml

AttentionKernel = Literal["flash", "unfused"]


@dataclass(frozen=True)
class Efficiency:
    """How close a GPU and its links get to their datasheet numbers."""

    gemm_peak_fraction: float
    kernel_overhead_s: float
    memory_bandwidth_fraction: float
    attention_vs_gemm: float
    scaleup_link_fraction: float
    scaleout_link_fraction: float
    scaleup_latency_s: float
    scaleout_latency_s: float
    overlap_interference: float
    source: str  # where gemm_peak_fraction came from for this device

    def with_values(self, **values: float) -> Efficiency:
        return replace(self, **values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class FrameworkProfile:
    name: str
    description: str
    attention_kernel: AttentionKernel
    dp_overlap: bool
    zero3_prefetch: bool
    tp_overlap: bool
    grad_reduce_bytes: int
    grad_bytes: int
    zero_stages: tuple[int, ...]
    fused_mlp: bool
    source: str
    virtual_stages: tuple[int, ...] = (1,)  # interleaved pipeline schedules it offers


def _data(name: str) -> Any:
    text = resources.files("gpufleet.estimate").joinpath("data", name).read_text("utf-8")
    return yaml.safe_load(text)


@cache
def efficiency_table() -> dict[str, Any]:
    data: dict[str, Any] = _data("efficiency.yaml")
    return data


def efficiency_for(accelerator: str) -> tuple[Efficiency, bool]:
    """Parameters for an accelerator, and whether they were calibrated for it."""
    table = efficiency_table()
    device = table["devices"].get(accelerator)
    calibrated = device is not None
    entry = device or table["default_device"]
    common = {k: float(v["value"]) for k, v in table["common"].items()}
    gemm = entry["gemm_peak_fraction"]
    value = gemm.get("value")
    if value is None:  # `same_as: <device>` reuses another device's (fitted) value
        value = table["devices"][gemm["same_as"]]["gemm_peak_fraction"]["value"]
    return (
        Efficiency(gemm_peak_fraction=float(value), source=str(gemm["source"]), **common),
        calibrated,
    )


def fitted_parameters() -> dict[str, tuple[float, float, float]]:
    """Name -> (value, low, high) of every parameter marked `fitted`."""
    table = efficiency_table()
    out: dict[str, tuple[float, float, float]] = {}
    for section in ("common",):
        for name, spec in table[section].items():
            if spec.get("source") == "fitted":
                low, high = spec["range"]
                out[name] = (float(spec["value"]), float(low), float(high))
    for device, params in table["devices"].items():
        for name, spec in params.items():
            if spec.get("source") == "fitted":
                low, high = spec["range"]
                out[f"{device}.{name}"] = (float(spec["value"]), float(low), float(high))
    return out


@cache
def framework_profiles() -> dict[str, FrameworkProfile]:
    out: dict[str, FrameworkProfile] = {}
    for name, spec in _data("frameworks.yaml").items():
        out[name] = FrameworkProfile(
            name=name,
            **{
                **spec,
                "zero_stages": tuple(spec["zero_stages"]),
                "virtual_stages": tuple(spec["virtual_stages"]),
            },
        )
    return out


def framework_profile(name: str) -> FrameworkProfile:
    return framework_profiles()[name]
