"""Inference engine profiles (estimate/data/engines.yaml) as `EngineEfficiency` values."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpufleet.errors import UserError
from gpufleet.estimate.inference import EngineEfficiency

DEFAULT_PROFILE_TOKENS = 8192


@cache
def engine_table() -> dict[str, Any]:
    text = resources.files("gpufleet.estimate").joinpath("data", "engines.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def engine(name: str, vendor: str | None = None) -> EngineEfficiency:
    """The profile of `name`; engines relative to another scale its fitted fractions."""
    table = engine_table()
    if name not in table:
        raise UserError(f"unknown engine '{name}'; one of {', '.join(table)}")
    entry = table[name]
    if vendor is not None and vendor not in entry["vendors"]:
        raise UserError(
            f"serving.engine: {name} does not run on {vendor} accelerators; "
            f"it runs on {', '.join(entry['vendors'])}"
        )
    base = table[entry.get("relative_to", name)]

    def value(key: str) -> float:
        return float(entry[key]["value"]) if key in entry else float(base[key]["value"])

    decode = float(base["decode_bandwidth_fraction"]["value"])
    prefill = float(base["prefill_compute_fraction"]["value"])
    if "relative_to" in entry:
        decode *= float(entry["decode_bandwidth_ratio"]["value"])
        prefill *= float(entry["prefill_compute_ratio"]["value"])
    maturity = entry.get("vendor_efficiency", {}).get(vendor or "", {}).get("value", 1.0)
    decode *= float(maturity)
    prefill *= float(maturity)
    profile = entry.get("profile_tokens", {}).get("value", DEFAULT_PROFILE_TOKENS)
    return EngineEfficiency(
        name=name,
        decode_bandwidth_fraction=decode,
        prefill_compute_fraction=prefill,
        step_overhead_s=value("step_overhead_s"),
        request_overhead_s=value("request_overhead_s"),
        allreduce_latency_s=value("allreduce_latency_s"),
        gpu_memory_utilization=value("gpu_memory_utilization"),
        profile_tokens=int(profile),
        source=str(entry["description"]),
    )


def fitted_engine_parameters() -> dict[str, tuple[float, float, float]]:
    """`engine.param` -> (value, low, high) for every value marked fitted."""
    out: dict[str, tuple[float, float, float]] = {}
    for name, entry in engine_table().items():
        for key, spec in entry.items():
            if isinstance(spec, dict) and spec.get("source") == "fitted":
                low, high = spec["range"]
                out[f"{name}.{key}"] = (float(spec["value"]), float(low), float(high))
    return out
