"""A stand-in for `pynvml` with the members `gpufleet.telemetry.nvml_api.NvmlModule` names.

Each fake GPU is a `FakeGpu`; a reading the GPU "does not support" raises
`NVMLError_NotSupported`, as pynvml does on a consumer card or a GPU in MIG mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):  # pynvml's names, below too
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801, N818
    pass


class NVMLError_Timeout(NVMLError):  # noqa: N801, N818
    pass


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801, N818
    pass


NOT_SUPPORTED = object()


@dataclass(eq=False)
class FakeGpu:
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    name: str = "NVIDIA H100 80GB HBM3"
    util: Any = 50
    mem_used: int = 10 * 2**30
    mem_total: int = 80 * 2**30
    power_mw: Any = 350_000
    temp: Any = 60
    ecc_uncorrected: Any = 0
    remapped: Any = (0, 0, 0, 0)
    retired: Any = NOT_SUPPORTED
    retired_pending: Any = NOT_SUPPORTED
    pids: Sequence[int] = ()
    calls: list[str] = field(default_factory=list)


def _get(value: Any) -> Any:
    if value is NOT_SUPPORTED:
        raise NVMLError_NotSupported("Not Supported")
    return value


class FakeNvml:
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_Timeout = NVMLError_Timeout
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    nvmlEventTypeXidCriticalError = 8  # noqa: N815

    def __init__(self, gpus: Sequence[FakeGpu], *, driver: bool = True) -> None:
        self.gpus = list(gpus)
        self.driver = driver
        self.inits = 0
        self.xids: list[tuple[int, int]] = []  # (gpu index, xid) waiting in the event set
        self.registered: list[int] = []

    def nvmlInit(self) -> None:  # noqa: N802
        if not self.driver:
            raise NVMLError_DriverNotLoaded("Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:  # noqa: N802
        return self.gpus[index]

    def nvmlDeviceGetIndex(self, h: FakeGpu) -> int:  # noqa: N802
        return next(i for i, g in enumerate(self.gpus) if g is h)

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> bytes:  # noqa: N802 (old pynvml: bytes)
        return h.uuid.encode()

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:  # noqa: N802
        return h.name

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:  # noqa: N802
        return SimpleNamespace(gpu=_get(h.util), memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:  # noqa: N802
        return SimpleNamespace(total=h.mem_total, used=h.mem_used, free=h.mem_total - h.mem_used)

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:  # noqa: N802
        return int(_get(h.power_mw))

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:  # noqa: N802
        assert sensor == self.NVML_TEMPERATURE_GPU
        return int(_get(h.temp))

    def nvmlDeviceGetTotalEccErrors(self, h: FakeGpu, kind: int, counter: int) -> int:  # noqa: N802
        assert (kind, counter) == (1, 0)
        return int(_get(h.ecc_uncorrected))

    def nvmlDeviceGetRetiredPages(self, h: FakeGpu, cause: int) -> list[int]:  # noqa: N802
        return list(_get(h.retired))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: FakeGpu) -> int:  # noqa: N802
        return int(_get(h.retired_pending))

    def nvmlDeviceGetRemappedRows(self, h: FakeGpu) -> tuple[int, int, int, int]:  # noqa: N802
        return tuple(_get(h.remapped))  # type: ignore[return-value]

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[Any]:  # noqa: N802
        return [SimpleNamespace(pid=p, usedGpuMemory=2**30) for p in h.pids]

    def nvmlEventSetCreate(self) -> str:  # noqa: N802
        return "events"

    def nvmlDeviceRegisterEvents(self, h: FakeGpu, types: int, events: str) -> None:  # noqa: N802
        assert types == self.nvmlEventTypeXidCriticalError
        self.registered.append(self.nvmlDeviceGetIndex(h))

    def nvmlEventSetWait(self, events: str, timeout_ms: int) -> Any:  # noqa: N802
        if not self.xids:
            raise NVMLError_Timeout("Timeout")
        index, xid = self.xids.pop(0)
        return SimpleNamespace(device=self.gpus[index], eventData=xid)

    def nvmlEventSetFree(self, events: str) -> None:  # noqa: N802
        pass
