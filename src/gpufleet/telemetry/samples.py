"""One GPU's reading at one time, whichever source took it, and what a source must offer.

Every source (NVML, a DCGM exporter, Slurm accounting, the emulated executor) answers in
this one type so that storage, idle detection and chargeback never ask where a number came
from. Units are in the field names; a field a source cannot see is None rather than 0, so
that "unknown" never reads as "idle" or "cool".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from gpufleet.errors import GpufleetError

# Xids that mean the hardware, not the application, failed (NVIDIA's Xid catalogue): double
# bit ECC, row remap events, NVLink, fallen off the bus, uncontained ECC, GSP errors. Others
# (13 graphics engine exception, 31 MMU fault, 43 GPU stopped processing...) are usually the
# program's own fault and leave the GPU healthy.
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})


def xid_problem(xid: int) -> tuple[bool, str]:
    """(makes the GPU unhealthy, words) for one Xid."""
    return xid in HARDWARE_XIDS, f"Xid {xid}"


class TelemetryError(GpufleetError):
    """A telemetry source could not be read at all (its library, endpoint or command)."""


def _pct(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 100.0:
        raise ValueError(f"{name} must be within 0-100 %, got {value}")


@dataclass(frozen=True, slots=True)
class GpuSample:
    """What one GPU (or, from job-level sources, one job's GPUs together) was doing.

    `gpu_index` is the device index on `node` as the driver numbers it (nvidia-smi's
    index), or None for a job-level reading that covers `gpu_count` GPUs at once (Slurm's
    TRES usage is per job step, not per device). `job_id` is gpufleet's job, mapped by the
    source's lookup; `holder` keeps what the source itself named (pids, a pod, a Slurm job)
    so that an unmapped GPU still says who holds it.
    """

    time_s: float  # Unix seconds when the reading was taken
    node: str
    gpu_index: int | None
    source: str  # "nvml", "dcgm", "slurm", "emulated"
    sm_util_pct: float  # share of the interval a kernel ran (NVML/DCGM "GPU utilisation")
    uuid: str | None = None
    model: str | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    temp_c: float | None = None
    # profiling counters (DCGM's DCP fields); NVML's plain API has no equivalent
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    healthy: bool = True
    health_detail: str = ""  # e.g. "2 uncorrected ECC errors (volatile); Xid 79"
    job_id: str | None = None
    holder: str = ""
    gpu_count: int = 1

    def __post_init__(self) -> None:
        _pct("sm_util_pct", self.sm_util_pct)
        _pct("sm_active_pct", self.sm_active_pct)
        _pct("tensor_active_pct", self.tensor_active_pct)
        if self.gpu_count < 1:
            raise ValueError(f"gpu_count must be at least 1, got {self.gpu_count}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        """One JSON object on one line (the `--json` output of `python -m ...nvml`)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuSample:
        """The inverse of `to_dict`; keys it does not know are ignored (newer writers)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Collector(Protocol):
    """A telemetry source. `collect` takes one reading of every GPU it can see.

    `reason` says why the last `collect` returned fewer readings than there are GPUs, or
    fields as None ("" when nothing was missing), so that the portal can say "site has no
    GPU accounting; use DCGM" instead of showing an empty chart.
    """

    @property
    def name(self) -> str: ...

    @property
    def reason(self) -> str: ...

    def collect(self, now_s: float) -> list[GpuSample]: ...
