"""Alibaba's GPU-sharing trace "openb" (cluster-trace-gpu-v2023, the FGD paper, ATC '23).

A pod list (one row per pod: CPU, memory, GPU count or GPU share in milli-GPUs, QoS, phase
and creation/scheduled/deletion times in seconds) and a node list (GPU count and model).
It is the only public trace with GPU *sharing* at scale, which is why gpufleet bundles the
default pod list and the GPU node list: a simulation can run on a real cluster and a real
workload with no download.

Mapping (docs/guide/traces.md): CPU-only pods are dropped; a single GPU with
`gpu_milli < 1000` becomes `gpu_fraction = gpu_milli / 1000`; otherwise `gpus = num_gpu` on
one worker; `gpu_spec` "A|B" becomes accelerators ("openb-A", "openb-B"); the duration is
deletion − scheduled (− creation when never scheduled); QoS LS is inference, the rest batch;
every pod is in team "openb" (the trace has no tenants).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Final

from gpufleet.errors import UserError
from gpufleet.sim.traces._common import (
    CellError,
    Tally,
    csv_rows,
    is_blank,
    open_text,
    parse_float,
    parse_int,
    read_csv_jobs,
    reading,
)
from gpufleet.sim.workload import TraceJob, TraceNode, Workload

ACCELERATOR_PREFIX: Final = "openb-"
TEAM: Final = "openb"
POD_COLUMNS: Final = (
    "name",
    "num_gpu",
    "gpu_milli",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
OPTIONAL_POD_COLUMNS: Final = ("gpu_spec", "qos", "pod_phase")
NODE_COLUMNS: Final = ("sn", "gpu", "model")
BUNDLED_PODS: Final = "openb_pod_list_default.csv.gz"
BUNDLED_NODES: Final = "openb_node_list_gpu_node.csv.gz"
FULL_GPU_MILLI: Final = 1000
SINGLE_TENANT: Final = "single tenant: team 'openb' (the trace has no teams)"


@contextmanager
def bundled_file(name: str) -> Iterator[Path]:
    """A path to a file shipped in gpufleet/data/traces/openb (extracted if zipped)."""
    ref = resources.files("gpufleet").joinpath("data", "traces", "openb", name)
    with resources.as_file(ref) as path:
        yield path


def read_openb_nodes(path: Path) -> tuple[TraceNode, ...]:
    """GPU nodes of an openb node list; nodes without GPUs are not part of a GPU cluster."""
    what = "an openb node list"
    nodes: list[TraceNode] = []
    with reading(path, what), open_text(path) as stream:
        header, body = csv_rows(stream, path, what, NODE_COLUMNS)
        col = {name: header.index(name) for name in NODE_COLUMNS}
        for line, cells in enumerate(body, start=2):
            if not cells:
                continue
            try:
                gpus = parse_int(cells[col["gpu"]], "gpu") if len(cells) > col["gpu"] else 0
            except CellError as exc:
                raise UserError(f"{path}: line {line}: {exc}") from None
            if gpus <= 0:
                continue
            model = cells[col["model"]].strip() if len(cells) > col["model"] else ""
            if is_blank(model):
                raise UserError(f"{path}: line {line}: a node with {gpus} GPUs has no model")
            nodes.append(TraceNode(cells[col["sn"]].strip(), ACCELERATOR_PREFIX + model, gpus))
    return tuple(nodes)


def bundled_openb_nodes() -> tuple[TraceNode, ...]:
    """The bundled `openb_node_list_gpu_node.csv`: 1,213 GPU nodes, 6,212 GPUs."""
    with bundled_file(BUNDLED_NODES) as path:
        return read_openb_nodes(path)


def read_openb(pods: Path, nodes: Path | None = None) -> Workload:
    """An openb pod list as a workload; `nodes` defaults to the bundled GPU node list."""
    cluster = bundled_openb_nodes() if nodes is None else read_openb_nodes(nodes)
    return read_csv_jobs(
        pods, "an openb pod list", POD_COLUMNS, _pod, nodes=cluster, every_job=(SINGLE_TENANT,)
    )


def bundled_openb() -> Workload:
    """The bundled default pod list (8,152 pods) on the bundled GPU node list."""
    with bundled_file(BUNDLED_PODS) as path:
        return read_openb(path)


def _pod(row: dict[str, str], tally: Tally) -> TraceJob | None:
    num_gpu = parse_int(row["num_gpu"], "num_gpu")
    if num_gpu == 0:
        tally.drop("CPU-only pod (num_gpu 0)")
        return None
    if num_gpu < 0:
        raise CellError("negative num_gpu")
    gpus: int | None = num_gpu
    fraction: float | None = None
    if num_gpu == 1:
        milli = parse_int(row["gpu_milli"], "gpu_milli")
        if milli <= 0:
            raise CellError("gpu_milli of a one-GPU pod is not positive")
        if milli < FULL_GPU_MILLI:
            gpus, fraction = None, milli / FULL_GPU_MILLI
    deleted = _time(row, "deletion_time")
    scheduled = _time(row, "scheduled_time")
    created = _time(row, "creation_time")
    if created is None:
        raise CellError("no creation_time")
    if deleted is None:
        raise CellError("no deletion_time")
    start = scheduled
    if start is None:
        start = created
        tally.note("never scheduled (no scheduled_time): duration from creation_time")
    duration = deleted - start
    if duration <= 0:
        raise CellError("non-positive duration (deletion_time not after start)")
    if row.get("pod_phase", "").strip() == "Failed":
        tally.note("kept a Failed pod (it held its GPUs until deleted)")
    spec = row.get("gpu_spec", "")
    accelerators = tuple(
        ACCELERATOR_PREFIX + part.strip()
        for part in ("" if is_blank(spec) else spec).split("|")
        if part.strip()
    )
    return TraceJob(
        name=row["name"].strip(),
        team=TEAM,
        submit_s=created,
        duration_s=duration,
        gpus=gpus,
        gpu_fraction=fraction,
        accelerators=accelerators,
        kind="inference" if row.get("qos", "").strip() == "LS" else "batch",
    )


def _time(row: dict[str, str], column: str) -> float | None:
    text = row[column]
    return None if is_blank(text) else parse_float(text, column)
