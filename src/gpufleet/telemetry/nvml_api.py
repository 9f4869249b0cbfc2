"""The part of NVML's Python bindings (`nvidia-ml-py`, imported as `pynvml`) gpufleet uses.

`pynvml` ships no type information and is absent on most machines that run gpufleet (CI,
laptops, the control plane's server). So the collector never imports it at module top: it
takes any object with these members, typed here, and `load()` imports the real module only
when a collector is built without one. Tests pass a fake module with the same members.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol, cast

from gpufleet.telemetry.samples import TelemetryError

INSTALL_HINT = (
    "install NVIDIA's NVML bindings: pip install nvidia-ml-py "
    "(or pip install 'gpufleet[nvml]'); the module is imported as pynvml"
)


class NvmlUnavailable(TelemetryError):  # noqa: N818 (the name says what it means)
    """NVML cannot be used here: the bindings are not installed, or no driver answered."""


class Utilization(Protocol):
    @property
    def gpu(self) -> int: ...  # % of the last sample period a kernel was running


class MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...  # bytes

    @property
    def used(self) -> int: ...  # bytes


class ProcessInfo(Protocol):
    @property
    def pid(self) -> int: ...


class EventData(Protocol):
    @property
    def device(self) -> Any: ...  # the device handle the event came from

    @property
    def eventData(self) -> int: ...  # noqa: N802 (pynvml's name): the Xid number


class NvmlModule(Protocol):
    """The members of `pynvml` the collector calls (names as pynvml spells them)."""

    NVMLError: type[Exception]
    NVMLError_NotSupported: type[Exception]
    NVMLError_Timeout: type[Exception]
    NVML_TEMPERATURE_GPU: int
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: int
    NVML_VOLATILE_ECC: int
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: int
    nvmlEventTypeXidCriticalError: int  # noqa: N815

    def nvmlInit(self) -> None: ...  # noqa: N802
    def nvmlShutdown(self) -> None: ...  # noqa: N802
    def nvmlDeviceGetCount(self) -> int: ...  # noqa: N802
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...  # noqa: N802
    def nvmlDeviceGetIndex(self, handle: Any) -> int: ...  # noqa: N802
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...  # noqa: N802
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...  # noqa: N802
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Utilization: ...  # noqa: N802
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> MemoryInfo: ...  # noqa: N802
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...  # noqa: N802  (mW)
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int: ...  # noqa: N802
    def nvmlDeviceGetTotalEccErrors(  # noqa: N802
        self, handle: Any, error_type: int, counter_type: int
    ) -> int: ...
    def nvmlDeviceGetRetiredPages(self, handle: Any, cause: int) -> Sequence[int]: ...  # noqa: N802
    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int: ...  # noqa: N802
    # (corrected rows, uncorrected rows, remap pending, remap failed)
    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]: ...  # noqa: N802
    def nvmlDeviceGetComputeRunningProcesses(  # noqa: N802
        self, handle: Any
    ) -> Sequence[ProcessInfo]: ...
    def nvmlEventSetCreate(self) -> Any: ...  # noqa: N802
    def nvmlDeviceRegisterEvents(self, handle: Any, types: int, event_set: Any) -> None: ...  # noqa: N802
    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> EventData: ...  # noqa: N802
    def nvmlEventSetFree(self, event_set: Any) -> None: ...  # noqa: N802


def load() -> NvmlModule:
    """The real `pynvml`, or `NvmlUnavailable` saying what to install."""
    try:
        module = importlib.import_module("pynvml")
    except ImportError as exc:
        raise NvmlUnavailable(f"NVML bindings not found ({exc}); {INSTALL_HINT}") from exc
    return cast(NvmlModule, module)


def text(value: str | bytes) -> str:
    """pynvml before 11.5 returned bytes for names and UUIDs; later versions return str."""
    return value.decode() if isinstance(value, bytes) else value
