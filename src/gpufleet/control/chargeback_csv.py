"""Chargeback reports as CSV files: the plain table and the FOCUS cost rows.

Apart from the computation because a file is a rendering of a finished report: nothing
here adds, shares or rounds money, it writes the amounts the report holds, as text a
spreadsheet will not run as a formula.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal

from gpufleet.control.chargeback_report import (
    IDLE,
    ROUNDING,
    ChargebackReport,
    ChargebackRow,
    RateUsed,
)
from gpufleet.errors import UserError

_ZERO = Decimal(0)

CSV_COLUMNS_AFTER_GROUPS: tuple[str, ...] = (
    "gpu_hours_allocated",
    "gpu_hours_used",
    "gpu_efficiency",
    "rate_usd_per_gpu_hour",
    "cost_usd",
    "idle_cost_usd",
    "total_cost_usd",
)
# on the usage basis, after gpu_efficiency: the hours the cost is on (used where reported,
# allocated elsewhere). Without it a row mixing both read 2.000000 allocated, 0.500000 used,
# 2.50 a GPU-hour and 3.75 USD: neither hours x rate, since 1.5 hours were billed
BILLED_COLUMN = "gpu_hours_billed"
HOUR_DECIMALS = 6
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
    # FOCUS's custom-column convention (x_): what telemetry measured of the billed hours
    "x_GpuHoursUsed",
    "x_GpuEfficiency",
)


def to_csv(report: ChargebackReport) -> str:
    """The report as CSV: `#` comment lines that say how it was computed, rows, TOTAL last.

    The comments carry what a reader needs to trust the numbers (period, basis, idle
    method, the definition of a GPU-hour, the rates used and when, unpriced flavors),
    because a CSV travels without the command that made it. Each row is rounded on its own
    (money to the cent, hours to six decimals); where they do not add up to the TOTAL
    (rounded once) a `__rounding__` line before it says by how much, column by column, so
    every column adds up. On the usage basis a `gpu_hours_billed` column holds the hours
    each cost is on, so every row reads as billed hours x rate.
    """
    buf = io.StringIO()
    for line in _header_lines(report):
        buf.write(f"# {_one_line(line)}\n")
    writer = csv.writer(buf, lineterminator="\n")
    usage = report.basis == "usage"
    writer.writerow(["period_start", "period_end", *report.group_by, *_columns(usage)])
    start, end = _iso(report.period_start_s), _iso(report.period_end_s)
    lines = [*report.rows, *([report.idle] if report.idle else [])]
    for row in lines:
        writer.writerow(_row_cells(row, start, end, usage))
    gaps = _rounding_cells(report, lines, usage)
    if any(cell not in ("", "0", "0.00") for cell in gaps):
        keys = (ROUNDING if i == 0 else "" for i in range(len(report.group_by)))
        writer.writerow([start, end, *keys, *gaps])
    writer.writerow(_row_cells(report.totals, start, end, usage))
    return buf.getvalue()


def _columns(usage: bool) -> tuple[str, ...]:
    if not usage:
        return CSV_COLUMNS_AFTER_GROUPS
    at = CSV_COLUMNS_AFTER_GROUPS.index("gpu_efficiency") + 1
    return (*CSV_COLUMNS_AFTER_GROUPS[:at], BILLED_COLUMN, *CSV_COLUMNS_AFTER_GROUPS[at:])


def _row_cells(row: ChargebackRow, start: str, end: str, usage: bool = False) -> list[str]:
    """One line of the report (a group, idle or the total) as CSV cells."""
    billed = [_fmt_hours(row.gpu_hours_billed)] if usage else []
    return [
        start,
        end,
        *(_cell(v) for _, v in row.group),
        _fmt_hours(row.gpu_hours_allocated),
        "" if row.gpu_hours_used is None else _fmt_hours(row.gpu_hours_used),
        "" if row.gpu_efficiency is None else f"{row.gpu_efficiency:.4f}",
        *billed,
        "" if row.rate_usd_per_gpu_h is None else str(row.rate_usd_per_gpu_h),
        str(row.cost_usd),
        str(row.idle_cost_usd),
        str(row.total_cost_usd),
    ]


def _rounding_cells(
    report: ChargebackReport, lines: Sequence[ChargebackRow], usage: bool
) -> list[str]:
    """The `__rounding__` line's cells: the TOTAL less the lines above it as printed, hours
    and money alike. Hours of each row are rounded to six decimals on their own, so three
    rows of 0.333333 stood above a TOTAL of 1.000000 with nothing to say why."""

    def hours(pick: Callable[[ChargebackRow], float | None]) -> str:
        want = pick(report.totals)
        if want is None:
            return ""
        got = sum((Decimal(_fmt_hours(h)) for x in lines if (h := pick(x)) is not None), _ZERO)
        diff = Decimal(_fmt_hours(want)) - got
        return f"{diff:.{HOUR_DECIMALS}f}" if diff else "0"

    billed = [hours(lambda r: r.gpu_hours_billed)] if usage else []
    return [
        hours(lambda r: r.gpu_hours_allocated),
        hours(lambda r: r.gpu_hours_used),
        "",
        *billed,
        "",
        str(report.rounding.cost_usd),
        str(report.rounding.idle_cost_usd),
        str(report.rounding.total_cost_usd),
    ]


def rates_text(rates: tuple[RateUsed, ...]) -> list[str]:
    """The rates a report used, one phrase per flavor and stretch of the period: what a
    reader multiplies GPU-hours by, and when each applied."""
    out = []
    for r in rates:
        rate = (
            "no rate (charged 0)"
            if r.rate_usd_per_gpu_h is None
            else (f"{r.rate_usd_per_gpu_h} USD/GPU-h")
        )
        text = f"{r.flavor} {rate} from {_iso(r.from_s)} to {_iso(r.to_s)}"
        if r.repriced:
            set_at = "" if r.set_s is None else f" on {_iso(r.set_s)}"
            text += f" (re-priced: set{set_at}, after the time it applies from)"
        out.append(text)
    return out


def _header_lines(report: ChargebackReport) -> list[str]:
    basis = {
        "allocation": "allocation (cost = GPU-hours allocated x rate)",
        "usage": (
            "usage (cost = gpu_hours_billed x rate: GPU-hours used where usage is reported, "
            "allocated where it is not; held-but-unused hours count as idle)"
        ),
    }[report.basis]
    idle = {
        "none": "none (idle capacity cost on its own __idle__ line)"
        if report.capacity_gpu_hours is not None
        else "none (no idle line: capacity is not part of this report)",
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
        _capacity_line(report),
        "rounding: each row's money is its exact amount rounded to the cent (half up), its "
        f"GPU-hours to {HOUR_DECIMALS} decimals; the TOTAL is the exact sum rounded once; a "
        "__rounding__ line states any difference, column by column",
    ]
    lines += [f"rate: {text}" for text in rates_text(report.rates)]
    if report.repriced:
        lines.append(
            "re-priced: an admin set a rate of this period after the time it applies from, "
            "so this report differs from one made before that"
        )
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


def _capacity_line(report: ChargebackReport) -> str:
    if report.capacity_gpu_hours is None or report.idle_gpu_hours is None:
        return "capacity and idle GPU-hours: not in this report (the cluster's, shown to admins)"
    return (
        f"capacity GPU-hours: {_fmt_hours(report.capacity_gpu_hours)}; "
        f"idle GPU-hours: {_fmt_hours(report.idle_gpu_hours)}"
    )


def to_focus_csv(
    report: ChargebackReport, *, billing_currency: str = "USD", provider: str = "gpufleet"
) -> str:
    """The report as FOCUS-shaped cost rows: one per group × flavor, one per unshared idle.

    FOCUS (the FinOps Open Cost and Usage Specification) prices by SKU, so the export is
    always split by flavor (`SkuId`) even when the report was not grouped by accelerator.
    BilledCost includes the row's idle share; EffectiveCost and ListCost equal it (there are
    no discounts or amortisation here). Quantities are the billed GPU-hours (the idle
    GPU-hours on idle rows). The rows add up to the report's total to the cent.
    `x_GpuHoursUsed` and `x_GpuEfficiency` (FOCUS custom columns) carry the busy GPU-hours
    telemetry measured and their share of the allocated ones; empty where not measured.
    Each row is rounded to the cent on its own; where they do not add up to the report's
    total (rounded once) one more row, ChargeCategory "Adjustment", carries the difference.
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
                "" if row.is_idle or row.gpu_hours_used is None else _fmt_hours(row.gpu_hours_used),
                "" if row.is_idle or row.gpu_efficiency is None else f"{row.gpu_efficiency:.4f}",
            ]
        )
    adjustment = report.flavor_rounding.total_cost_usd
    if adjustment:
        writer.writerow(
            [
                str(adjustment),
                str(adjustment),
                str(adjustment),
                currency,
                start,
                end,
                "Adjustment",
                "Rounding: each row is rounded to the cent on its own, the total once",
                "",
                "",
                "",
                "",
                _cell(f"{provider}/{ROUNDING}"),
                "GPU Compute",
                "",
                "",
                "{}",
                _cell(provider),
                "",
                "",
            ]
        )
    return buf.getvalue()


def _iso(t_s: float) -> str:
    """ISO 8601 in UTC with a Z, to the second unless the time has a fraction."""
    dt = datetime.fromtimestamp(t_s, UTC)
    spec = "seconds" if dt.microsecond == 0 else "microseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


# not `formatting.fmt_num`: a CSV cell gets six decimals and no thousands separator
def _fmt_hours(h: float) -> str:
    return f"{h:.{HOUR_DECIMALS}f}"


def _cell(text: str | None) -> str:
    """A text cell a spreadsheet will not run as a formula (OWASP CSV injection)."""
    if text is None:
        return ""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _one_line(text: str) -> str:
    return " ".join(text.split())
