"""Inference engine profiles (estimate/data/engines.yaml) as `EngineEfficiency` values.

A profile fitted per accelerator generation (estimate/data/engine_generations.yaml) replaces
the A100-era values on that generation: the same engine reaches different fractions of a
Hopper's or an MI300X's datasheet than of an A100's.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any, get_args

import yaml

from gpufleet.errors import UserError
from gpufleet.estimate.inference import EngineEfficiency, MemoryBasis

DEFAULT_PROFILE_TOKENS = 8192


GENERATION_KEYS = (
    "decode_bandwidth_fraction",
    "kv_bandwidth_fraction",
    "prefill_compute_fraction",
    "step_overhead_s",
    "sequence_overhead_s",
    "allreduce_latency_s",
)


def _data(name: str) -> dict[str, Any]:
    text = resources.files("gpufleet.estimate").joinpath("data", name).read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def engine_table() -> dict[str, Any]:
    return _data("engines.yaml")


@cache
def generation_table() -> dict[str, Any]:
    return _data("engine_generations.yaml")


def generation_of(accelerator: str | None) -> str | None:
    """The accelerator's generation as engine_generations.yaml groups them, or None."""
    for gen, members in generation_table()["generations"].items():
        if accelerator in members:
            return str(gen)
    return None


def generation_fit(name: str, accelerator: str | None) -> tuple[str, dict[str, float]] | None:
    """(generation, fitted values) of engine `name` on `accelerator`, if fitted there."""
    gen = generation_of(accelerator)
    fitted = generation_table().get("fitted", {}).get(name, {})
    if gen is None or gen not in fitted:
        return None
    return gen, {k: float(v) for k, v in fitted[gen].items() if k in GENERATION_KEYS}


def engine(
    name: str, vendor: str | None = None, accelerator: str | None = None
) -> EngineEfficiency:
    """The profile of `name` on `accelerator`: the generation's fit when there is one, else
    engines.yaml (engines relative to another scale its fitted fractions)."""
    base_eff = _engine(name, vendor)
    fit = generation_fit(name, accelerator)
    relative = engine_table()[name].get("relative_to")
    if fit is None and relative and generation_fit(relative, accelerator):
        return _relative_on_generation(base_eff, relative, accelerator)
    if fit is None:
        if accelerator is None:
            return base_eff
        where = generation_of(accelerator) or accelerator
        note = f"; no {name} rows fitted on {where}: the engines.yaml profile (A100 fit)"
        return replace(base_eff, source=base_eff.source + note)
    gen, values = fit
    return replace(
        base_eff,
        source=f"{base_eff.source}; fitted on {gen} rows (engine_generations.yaml)",
        **values,  # type: ignore[arg-type]
    )


def _relative_on_generation(
    eff: EngineEfficiency, relative: str, accelerator: str | None
) -> EngineEfficiency:
    """An engine stated as a ratio of `relative` keeps its ratios (and its own overheads) on
    a generation where `relative` was fitted: the ratios apply to the fitted fractions."""
    ref, ref_a100 = engine(relative, None, accelerator), _engine(relative, None)
    scale_bw = eff.decode_bandwidth_fraction / ref_a100.decode_bandwidth_fraction
    scale_flops = eff.prefill_compute_fraction / ref_a100.prefill_compute_fraction
    return replace(
        eff,
        decode_bandwidth_fraction=ref.decode_bandwidth_fraction * scale_bw,
        kv_bandwidth_fraction=ref.kv_fraction * scale_bw,
        prefill_compute_fraction=ref.prefill_compute_fraction * scale_flops,
        source=f"{eff.source}; ratios applied to {ref.name} {ref.source.rsplit('; ', 1)[-1]}",
    )


def _engine(name: str, vendor: str | None) -> EngineEfficiency:
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
    basis = _memory_basis(name, entry)
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
        memory_fraction_of=basis,
    )


def _memory_basis(name: str, entry: dict[str, Any]) -> MemoryBasis:
    """What the engine's gpu_memory_utilization is a fraction of. Every engine states its
    own: inherited through `relative_to`, vLLM would take TensorRT-LLM's "free" reading of a
    flag that in vLLM caps the whole instance."""
    if "memory_fraction_of" not in entry:
        raise UserError(f"engines.yaml: {name} gives no memory_fraction_of (total or free)")
    value = str(entry["memory_fraction_of"]["value"])
    if value not in get_args(MemoryBasis):
        raise UserError(f"engines.yaml: {name}.memory_fraction_of is {value}; total or free")
    return value  # type: ignore[return-value]


def fitted_engine_parameters() -> dict[str, tuple[float, float, float]]:
    """`engine.param` -> (value, low, high) for every value marked fitted."""
    out: dict[str, tuple[float, float, float]] = {}
    for name, entry in engine_table().items():
        for key, spec in entry.items():
            if isinstance(spec, dict) and spec.get("source") == "fitted":
                low, high = spec["range"]
                out[f"{name}.{key}"] = (float(spec["value"]), float(low), float(high))
    return out
