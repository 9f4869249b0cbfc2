"""Allocation over time, from the usage ledger: the series behind the overview's chart.

The ledger (closed intervals) plus the allocations still held (clipped to now) are the
same records chargeback bills from (`ledger.usage_records`), so the chart and the bill can
never disagree. Each bucket shows the average GPUs held in it: GPU-hours in the bucket
divided by its length, so a short spike and a steady load of the same GPU-hours look alike
(the chart is about capacity over time, not instants).

Buckets start on clock boundaries of their length (a minute, half an hour, 3 h, 12 h, a day,
in UTC), from the boundary at or before the window's start to the one after now: a row
labelled "12:38" is 12:38:00–12:39:00. They once began at now − window, so "12:38" was
12:38:41–12:39:41 and showed GPUs held from 12:39:05 in the minute before they were. The
last bucket is the one still running: it is averaged over its part up to now, not its whole
length, or the chart would end in a dip that is only time not yet passed.
"""

from __future__ import annotations

import math
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
class Grid:
    """The chart's intervals: `count` buckets of `step_s` from `start_s`, the last holding
    `now_s` (it ends there, not at its boundary, until the clock gets there)."""

    start_s: float
    step_s: float
    count: int
    now_s: float

    @property
    def end_s(self) -> float:
        """The last bucket's boundary (at or after now)."""
        return self.start_s + self.count * self.step_s

    def bounds(self, i: int) -> tuple[float, float]:
        """Bucket `i`'s true [start, end): the running one ends now."""
        lo = self.start_s + i * self.step_s
        return lo, min(lo + self.step_s, self.now_s)


def grid_for(window: str, now_s: float) -> Grid:
    """The window's buckets on clock boundaries of their length, covering the whole window
    (the first begins at or before now − window) up to now (the last holds now)."""
    span_s, buckets = WINDOWS[window]
    step_s = span_s / buckets
    start_s = math.floor((now_s - span_s) / step_s) * step_s
    count = max(1, math.ceil((now_s - start_s) / step_s))
    return Grid(start_s, step_s, count, now_s)


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
    until_s: float | None = None,
) -> Series:
    """Average GPUs held in each of `buckets` equal slices of [start_s, end_s), per
    `label` ("flavor" or "team"). With `until_s` (now), a slice that runs past it is
    averaged over its part before it: the time after now holds nothing yet, it is not idle."""
    width = (end_s - start_s) / buckets
    starts = tuple(start_s + i * width for i in range(buckets))
    until = end_s if until_s is None else min(end_s, until_s)
    sums: dict[str, list[float]] = {}
    for r in records:
        key = r.flavor if label == "flavor" else r.team
        row = sums.setdefault(key, [0.0] * buckets)
        lo, hi = max(r.start_s, start_s), min(r.end_s, until)
        if hi <= lo:
            continue
        first = int((lo - start_s) // width)
        last = min(buckets - 1, int((hi - start_s) // width))
        for i in range(first, last + 1):
            b0 = start_s + i * width
            overlap = min(hi, b0 + width) - max(lo, b0)
            if overlap > 0:
                row[i] += r.gpu_milli / 1000 * overlap
    lengths = [max(0.0, min(width, until - b0)) for b0 in starts]
    values = {
        k: tuple(v / n if n > 0 else 0.0 for v, n in zip(row, lengths, strict=True))
        for k, row in sorted(sums.items())
    }
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
