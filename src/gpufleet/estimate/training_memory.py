"""Memory headroom of a training layout: when it needs memory engineering, and what fits.

A layout the model puts above `NEAR_LIMIT_FRACTION` of HBM runs in practice only after
tuning (allocator settings, smaller buffers, activation offload): the model's memory is an
estimate (validation/training_memory.py shows how close it comes on published runs), and
fragmentation in PyTorch's caching allocator grows with it. Such a layout, and one that does
not fit, are reported as needing memory engineering together with the single changes
(full recomputation, a larger pp or tp, a higher ZeRO stage, a smaller microbatch) that
bring the layout under the limit, each with the memory it would use.

Optimizer offload (training_offload) is the last resort: the search adds offloaded variants
only for a GPU count where no layout fits in HBM without it, so a run that fits is never
slowed by host traffic, and the single changes list it with its seconds per step.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gpufleet.estimate.training import Evaluation, Layouts, TrainingCase, evaluate
from gpufleet.estimate.training_offload import OFFLOAD_CODES, host_memory_per_gpu_bytes
from gpufleet.formatting import format_gb

# Above this share of HBM a layout is "near the limit" (assumption: PyTorch's caching
# allocator commonly loses 5-10 % to fragmentation; the reserve in the model is flat).
NEAR_LIMIT_FRACTION = 0.90
MEMORY_ENGINEERING = "needs memory engineering"


def single_changes(case: TrainingCase, lay: Layouts) -> list[tuple[str, Layouts]]:
    """The one-knob changes to a layout that lower its memory, with their labels."""
    arch = case.arch
    tp, pp, dp = int(lay.tp[0]), int(lay.pp[0]), int(lay.dp[0])
    out: list[tuple[str, Layouts]] = []
    if int(lay.recompute[0]) < 2:
        out.append(("recompute full", replace(lay, recompute=np.array([2]))))
    for k in (2, 4, 8, 16, 32):
        if pp * k <= arch.layers and dp % k == 0 and int(lay.zero[0]) != 3:
            out.append((f"pp {pp * k}", replace(lay, pp=lay.pp * k, dp=lay.dp // k)))
    for k in (2, 4, 8):
        new_tp = tp * k
        fits_heads = arch.heads % new_tp == 0 and arch.kv_heads % new_tp == 0
        if fits_heads and new_tp <= case.hw.scaleup_domain_gpus and dp % k == 0:
            sp = np.array([1])
            out.append((f"tp {new_tp}", replace(lay, tp=lay.tp * k, dp=lay.dp // k, sp=sp)))
    for zero in case.profile.zero_stages:
        if zero > int(lay.zero[0]) and not (zero == 3 and pp > 1):
            out.append((f"zero_stage {zero}", replace(lay, zero=np.array([zero]))))
    if int(lay.mb[0]) > 1:
        out.append(("microbatch 1", replace(lay, mb=np.array([1]))))
    offloaded = offload_variants(case, lay)
    if offloaded.tp.size:
        out.append(("offload optimizer state", offloaded))
    return out


def offload_variants(case: TrainingCase, lay: Layouts) -> Layouts:
    """`lay`'s layouts with the optimizer state in host memory, where the framework offers
    it and the layout shards the state (ZeRO >= 1: the offloaded shard is dp × cp-th of it);
    empty otherwise."""
    keep = (lay.zero >= 1) & (lay.offloaded == 0)
    if "optimizer" not in case.profile.offload:
        keep &= False
    picked = lay.take(np.flatnonzero(keep))
    return replace(picked, offload=np.full(picked.tp.size, OFFLOAD_CODES["optimizer"]))


def host_fits(case: TrainingCase, ev: Evaluation) -> npt.NDArray[np.bool_]:
    """Which layouts' offloaded state fits in their GPU's share of host memory."""
    return np.asarray(ev.host_bytes <= host_memory_per_gpu_bytes(case.hw))


def concat_layouts(a: Layouts, b: Layouts) -> Layouts:
    """`a` then `b`, with an explicit offload column."""
    cols = {
        f.name: np.concatenate([getattr(a, f.name), getattr(b, f.name)])
        for f in fields(a)
        if f.name != "offload"
    }
    return Layouts(**cols, offload=np.concatenate([a.offloaded, b.offloaded]))


def concat_evaluations(a: Evaluation, b: Evaluation) -> Evaluation:
    """`a` then `b`, array by array (scalars are the workload's, equal in both)."""
    out: dict[str, Any] = {}
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        out[f.name] = np.concatenate([x, y]) if isinstance(x, np.ndarray) else x
    return Evaluation(**out)


def fitting_changes(
    case: TrainingCase, lay: Layouts, limit_bytes: float
) -> list[tuple[str, float]]:
    """Labels and per-GPU bytes of the single changes that bring `lay` under `limit_bytes`;
    only the smallest pp and tp that do (a larger one fits too and says nothing new)."""
    found: list[tuple[str, float]] = []
    seen: set[str] = set()
    for label, variant in single_changes(case, lay):
        ev = evaluate(case, variant)
        total = float(ev.total_bytes[0])
        axis = label.split()[0]
        shown = label
        if label.startswith("offload"):
            if not bool(host_fits(case, ev)[0]):
                continue
            shown = f"{label} (+{float(ev.offload_s[0]):.2f} s/step over the host link)"
        if total <= limit_bytes and axis not in seen:
            if axis in ("pp", "tp"):
                seen.add(axis)
            found.append((shown, total))
    return found


def memory_engineering(case: TrainingCase, lay: Layouts, total_bytes: float) -> str | None:
    """The finding for a layout near or over the limit, naming the changes that fit under
    `NEAR_LIMIT_FRACTION` of HBM; None when the layout has headroom."""
    have = case.hw.memory_bytes
    if total_bytes <= NEAR_LIMIT_FRACTION * have:
        return None
    share = f"{format_gb(total_bytes)} of {format_gb(have)} per GPU ({total_bytes / have:.0%})"
    state = "over the limit" if total_bytes > have else f"above {NEAR_LIMIT_FRACTION:.0%} of HBM"
    changes = fitting_changes(case, lay, NEAR_LIMIT_FRACTION * have)
    if changes:
        fits = ", ".join(f"{label} ({format_gb(b)})" for label, b in changes)
        hint = f"layouts that fit with headroom: {fits}"
    else:
        hint = "no single change fits with headroom: use more GPUs or offload"
    return f"{MEMORY_ENGINEERING}: {share}, {state}; {hint}"
