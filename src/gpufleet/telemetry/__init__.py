"""Readings of what GPUs do, from the sources a cluster already has (design 0017).

One type (`GpuSample`) and one interface (`Collector`), several sources: NVML on the
host (`nvml`), a DCGM exporter's Prometheus endpoint (`dcgm`), Slurm's per-job TRES
accounting (`slurm`), and the emulated executor's declared busy profiles (`emulated`).

This package imports only the standard library and gpufleet's bottom row, never
pydantic or numpy: `python -m gpufleet.telemetry.nvml` must run on a GPU host whose
Python has nothing but the NVML bindings. So this file exports the sample types only;
each source is imported by its module name.
"""

from gpufleet.telemetry.samples import Collector, GpuSample, TelemetryError

__all__ = ["Collector", "GpuSample", "TelemetryError"]
