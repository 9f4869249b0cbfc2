"""Turn a job's request into what the scheduler places: whole GPUs, a MIG slice or a fraction.

A workload-aware inference job names its model and load instead of a slice; the
smallest MIG profile (or GPU fraction) whose memory holds the weights, the KV
cache of its concurrency at its longest requests and the engine's reserves is
chosen per acceptable accelerator, so slices follow real memory needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import ValidationError

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.mig import mig_profiles_for
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.inference import device_bytes_needed
from gpufleet.estimate.inference_estimate import case_for
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.jobs import JobSpec

RequestKind = Literal["gpus", "mig", "fraction"]
# Fractions are placed in steps of 1/8 of a GPU (an integer count of eighths), which keeps
# capacity arithmetic exact and matches common time-slicing/MPS configurations (assumption).
FRACTION_STEPS = 8


@dataclass(frozen=True)
class Request:
    """One acceptable way to run a job on one accelerator type."""

    accelerator: str
    kind: RequestKind
    workers: int
    gpus_per_worker: int = 0  # kind == gpus
    mig_profile: str | None = None  # kind == mig
    eighths: int = 0  # kind == fraction: GPU share in 1/8 units

    @property
    def total_gpus(self) -> int:
        return self.workers * self.gpus_per_worker


def fraction_eighths(share: float) -> int:
    """The whole eighths of a GPU a share is placed, held and billed in: rounded up, at least
    one (0.05 holds 1/8, 0.3 holds 3/8). The one rule every reader of a share applies (the
    scheduler, the simulator's checks, the API's held fraction)."""
    return max(1, math.ceil(share * FRACTION_STEPS - 1e-9))


def requests_for(job: JobSpec, accelerators: list[str]) -> list[Request]:
    """The job's request on each cluster accelerator it accepts (empty: it cannot run here)."""
    wanted = job.accelerators or accelerators
    names = [a for a in accelerators if a in wanted]
    out: list[Request] = []
    for name in names:
        if job.gpus:
            out.append(Request(name, "gpus", job.workers, gpus_per_worker=job.gpus))
        elif job.mig_profile:
            profiles = {p.profile for p in mig_profiles_for(name)}
            if job.mig_profile in profiles:
                out.append(Request(name, "mig", 1, mig_profile=job.mig_profile))
        elif job.gpu_fraction:
            eighths = fraction_eighths(job.gpu_fraction)
            out.append(Request(name, "fraction", 1, eighths=eighths))
        else:
            sized = _sized_for_workload(job, name)
            if sized is not None:
                out.append(sized)
    return out


def workload_memory_bytes(job: JobSpec, accelerator: str) -> float:
    """Device memory the job's model needs at its load (weights, KV cache, engine reserves)."""

    w = job.workload
    if w is None:
        raise ValueError("job has no workload")
    spec = InferenceSpec.model_validate(
        {
            "kind": "inference",
            "model": w.model.model_dump(),
            "serving": w.serving.model_dump(),
            "hardware": {"accelerator": accelerator},
        }
    )
    case = case_for(spec, Assumptions())
    sv = spec.serving
    load = sv.concurrency or sv.batch or 1
    longest = float(sv.max_tokens("input") + sv.max_tokens("output"))
    # the device memory on which the engine's own memory rule holds the load: (weights +
    # activations + KV) / u for vLLM's share of the device, weights + activations + KV / u
    # for TensorRT-LLM's share of what is free (dividing the whole by u asked ~8 GB too much)
    need = device_bytes_needed(case, np.array([1.0]), np.array([float(load)]), np.array([longest]))
    return float(need[0])


def _sized_for_workload(job: JobSpec, accelerator: str) -> Request | None:
    try:
        need = workload_memory_bytes(job, accelerator)
    except (UserError, ValidationError):
        return None  # e.g. fp8 on a GPU without FP8 units: not an acceptable type
    device = get_accelerator(accelerator)
    profiles = sorted(
        (p for p in mig_profiles_for(accelerator) if not p.has_media_extensions),
        key=lambda p: (p.memory_bytes, p.compute_slices),
    )
    for p in profiles:
        if p.memory_bytes >= need:
            return Request(accelerator, "mig", 1, mig_profile=p.profile)
    share = need / device.memory_bytes
    if share <= 1.0:
        eighths = fraction_eighths(share)
        if eighths < FRACTION_STEPS:
            return Request(accelerator, "fraction", 1, eighths=eighths)
        return Request(accelerator, "gpus", 1, gpus_per_worker=1)
    return Request(accelerator, "gpus", 1, gpus_per_worker=math.ceil(share))


def whole_gpus(requests: Sequence[Request]) -> list[Request]:
    """Each slice or fraction request as one whole GPU of its accelerator, as the NVIDIA
    device plugin's integer `nvidia.com/gpu` resource asks (`Profile.whole_gpus_only`)."""
    return [
        r if r.kind == "gpus" else Request(r.accelerator, "gpus", 1, gpus_per_worker=1)
        for r in requests
    ]
