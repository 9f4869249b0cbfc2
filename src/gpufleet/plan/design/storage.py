"""Shared storage: capacity, read and checkpoint-write rates, and a product sized for them.

storage.csv rows state throughput in different units (per TiB, per client node, per cluster)
or not at all, so picking and sizing a product is its own job, apart from the compute side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.catalog.storage import Storage as StorageRow
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design.need import TrafficNeed
from gpufleet.plan.model import Storage

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
    checkpoint write = checkpoint bytes / target write time. See `choose_storage`.
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
        f"target time to write one checkpoint; {retained} retained",
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
