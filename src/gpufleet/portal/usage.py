"""Allocation over time, from the usage ledger: the series behind the overview's chart.

The ledger (closed intervals) plus the allocations still held (clipped to now) are the
same records chargeback bills from (`ledger.usage_records`), so the chart and the bill can
never disagree. Each bucket shows the average GPUs held in it: GPU-hours in the bucket
divided by its length, so a short spike and a steady load of the same GPU-hours look alike
(the chart is about capacity over time, not instants).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufleet.control.chargeback_report import UsageRecord
from gpufleet.control.models import NodeRecord

WINDOWS: Mapping[str, tuple[float, int]] = {  # name -> (seconds, buckets)
    "1h": (3_600.0, 60),
    "24h": (86_400.0, 48),
    "7d": (7 * 86_400.0, 56),
    "30d": (30 * 86_400.0, 60),
    "90d": (90 * 86_400.0, 90),
}


def window_for(age_s: float) -> str:
    """The smallest window that shows all the data there is (a 10-minute-old cluster: 1h,
    not 24 hours of nothing with a spike at the end), at most the longest."""
    return next((name for name, (span_s, _) in WINDOWS.items() if span_s >= age_s), "90d")


def data_age_s(session: Session, now_s: float) -> float:
    """How long the cluster has existed in the store: since its first node joined."""
    first = session.scalar(select(func.min(NodeRecord.created_s)))
    return now_s - first if first is not None else 0.0


@dataclass(frozen=True)
class Series:
    """Average GPUs held per bucket: one series per label (a flavor, or a team)."""

    starts_s: tuple[float, ...]
    bucket_s: float
    values: Mapping[str, tuple[float, ...]]


@dataclass(frozen=True)
class UseSummary:
    """Allocated and (where reported) used GPU-hours over the window."""

    allocated_gpu_h: float
    reported_allocated_gpu_h: float  # allocated hours of the records that report usage
    used_gpu_h: float

    @property
    def collected(self) -> bool:
        return self.reported_allocated_gpu_h > 0

    @property
    def idle_allocated_gpu_h(self) -> float:
        return max(0.0, self.reported_allocated_gpu_h - self.used_gpu_h)


def allocation_series(
    records: Iterable[UsageRecord],
    *,
    start_s: float,
    end_s: float,
    buckets: int,
    label: str = "flavor",
) -> Series:
    """Average GPUs held in each of `buckets` equal slices of [start_s, end_s), per
    `label` ("flavor" or "team")."""
    width = (end_s - start_s) / buckets
    starts = tuple(start_s + i * width for i in range(buckets))
    sums: dict[str, list[float]] = {}
    for r in records:
        key = r.flavor if label == "flavor" else r.team
        row = sums.setdefault(key, [0.0] * buckets)
        lo, hi = max(r.start_s, start_s), min(r.end_s, end_s)
        if hi <= lo:
            continue
        first = int((lo - start_s) // width)
        last = min(buckets - 1, int((hi - start_s) // width))
        for i in range(first, last + 1):
            b0 = start_s + i * width
            overlap = min(hi, b0 + width) - max(lo, b0)
            if overlap > 0:
                row[i] += r.gpu_milli / 1000 * overlap
    values = {k: tuple(v / width for v in row) for k, row in sorted(sums.items())}
    return Series(starts, width, values)


def use_summary(records: Sequence[UsageRecord], *, start_s: float, end_s: float) -> UseSummary:
    """GPU-hours held in the window, and used where the executor reported utilisation."""
    alloc = reported = used = 0.0
    for r in records:
        lo, hi = max(r.start_s, start_s), min(r.end_s, end_s)
        if hi <= lo:
            continue
        held = r.gpu_milli / 1000 * (hi - lo) / 3600
        alloc += held
        if r.used_gpu_s is not None and r.end_s > r.start_s:
            reported += held
            used += r.used_gpu_s / 3600 * (hi - lo) / (r.end_s - r.start_s)
    return UseSummary(alloc, reported, used)
