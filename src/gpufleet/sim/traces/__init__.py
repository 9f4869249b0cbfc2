"""Trace readers: public cluster traces and gpufleet's own format, all to one `Workload`.

Each reader maps its format's rows to `TraceJob`s and reports every row it dropped or
changed, with the reason (docs/guide/traces.md has each mapping). `read_trace` is the one
entry point the CLI needs: an unknown format, a missing file or a file that is not of the
named format is a `UserError` with a message, never a traceback.

Formats: `openb` (Alibaba GPU 2023 pod list; a copy with its node list is bundled,
`bundled_openb()`), `philly` (Microsoft Philly cluster_job_log JSON), `helios`
(SenseTime Helios/Acme CSV), `sacct` (Slurm `sacct --parsable2`), `gpufleet` (native CSV
or Parquet, also written by `write_native`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from gpufleet.errors import UnknownNameError
from gpufleet.sim.traces._common import check_exists
from gpufleet.sim.traces.helios import read_helios
from gpufleet.sim.traces.native import read_native, write_native
from gpufleet.sim.traces.openb import (
    bundled_openb,
    bundled_openb_nodes,
    read_openb,
    read_openb_nodes,
)
from gpufleet.sim.traces.philly import read_philly
from gpufleet.sim.traces.sacct import read_sacct
from gpufleet.sim.workload import Workload


def _read_openb_pods(path: Path) -> Workload:
    """openb pod list on the bundled GPU node list (the registry's one-argument form)."""
    return read_openb(path)


READERS: Mapping[str, Callable[[Path], Workload]] = MappingProxyType(
    {
        "openb": _read_openb_pods,
        "philly": read_philly,
        "helios": read_helios,
        "sacct": read_sacct,
        "gpufleet": read_native,
    }
)


def read_trace(path: Path, fmt: str) -> Workload:
    """Read `path` as trace format `fmt` (a key of `READERS`).

    Raises `UnknownNameError` (a `UserError`, with a did-you-mean) for an unknown format and
    `UserError` for a missing file or one that is not in that format.
    """
    reader = READERS.get(fmt)
    if reader is None:
        raise UnknownNameError("trace format", fmt, READERS)
    check_exists(path)
    return reader(path)


__all__ = [
    "READERS",
    "bundled_openb",
    "bundled_openb_nodes",
    "read_helios",
    "read_native",
    "read_openb",
    "read_openb_nodes",
    "read_philly",
    "read_sacct",
    "read_trace",
    "write_native",
]
