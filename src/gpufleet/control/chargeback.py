"""Chargeback: who held which GPUs for how long in a period, and what that costs.

This is the pure accounting core: no database, no clock. The caller loads the usage ledger
(`UsageEntry` rows, plus open `Allocation` rows passed with `end_s = now`) into
`UsageRecord`s, the per-flavor rates (`FlavorRate`) and the cluster's GPUs per flavor, and
gets a `ChargebackReport` back; `chargeback_csv.to_csv` and `to_focus_csv` render it. The
types are in `chargeback_report`, the exact sums and the rounding in `chargeback_exact`, and
budgets, which need none of this, in `chargeback_budget`.

Units are in the names: `*_s` seconds since the Unix epoch (or a duration in seconds),
`*_gpu_h` / `gpu_hours_*` GPU-hours, `*_milli` thousandths of a GPU, `*_usd` US dollars,
`*_usd_micro_*` integer micro-dollars (as `FlavorRate` stores them).

Exactness. Times are read to the microsecond (a float timestamp near today resolves about a
quarter of one anyway), so every clipped record is an integer number of milli-GPU-microseconds
and every sum is exact: grouping differently can never change a total. Rate products and idle
shares stay exact rationals (`fractions.Fraction`); money is rounded to cents once, at the
end. Rows are rounded with the largest-remainder method so that a column of rows adds up to
its total to the cent: a finance team reconciling the CSV against an invoice must not find a
one-cent gap per row. Hours are reported as floats, each correctly rounded from the exact
amount.

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
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from gpufleet.control.chargeback_exact import (
    UNITS_MICRO_PER_USD,
    Acc,
    Line,
    finish_rows,
    gpu_hours_of,
    line_row,
    micro_to_usd,
    round_half_up,
    to_cents,
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


def chargeback(
    records: Iterable[UsageRecord],
    *,
    period_start_s: float,
    period_end_s: float,
    group_by: Sequence[str] = ("team",),
    rates_usd_micro_per_gpu_h: Mapping[str, int],
    capacity_gpus: Mapping[str, int] | None = None,
    basis: Basis = "allocation",
    idle_method: IdleMethod = "none",
    capacity_gpu_us: Mapping[str, int] | None = None,
) -> ChargebackReport:
    """Charge the GPU time of `records` in [period_start_s, period_end_s) to groups.

    Records are clipped to the period: GPU-hours = gpu_milli / 1000 × overlap_s / 3600, and
    used hours are scaled by the same overlap fraction, so a month's report charges exactly
    the part of a long job that fell in that month and consecutive reports add up.

    `group_by` keys: team, project, user, accelerator (the flavor), priority (the priority
    class), job. A flavor missing from `rates_usd_micro_per_gpu_h` costs 0 and is listed in
    `unpriced_flavors`, so a missing price shows up instead of quietly zeroing a bill.
    `capacity_gpus` (GPUs per flavor in the cluster) is needed for idle; a flavor missing
    from it has no idle. `capacity_gpu_us`, when given, is the capacity each flavor really
    had in the period (GPU-microseconds: each node counted from when it existed) and replaces
    capacity_gpus × the period, so a cluster a week old is not charged idle for the month
    before it (issue 30).

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
    rates = rates_usd_micro_per_gpu_h
    keys = _check_args(
        group_by,
        period_start_s=period_start_s,
        period_end_s=period_end_s,
        rates=rates,
        caps=caps,
        basis=basis,
        idle_method=idle_method,
    )
    cells, in_period, missing_usage = _collect(
        records, keys, _us(period_start_s), _us(period_end_s), basis
    )
    flavors = sorted({f for _, f in cells} | {f for f, n in caps.items() if n > 0})
    period_us = _us(period_end_s) - _us(period_start_s)
    idles = [
        _flavor_idle(
            flavor,
            cells,
            keys=keys,
            caps=caps,
            rates=rates,
            period_us=period_us,
            idle_method=idle_method,
            existed_us=None if capacity_gpu_us is None else capacity_gpu_us.get(flavor),
        )
        for flavor in flavors
    ]
    lines, cell_lines = _lines(cells, keys, idles)

    rows = finish_rows(lines, rates)
    flavor_rows = finish_rows(cell_lines, rates)
    idle_row = rows.pop() if rows and rows[-1].is_idle else None
    everything = Line(tuple((k, TOTAL if i == 0 else None) for i, k in enumerate(keys)))
    for line in lines:
        everything.absorb(line)
    rounded = [*rows, *([idle_row] if idle_row else [])]
    totals = line_row(
        everything,
        rates,
        sum((r.cost_usd for r in rounded), Decimal("0.00")),
        sum((r.idle_cost_usd for r in rounded), Decimal("0.00")),
    )
    summaries = tuple(_summary(fi, caps, rates) for fi in idles)
    capacity_micro_units = [
        fi.capacity * rates.get(fi.flavor, 0) for fi in idles if fi.capacity is not None
    ]
    return ChargebackReport(
        period_start_s=period_start_s,
        period_end_s=period_end_s,
        basis=basis,
        group_by=keys,
        idle_method=idle_method,
        rows=tuple(rows),
        totals=totals,
        idle_gpu_hours=gpu_hours_of(sum(fi.idle for fi in idles)) if caps else None,
        capacity_gpu_hours=gpu_hours_of(sum(fi.capacity or 0 for fi in idles)) if caps else None,
        idle=idle_row,
        flavors=summaries,
        flavor_rows=tuple(flavor_rows),
        unpriced_flavors=tuple(f for f in flavors if f not in rates),
        usage_missing_records=missing_usage,
        over_capacity_flavors=tuple(s.flavor for s in summaries if s.over_capacity),
        records_in_period=in_period,
        capacity_cost_usd=to_cents(Fraction(sum(capacity_micro_units), UNITS_MICRO_PER_USD))
        if caps
        else None,
    )


_Cells = dict[tuple[tuple[str | None, ...], str], Acc]  # (group values, flavor) -> sums


@dataclass
class _FlavorIdle:
    """One flavor's capacity, billed and idle milli-GPU-microseconds, and idle shares."""

    flavor: str
    alloc: int
    billed: int
    capacity: int | None
    idle: int
    idle_cost: Fraction
    # group values -> (idle milli-GPU-microseconds, idle USD); empty when the idle is not shared
    shares: dict[tuple[str | None, ...], tuple[Fraction, Fraction]]

    @property
    def shared(self) -> bool:
        return bool(self.shares)

    @property
    def over_capacity(self) -> bool:
        return self.capacity is not None and self.billed > self.capacity


def _collect(
    records: Iterable[UsageRecord],
    keys: tuple[str, ...],
    start_us: int,
    end_us: int,
    basis: str,
) -> tuple[_Cells, int, int]:
    """Clip every record to the period and sum it into its group × flavor cell."""
    cells: _Cells = {}
    in_period = missing_usage = 0
    for rec in records:
        acc = _clip(rec, start_us, end_us, basis)
        if acc is None:
            continue
        in_period += 1
        missing_usage += acc.reporting == 0
        values = tuple(_value(rec, k) for k in keys)
        cells.setdefault((values, rec.flavor), Acc()).merge(acc)
    return cells, in_period, missing_usage


def _flavor_idle(
    flavor: str,
    cells: _Cells,
    *,
    keys: tuple[str, ...],
    caps: Mapping[str, int],
    rates: Mapping[str, int],
    period_us: int,
    idle_method: str,
    existed_us: int | None = None,
) -> _FlavorIdle:
    """Idle of one flavor (capacity × period − billed, floored at 0) and who pays for it.
    `existed_us`: the flavor's GPU-microseconds in the period, nodes counted from when they
    existed, instead of its GPUs × the whole period."""
    mine = [(values, acc) for (values, f), acc in cells.items() if f == flavor]
    alloc = sum(acc.alloc for _, acc in mine)
    billed = sum(acc.billed for _, acc in mine)
    capacity = None
    if flavor in caps:
        capacity = 1000 * (caps[flavor] * period_us if existed_us is None else existed_us)
    idle = max(0, capacity - billed) if capacity is not None else 0
    idle_cost = Fraction(idle * rates.get(flavor, 0), UNITS_MICRO_PER_USD)
    users = sorted(
        ((values, acc) for values, acc in mine if acc.alloc > 0),
        key=lambda item: _sort_key(item[0], keys),
    )
    shares: dict[tuple[str | None, ...], tuple[Fraction, Fraction]] = {}
    if idle > 0 and idle_method != "none" and users:
        for values, acc in users:
            share = (
                Fraction(1, len(users)) if idle_method == "uniform" else Fraction(acc.alloc, alloc)
            )
            shares[values] = (idle * share, idle_cost * share)
    return _FlavorIdle(flavor, alloc, billed, capacity, idle, idle_cost, shares)


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
                target.add_idle(flavor, *shares[(values, flavor)])
        cell_lines.append(cell)
    lines = list(row_lines.values())
    unshared = [fi for fi in idles if fi.idle > 0 and not fi.shared]
    if unshared:
        idle_line = Line(tuple((k, IDLE) for k in keys), is_idle=True)
        for fi in unshared:
            idle_line.add_idle(fi.flavor, fi.idle, fi.idle_cost)
            group = tuple((k, fi.flavor if k == "accelerator" else IDLE) for k in keys)
            per_flavor = Line(
                group if "accelerator" in keys else (*group, ("accelerator", fi.flavor)),
                is_idle=True,
            )
            per_flavor.add_idle(fi.flavor, fi.idle, fi.idle_cost)
            cell_lines.append(per_flavor)
        lines.append(idle_line)
    return lines, cell_lines


def _summary(fi: _FlavorIdle, caps: Mapping[str, int], rates: Mapping[str, int]) -> FlavorSummary:
    rate = rates.get(fi.flavor)
    micro = rate or 0
    return FlavorSummary(
        flavor=fi.flavor,
        rate_usd_per_gpu_h=None if rate is None else micro_to_usd(rate),
        capacity_gpus=caps.get(fi.flavor),
        capacity_gpu_hours=None if fi.capacity is None else gpu_hours_of(fi.capacity),
        gpu_hours_allocated=gpu_hours_of(fi.alloc),
        gpu_hours_billed=gpu_hours_of(fi.billed),
        idle_gpu_hours=gpu_hours_of(fi.idle),
        cost_usd=to_cents(Fraction(fi.billed * micro, UNITS_MICRO_PER_USD)),
        idle_cost_usd=to_cents(fi.idle_cost),
        capacity_cost_usd=None
        if fi.capacity is None
        else to_cents(Fraction(fi.capacity * micro, UNITS_MICRO_PER_USD)),
        idle_distributed=fi.shared,
        over_capacity=fi.over_capacity,
    )


def _check_args(
    group_by: Sequence[str],
    *,
    period_start_s: float,
    period_end_s: float,
    rates: Mapping[str, int],
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
    for flavor, rate in rates.items():
        if rate < 0:
            raise UserError(f"the rate of {flavor} is negative: {rate} micro-USD per GPU-hour")
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
