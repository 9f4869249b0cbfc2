"""Utilisation the emulated executor's jobs "produce", from a declared busy profile.

The emulated cluster runs no processes, so without this its GPUs would read 0 % or not at
all, and demos and tests of idle detection, heat maps and used GPU-hours would have
nothing to show. A job declares a profile name; its readings follow from (job id, profile,
GPU, start time, now) alone, hash-seeded, so a restarted server, a test and a second
collector all see the same numbers, and no state is kept.

Profiles (per-GPU utilisation, in %):

* ``training``: loading for the first 2 minutes (~10 %), then 84-96 % (a level per job)
  with ±3 % noise, dropping to ~8 % for 45 s at each checkpoint (every 30 minutes);
* ``inference``: a server following its traffic: 25-75 %, changing every 5 minutes;
* ``notebook``: mostly idle (0-3 %), busy (40-80 %) in about one 5-minute window in eight;
* ``idle``: holds GPUs and does nothing (0-2 %) - the waste idle detection must find.

`now_s` is the executor's clock (emulated seconds when it runs faster than real time).
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpufleet.telemetry.samples import GpuSample

SOURCE = "emulated"
PROFILES = ("training", "inference", "notebook", "idle")
DEFAULT_PROFILE = "training"
STEP_S = 10.0  # readings change every 10 s: like NVML's short window, not like white noise
WARMUP_S = 120.0
CHECKPOINT_EVERY_S = 1800.0
CHECKPOINT_S = 45.0
WINDOW_S = 300.0  # inference traffic and notebook sessions change every 5 minutes
GIB = 2**30


def unit(*key: object) -> float:
    """A number in [0, 1) that depends on `key` alone (not on Python's per-process hash)."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return float(struct.unpack(">Q", digest)[0] >> 11) / float(1 << 53)


def _noise(spread: float, *key: object) -> float:
    return (unit(*key) * 2 - 1) * spread


def busy_pct(profile: str, job_id: str, gpu: int, start_s: float, now_s: float) -> float:
    """One GPU's utilisation (0-100) under `profile` at `now_s` (see the module doc)."""
    age_s = max(now_s - start_s, 0.0)
    step = int(age_s // STEP_S)
    window = int(age_s // WINDOW_S)
    if profile == "training":
        if age_s < WARMUP_S:
            value = 10 + _noise(5, job_id, gpu, step)
        elif age_s % CHECKPOINT_EVERY_S < CHECKPOINT_S and age_s >= CHECKPOINT_EVERY_S:
            value = 8 + _noise(4, job_id, gpu, step)
        else:
            # data-parallel GPUs move together: the job's level and step, a little per GPU
            level = 84 + 12 * unit(job_id, "level")
            value = level + _noise(3, job_id, step) + _noise(1, job_id, gpu, step)
    elif profile == "inference":
        value = 25 + 50 * unit(job_id, "traffic", window) + _noise(5, job_id, gpu, step)
    elif profile == "notebook":
        if unit(job_id, "session", window) < 0.125:
            value = 40 + 40 * unit(job_id, gpu, "burst", step)
        else:
            value = 3 * unit(job_id, gpu, step)
    elif profile == "idle":
        value = 2 * unit(job_id, gpu, step)
    else:
        raise ValueError(f"unknown busy profile {profile!r}; known: {', '.join(PROFILES)}")
    return min(max(value, 0.0), 100.0)


_MEM_SHARE = {"training": 0.88, "inference": 0.92, "notebook": 0.2, "idle": 0.05}


@dataclass(frozen=True, slots=True)
class EmulatedJob:
    """A running emulated job, as the executor knows it."""

    job_id: str
    profile: str
    node: str
    gpu_indices: tuple[int, ...]  # the GPUs of `node` it holds
    start_s: float
    # (GPU index, bytes of it the job holds) where it holds part of a GPU: a MIG slice's
    # memory, or a fraction's share; a GPU not named here is the job's whole, unless other
    # jobs hold part of it too (then the memory nobody declared is split among them)
    mem_held_bytes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class EmulatedGpu:
    """What an emulated GPU is: its memory and power range (from the catalog's accelerator)."""

    mem_total_bytes: int = 80 * GIB
    idle_w: float = 70.0
    max_w: float = 700.0
    model: str | None = None


class EmulatedCollector:
    """The `Collector` of the emulated cluster: every held GPU by its job's profile, and the
    free GPUs `free_gpus` names at 0 %."""

    name = SOURCE
    reason = ""

    def __init__(
        self,
        jobs: Callable[[], Iterable[EmulatedJob]],
        *,
        free_gpus: Callable[[], Iterable[tuple[str, int]]] | None = None,
        gpu: EmulatedGpu | None = None,
    ) -> None:
        self._jobs = jobs
        self._free = free_gpus
        self.gpu = gpu or EmulatedGpu()

    def collect(self, now_s: float) -> list[GpuSample]:
        jobs = list(self._jobs())
        held = self._mem_held_bytes(jobs)
        out = [
            self._sample(
                now_s,
                job.node,
                index,
                job,
                busy_pct(job.profile, job.job_id, index, job.start_s, now_s),
                held_bytes=held[(job.node, index, job.job_id)],
            )
            for job in jobs
            for index in job.gpu_indices
        ]
        for node, index in self._free() if self._free else ():
            out.append(self._sample(now_s, node, index, None, 0.0, held_bytes=0))
        return sorted(out, key=lambda s: (s.node, s.gpu_index or 0))

    def _mem_held_bytes(self, jobs: list[EmulatedJob]) -> dict[tuple[str, int, str], int]:
        """(node, GPU, job) -> the memory the job holds on that GPU, the most it may read.

        The store adds up a GPU's readings (a MIG GPU reads once per slice, as DCGM's
        exporter does), so a slice's job reading a whole GPU's share gave 179 GB used of an
        80 GB GPU. A job holds what it declares (`EmulatedJob.mem_held_bytes`); the jobs of
        a GPU that declare nothing split what the others leave equally; and should the
        declarations exceed the GPU, every job's part shrinks in proportion: a GPU's
        parts never add up to more than it has."""
        total = self.gpu.mem_total_bytes
        on_gpu: dict[tuple[str, int], list[tuple[str, int | None]]] = defaultdict(list)
        for job in jobs:
            declared = dict(job.mem_held_bytes)
            for index in job.gpu_indices:
                on_gpu[(job.node, index)].append((job.job_id, declared.get(index)))
        out: dict[tuple[str, int, str], int] = {}
        for (node, index), parts in on_gpu.items():
            known = sum(max(0, b) for _, b in parts if b is not None)
            unknown = sum(1 for _, b in parts if b is None)
            rest = max(0, total - known) // unknown if unknown else 0
            want = [(job_id, rest if b is None else max(0, b)) for job_id, b in parts]
            asked = sum(b for _, b in want)
            for job_id, b in want:
                out[(node, index, job_id)] = b if asked <= total else b * total // asked
        return out

    def _sample(
        self,
        now_s: float,
        node: str,
        index: int,
        job: EmulatedJob | None,
        util: float,
        *,
        held_bytes: int,
    ) -> GpuSample:
        """One reading; the job uses its profile's share of the memory it holds there
        (`held_bytes`), never more (rounded down)."""
        g = self.gpu
        util = round(util, 1)
        share = _MEM_SHARE.get(job.profile, 0.5) if job else 0.0
        power = g.idle_w + (g.max_w - g.idle_w) * util / 100
        return GpuSample(
            time_s=now_s,
            node=node,
            gpu_index=index,
            source=SOURCE,
            sm_util_pct=util,
            uuid=f"GPU-emulated-{node}-{index}",
            model=g.model,
            mem_used_bytes=math.floor(held_bytes * share),
            mem_total_bytes=g.mem_total_bytes,
            power_w=round(power, 1),
            temp_c=round(30 + 40 * util / 100, 1),
            job_id=job.job_id if job else None,
            holder=f"emulated {job.profile}" if job else "",
        )
