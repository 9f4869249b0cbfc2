"""Chargeback: who held which GPUs for how long in a period, and what that costs.

This is the pure accounting core: no database, no clock. The caller loads the usage ledger
(`UsageEntry` rows, plus open `Allocation` rows passed with `end_s = now`) into
`UsageRecord`s, the per-flavor rate history (`FlavorRate` rows as `RateChange`s) and the
cluster's GPUs per flavor, and gets a `ChargebackReport` back; `chargeback_csv.to_csv` and
`to_focus_csv` render it. The types are in `chargeback_report`, the exact sums and the
rounding in `chargeback_exact`, and budgets, which need none of this, in `chargeback_budget`.

Units are in the names: `*_s` seconds since the Unix epoch (or a duration in seconds),
`*_gpu_h` / `gpu_hours_*` GPU-hours, `*_milli` thousandths of a GPU, `*_usd` US dollars,
`*_usd_micro_*` integer micro-dollars (as `FlavorRate` stores them).

Exactness. Times are read to the microsecond (a float timestamp near today resolves about a
quarter of one anyway), so every clipped record is an integer number of milli-GPU-microseconds
and every sum is exact: grouping differently can never change a total. Rates are history
(`RateChange`): a record is split where its flavor's rate changed, and each part is priced at
the rate in force then. Rate products and idle shares stay exact rationals
(`fractions.Fraction`); money is rounded to cents once per line and column, at the end. Each
line is rounded on its own, so that it reads as its GPU-hours × its rate; the TOTAL is the
exact sum rounded once, and what the lines differ from it is a rounding line of its own
(`ChargebackReport.rounding`), so a finance team reconciling the CSV against an invoice
finds every cent stated. (Rows apportioned by largest remainder added up without it, but a
row could then be a cent off its own hours × rate, and the idle line was what the total
left.) Hours are reported as floats, each correctly rounded from the exact amount.

Idle capacity follows the OpenCost specification: per flavor, idle = capacity × period −
what workloads are charged for, and its cost is either shown on its own (`__idle__`) or shared
among the groups that used that flavor, equally ("uniform") or in proportion to their
allocated GPU-hours ("proportional"). Either way, for a flavor whose capacity is known and not
exceeded, workload cost + idle cost = capacity × period × rate: nothing is double-counted and
nothing is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction

from gpufleet.control.chargeback_exact import (
    UNITS_MICRO_PER_USD,
    Acc,
    Idle,
    Line,
    finish_rows,
    gpu_hours_of,
    micro_to_usd,
    round_half_up,
    rounding,
    to_cents,
    total_row,
)
from gpufleet.control.chargeback_report import (
    BASES,
    GROUP_KEYS,
    IDLE,
    IDLE_METHODS,
    TOTAL,
    Basis,
    ChargebackReport,
    FlavorSummary,
    IdleMethod,
    RateChange,
    RateUsed,
    UsageRecord,
)
from gpufleet.errors import UserError, suggest

# field and column names people type instead of the group-by keys, for the error hint
_KEY_ALIASES: dict[str, str] = {
    "flavor": "accelerator",
    "gpu": "accelerator",
    "priority_class": "priority",
    "job_id": "job",
    "user_name": "user",
}

# A flavor's rates: one micro-dollar rate for all time, or its history (`RateChange`s).
Rates = Mapping[str, int | Sequence[RateChange]]
# GPUs a flavor had and when: (from_s, to_s, gpus), e.g. one per node from when it joined
CapacitySpans = Mapping[str, Sequence[tuple[float, float, int]]]


def chargeback(
    records: Iterable[UsageRecord],
    *,
    period_start_s: float,
    period_end_s: float,
    group_by: Sequence[str] = ("team",),
    rates_usd_micro_per_gpu_h: Rates,
    capacity_gpus: Mapping[str, int] | None = None,
    basis: Basis = "allocation",
    idle_method: IdleMethod = "none",
    capacity_spans: CapacitySpans | None = None,
) -> ChargebackReport:
    """Charge the GPU time of `records` in [period_start_s, period_end_s) to groups.

    Records are clipped to the period: GPU-hours = gpu_milli / 1000 × overlap_s / 3600, and
    used hours are scaled by the same overlap fraction, so a month's report charges exactly
    the part of a long job that fell in that month and consecutive reports add up.

    `group_by` keys: team, project, user, accelerator (the flavor), priority (the priority
    class), job. `rates_usd_micro_per_gpu_h` gives each flavor one rate, or its history as
    `RateChange`s: then a record is split where the rate changed and each part is priced at
    the rate in force when it was used, so a rate set today never re-prices a closed period
    (the report lists the rates it used, `rates`). GPU time when a flavor had no rate costs
    0 and the flavor is listed in `unpriced_flavors`, so a missing price shows up instead of
    quietly zeroing a bill; so is a flavor of `capacity_gpus` with no rate all period, GPU
    time or not. `capacity_gpus` (GPUs per flavor in the cluster) is needed for
    idle; a flavor missing from it has no idle. `capacity_spans`, when given, is the
    capacity each flavor really had (GPUs from when to when: each node counted from when it
    existed) and replaces capacity_gpus × the period for the flavors it names, so a cluster
    a week old is not charged idle for the month before it (issue 30).

    basis "allocation": cost = allocated GPU-hours × rate. This is the honest charge for a
    GPU: a held GPU is unavailable to everyone else whether it is busy or not.

    basis "usage": cost = used GPU-hours × rate where a record reports usage, allocated
    hours where it does not (counted in `usage_missing_records`). OpenCost's rule is that
    "Workload Costs should be understood as max(request, usage)"; but a GPU is held whole
    (or as a fixed slice), so usage never exceeds the allocation and max(request, usage) is
    just the allocation: a "usage" basis built that way prints the same numbers as the
    allocation basis, and opencost#3900 shows users misled by exactly that. So here usage
    means used hours. The held-but-unused hours are not dropped: they count as idle
    (idle = capacity × period − billed hours), so they are shown on `__idle__` or shared out
    by `idle_method`, and the capacity identity still holds.

    idle_method: "none" keeps idle on its own `__idle__` line; "uniform" shares each flavor's
    idle cost equally among the groups that held that flavor in the period; "proportional"
    shares it by their allocated GPU-hours of that flavor (OpenCost's two idle distributions).
    Idle of a flavor no group held stays on `__idle__`.
    """
    caps: Mapping[str, int] = capacity_gpus if capacity_gpus is not None else {}
    keys = _check_args(
        group_by,
        period_start_s=period_start_s,
        period_end_s=period_end_s,
        rates=rates_usd_micro_per_gpu_h,
        caps=caps,
        basis=basis,
        idle_method=idle_method,
    )
    start_us, end_us = _us(period_start_s), _us(period_end_s)
    pricing = _Pricing(rates_usd_micro_per_gpu_h, start_us, end_us)
    cells, billed_by_segment, in_period, missing_usage = _collect(
        records, keys, start_us, end_us, basis=basis, pricing=pricing
    )
    spans = capacity_spans or {}
    flavors = sorted({f for _, f in cells} | {f for f, n in caps.items() if n > 0})
    idles = [
        _flavor_idle(
            flavor,
            cells,
            keys=keys,
            segments=pricing.segments(flavor),
            billed=billed_by_segment.get(flavor, {}),
            gpus=caps.get(flavor),
            spans=spans.get(flavor) if flavor in caps else None,
            idle_method=idle_method,
        )
        for flavor in flavors
    ]
    lines, cell_lines = _lines(cells, keys, idles)

    rows = finish_rows(lines)
    flavor_rows = finish_rows(cell_lines)
    idle_row = rows.pop() if rows and rows[-1].is_idle else None
    totals = total_row(lines, tuple((k, TOTAL if i == 0 else None) for i, k in enumerate(keys)))
    summaries = tuple(_summary(fi, caps) for fi in idles)
    return ChargebackReport(
        period_start_s=period_start_s,
        period_end_s=period_end_s,
        basis=basis,
        group_by=keys,
        idle_method=idle_method,
        rows=tuple(rows),
        totals=totals,
        idle_gpu_hours=gpu_hours_of(sum(fi.idle.units for fi in idles)) if caps else None,
        capacity_gpu_hours=gpu_hours_of(sum(fi.capacity or 0 for fi in idles)) if caps else None,
        idle=idle_row,
        flavors=summaries,
        flavor_rows=tuple(flavor_rows),
        unpriced_flavors=tuple(fi.flavor for fi in idles if fi.unpriced),
        usage_missing_records=missing_usage,
        over_capacity_flavors=tuple(s.flavor for s in summaries if s.over_capacity),
        records_in_period=in_period,
        capacity_cost_usd=to_cents(
            sum((fi.capacity_cost for fi in idles if fi.capacity is not None), Fraction(0))
        )
        if caps
        else None,
        rounding=rounding([*rows, *([idle_row] if idle_row else [])], totals),
        flavor_rounding=rounding(flavor_rows, totals),
        # a stretch without a rate is stated where the flavor had GPU time in it (it is in
        # `unpriced_flavors` then); before a flavor's first rate there is often nothing
        rates=tuple(
            used
            for fi in idles
            for used in pricing.used(fi.flavor, period_start_s, period_end_s)
            if used.rate_usd_per_gpu_h is not None or fi.unpriced
        ),
    )


@dataclass(frozen=True)
class _Segment:
    """Part of the period over which a flavor had one rate (`micro` None: no rate)."""

    start_us: int
    end_us: int
    micro: int | None
    change: RateChange | None


class _Pricing:
    """Each flavor's rates cut to the period: the segments over which one rate was in force.

    A rate is in force from its `effective_s` until the flavor's next one; of two with the
    same `effective_s`, the later in the history wins (set again at the same instant)."""

    def __init__(self, rates: Rates, start_us: int, end_us: int) -> None:
        self._rates = rates
        self._start_us, self._end_us = start_us, end_us
        self._cache: dict[str, list[_Segment]] = {}

    def segments(self, flavor: str) -> list[_Segment]:
        cached = self._cache.get(flavor)
        if cached is not None:
            return cached
        value = self._rates.get(flavor)
        if value is None:
            changes: list[tuple[int | None, RateChange | None, int | None]] = []
        elif isinstance(value, int):
            changes = [(None, None, value)]  # one rate for all time
        else:
            order = sorted(range(len(value)), key=lambda i: (value[i].effective_s, i))
            changes = [
                (_us(value[i].effective_s), value[i], value[i].usd_micro_per_gpu_h) for i in order
            ]
        out: list[_Segment] = []
        current: tuple[RateChange | None, int | None] = (None, None)
        cuts: list[tuple[int, RateChange | None, int | None]] = []
        for at_us, change, micro in changes:
            if at_us is None or at_us <= self._start_us:
                current = (change, micro)
            elif at_us < self._end_us:
                cuts.append((at_us, change, micro))
        at = self._start_us
        for cut_us, change, micro in cuts:
            if cut_us > at:
                out.append(_Segment(at, cut_us, current[1], current[0]))
                at = cut_us
            current = (change, micro)
        out.append(_Segment(at, self._end_us, current[1], current[0]))
        self._cache[flavor] = out
        return out

    def used(self, flavor: str, period_start_s: float, period_end_s: float) -> list[RateUsed]:
        """The flavor's segments as the report states them: from the period's start or the
        time the rate took effect, to the next one or the period's end."""
        segs = self.segments(flavor)
        out: list[RateUsed] = []
        for i, seg in enumerate(segs):
            starts = period_start_s if i == 0 or seg.change is None else seg.change.effective_s
            if out:
                out[-1] = replace(out[-1], to_s=starts)
            out.append(
                RateUsed(
                    flavor=flavor,
                    from_s=starts,
                    to_s=period_end_s,
                    rate_usd_per_gpu_h=None if seg.micro is None else micro_to_usd(seg.micro),
                    set_s=None if seg.change is None else seg.change.set_s,
                    repriced=seg.change is not None and seg.change.repriced,
                )
            )
        return out


_Cells = dict[tuple[tuple[str | None, ...], str], Acc]  # (group values, flavor) -> sums


@dataclass
class _FlavorIdle:
    """One flavor's capacity, billed and idle milli-GPU-microseconds, and idle shares."""

    flavor: str
    alloc: int
    billed: int
    capacity: int | None
    capacity_cost: Fraction  # exact USD, capacity of each segment × its rate
    cost: Fraction  # exact USD of what was billed
    idle: Idle
    unpriced: bool  # some billed or idle GPU time had no rate
    rates: set[int]
    # group values -> its share of the idle; empty when the idle is not shared
    shares: dict[tuple[str | None, ...], Idle]
    # more billed than capacity in some stretch of one rate (stale capacity): its idle is
    # floored at 0 there, so workload + idle = capacity × rate cannot hold
    over_capacity: bool = False

    @property
    def shared(self) -> bool:
        return bool(self.shares)


def _collect(
    records: Iterable[UsageRecord],
    keys: tuple[str, ...],
    start_us: int,
    end_us: int,
    *,
    basis: str,
    pricing: _Pricing,
) -> tuple[_Cells, dict[str, dict[int, int]], int, int]:
    """Clip every record to the period, split it where its flavor's rate changed, and sum
    it into its group × flavor cell; also the billed units per flavor and rate segment."""
    cells: _Cells = {}
    billed: dict[str, dict[int, int]] = {}
    in_period = missing_usage = 0
    for rec in records:
        acc = Acc()
        segs = pricing.segments(rec.flavor)
        for i, seg in enumerate(segs):
            piece = _clip(rec, max(start_us, seg.start_us), min(end_us, seg.end_us), basis)
            if piece is None:
                continue
            if seg.micro is None:
                piece.unpriced = piece.alloc
            else:
                piece.cost_micro = piece.billed * seg.micro
                piece.rates = {seg.micro}
            per = billed.setdefault(rec.flavor, {})
            per[i] = per.get(i, 0) + piece.billed
            acc.merge(piece)
        if acc.records == 0:  # it misses the period (`_clip` checked it all the same)
            continue
        acc.records = 1
        acc.reporting = min(acc.reporting, 1)
        in_period += 1
        missing_usage += acc.reporting == 0
        values = tuple(_value(rec, k) for k in keys)
        cells.setdefault((values, rec.flavor), Acc()).merge(acc)
    return cells, billed, in_period, missing_usage


def _flavor_idle(
    flavor: str,
    cells: _Cells,
    *,
    keys: tuple[str, ...],
    segments: Sequence[_Segment],
    billed: Mapping[int, int],
    gpus: int | None,
    spans: Sequence[tuple[float, float, int]] | None,
    idle_method: str,
) -> _FlavorIdle:
    """Idle of one flavor, segment by segment of its rates (capacity − billed, floored at
    0, at the rate in force), and who pays for it. `spans`: the GPUs it had and when, in
    place of `gpus` × each segment."""
    mine = [(values, acc) for (values, f), acc in cells.items() if f == flavor]
    alloc = sum(acc.alloc for _, acc in mine)
    cost = Fraction(sum(acc.cost_micro for _, acc in mine), UNITS_MICRO_PER_USD)
    unpriced = any(acc.unpriced for _, acc in mine)
    rates = {r for _, acc in mine for r in acc.rates}
    idle = Idle()
    capacity: int | None = None if gpus is None else 0
    capacity_cost = Fraction(0)
    over = False
    for i, seg in enumerate(segments):
        if gpus is None:
            break
        cap = 1000 * (gpus * (seg.end_us - seg.start_us) if spans is None else _span_us(spans, seg))
        assert capacity is not None
        capacity += cap
        over = over or billed.get(i, 0) > cap
        spare = max(0, cap - billed.get(i, 0))
        if seg.micro is None:
            idle.add(Idle(Fraction(spare), unpriced=Fraction(spare)))
            unpriced = unpriced or spare > 0
        else:
            capacity_cost += Fraction(cap * seg.micro, UNITS_MICRO_PER_USD)
            idle.add(Idle(Fraction(spare), Fraction(spare * seg.micro, UNITS_MICRO_PER_USD)))
            if spare > 0:
                idle.rates.add(seg.micro)
            rates.add(seg.micro)
    # a flavor of the cluster with no rate all period is unpriced even with no GPU time in
    # it (nodes not joined yet): its missing price shows before the first bill needs it
    unpriced = unpriced or (bool(gpus) and all(seg.micro is None for seg in segments))
    users = sorted(
        ((values, acc) for values, acc in mine if acc.alloc > 0),
        key=lambda item: _sort_key(item[0], keys),
    )
    shares: dict[tuple[str | None, ...], Idle] = {}
    if idle.units > 0 and idle_method != "none" and users:
        for values, acc in users:
            share = (
                Fraction(1, len(users)) if idle_method == "uniform" else Fraction(acc.alloc, alloc)
            )
            shares[values] = idle.scaled(share)
    return _FlavorIdle(
        flavor,
        alloc,
        sum(billed.values()),
        capacity,
        capacity_cost,
        cost,
        idle,
        unpriced,
        rates,
        shares,
        over,
    )


def _span_us(spans: Sequence[tuple[float, float, int]], seg: _Segment) -> int:
    """GPU-microseconds the spans hold within the segment."""
    total = 0
    for from_s, to_s, gpus in spans:
        overlap = min(seg.end_us, _us(to_s)) - max(seg.start_us, _us(from_s))
        if overlap > 0:
            total += gpus * overlap
    return total


def _lines(
    cells: _Cells, keys: tuple[str, ...], idles: Sequence[_FlavorIdle]
) -> tuple[list[Line], list[Line]]:
    """The report's lines (one per group, then `__idle__`) and the per-flavor FOCUS lines."""
    shares = {(values, fi.flavor): s for fi in idles for values, s in fi.shares.items()}
    row_lines: dict[tuple[str | None, ...], Line] = {}
    cell_lines: list[Line] = []
    for (values, flavor), acc in sorted(
        cells.items(), key=lambda item: (_sort_key(item[0][0], keys), item[0][1])
    ):
        group = tuple(zip(keys, values, strict=True))
        line = row_lines.setdefault(values, Line(group))
        cell = Line(group if "accelerator" in keys else (*group, ("accelerator", flavor)))
        for target in (line, cell):
            target.add_work(flavor, acc)
            if (values, flavor) in shares:
                target.add_idle(flavor, shares[(values, flavor)])
        cell_lines.append(cell)
    lines = list(row_lines.values())
    unshared = [fi for fi in idles if fi.idle.units > 0 and not fi.shared]
    if unshared:
        idle_line = Line(tuple((k, IDLE) for k in keys), is_idle=True)
        for fi in unshared:
            idle_line.add_idle(fi.flavor, fi.idle)
            group = tuple((k, fi.flavor if k == "accelerator" else IDLE) for k in keys)
            per_flavor = Line(
                group if "accelerator" in keys else (*group, ("accelerator", fi.flavor)),
                is_idle=True,
            )
            per_flavor.add_idle(fi.flavor, fi.idle)
            cell_lines.append(per_flavor)
        lines.append(idle_line)
    return lines, cell_lines


def _summary(fi: _FlavorIdle, caps: Mapping[str, int]) -> FlavorSummary:
    """A flavor's figures, each rounded on its own; its rate when it had one all period."""
    one_rate = len(fi.rates) == 1 and not fi.unpriced
    return FlavorSummary(
        flavor=fi.flavor,
        rate_usd_per_gpu_h=micro_to_usd(next(iter(fi.rates))) if one_rate else None,
        capacity_gpus=caps.get(fi.flavor),
        capacity_gpu_hours=None if fi.capacity is None else gpu_hours_of(fi.capacity),
        gpu_hours_allocated=gpu_hours_of(fi.alloc),
        gpu_hours_billed=gpu_hours_of(fi.billed),
        idle_gpu_hours=gpu_hours_of(fi.idle.units),
        cost_usd=to_cents(fi.cost),
        idle_cost_usd=to_cents(fi.idle.cost),
        capacity_cost_usd=None if fi.capacity is None else to_cents(fi.capacity_cost),
        idle_distributed=fi.shared,
        over_capacity=fi.over_capacity,
    )


def _check_args(
    group_by: Sequence[str],
    *,
    period_start_s: float,
    period_end_s: float,
    rates: Rates,
    caps: Mapping[str, int],
    basis: str,
    idle_method: str,
) -> tuple[str, ...]:
    """Reject what would give a silently wrong bill; return the group-by keys as a tuple."""
    if isinstance(group_by, str):  # ("team") is a str, not a tuple: a classic slip
        group_by = (group_by,)
    keys = tuple(group_by)
    if not keys:
        raise UserError(f"group by at least one key: {', '.join(GROUP_KEYS)}")
    for key in keys:
        if key not in GROUP_KEYS:
            hints = [_KEY_ALIASES[key]] if key in _KEY_ALIASES else suggest(key, GROUP_KEYS)
            hint = f"; did you mean {' or '.join(repr(h) for h in hints)}?" if hints else ""
            raise UserError(
                f"unknown group-by key {key!r}{hint} (valid keys: {', '.join(GROUP_KEYS)})"
            )
    if len(set(keys)) != len(keys):
        raise UserError(f"group-by keys repeat: {', '.join(keys)}")
    if basis not in BASES:
        raise UserError(f"unknown basis {basis!r}; use one of {', '.join(BASES)}")
    if idle_method not in IDLE_METHODS:
        raise UserError(
            f"unknown idle method {idle_method!r}; use one of {', '.join(IDLE_METHODS)}"
        )
    if not (math.isfinite(period_start_s) and math.isfinite(period_end_s)):
        raise UserError("the period bounds must be finite times")
    if period_end_s <= period_start_s:
        raise UserError(
            f"the period is empty: it ends ({period_end_s}) at or before it starts "
            f"({period_start_s})"
        )
    for flavor, value in rates.items():
        for change in [RateChange(0.0, value)] if isinstance(value, int) else value:
            rate = change.usd_micro_per_gpu_h
            if rate < 0:
                raise UserError(f"the rate of {flavor} is negative: {rate} micro-USD per GPU-hour")
            if not math.isfinite(change.effective_s):
                raise UserError(f"a rate of {flavor} takes effect at no finite time")
    for flavor, gpus in caps.items():
        if gpus < 0:
            raise UserError(f"the capacity of {flavor} is negative: {gpus} GPUs")
    return keys


def _clip(rec: UsageRecord, start_us: int, end_us: int, basis: str) -> Acc | None:
    """The record's share of the period in milli-GPU-µs, or None when it misses the period."""
    where = f"usage record of job {rec.job_id} attempt {rec.attempt}"
    if not (math.isfinite(rec.start_s) and math.isfinite(rec.end_s)):
        raise UserError(f"{where}: start and end must be finite times")
    if rec.end_s < rec.start_s:
        raise UserError(f"{where}: it ends ({rec.end_s}) before it starts ({rec.start_s})")
    if rec.gpu_milli < 0:
        raise UserError(f"{where}: negative gpu_milli {rec.gpu_milli}")
    if rec.used_gpu_s is not None and not (math.isfinite(rec.used_gpu_s) and rec.used_gpu_s >= 0):
        raise UserError(f"{where}: used_gpu_s must be a finite number >= 0, not {rec.used_gpu_s}")
    rec_start_us = _us(rec.start_s)
    rec_end_us = _us(rec.end_s)
    overlap_us = min(rec_end_us, end_us) - max(rec_start_us, start_us)
    if overlap_us <= 0:
        return None
    alloc = rec.gpu_milli * overlap_us
    acc = Acc(alloc=alloc, records=1)
    if rec.used_gpu_s is None:
        acc.billed = alloc
        return acc
    # used ≤ held: a reporter that says otherwise (sampling jitter) is capped at what was held
    held_us = rec_end_us - rec_start_us
    used_whole = min(round(Decimal(rec.used_gpu_s).scaleb(9)), rec.gpu_milli * held_us)
    acc.used = round_half_up(Fraction(used_whole * overlap_us, held_us))
    acc.alloc_reporting = alloc
    acc.reporting = 1
    acc.billed = acc.used if basis == "usage" else alloc
    return acc


def _us(t_s: float) -> int:
    """Seconds as whole microseconds, converted exactly (no float overflow or drift)."""
    return round(Decimal(t_s).scaleb(6))


def _value(rec: UsageRecord, key: str) -> str | None:
    raw: object = getattr(rec, GROUP_KEYS[key])
    return None if raw is None else str(raw)


def _sort_key(values: tuple[str | None, ...], keys: tuple[str, ...]) -> tuple[object, ...]:
    """Rows in a stable, readable order: by value, job ids numerically, no project last."""
    out: list[object] = []
    for key, v in zip(keys, values, strict=True):
        if v is None:
            out.append((1, 0, ""))
        elif key == "job":
            out.append((0, int(v), ""))
        else:
            out.append((0, 0, v))
    return tuple(out)
