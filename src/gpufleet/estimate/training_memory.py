"""Memory headroom of a training layout: when it needs memory engineering, and what fits.

A layout the model puts above `NEAR_LIMIT_FRACTION` of HBM runs in practice only after
tuning (allocator settings, smaller buffers, activation offload): the model's memory is an
estimate (validation/training_memory.py shows how close it comes on published runs), and
fragmentation in PyTorch's caching allocator grows with it. Such a layout, and one that does
not fit, are reported as needing memory engineering together with the single changes
(full recomputation, a larger pp or tp, a higher ZeRO stage, a smaller microbatch) that
bring the layout under the limit, each with the memory it would use.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpufleet.estimate.training import Layouts, TrainingCase, evaluate
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
    return out


def fitting_changes(
    case: TrainingCase, lay: Layouts, limit_bytes: float
) -> list[tuple[str, float]]:
    """Labels and per-GPU bytes of the single changes that bring `lay` under `limit_bytes`;
    only the smallest pp and tp that do (a larger one fits too and says nothing new)."""
    found: list[tuple[str, float]] = []
    seen: set[str] = set()
    for label, variant in single_changes(case, lay):
        total = float(evaluate(case, variant).total_bytes[0])
        axis = label.split()[0]
        if total <= limit_bytes and axis not in seen:
            if axis in ("pp", "tp"):
                seen.add(axis)
            found.append((label, total))
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
