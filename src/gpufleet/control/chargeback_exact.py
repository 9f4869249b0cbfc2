"""Exact sums of GPU time and the one rounding of money to cents.

Apart from the report's logic so that every amount goes through the same few integer and
`Fraction` steps: GPU time is summed as integers, money stays an exact rational until
`finish_rows` rounds a column to cents once, by largest remainder, so that it adds up to its
total. Whatever groups or shares the lines, the arithmetic here is the only place a total
can drift, and it does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from gpufleet.control.chargeback_report import ChargebackRow

# Amounts of GPU time are integers in milli-GPU-microseconds ("units"): 1000 units are one
# GPU for one microsecond.
_UNITS_PER_GPU_H = 1000 * 3_600_000_000
# (units × micro-dollars per GPU-hour) in one dollar
UNITS_MICRO_PER_USD = _UNITS_PER_GPU_H * 1_000_000
_ZERO = Fraction(0)


@dataclass
class Acc:
    """Exact sums for one group × flavor cell, in milli-GPU-microseconds."""

    alloc: int = 0
    used: int = 0  # of the records that report usage
    alloc_reporting: int = 0  # allocation of the records that report usage
    billed: int = 0
    records: int = 0
    reporting: int = 0

    def merge(self, other: Acc) -> None:
        self.alloc += other.alloc
        self.used += other.used
        self.alloc_reporting += other.alloc_reporting
        self.billed += other.billed
        self.records += other.records
        self.reporting += other.reporting


@dataclass
class Line:
    """A report line before rounding: workload per flavor plus idle per flavor."""

    group: tuple[tuple[str, str | None], ...]
    is_idle: bool = False
    by_flavor: dict[str, Acc] = field(default_factory=dict)
    idle_units: dict[str, Fraction] = field(default_factory=dict)
    idle_cost_exact: dict[str, Fraction] = field(default_factory=dict)

    def add_work(self, flavor: str, acc: Acc) -> None:
        self.by_flavor.setdefault(flavor, Acc()).merge(acc)

    def add_idle(self, flavor: str, units: int | Fraction, cost: Fraction) -> None:
        self.idle_units[flavor] = self.idle_units.get(flavor, _ZERO) + units
        self.idle_cost_exact[flavor] = self.idle_cost_exact.get(flavor, _ZERO) + cost

    def absorb(self, other: Line) -> None:
        for flavor, acc in other.by_flavor.items():
            self.add_work(flavor, acc)
        for flavor, units in other.idle_units.items():
            self.add_idle(flavor, units, other.idle_cost_exact[flavor])

    def merged(self) -> Acc:
        total = Acc()
        for acc in self.by_flavor.values():
            total.merge(acc)
        return total

    def work_cost(self, rates: Mapping[str, int]) -> Fraction:
        micro_units = sum(acc.billed * rates.get(f, 0) for f, acc in self.by_flavor.items())
        return Fraction(micro_units, UNITS_MICRO_PER_USD)

    def idle_cost(self) -> Fraction:
        return sum(self.idle_cost_exact.values(), _ZERO)


def finish_rows(lines: Sequence[Line], rates: Mapping[str, int]) -> list[ChargebackRow]:
    """Round the lines' money to cents so that every column adds up to its total.

    The cost column adds up to the exact workload cost rounded once, and the total column to
    the exact grand total (workload + idle) rounded once; the idle column takes what is
    left, so cost + idle = total holds on every line and a capacity cost that is a whole
    number of cents comes out to that number. (Rounding the idle column on its own could
    put the grand total a cent off: 0.005 + 0.995 would round to 0.01 + 1.00.)
    """
    exact_costs = [line.work_cost(rates) for line in lines]
    exact_idles = [line.idle_cost() for line in lines]
    cost_cents = round_half_up(sum(exact_costs, _ZERO) * 100)
    total_cents = round_half_up(sum([*exact_costs, *exact_idles], _ZERO) * 100)
    costs = _apportion(exact_costs, cost_cents)
    idles = _apportion(exact_idles, total_cents - cost_cents)
    return [
        line_row(line, rates, cost, idle)
        for line, cost, idle in zip(lines, costs, idles, strict=True)
    ]


def line_row(line: Line, rates: Mapping[str, int], cost: Decimal, idle: Decimal) -> ChargebackRow:
    """The line as a report row, with its money already rounded to `cost` and `idle`."""
    acc = line.merged()
    weights = {f: Fraction(a.billed) for f, a in line.by_flavor.items() if a.billed > 0}
    if not weights:
        weights = {f: u for f, u in line.idle_units.items() if u > 0}
    flavors = sorted(set(line.by_flavor) | set(line.idle_units))
    return ChargebackRow(
        group=line.group,
        flavors=tuple(flavors),
        gpu_hours_allocated=gpu_hours_of(acc.alloc),
        gpu_hours_used=gpu_hours_of(acc.used) if acc.reporting else None,
        gpu_hours_billed=gpu_hours_of(acc.billed),
        gpu_hours_idle=gpu_hours_of(sum(line.idle_units.values(), _ZERO)),
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
        return micro_to_usd(distinct.pop())
    total = sum(weights.values(), _ZERO)
    if total == 0:
        return None
    micro = sum((w * rates[f] for f, w in weights.items()), _ZERO) / total
    return micro_to_usd(round_half_up(micro))


def _apportion(amounts_usd: Sequence[Fraction], target_cents: int) -> list[Decimal]:
    """Round to cents by largest remainder so that the parts add up to `target_cents`.

    Rounding each row on its own can leave the rows a cent or more off their total; here
    every row gets its floor in cents and the cents still missing go to the rows with the
    largest remainders (ties to the earlier row). `finish_rows` only asks for a target within a
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
