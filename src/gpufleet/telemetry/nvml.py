"""Per-GPU readings from NVML on the host the local executor runs on.

NVML is the driver's own counter interface (what `nvidia-smi` prints), so it needs no
daemon: utilisation (the share of the last sample period, 1/6 s to 1 s depending on the
GPU, in which a kernel ran), memory, power, temperature and ECC health. It cannot see how
busy the SMs were while a kernel ran (DCGM's profiling fields can), and it sees processes,
not jobs: the executor maps GPUs to jobs, by device index (what it allocated) or by pid
(who is running there).

Runs on its own too, with only the NVML bindings and the standard library:
``python -m gpufleet.telemetry.nvml --samples 10 --interval-s 1 --json``.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from gpufleet.telemetry.nvml_api import NvmlModule, NvmlUnavailable, load, text
from gpufleet.telemetry.samples import GpuSample, xid_problem

SOURCE = "nvml"

T = TypeVar("T")
JobOfPid = Callable[[int], str | None]
JobsByIndex = Callable[[], Mapping[int, str]]


class NvmlCollector:
    """The `Collector` over NVML (see the module doc). Call `close` (or use `with`) to
    release NVML and the Xid event set."""

    name = SOURCE

    def __init__(
        self,
        node: str | None = None,
        *,
        nvml_module: NvmlModule | None = None,
        jobs_by_index: JobsByIndex | None = None,
        job_of_pid: JobOfPid | None = None,
        xid_events: bool = False,
    ) -> None:
        self.node = node or socket.gethostname()
        self._nvml = nvml_module if nvml_module is not None else load()
        self._jobs_by_index = jobs_by_index
        self._job_of_pid = job_of_pid
        self.reason = ""
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as exc:
            raise NvmlUnavailable(
                f"NVML could not start ({exc}): is the NVIDIA driver installed and loaded "
                "on this host?"
            ) from exc
        self._handles = [
            self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self._nvml.nvmlDeviceGetCount())
        ]
        self._static = [
            (text(self._nvml.nvmlDeviceGetUUID(h)), self._name(h)) for h in self._handles
        ]
        self._xids: dict[int, list[int]] = {}
        self._events: Any = self._register_xids() if xid_events else None

    def __enter__(self) -> NvmlCollector:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._events is not None:
            self._optional(lambda: self._nvml.nvmlEventSetFree(self._events))
            self._events = None
        self._optional(self._nvml.nvmlShutdown)

    @property
    def gpu_count(self) -> int:
        return len(self._handles)

    def collect(self, now_s: float) -> list[GpuSample]:
        """One reading of every GPU NVML can read utilisation from; the others are named in
        `reason` (a GPU in MIG mode has no whole-GPU utilisation)."""
        self._drain_xids()
        jobs = dict(self._jobs_by_index()) if self._jobs_by_index else {}
        out: list[GpuSample] = []
        missing: list[str] = []
        for index, handle in enumerate(self._handles):
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            except self._nvml.NVMLError as exc:
                missing.append(f"GPU {index}: no utilisation ({exc})")
                continue
            out.append(self._sample(now_s, index, handle, float(util), jobs.get(index)))
        self.reason = "; ".join(missing)
        return out

    def _sample(
        self, now_s: float, index: int, handle: Any, util_pct: float, job: str | None
    ) -> GpuSample:
        nvml = self._nvml
        memory = self._optional(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        power_mw = self._optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        temp = self._optional(
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        pids = self._pids(handle)
        if job is None and self._job_of_pid is not None:
            found = sorted({j for p in pids if (j := self._job_of_pid(p)) is not None})
            job = found[0] if found else None
        problems = self._health(index, handle)
        uuid, model = self._static[index]
        return GpuSample(
            time_s=now_s,
            node=self.node,
            gpu_index=index,
            source=SOURCE,
            sm_util_pct=min(max(util_pct, 0.0), 100.0),
            uuid=uuid,
            model=model,
            mem_used_bytes=int(memory.used) if memory is not None else None,
            mem_total_bytes=int(memory.total) if memory is not None else None,
            power_w=power_mw / 1000 if power_mw is not None else None,
            temp_c=float(temp) if temp is not None else None,
            healthy=not any(bad for bad, _ in problems),
            health_detail="; ".join(words for _, words in problems),
            job_id=job,
            holder=f"pids {','.join(map(str, pids))}" if pids else "",
        )

    def _health(self, index: int, handle: Any) -> list[tuple[bool, str]]:
        """(makes it unhealthy, words) for each thing worth saying about the GPU's memory
        and Xids. Each counter is read where the GPU supports it: retired pages before
        Ampere, remapped rows from Ampere on, ECC only where ECC is on."""
        nvml = self._nvml
        out: list[tuple[bool, str]] = []
        ecc = self._optional(
            lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            )
        )
        if ecc:
            out.append((True, f"{ecc} uncorrected ECC errors since the driver loaded"))
        rows = self._optional(lambda: nvml.nvmlDeviceGetRemappedRows(handle))
        if rows is not None:
            _corrected, uncorrected, pending, failed = rows
            if failed:
                out.append((True, "row remapping failed"))
            elif pending:
                out.append((True, "row remap pending: reset the GPU"))
            elif uncorrected:
                out.append((False, f"{uncorrected} rows remapped after uncorrected errors"))
        retired = self._optional(
            lambda: nvml.nvmlDeviceGetRetiredPages(
                handle, nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
            )
        )
        if self._optional(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)):
            out.append((True, "page retirement pending: reset the GPU"))
        elif retired:
            out.append((False, f"{len(retired)} pages retired after double-bit errors"))
        for xid in self._xids.pop(index, []):
            out.append(xid_problem(xid))
        return out

    def _pids(self, handle: Any) -> list[int]:
        procs = self._optional(lambda: self._nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        return sorted({int(p.pid) for p in procs or ()})

    def _name(self, handle: Any) -> str | None:
        name = self._optional(lambda: self._nvml.nvmlDeviceGetName(handle))
        return text(name) if name is not None else None

    def _register_xids(self) -> Any:
        """An event set for critical Xids on every GPU, or None where NVML offers none."""
        nvml = self._nvml
        events = self._optional(nvml.nvmlEventSetCreate)
        if events is None:
            return None
        kind = nvml.nvmlEventTypeXidCriticalError
        for handle in self._handles:
            self._optional(partial(nvml.nvmlDeviceRegisterEvents, handle, kind, events))
        return events

    def _drain_xids(self) -> None:
        """Xids that arrived since the last reading, by device index (never waits)."""
        if self._events is None:
            return
        while True:
            try:
                event = self._nvml.nvmlEventSetWait(self._events, 0)
            except self._nvml.NVMLError:  # Timeout: nothing more queued
                return
            # handles are ctypes pointers, which compare by identity: ask for the index
            index = self._optional(partial(self._nvml.nvmlDeviceGetIndex, event.device))
            if index is not None:
                self._xids.setdefault(int(index), []).append(int(event.eventData))

    def _optional(self, read: Callable[[], T]) -> T | None:
        """A reading the GPU may not support (or not let us read): None then."""
        try:
            return read()
        except self._nvml.NVMLError:
            return None


def job_by_ancestry(roots: Mapping[int, str], proc: Path = Path("/proc")) -> JobOfPid:
    """A `job_of_pid` for the local executor: a pid's job is that of its nearest ancestor
    in `roots` (a job's runner or worker pids), so a DataLoader worker or a process a
    launcher forked maps to its job. NVML reports pids as the host sees them; a collector
    inside another pid namespace (a container) sees none of them."""

    def parent(pid: int) -> int | None:
        try:
            status = (proc / str(pid) / "status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
        return None

    def lookup(pid: int) -> str | None:
        seen: set[int] = set()
        current: int | None = pid
        while current and current not in seen:
            if current in roots:
                return roots[current]
            seen.add(current)
            current = parent(current)
        return None

    return lookup


def sample_loop(
    collector: NvmlCollector, samples: int, interval_s: float, clock: Callable[[], float]
) -> Iterator[GpuSample]:
    """`samples` readings `interval_s` apart (on a fixed schedule, not drifting)."""
    start = time.monotonic()
    for i in range(samples):
        delay = start + i * interval_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield from collector.collect(clock())


def _line(s: GpuSample) -> str:
    def num(v: float | int | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    mem = num(s.mem_used_bytes / 2**30 if s.mem_used_bytes is not None else None, ".1f")
    return (
        f"{s.time_s:.1f} {s.node} gpu{s.gpu_index} util {s.sm_util_pct:5.1f}% "
        f"mem {mem} GiB power {num(s.power_w, '.0f')} W temp {num(s.temp_c, '.0f')} C "
        f"{'ok' if s.healthy else 'UNHEALTHY'} {s.health_detail} job={s.job_id or '-'}"
    ).rstrip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpufleet.telemetry.nvml", description="Print NVML readings."
    )
    parser.add_argument("--samples", type=int, default=1, help="readings per GPU")
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--node", default=None, help="node name (default: the host name)")
    parser.add_argument("--xid-events", action="store_true", help="watch for Xid errors")
    args = parser.parse_args(argv)
    try:
        collector = NvmlCollector(args.node, xid_events=args.xid_events)
    except NvmlUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with collector:
        for sample in sample_loop(collector, args.samples, args.interval_s, time.time):
            print(sample.to_json() if args.json else _line(sample), flush=True)
        if collector.reason:
            print(f"note: {collector.reason}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
