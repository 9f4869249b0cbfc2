"""Exact sums of GPU time and money, and the rounding of money to cents.

Apart from the report's logic so that every amount goes through the same few integer and
`Fraction` steps: GPU time is summed as integers, money (each piece of GPU time × the rate in
force when it was used) stays an exact rational until a line is rounded to cents, once per
column. Each line is rounded on its own, so that a reader can check it as its GPU-hours × its
rate; the TOTAL is the exact sum rounded once, and the few cents the lines' sum differs from
it are a `Rounding` line of their own rather than hidden in one of the rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from gpufleet.control.chargeback_report import ChargebackRow, Rounding

# Amounts of GPU time are integers in milli-GPU-microseconds ("units"): 1000 units are one
# GPU for one microsecond.
_UNITS_PER_GPU_H = 1000 * 3_600_000_000
# (units × micro-dollars per GPU-hour) in one dollar
UNITS_MICRO_PER_USD = _UNITS_PER_GPU_H * 1_000_000
_ZERO = Fraction(0)
# a rate averaged over several rates is exact to this many decimals of a dollar: enough that
# billed hours × the rate shown gives the cost to the cent up to 10^7 GPU-hours
AVERAGE_RATE_DECIMALS = 10


@dataclass
class Acc:
    """Exact sums for one group × flavor cell, in milli-GPU-microseconds, and their price.

    `cost_micro` is Σ billed units × the micro-dollar rate in force when they were used;
    `rates` the distinct rates its GPU time had, `unpriced` its units held when the flavor
    had no rate (billed at 0)."""

    alloc: int = 0
    used: int = 0  # of the records that report usage
    alloc_reporting: int = 0  # allocation of the records that report usage
    billed: int = 0
    records: int = 0
    reporting: int = 0
    cost_micro: int = 0
    unpriced: int = 0
    rates: set[int] = field(default_factory=set)

    def merge(self, other: Acc) -> None:
        self.alloc += other.alloc
        self.used += other.used
        self.alloc_reporting += other.alloc_reporting
        self.billed += other.billed
        self.records += other.records
        self.reporting += other.reporting
        self.cost_micro += other.cost_micro
        self.unpriced += other.unpriced
        self.rates |= other.rates


@dataclass
class Idle:
    """Idle capacity of one flavor (or a group's share of it): units, exact cost, the rates
    it was priced at and its units when the flavor had no rate."""

    units: Fraction = _ZERO
    cost: Fraction = _ZERO
    rates: set[int] = field(default_factory=set)
    unpriced: Fraction = _ZERO

    def add(self, other: Idle) -> None:
        self.units += other.units
        self.cost += other.cost
        self.rates |= other.rates
        self.unpriced += other.unpriced

    def scaled(self, share: Fraction) -> Idle:
        return Idle(self.units * share, self.cost * share, set(self.rates), self.unpriced * share)


@dataclass
class Line:
    """A report line before rounding: workload per flavor plus idle per flavor."""

    group: tuple[tuple[str, str | None], ...]
    is_idle: bool = False
    by_flavor: dict[str, Acc] = field(default_factory=dict)
    idle: dict[str, Idle] = field(default_factory=dict)

    def add_work(self, flavor: str, acc: Acc) -> None:
        self.by_flavor.setdefault(flavor, Acc()).merge(acc)

    def add_idle(self, flavor: str, idle: Idle) -> None:
        self.idle.setdefault(flavor, Idle()).add(idle)

    def absorb(self, other: Line) -> None:
        for flavor, acc in other.by_flavor.items():
            self.add_work(flavor, acc)
        for flavor, idle in other.idle.items():
            self.add_idle(flavor, idle)

    def merged(self) -> Acc:
        total = Acc()
        for acc in self.by_flavor.values():
            total.merge(acc)
        return total

    def merged_idle(self) -> Idle:
        total = Idle()
        for idle in self.idle.values():
            total.add(idle)
        return total

    def work_cost(self) -> Fraction:
        return Fraction(sum(a.cost_micro for a in self.by_flavor.values()), UNITS_MICRO_PER_USD)

    def idle_cost(self) -> Fraction:
        return sum((i.cost for i in self.idle.values()), _ZERO)


def finish_rows(lines: Sequence[Line]) -> list[ChargebackRow]:
    """Each line's money rounded to cents on its own (half up): its cost is its billed
    GPU-hours × its rate and its idle share its idle GPU-hours × theirs, to the cent, and its
    total is the two added. (The idle line was once what the grand total left after the
    costs: 80.997344 idle GPU-hours at 1.971139 read 159.65, not 159.66.)"""
    return [
        line_row(line, to_cents(line.work_cost()), to_cents(line.idle_cost())) for line in lines
    ]


def total_row(lines: Sequence[Line], group: tuple[tuple[str, str | None], ...]) -> ChargebackRow:
    """The TOTAL of `lines`: cost and total are the exact sums rounded once, so that a
    capacity cost that is a whole number of cents comes out to that number, and idle is
    total − cost (within a cent of the idle lines' exact sum), so cost + idle = total here
    too. (Rounding cost and idle on their own could bill $1.01 for a $1.00 GPU-hour:
    0.005 + 0.995.)"""
    everything = Line(group)
    for line in lines:
        everything.absorb(line)
    cost = to_cents(everything.work_cost())
    total = to_cents(everything.work_cost() + everything.idle_cost())
    return line_row(everything, cost, total - cost)


def rounding(rows: Sequence[ChargebackRow], total: ChargebackRow) -> Rounding:
    """What `total` differs from the sum of `rows`, column by column."""
    zero = Decimal("0.00")
    return Rounding(
        total.cost_usd - sum((r.cost_usd for r in rows), zero),
        total.idle_cost_usd - sum((r.idle_cost_usd for r in rows), zero),
        total.total_cost_usd - sum((r.total_cost_usd for r in rows), zero),
    )


def line_row(line: Line, cost: Decimal, idle: Decimal) -> ChargebackRow:
    """The line as a report row, with its money already rounded to `cost` and `idle`."""
    acc = line.merged()
    idle_part = line.merged_idle()
    flavors = sorted(set(line.by_flavor) | set(line.idle))
    if acc.alloc > 0 or acc.billed > 0:
        rate = _rate(acc.billed, line.work_cost(), acc.rates, acc.unpriced > 0)
    else:
        rate = _rate(idle_part.units, idle_part.cost, idle_part.rates, idle_part.unpriced > 0)
    return ChargebackRow(
        group=line.group,
        flavors=tuple(flavors),
        gpu_hours_allocated=gpu_hours_of(acc.alloc),
        gpu_hours_used=gpu_hours_of(acc.used) if acc.reporting else None,
        gpu_hours_billed=gpu_hours_of(acc.billed),
        gpu_hours_idle=gpu_hours_of(idle_part.units),
        gpu_efficiency=float(acc.used / acc.alloc_reporting) if acc.alloc_reporting else None,
        rate_usd_per_gpu_h=rate,
        cost_usd=cost,
        idle_cost_usd=idle,
        total_cost_usd=cost + idle,
        records=acc.records,
        is_idle=line.is_idle,
    )


def _rate(
    units: int | Fraction, cost_usd: Fraction, rates: set[int], unpriced: bool
) -> Decimal | None:
    """The line's rate: the list rate when all its time had one, else cost / GPU-hours."""
    if unpriced or not rates:
        return None
    if len(rates) == 1:
        return micro_to_usd(next(iter(rates)))
    if units == 0:
        return None
    return average_rate(cost_usd * _UNITS_PER_GPU_H / units)


def average_rate(usd_per_gpu_h: Fraction) -> Decimal:
    """An averaged rate to `AVERAGE_RATE_DECIMALS` decimals (half up), shown with at least
    the six of a list rate: 1.25 reads "1.250000", as a micro-dollar rate does."""
    scale = 10**AVERAGE_RATE_DECIMALS
    exact = Decimal(round_half_up(usd_per_gpu_h * scale)).scaleb(-AVERAGE_RATE_DECIMALS)
    six = exact.quantize(Decimal("0.000001"))
    return six if six == exact else exact.normalize()


def round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def to_cents(usd: Fraction) -> Decimal:
    return Decimal(round_half_up(usd * 100)).scaleb(-2)


def micro_to_usd(micro: int) -> Decimal:
    return Decimal(micro).scaleb(-6)


def gpu_hours_of(units: int | Fraction) -> float:
    """Milli-GPU-microseconds as GPU-hours, correctly rounded to a float."""
    if isinstance(units, int):
        return units / _UNITS_PER_GPU_H  # int / int is correctly rounded in Python
    return float(units / _UNITS_PER_GPU_H)
