"""Chargeback: who held which GPUs for how long in a period, and what that costs.

This is the pure accounting core: no database, no clock. The caller loads the usage ledger
(`UsageEntry` rows, plus open `Allocation` rows passed with `end_s = now`) into
`UsageRecord`s, the per-flavor rates (`FlavorRate`) and the cluster's GPUs per flavor, and
gets a `ChargebackReport` back; `to_csv` and `to_focus_csv` render it.

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

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from typing import Literal, get_args

from gpufleet.errors import UserError, suggest

Basis = Literal["allocation", "usage"]
IdleMethod = Literal["none", "uniform", "proportional"]
BASES: tuple[str, ...] = get_args(Basis)
IDLE_METHODS: tuple[str, ...] = get_args(IdleMethod)

# group-by key -> the UsageRecord field it reads
GROUP_KEYS: dict[str, str] = {
    "team": "team",
    "project": "project",
    "user": "user",
    "accelerator": "flavor",
    "priority": "priority_class",
    "job": "job_id",
}
# field and column names people type instead of the group-by keys, for the error hint
_KEY_ALIASES: dict[str, str] = {
    "flavor": "accelerator",
    "gpu": "accelerator",
    "priority_class": "priority",
    "job_id": "job",
    "user_name": "user",
}

IDLE = "__idle__"  # the group value of the line that holds idle capacity (OpenCost's name)
TOTAL = "TOTAL"

# Amounts of GPU time are integers in milli-GPU-microseconds ("units"): 1000 units are one
# GPU for one microsecond.
_UNITS_PER_GPU_H = 1000 * 3_600_000_000
# (units × micro-dollars per GPU-hour) in one dollar
_UNITS_MICRO_PER_USD = _UNITS_PER_GPU_H * 1_000_000
_ZERO = Fraction(0)

CSV_COLUMNS_AFTER_GROUPS: tuple[str, ...] = (
    "gpu_hours_allocated",
    "gpu_hours_used",
    "gpu_efficiency",
    "rate_usd_per_gpu_hour",
    "cost_usd",
    "idle_cost_usd",
    "total_cost_usd",
)
FOCUS_COLUMNS: tuple[str, ...] = (
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "BillingCurrency",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeDescription",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "PricingUnit",
    "ResourceId",
    "ServiceName",
    "SkuId",
    "SubAccountName",
    "Tags",
    "ProviderName",
)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One interval during which one attempt of one job held `gpu_milli` of one flavor.

    A closed `UsageEntry` maps field for field (`user_name` -> `user`); an allocation still
    held is passed with `end_s` = now, so a running job is charged up to the report time.
    `used_gpu_s` is the busy GPU-seconds over the whole interval where utilisation is
    reported (None where it is not); it is scaled by the same fraction as the interval when
    the record is clipped to a period.
    """

    job_id: int
    attempt: int
    team: str
    project: str | None
    user: str
    flavor: str
    priority_class: str
    start_s: float
    end_s: float
    gpu_milli: int
    used_gpu_s: float | None = None


@dataclass(frozen=True, slots=True)
class ChargebackRow:
    """One line of a report: a group (or the `__idle__` line, or the TOTAL).

    `group` pairs each group-by key with its value (None for a job without a project).
    `gpu_hours_billed` is what `cost_usd` is computed on: allocated hours on the allocation
    basis, used hours (allocated where usage is missing) on the usage basis.
    `gpu_hours_idle` is the idle capacity this line pays for: its share under "uniform" or
    "proportional", the unshared idle on the `__idle__` line. The `__idle__` line holds no
    allocation, so its `gpu_hours_allocated` is 0 and the hour columns of the TOTAL are what
    workloads held.
    `gpu_efficiency` is used / allocated over the records that report usage, so that missing
    telemetry does not read as idle GPUs; None when none of them reports it.
    `rate_usd_per_gpu_h` is the flavor's list rate when the line has one rate, otherwise the
    rate averaged over billed hours (idle hours on the `__idle__` line); None when unpriced
    or when there is nothing to average.
    """

    group: tuple[tuple[str, str | None], ...]
    flavors: tuple[str, ...]
    gpu_hours_allocated: float
    gpu_hours_used: float | None
    gpu_hours_billed: float
    gpu_hours_idle: float
    gpu_efficiency: float | None
    rate_usd_per_gpu_h: Decimal | None
    cost_usd: Decimal
    idle_cost_usd: Decimal
    total_cost_usd: Decimal
    records: int
    is_idle: bool = False

    def value(self, key: str) -> str | None:
        """The value of group-by key `key` on this line."""
        for k, v in self.group:
            if k == key:
                return v
        raise KeyError(key)


@dataclass(frozen=True, slots=True)
class FlavorSummary:
    """Capacity, workload and idle of one flavor over the period.

    Amounts are each rounded on their own (they need not add up across flavors to the
    cent; the report's rows and totals do). `capacity_gpus` is None where the caller gave
    no capacity for the flavor: then it has no idle and no identity to hold.
    """

    flavor: str
    rate_usd_per_gpu_h: Decimal | None
    capacity_gpus: int | None
    capacity_gpu_hours: float | None
    gpu_hours_allocated: float
    gpu_hours_billed: float
    idle_gpu_hours: float
    cost_usd: Decimal
    idle_cost_usd: Decimal
    capacity_cost_usd: Decimal | None
    idle_distributed: bool
    over_capacity: bool


@dataclass(frozen=True, slots=True)
class ChargebackReport:
    """Chargeback over [period_start_s, period_end_s).

    `rows` are the groups, sorted by their values. `idle` is the `__idle__` line: all idle
    cost when `idle_method` is "none", otherwise the idle of flavors no group used (there is
    no one to share it with); None when there is none. `totals` is the column sum of `rows`
    and `idle` to the cent; its cost and total columns are the exact amounts rounded once.
    So where every billed flavor has a known capacity that is not exceeded,
    `totals.total_cost_usd == capacity_cost_usd` (capacity × period × rate, rounded once).
    `flavor_rows` are the same amounts grouped by flavor in addition (and one `__idle__` line
    per flavor with unshared idle): what `to_focus_csv` writes; they add up to `totals` too.
    `usage_missing_records` counts records in the period without `used_gpu_s` (on the usage
    basis they are billed on allocation). `over_capacity_flavors` lists flavors whose billed
    hours exceed capacity × period (stale capacity): their idle is floored at 0 and the
    identity cannot hold for them.
    """

    period_start_s: float
    period_end_s: float
    basis: Basis
    group_by: tuple[str, ...]
    idle_method: IdleMethod
    rows: tuple[ChargebackRow, ...]
    totals: ChargebackRow
    idle_gpu_hours: float
    capacity_gpu_hours: float
    idle: ChargebackRow | None = None
    flavors: tuple[FlavorSummary, ...] = ()
    flavor_rows: tuple[ChargebackRow, ...] = ()
    unpriced_flavors: tuple[str, ...] = ()
    usage_missing_records: int = 0
    over_capacity_flavors: tuple[str, ...] = ()
    records_in_period: int = 0
    capacity_cost_usd: Decimal | None = None  # None when no capacity was given

    @property
    def period_hours(self) -> float:
        return (self.period_end_s - self.period_start_s) / 3600


# ---------------------------------------------------------------------------------------
# exact accumulation


@dataclass
class _Acc:
    """Exact sums for one group × flavor cell, in milli-GPU-microseconds."""

    alloc: int = 0
    used: int = 0  # of the records that report usage
    alloc_reporting: int = 0  # allocation of the records that report usage
    billed: int = 0
    records: int = 0
    reporting: int = 0

    def merge(self, other: _Acc) -> None:
        self.alloc += other.alloc
        self.used += other.used
        self.alloc_reporting += other.alloc_reporting
        self.billed += other.billed
        self.records += other.records
        self.reporting += other.reporting


@dataclass
class _Line:
    """A report line before rounding: workload per flavor plus idle per flavor."""

    group: tuple[tuple[str, str | None], ...]
    is_idle: bool = False
    by_flavor: dict[str, _Acc] = field(default_factory=dict)
    idle_units: dict[str, Fraction] = field(default_factory=dict)
    idle_cost_exact: dict[str, Fraction] = field(default_factory=dict)

    def add_work(self, flavor: str, acc: _Acc) -> None:
        self.by_flavor.setdefault(flavor, _Acc()).merge(acc)

    def add_idle(self, flavor: str, units: int | Fraction, cost: Fraction) -> None:
        self.idle_units[flavor] = self.idle_units.get(flavor, _ZERO) + units
        self.idle_cost_exact[flavor] = self.idle_cost_exact.get(flavor, _ZERO) + cost

    def absorb(self, other: _Line) -> None:
        for flavor, acc in other.by_flavor.items():
            self.add_work(flavor, acc)
        for flavor, units in other.idle_units.items():
            self.add_idle(flavor, units, other.idle_cost_exact[flavor])

    def merged(self) -> _Acc:
        total = _Acc()
        for acc in self.by_flavor.values():
            total.merge(acc)
        return total

    def work_cost(self, rates: Mapping[str, int]) -> Fraction:
        micro_units = sum(acc.billed * rates.get(f, 0) for f, acc in self.by_flavor.items())
        return Fraction(micro_units, _UNITS_MICRO_PER_USD)

    def idle_cost(self) -> Fraction:
        return sum(self.idle_cost_exact.values(), _ZERO)


# ---------------------------------------------------------------------------------------
# the report


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
) -> ChargebackReport:
    """Charge the GPU time of `records` in [period_start_s, period_end_s) to groups.

    Records are clipped to the period: GPU-hours = gpu_milli / 1000 × overlap_s / 3600, and
    used hours are scaled by the same overlap fraction, so a month's report charges exactly
    the part of a long job that fell in that month and consecutive reports add up.

    `group_by` keys: team, project, user, accelerator (the flavor), priority (the priority
    class), job. A flavor missing from `rates_usd_micro_per_gpu_h` costs 0 and is listed in
    `unpriced_flavors`, so a missing price shows up instead of quietly zeroing a bill.
    `capacity_gpus` (GPUs per flavor in the cluster) is needed for idle; a flavor missing
    from it has no idle.

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
        )
        for flavor in flavors
    ]
    lines, cell_lines = _lines(cells, keys, idles)

    rows = _finish(lines, rates)
    flavor_rows = _finish(cell_lines, rates)
    idle_row = rows.pop() if rows and rows[-1].is_idle else None
    everything = _Line(tuple((k, TOTAL if i == 0 else None) for i, k in enumerate(keys)))
    for line in lines:
        everything.absorb(line)
    rounded = [*rows, *([idle_row] if idle_row else [])]
    totals = _row(
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
        idle_gpu_hours=_hours(sum(fi.idle for fi in idles)),
        capacity_gpu_hours=_hours(sum(fi.capacity or 0 for fi in idles)),
        idle=idle_row,
        flavors=summaries,
        flavor_rows=tuple(flavor_rows),
        unpriced_flavors=tuple(f for f in flavors if f not in rates),
        usage_missing_records=missing_usage,
        over_capacity_flavors=tuple(s.flavor for s in summaries if s.over_capacity),
        records_in_period=in_period,
        capacity_cost_usd=_cents(Fraction(sum(capacity_micro_units), _UNITS_MICRO_PER_USD))
        if caps
        else None,
    )


_Cells = dict[tuple[tuple[str | None, ...], str], _Acc]  # (group values, flavor) -> sums


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
        cells.setdefault((values, rec.flavor), _Acc()).merge(acc)
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
) -> _FlavorIdle:
    """Idle of one flavor (capacity × period − billed, floored at 0) and who pays for it."""
    mine = [(values, acc) for (values, f), acc in cells.items() if f == flavor]
    alloc = sum(acc.alloc for _, acc in mine)
    billed = sum(acc.billed for _, acc in mine)
    capacity = caps[flavor] * 1000 * period_us if flavor in caps else None
    idle = max(0, capacity - billed) if capacity is not None else 0
    idle_cost = Fraction(idle * rates.get(flavor, 0), _UNITS_MICRO_PER_USD)
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
) -> tuple[list[_Line], list[_Line]]:
    """The report's lines (one per group, then `__idle__`) and the per-flavor FOCUS lines."""
    shares = {(values, fi.flavor): s for fi in idles for values, s in fi.shares.items()}
    row_lines: dict[tuple[str | None, ...], _Line] = {}
    cell_lines: list[_Line] = []
    for (values, flavor), acc in sorted(
        cells.items(), key=lambda item: (_sort_key(item[0][0], keys), item[0][1])
    ):
        group = tuple(zip(keys, values, strict=True))
        line = row_lines.setdefault(values, _Line(group))
        cell = _Line(group if "accelerator" in keys else (*group, ("accelerator", flavor)))
        for target in (line, cell):
            target.add_work(flavor, acc)
            if (values, flavor) in shares:
                target.add_idle(flavor, *shares[(values, flavor)])
        cell_lines.append(cell)
    lines = list(row_lines.values())
    unshared = [fi for fi in idles if fi.idle > 0 and not fi.shared]
    if unshared:
        idle_line = _Line(tuple((k, IDLE) for k in keys), is_idle=True)
        for fi in unshared:
            idle_line.add_idle(fi.flavor, fi.idle, fi.idle_cost)
            group = tuple((k, fi.flavor if k == "accelerator" else IDLE) for k in keys)
            per_flavor = _Line(
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
        rate_usd_per_gpu_h=None if rate is None else _micro_to_usd(rate),
        capacity_gpus=caps.get(fi.flavor),
        capacity_gpu_hours=None if fi.capacity is None else _hours(fi.capacity),
        gpu_hours_allocated=_hours(fi.alloc),
        gpu_hours_billed=_hours(fi.billed),
        idle_gpu_hours=_hours(fi.idle),
        cost_usd=_cents(Fraction(fi.billed * micro, _UNITS_MICRO_PER_USD)),
        idle_cost_usd=_cents(fi.idle_cost),
        capacity_cost_usd=None
        if fi.capacity is None
        else _cents(Fraction(fi.capacity * micro, _UNITS_MICRO_PER_USD)),
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


def _clip(rec: UsageRecord, start_us: int, end_us: int, basis: str) -> _Acc | None:
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
    acc = _Acc(alloc=alloc, records=1)
    if rec.used_gpu_s is None:
        acc.billed = alloc
        return acc
    # used ≤ held: a reporter that says otherwise (sampling jitter) is capped at what was held
    held_us = rec_end_us - rec_start_us
    used_whole = min(round(Decimal(rec.used_gpu_s).scaleb(9)), rec.gpu_milli * held_us)
    acc.used = _round_half_up(Fraction(used_whole * overlap_us, held_us))
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


def _finish(lines: Sequence[_Line], rates: Mapping[str, int]) -> list[ChargebackRow]:
    """Round the lines' money to cents so that every column adds up to its total.

    The cost column adds up to the exact workload cost rounded once, and the total column to
    the exact grand total (workload + idle) rounded once; the idle column takes what is
    left, so cost + idle = total holds on every line and a capacity cost that is a whole
    number of cents comes out to that number. (Rounding the idle column on its own could
    put the grand total a cent off: 0.005 + 0.995 would round to 0.01 + 1.00.)
    """
    exact_costs = [line.work_cost(rates) for line in lines]
    exact_idles = [line.idle_cost() for line in lines]
    cost_cents = _round_half_up(sum(exact_costs, _ZERO) * 100)
    total_cents = _round_half_up(sum([*exact_costs, *exact_idles], _ZERO) * 100)
    costs = _apportion(exact_costs, cost_cents)
    idles = _apportion(exact_idles, total_cents - cost_cents)
    return [
        _row(line, rates, cost, idle) for line, cost, idle in zip(lines, costs, idles, strict=True)
    ]


def _row(line: _Line, rates: Mapping[str, int], cost: Decimal, idle: Decimal) -> ChargebackRow:
    acc = line.merged()
    weights = {f: Fraction(a.billed) for f, a in line.by_flavor.items() if a.billed > 0}
    if not weights:
        weights = {f: u for f, u in line.idle_units.items() if u > 0}
    flavors = sorted(set(line.by_flavor) | set(line.idle_units))
    return ChargebackRow(
        group=line.group,
        flavors=tuple(flavors),
        gpu_hours_allocated=_hours(acc.alloc),
        gpu_hours_used=_hours(acc.used) if acc.reporting else None,
        gpu_hours_billed=_hours(acc.billed),
        gpu_hours_idle=_hours(sum(line.idle_units.values(), _ZERO)),
        gpu_efficiency=float(acc.used / acc.alloc_reporting) if acc.alloc_reporting else None,
        rate_usd_per_gpu_h=_blended_rate(weights or dict.fromkeys(flavors, _ZERO), rates),
        cost_usd=cost,
        idle_cost_usd=idle,
        total_cost_usd=cost + idle,
        records=acc.records,
        is_idle=line.is_idle,
    )


def _blended_rate(weights: Mapping[str, Fraction], rates: Mapping[str, int]) -> Decimal | None:
    """The line's rate: the list rate when it has one, else the weight-averaged rate."""
    if not weights or any(f not in rates for f in weights):
        return None
    distinct = {rates[f] for f in weights}
    if len(distinct) == 1:
        return _micro_to_usd(distinct.pop())
    total = sum(weights.values(), _ZERO)
    if total == 0:
        return None
    micro = sum((w * rates[f] for f, w in weights.items()), _ZERO) / total
    return _micro_to_usd(_round_half_up(micro))


def _apportion(amounts_usd: Sequence[Fraction], target_cents: int) -> list[Decimal]:
    """Round to cents by largest remainder so that the parts add up to `target_cents`.

    Rounding each row on its own can leave the rows a cent or more off their total; here
    every row gets its floor in cents and the cents still missing go to the rows with the
    largest remainders (ties to the earlier row). `_finish` only asks for a target within a
    cent of the exact sum, which never needs more cents than there are rows with a
    remainder, so no part is negative and an amount of exactly 0 stays 0.
    """
    floors: list[int] = []
    remainders: list[float] = []  # only orders the rows, so a float is precise enough
    for amount in amounts_usd:
        cents, rest = divmod(amount.numerator * 100, amount.denominator)
        floors.append(cents)
        remainders.append(rest / amount.denominator)
    missing = target_cents - sum(floors)
    if not 0 <= missing <= len(floors):
        raise AssertionError(f"cannot apportion {target_cents} cents over {amounts_usd}")
    order = sorted(range(len(floors)), key=lambda i: (-remainders[i], i))
    for i in order[:missing]:
        floors[i] += 1
    return [Decimal(c).scaleb(-2) for c in floors]


def _round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def _cents(usd: Fraction) -> Decimal:
    return Decimal(_round_half_up(usd * 100)).scaleb(-2)


def _micro_to_usd(micro: int) -> Decimal:
    return Decimal(micro).scaleb(-6)


def _hours(units: int | Fraction) -> float:
    if isinstance(units, int):
        return units / _UNITS_PER_GPU_H  # int / int is correctly rounded in Python
    return float(units / _UNITS_PER_GPU_H)


# ---------------------------------------------------------------------------------------
# CSV


def to_csv(report: ChargebackReport) -> str:
    """The report as CSV: `#` comment lines that say how it was computed, rows, TOTAL last.

    The comments carry what a reader needs to trust the numbers (period, basis, idle
    method, the definition of a GPU-hour, unpriced flavors), because a CSV travels without
    the command that made it.
    """
    buf = io.StringIO()
    for line in _header_lines(report):
        buf.write(f"# {_one_line(line)}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["period_start", "period_end", *report.group_by, *CSV_COLUMNS_AFTER_GROUPS])
    start, end = _iso(report.period_start_s), _iso(report.period_end_s)
    lines = [*report.rows, *([report.idle] if report.idle else []), report.totals]
    for row in lines:
        writer.writerow(
            [
                start,
                end,
                *(_cell(v) for _, v in row.group),
                _fmt_hours(row.gpu_hours_allocated),
                "" if row.gpu_hours_used is None else _fmt_hours(row.gpu_hours_used),
                "" if row.gpu_efficiency is None else f"{row.gpu_efficiency:.4f}",
                "" if row.rate_usd_per_gpu_h is None else str(row.rate_usd_per_gpu_h),
                str(row.cost_usd),
                str(row.idle_cost_usd),
                str(row.total_cost_usd),
            ]
        )
    return buf.getvalue()


def _header_lines(report: ChargebackReport) -> list[str]:
    basis = {
        "allocation": "allocation (cost = GPU-hours allocated x rate)",
        "usage": (
            "usage (cost = GPU-hours used x rate; allocated where usage is not reported; "
            "held-but-unused hours count as idle)"
        ),
    }[report.basis]
    idle = {
        "none": "none (idle capacity cost on its own __idle__ line)",
        "uniform": "uniform (each flavor's idle cost shared equally by the groups that used it)",
        "proportional": (
            "proportional (each flavor's idle cost shared by the groups' allocated GPU-hours)"
        ),
    }[report.idle_method]
    lines = [
        "gpufleet chargeback",
        f"period: {_iso(report.period_start_s)} to {_iso(report.period_end_s)} (end exclusive)",
        f"basis: {basis}",
        f"idle method: {idle}",
        "GPU-hours allocated = GPUs held x hours held, clipped to the period",
        "gpu_efficiency = GPU-hours used / allocated, over the records that report usage",
        f"capacity GPU-hours: {_fmt_hours(report.capacity_gpu_hours)}; "
        f"idle GPU-hours: {_fmt_hours(report.idle_gpu_hours)}",
    ]
    if report.unpriced_flavors:
        lines.append(f"unpriced flavors (charged 0): {', '.join(report.unpriced_flavors)}")
    if report.usage_missing_records:
        lines.append(f"records without usage data: {report.usage_missing_records}")
    if report.over_capacity_flavors:
        lines.append(
            "over capacity (more GPU-hours billed than capacity; check capacity): "
            + ", ".join(report.over_capacity_flavors)
        )
    return lines


def to_focus_csv(
    report: ChargebackReport, *, billing_currency: str = "USD", provider: str = "gpufleet"
) -> str:
    """The report as FOCUS-shaped cost rows: one per group × flavor, one per unshared idle.

    FOCUS (the FinOps Open Cost and Usage Specification) prices by SKU, so the export is
    always split by flavor (`SkuId`) even when the report was not grouped by accelerator.
    BilledCost includes the row's idle share; EffectiveCost and ListCost equal it (there are
    no discounts or amortisation here). Quantities are the billed GPU-hours (the idle
    GPU-hours on idle rows). The rows add up to the report's total to the cent.
    `billing_currency` only labels the amounts: nothing is converted, so pass another code
    only when the rates were set in that currency.
    """
    if not (len(billing_currency) == 3 and billing_currency.isalpha()):
        raise UserError(
            f"billing currency must be an ISO 4217 code such as USD: {billing_currency!r}"
        )
    currency = billing_currency.upper()
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(FOCUS_COLUMNS)
    start, end = _iso(report.period_start_s), _iso(report.period_end_s)
    for row in report.flavor_rows:
        flavor = row.flavors[0]
        if row.is_idle:
            quantity = row.gpu_hours_idle
            description = f"Idle {flavor} capacity: GPU-hours not held by any job"
            resource = f"{provider}/{flavor}/{IDLE}"
            sub_account = IDLE
            tags: dict[str, str] = {}
        else:
            quantity = row.gpu_hours_billed
            description = f"{flavor} GPU-hours ({report.basis} basis)"
            if row.idle_cost_usd:
                description += f", with a {report.idle_method} share of idle capacity"
            dims = [(k, v) for k, v in row.group if k != "accelerator" and v is not None]
            resource = "/".join([provider, flavor, *(f"{k}={v}" for k, v in dims)])
            sub_account = (row.value("team") or "") if "team" in report.group_by else ""
            tags = {k: v for k, v in dims if k != "team"}
        writer.writerow(
            [
                str(row.total_cost_usd),
                str(row.total_cost_usd),
                str(row.total_cost_usd),
                currency,
                start,
                end,
                "Usage",
                _cell(description),
                _fmt_hours(quantity),
                "GPU-Hours",
                _fmt_hours(quantity),
                "GPU-Hours",
                _cell(resource),
                "GPU Compute",
                _cell(flavor),
                _cell(sub_account),
                json.dumps(tags, sort_keys=True, separators=(",", ":")),
                _cell(provider),
            ]
        )
    return buf.getvalue()


def _iso(t_s: float) -> str:
    """ISO 8601 in UTC with a Z, to the second unless the time has a fraction."""
    dt = datetime.fromtimestamp(t_s, UTC)
    spec = "seconds" if dt.microsecond == 0 else "microseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def _fmt_hours(h: float) -> str:
    return f"{h:.6f}"


def _cell(text: str | None) -> str:
    """A text cell a spreadsheet will not run as a formula (OWASP CSV injection)."""
    if text is None:
        return ""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------
# budgets


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """Where a team stands against its GPU-hour budget.

    `fraction` is used / budget (None without a budget, or with a budget of 0, where any use
    is over). `alerts` holds one message per threshold reached, in the order of
    `thresholds_reached`, so a notifier can send each threshold once per period.
    """

    used_gpu_h: float
    budget_gpu_h: float | None
    fraction: float | None
    alerts: tuple[str, ...]
    over: bool
    thresholds_reached: tuple[float, ...] = ()


def budget_status(
    used_gpu_h: float,
    budget_gpu_h: float | None,
    thresholds: Sequence[float] = (0.8, 1.0),
    *,
    team: str | None = None,
    period_label: str = "monthly",
) -> BudgetStatus:
    """Compare GPU-hours used with a budget and phrase an alert per threshold reached.

    A threshold is reached when used ≥ threshold × budget; `over` means strictly above the
    budget, so using exactly the budget alerts at 100% but is not over. Percentages are
    rounded down so that 99.7% never reads "100%" while the team is still under.
    """
    if not math.isfinite(used_gpu_h) or used_gpu_h < 0:
        raise UserError(f"GPU-hours used must be a finite number >= 0, not {used_gpu_h}")
    if any(not (math.isfinite(t) and t > 0) for t in thresholds):
        raise UserError(f"budget thresholds must be positive fractions, not {list(thresholds)}")
    if budget_gpu_h is None:
        return BudgetStatus(used_gpu_h, None, None, (), over=False)
    if not math.isfinite(budget_gpu_h) or budget_gpu_h < 0:
        raise UserError(f"a GPU-hour budget must be a finite number >= 0, not {budget_gpu_h}")
    who = f"team {team}" if team else "the team"
    budget_text = f"{_fmt_amount(budget_gpu_h)} GPU-hour {period_label} budget"
    if budget_gpu_h == 0:
        if used_gpu_h == 0:
            return BudgetStatus(used_gpu_h, 0.0, None, (), over=False)
        message = f"{who} has used {_fmt_amount(used_gpu_h)} GPU-hours of its {budget_text}"
        return BudgetStatus(used_gpu_h, 0.0, None, (message,), True, (1.0,))
    fraction = used_gpu_h / budget_gpu_h
    reached = tuple(sorted(t for t in set(thresholds) if used_gpu_h >= t * budget_gpu_h))
    pct = math.floor(round(fraction * 100, 6))
    alerts = tuple(
        f"{who} has used {pct}% of its {budget_text} (alert at {_fmt_pct(t)})" for t in reached
    )
    return BudgetStatus(
        used_gpu_h, budget_gpu_h, fraction, alerts, used_gpu_h > budget_gpu_h, reached
    )


def _fmt_amount(x: float) -> str:
    return f"{x:,.0f}" if x == round(x) else f"{x:,.1f}"


def _fmt_pct(t: float) -> str:
    return f"{round(t * 100, 6):g}%"


def month_bounds(now_s: float) -> tuple[float, float]:
    """The calendar month (UTC) containing `now_s`: [first instant, first of next month)."""
    now = datetime.fromtimestamp(now_s, UTC)
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        first.replace(year=first.year + 1, month=1)
        if first.month == 12
        else first.replace(month=first.month + 1)
    )
    return first.timestamp(), nxt.timestamp()
