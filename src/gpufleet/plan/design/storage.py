"""Shared storage: capacity, read and checkpoint-write rates, and a product sized for them.

storage.csv rows state throughput in different units (per TiB, per client node, per cluster)
or not at all, so picking and sizing a product is its own job, apart from the compute side.

The checkpoint write rate is the one the training runs' goodput is computed with. The
design step alone knows only the checkpoint's size, so `size_storage` sizes the floor (one
checkpoint within the write target, 300 s by default); the planner then sets the rate each
run's goodput used (`with_checkpoint_write`): the rate gpufleet's design rule gives for the
run's GPU count and failure rate (`estimate.goodput.designed_checkpoint_write_bytes_per_s`),
or the storage the spec states. A 405B plan designed 21.6 GB/s beside a goodput that assumed
2,000 GB/s; its run time and GPU-hours came from storage the design did not have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.catalog.storage import Storage as StorageRow
from gpufleet.catalog.storage import load_storage
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.goodput import (
    CHECKPOINT_WRITE_MAX_S,
    CHECKPOINT_WRITE_SHARE,
)
from gpufleet.formatting import fmt_duration, fmt_pct, format_gb
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.model import Design, Storage, WorkloadChoice

STORAGE_HEADROOM = 0.20
# Token ids as stored for training: int32 once the vocabulary exceeds uint16
# (Megatron-LM indexed datasets; Llama 3's 128k vocabulary needs more than 16 bits).
DEFAULT_BYTES_PER_TOKEN = 4.0
TIB = 2**40
GB = 1e9


@dataclass(frozen=True)
class _Option:
    row: StorageRow
    rank: int  # 0: sized per TiB, 1: per client node, 2: per cluster
    feasible: bool
    headroom: float  # capability / need
    units: float
    note: str


def size_storage(
    need: TrafficNeed | None,
    nodes: int,
    *,
    log: Assumptions,
    write_target_s: float,
    retained: int,
    rows: Sequence[StorageRow],
) -> Storage:
    """Capacity, throughput and a sized on-prem product.

    capacity = (dataset + checkpoint × retained) × 1.2; read = tokens/s × bytes/token;
    checkpoint write = checkpoint bytes / target write time, the floor: a plan then sets the
    rate its training runs' goodput used (`checkpoint_storage_as_costed`). See
    `choose_storage`.
    """
    if need is None:
        return Storage(
            capacity_bytes=0.0,
            dataset_bytes=0.0,
            checkpoint_bytes=0.0,
            checkpoints_retained=0,
            read_gbytes_per_s=0.0,
            checkpoint_write_gbytes_per_s=0.0,
            choice="none",
            units=None,
            rationale=(
                "inference only: no training data or checkpoints, so no shared parallel file "
                "system is sized; model weights load from local NVMe or an object store"
            ),
        )
    bpt = need.bytes_per_token
    if bpt is None:
        bpt = DEFAULT_BYTES_PER_TOKEN
        log.add(
            "design.bytes_per_token",
            bpt,
            "assumption: tokenized data as int32 ids (Megatron-LM indexed datasets use int32 "
            "once the vocabulary exceeds uint16, e.g. Llama 3's 128k)",
        )
    log.add(
        "design.storage_headroom",
        f"{STORAGE_HEADROOM:.0%}",
        "assumption: free space on top of dataset and retained checkpoints",
    )
    log.add(
        "design.checkpoint_write_target_s",
        write_target_s,
        f"the slowest checkpoint write the design allows, a floor on the write rate: the "
        f"rate is the one the training runs' goodput uses (checkpoint storage[run]); "
        f"{retained} retained",
    )
    capacity = (need.dataset_bytes + need.checkpoint_bytes * retained) * (1 + STORAGE_HEADROOM)
    read = need.tokens_per_s * bpt / GB
    write = need.checkpoint_bytes / write_target_s / GB
    choice, units, rationale = choose_storage(capacity, read, write, nodes, rows)
    return Storage(
        capacity_bytes=capacity,
        dataset_bytes=need.dataset_bytes,
        checkpoint_bytes=need.checkpoint_bytes,
        checkpoints_retained=retained,
        read_gbytes_per_s=read,
        checkpoint_write_gbytes_per_s=write,
        choice=choice,
        units=units,
        rationale=rationale,
    )


def checkpoint_storage_as_costed(
    design: Design | None,
    choices: Sequence[WorkloadChoice],
    given: set[str],
    log: Assumptions,
) -> Design | None:
    """`design` with the checkpoint write rate the training runs' goodput used (each run's
    `checkpoint_write_bytes_per_s` design input; `given` names the runs whose spec states
    it), and a line per run in `log` saying what it is and where it comes from: a cloud plan
    has no design, and the storage it rents must match too. `size_storage` sized the floor,
    one checkpoint in the write target; the storage serves one run's checkpoint at a time,
    so it gets the fastest run's rate, and each run's goodput used its own, no more."""
    runs = [
        c
        for c in choices
        if c.kind == "training" and c.design_inputs.get("checkpoint_write_bytes_per_s")
    ]
    whys = {
        c.workload: checkpoint_write_why(
            workload=c.workload,
            gpus=c.gpus,
            write_bytes_per_s=c.design_inputs["checkpoint_write_bytes_per_s"],
            checkpoint_bytes=c.design_inputs.get("checkpoint_bytes", 0.0),
            interval_s=c.design_inputs.get("checkpoint_interval_s", 0.0),
            given=c.workload in given,
        )
        for c in runs
    }
    for c in runs:
        rate = c.design_inputs["checkpoint_write_bytes_per_s"] / GB
        log.add(f"checkpoint storage[{c.workload}]", f"{rate:,.1f} GB/s", whys[c.workload])
    if design is None or not runs:
        return design
    run = max(runs, key=lambda c: c.design_inputs["checkpoint_write_bytes_per_s"])
    storage = with_checkpoint_write(
        design.storage,
        run.design_inputs["checkpoint_write_bytes_per_s"],
        design.nodes,
        why=whys[run.workload],
        rows=load_storage(),
    )
    return design.model_copy(update={"storage": storage})


def with_checkpoint_write(
    storage: Storage,
    write_bytes_per_s: float,
    nodes: int,
    *,
    why: str,
    rows: Sequence[StorageRow],
) -> Storage:
    """`storage` with its checkpoint write rate set to `write_bytes_per_s` (the rate the
    training runs' goodput used) and its product chosen again for it; `why` says where the
    rate comes from and starts the rationale.

    The rate is set, not raised to the design's floor: a rate the spec states is the storage
    the user has, and the plan reports what it costs them. Capacity, read rate and the
    checkpoint size stay as `size_storage` found them; so does the storage power, a share of
    the compute power whatever the rate (design/power.py)."""
    if storage.checkpoint_bytes <= 0:
        return storage  # nothing to write: an inference-only design
    if not (math.isfinite(write_bytes_per_s) and write_bytes_per_s > 0):
        raise ValueError(f"write_bytes_per_s must be finite and > 0, got {write_bytes_per_s}")
    write = write_bytes_per_s / GB
    choice, units, rationale = choose_storage(
        storage.capacity_bytes, storage.read_gbytes_per_s, write, nodes, rows
    )
    return storage.model_copy(
        update={
            "checkpoint_write_gbytes_per_s": write,
            "choice": choice,
            "units": units,
            "rationale": f"{why}. {rationale[0].upper()}{rationale[1:]}",
        }
    )


def checkpoint_write_why(
    *,
    workload: str,
    gpus: int,
    write_bytes_per_s: float,
    checkpoint_bytes: float,
    interval_s: float,
    given: bool,
) -> str:
    """Where a run's checkpoint write rate comes from and what it buys, from its figures:
    the rule or the spec, then one checkpoint's write time against the interval its goodput
    checkpoints at (the share the rule holds to `CHECKPOINT_WRITE_SHARE`)."""
    write_s = checkpoint_bytes / write_bytes_per_s
    share = fmt_pct(write_s / interval_s) if interval_s > 0 else "an unknown share"
    every = (
        f"one {format_gb(checkpoint_bytes)} checkpoint in {fmt_duration(write_s)} every "
        f"{fmt_duration(interval_s)} of compute on {gpus:,} GPUs, {share} of it"
    )
    rate = f"checkpoint write {write_bytes_per_s / GB:,.1f} GB/s"
    if given:
        return (
            f"{rate}, as the spec states (reliability.checkpoint_storage), {workload}'s "
            f"goodput uses it: {every}"
        )
    return (
        f"{rate}, {workload}'s goodput uses it: {every}; gpufleet's design rule holds blocking "
        f"checkpoint writes to {fmt_pct(CHECKPOINT_WRITE_SHARE)} of the compute time at the "
        f"interval the goodput model picks for the run's failure rate, and one checkpoint to "
        f"at most {fmt_duration(CHECKPOINT_WRITE_MAX_S)} (estimate/goodput.py, "
        "designed_checkpoint_write_bytes_per_s)"
    )


def choose_storage(
    capacity_bytes: float,
    read_gbytes_per_s: float,
    write_gbytes_per_s: float,
    nodes: int,
    rows: Sequence[StorageRow],
) -> tuple[str, float | None, str]:
    """Pick an on-prem product (storage.csv `kind` containing "on-prem") and size it.

    The rate to sustain is max(read, checkpoint write): the checkpoint burst and the data
    reads do not overlap in a synchronous checkpoint. By the figure the row provides:
    - MB/s per TiB: TiB = max(capacity, rate / per-TiB rate), raised to the row's minimum
      and capacity step; feasible within its maximum; units = TiB.
    - GB/s per client node: feasible when rate / nodes fits; units = capacity in TiB (no
      per-appliance figure, so the appliance count comes from a vendor quote).
    - GB/s per cluster: feasible when the rate fits; units = capacity in TiB.
    Rows without any figure are skipped and named. The first feasible row in that order
    (then catalog order) wins; if none is feasible, the one with the most headroom.
    Returns (choice, units, rationale).
    """
    rate = max(read_gbytes_per_s, write_gbytes_per_s)
    cap_tib = capacity_bytes / TIB
    options: list[_Option] = []
    skipped: list[str] = []
    for row in rows:
        if "on-prem" not in row.kind:
            continue
        option = _size_option(row, cap_tib, rate, nodes)
        if option is None:
            skipped.append(row.display_name)
        else:
            options.append(option)
    need_text = (
        f"needs {cap_tib:,.1f} TiB, {read_gbytes_per_s:,.2f} GB/s read and "
        f"{write_gbytes_per_s:,.2f} GB/s checkpoint write"
    )
    skip_text = (
        f" Skipped for lack of throughput figures in storage.csv: {', '.join(skipped)}."
        if skipped
        else ""
    )
    if not options:
        return (
            "none",
            cap_tib,
            f"{need_text}; no on-prem product in storage.csv has a throughput figure, so "
            f"only capacity is sized (TiB).{skip_text}",
        )
    feasible = [o for o in options if o.feasible]
    if feasible:
        best = min(feasible, key=lambda o: o.rank)
        verdict = "meets it"
    else:
        best = max(options, key=lambda o: o.headroom)
        verdict = "falls short; more appliances or another product are needed"
    return (
        best.row.name,
        best.units,
        f"{need_text}: {best.row.display_name} {verdict} ({best.note}).{skip_text}",
    )


def _size_option(row: StorageRow, cap_tib: float, rate: float, nodes: int) -> _Option | None:
    if row.throughput_mbytes_per_s_per_tib:
        tib = max(cap_tib, rate * 1000 / row.throughput_mbytes_per_s_per_tib)
        tib = _round_capacity(row, tib * TIB) / TIB
        head = math.inf
        if row.max_capacity_bytes is not None:
            head = row.max_capacity_bytes / (tib * TIB)
        note = (
            f"{tib:,.1f} TiB at {row.throughput_mbytes_per_s_per_tib:g} MB/s per TiB gives "
            f"{tib * row.throughput_mbytes_per_s_per_tib / 1000:,.1f} GB/s; units are TiB"
        )
        return _Option(row, 0, head >= 1, head, tib, note)
    if row.throughput_gbytes_per_s_per_node:
        per_node = rate / nodes
        head = math.inf if per_node == 0 else row.throughput_gbytes_per_s_per_node / per_node
        note = (
            f"its source gives ~{row.throughput_gbytes_per_s_per_node:g} GB/s per client node, "
            f"this plan needs {per_node:,.2f} GB/s per node; no per-appliance figure, so units "
            "are TiB provisioned and the appliance count needs a vendor quote"
        )
        return _Option(row, 1, head >= 1, head, cap_tib, note)
    if row.cluster_throughput_gbytes_per_s:
        head = math.inf if rate == 0 else row.cluster_throughput_gbytes_per_s / rate
        note = (
            f"~{row.cluster_throughput_gbytes_per_s:g} GB/s for the whole cluster; units are "
            "TiB provisioned"
        )
        return _Option(row, 2, head >= 1, head, cap_tib, note)
    return None


def _round_capacity(row: StorageRow, need_bytes: float) -> float:
    """Raise to the row's minimum, then to its capacity step (coarse step past its threshold)."""
    value = max(need_bytes, float(row.min_capacity_bytes or 0))
    step = row.capacity_step_bytes
    if not step:
        return value
    coarse_from, coarse = row.coarse_step_from_bytes, row.coarse_step_bytes
    if coarse_from and coarse and value > coarse_from:
        return coarse_from + math.ceil((value - coarse_from) / coarse) * coarse
    return float(math.ceil(value / step) * step)
