"""The shape of a chargeback: the usage records that go in and the report that comes out.

Apart from the computation (`chargeback`) so that what only carries or shows these rows (the
ledger that loads usage, the API, the portal, the CSV writers) needs nothing of the exact
arithmetic. Units are in the names, as in `chargeback`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, get_args

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

IDLE = "__idle__"  # the group value of the line that holds idle capacity (OpenCost's name)
TOTAL = "TOTAL"
# the group value of the line that brings the rows, each rounded to the cent on its own, to
# the total, rounded once (`ChargebackReport.rounding`)
ROUNDING = "__rounding__"


@dataclass(frozen=True, slots=True)
class RateChange:
    """A flavor's price of one GPU-hour from `effective_s` until its next change.

    Rates are history (`models.FlavorRate`): a report prices each GPU-second at the rate in
    force when it was used, so a rate set today never changes a closed month's bill.
    `set_s` is when it was entered (None where unknown); `repriced` marks a rate an admin
    entered for a time already past (re-pricing what was used then), which the reports say.
    """

    effective_s: float
    usd_micro_per_gpu_h: int
    set_s: float | None = None
    repriced: bool = False


@dataclass(frozen=True, slots=True)
class RateUsed:
    """The rate one flavor had over part of a report's period: [from_s, to_s).
    `rate_usd_per_gpu_h` None: the flavor had no rate then (its GPU time costs 0 and the
    flavor is listed in `unpriced_flavors`)."""

    flavor: str
    from_s: float
    to_s: float
    rate_usd_per_gpu_h: Decimal | None
    set_s: float | None = None
    repriced: bool = False


@dataclass(frozen=True, slots=True)
class Rounding:
    """What the TOTAL's money columns differ from the sum of the lines above it.

    Every line's cost and idle share are its exact amounts rounded to the cent on their own
    (so each reads as its GPU-hours × its rate), and the TOTAL's are the exact sums rounded
    once; the difference, a few cents at most, is stated on its own line rather than hidden
    in one of the rows."""

    cost_usd: Decimal
    idle_cost_usd: Decimal
    total_cost_usd: Decimal

    @property
    def is_zero(self) -> bool:
        return not (self.cost_usd or self.idle_cost_usd or self.total_cost_usd)


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
    `rate_usd_per_gpu_h` is the list rate when the line was billed at one rate, otherwise
    the rate averaged over its billed hours (idle hours on the `__idle__` line), exact to
    1e-10 USD, so that billed hours × rate = cost; None when some of its GPU time had no
    rate, or there is nothing to average.
    `cost_usd` and `idle_cost_usd` are the line's exact amounts each rounded to the cent
    (half up), and `total_cost_usd` their sum; on the TOTAL line cost and total are the exact
    sums rounded once and idle is total − cost (`ChargebackReport.rounding` says how far the
    lines' sum is from it).
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
    no one to share it with); None when there is none. `totals`' cost and total columns are
    the exact amounts rounded once (its idle is total − cost), and `rows` + `idle` +
    `rounding` add up to it to the cent. So where every billed flavor has a known capacity
    that is not exceeded,
    `totals.total_cost_usd == capacity_cost_usd` (capacity × period × rate, rounded once).
    `flavor_rows` are the same amounts grouped by flavor in addition (and one `__idle__` line
    per flavor with unshared idle): what `to_focus_csv` writes. Every line is rounded to the
    cent on its own; `rounding` (rows and idle) and `flavor_rounding` (flavor rows) are what
    the TOTAL differs from their sums, so lines + rounding = TOTAL to the cent.
    `rates` are the rates each flavor had over the period, in order: a rate changed inside
    the period splits it, and each GPU-second is priced at the rate in force when it was used.
    `usage_missing_records` counts records in the period without `used_gpu_s` (on the usage
    basis they are billed on allocation). `over_capacity_flavors` lists flavors whose billed
    hours exceed their capacity over some stretch of one rate (stale capacity): their idle
    is floored at 0 there and the identity cannot hold for them.
    """

    period_start_s: float
    period_end_s: float
    basis: Basis
    group_by: tuple[str, ...]
    idle_method: IdleMethod
    rows: tuple[ChargebackRow, ...]
    totals: ChargebackRow
    # None when the report was built without the cluster's capacity (a team's own report:
    # capacity and idle are the whole cluster's, shown to admins), never a 0 that reads as
    # an empty cluster
    idle_gpu_hours: float | None
    capacity_gpu_hours: float | None
    idle: ChargebackRow | None = None
    flavors: tuple[FlavorSummary, ...] = ()
    flavor_rows: tuple[ChargebackRow, ...] = ()
    unpriced_flavors: tuple[str, ...] = ()
    usage_missing_records: int = 0
    over_capacity_flavors: tuple[str, ...] = ()
    records_in_period: int = 0
    capacity_cost_usd: Decimal | None = None  # None when no capacity was given
    rounding: Rounding = Rounding(Decimal("0.00"), Decimal("0.00"), Decimal("0.00"))
    flavor_rounding: Rounding = Rounding(Decimal("0.00"), Decimal("0.00"), Decimal("0.00"))
    rates: tuple[RateUsed, ...] = ()

    @property
    def repriced(self) -> tuple[RateUsed, ...]:
        """The rates of this period an admin set after the time they apply from."""
        return tuple(r for r in self.rates if r.repriced)

    @property
    def period_hours(self) -> float:
        return (self.period_end_s - self.period_start_s) / 3600
