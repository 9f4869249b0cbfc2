"""The chargeback period picker: named periods and custom dates -> [start, end) in seconds.

Dates are whole UTC days and the "to" date is inclusive, as people read a date range; the
report itself (`control.chargeback`) takes an exclusive end, so a day is added here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from gpufleet.control.chargeback_budget import month_bounds
from gpufleet.errors import UserError

PERIODS = {
    "this-month": "this month (to date)",
    "last-month": "last month",
    "last-7d": "the last 7 days",
    "custom": "custom dates",
}


@dataclass(frozen=True, slots=True)
class Period:
    name: str
    start_s: float
    end_s: float
    complete: bool  # False while the period is still running (its numbers will grow)

    @property
    def label(self) -> str:
        return PERIODS[self.name]


def resolve_period(name: str, from_date: str, to_date: str, now_s: float) -> Period:
    """The period a form asks for. Raises UserError for unreadable or reversed dates."""
    if name == "last-month":
        this_start, _ = month_bounds(now_s)
        start, end = month_bounds(this_start - 1)
        return Period(name, start, end, True)
    if name == "last-7d":
        return Period(name, now_s - 7 * 86_400, now_s, False)
    if name == "custom":
        start_d = _date(from_date, "from")
        end_d = _date(to_date, "to")
        if end_d < start_d:
            raise UserError("the 'to' date is before the 'from' date")
        start = _midnight(start_d)
        end = _midnight(end_d + timedelta(days=1))
        if start >= now_s:
            raise UserError("the period starts in the future: nothing to report yet")
        return Period(name, start, min(end, now_s), end <= now_s)  # no bill for the future
    start, _ = month_bounds(now_s)
    return Period("this-month", start, now_s, False)


def _date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise UserError(f"{what}: use a date such as 2026-11-01, got {value!r}") from None


def _midnight(d: date) -> float:
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()


def day(t_s: float) -> str:
    """The UTC date of a time, as a date input shows it."""
    return datetime.fromtimestamp(t_s, UTC).date().isoformat()
