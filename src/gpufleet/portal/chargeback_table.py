"""The chargeback table as the page and its PDF print it: figures a reader can check.

The API's JSON report is exact (hours as floats, money and rates as decimal strings); a
person reads a table, and must be able to check every row from what it shows: GPU-hours ×
the rate shown gives the cost shown, and the rows add up to the total. Printed to two
decimals of an hour and four of a dollar they did not (200.01 × 2.1247 = 424.96 against
424.98; rows by project 0.61 against a total 0.62), so here:

- a list rate is printed as stored (whole micro-dollars, at least two decimals: 2.50,
  2.124738, 0.4567); a rate averaged over several flavors or rates with as many decimals
  (at least four) as its row needs;
- GPU-hours get the fewest decimals (at least two, the same for the whole column) at which
  every row's hours × its rate, rounded half up to the cent, is the cost shown;
- the idle line shows its GPU-hours and the TOTAL its averaged rate, so they check too;
- where the rows, each rounded on its own, do not add up to the TOTAL (rounded once), a
  Rounding line says by how much, money and hours alike.

Nothing here changes an amount: the money is the report's, to the cent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from gpufleet.portal.fmt import pct

MIN_HOUR_DECIMALS = 2
MAX_HOUR_DECIMALS = 9
MIN_AVERAGE_RATE_DECIMALS = 4
MAX_RATE_DECIMALS = 10
LIST_RATE_DECIMALS = 6  # rates are stored in whole micro-dollars
_CENT = Decimal("0.01")


@dataclass(frozen=True)
class Line:
    """One printed line: group cells, then the figures as text ("—" where there is none)."""

    groups: tuple[str, ...]
    allocated: str
    used: str
    efficiency: str
    billed: str
    rate: str
    cost: str
    idle_hours: str
    idle: str
    total: str
    kind: str = "row"  # row | idle | rounding | total


@dataclass(frozen=True)
class Table:
    group_by: tuple[str, ...]
    rows: tuple[Line, ...]
    idle: Line | None
    rounding: Line | None
    total: Line
    show_billed: bool  # the usage basis: cost is on billed hours, not the allocated ones
    show_idle_hours: bool  # the report carries the cluster's capacity (admins)
    rates: tuple[str, ...]  # the rates used, one phrase per flavor and stretch of time
    repriced: bool

    @property
    def columns(self) -> int:
        return len(self.group_by) + 7 + self.show_billed + self.show_idle_hours


def chargeback_table(report: Mapping[str, Any]) -> Table:
    """The API's JSON report (`routes_cluster.chargeback`) as a checkable table."""
    keys = tuple(report["group_by"])
    usage = report["basis"] == "usage"
    rows: list[Mapping[str, Any]] = list(report["rows"])
    idle: Mapping[str, Any] | None = report.get("idle")
    totals: Mapping[str, Any] = report["totals"]
    # the hours the cost is on: allocated on the allocation basis (the same as billed)
    priced = "gpu_hours_billed" if usage else "gpu_hours_allocated"
    work = [*rows, totals]
    hour_places = _column_places([(r[priced], r, "cost_usd") for r in work])
    idle_lines = [(idle["gpu_hours_idle"], idle, "idle_cost_usd")] if idle else []
    idle_places = _column_places(idle_lines)

    def line(r: Mapping[str, Any], kind: str) -> Line:
        if kind == "idle":
            rate = _rate_text(r, r["gpu_hours_idle"], "idle_cost_usd", idle_places)
        else:
            rate = _rate_text(r, r[priced], "cost_usd", hour_places)
        groups = tuple(_group_text(r.get(k)) for k in keys)
        dash = kind == "idle"
        return Line(
            groups=groups,
            allocated="—" if dash else _hours(r["gpu_hours_allocated"], hour_places),
            used="—" if dash else _hours(r["gpu_hours_used"], hour_places),
            efficiency="—" if dash else pct(r["gpu_efficiency"]),
            billed="—" if dash else _hours(r["gpu_hours_billed"], hour_places),
            rate=rate,
            cost=str(r["cost_usd"]),
            idle_hours=_hours(r["gpu_hours_idle"], idle_places),
            idle=str(r["idle_cost_usd"]),
            total=str(r["total_cost_usd"]),
            kind=kind,
        )

    printed = [line(r, "row") for r in rows]
    idle_line = line(idle, "idle") if idle else None
    total_line = line(totals, "total")
    show_idle_hours = report.get("capacity_gpu_hours") is not None
    return Table(
        group_by=keys,
        rows=tuple(printed),
        idle=idle_line,
        rounding=_rounding(
            [*printed, *([idle_line] if idle_line else [])], total_line, report["rounding"]
        ),
        total=total_line,
        show_billed=usage,
        show_idle_hours=show_idle_hours,
        rates=tuple(_rate_used(r) for r in report.get("rates", ())),
        repriced=bool(report.get("repriced")),
    )


def _column_places(checks: Sequence[tuple[float | None, Mapping[str, Any], str]]) -> int:
    """The fewest decimals of an hour at which every line's hours × its rate (itself with
    the decimals it needs) rounds to its money; the most there are if none does."""
    for places in range(MIN_HOUR_DECIMALS, MAX_HOUR_DECIMALS + 1):
        if all(_rate_for(h, r, money, places) is not None for h, r, money in checks):
            return places
    return MAX_HOUR_DECIMALS


def _rate_for(
    hours: float | None, row: Mapping[str, Any], money: str, places: int
) -> Decimal | None:
    """The rate as printed at which the line checks with its hours at `places` decimals;
    None when no printing of it does. A line without a rate, or without hours, checks
    trivially (it has nothing to multiply)."""
    exact = _decimal(row.get("rate_usd_per_gpu_h"))
    if exact is None or hours is None:
        return Decimal(0)
    shown_hours = _quantize(Decimal(repr(hours)), places)
    want = _decimal(row[money])
    for rate in _rate_printings(exact):
        if (shown_hours * rate).quantize(_CENT, rounding=ROUND_HALF_UP) == want:
            return rate
    return None


def _rate_printings(exact: Decimal) -> list[Decimal]:
    """A list rate as stored; an averaged rate from four decimals to all it has."""
    places = -int(exact.normalize().as_tuple().exponent)
    if places <= LIST_RATE_DECIMALS:
        return [_quantize(exact, max(2, places))]
    return [_quantize(exact, p) for p in range(MIN_AVERAGE_RATE_DECIMALS, MAX_RATE_DECIMALS + 1)]


def _rate_text(row: Mapping[str, Any], hours: float | None, money: str, places: int) -> str:
    exact = _decimal(row.get("rate_usd_per_gpu_h"))
    if exact is None:
        return "—"
    rate = _rate_for(hours, row, money, places)
    if rate is None or hours is None:  # no printing checks (a half cent exactly): all of it
        rate = _rate_printings(exact)[-1]
    return str(rate)


def _rounding(lines: Sequence[Line], total: Line, money: Mapping[str, str]) -> Line | None:
    """The TOTAL less the printed lines, column by column; None when nothing differs."""

    def gap(column: str) -> str:
        want = _decimal(getattr(total, column))
        if want is None:
            return "—"
        got = sum((_decimal(getattr(x, column)) or Decimal(0) for x in lines), Decimal(0))
        diff = want - got
        return f"{diff:+}" if diff else "0"

    line = Line(
        groups=(),
        allocated=gap("allocated"),
        used=gap("used"),
        efficiency="",
        billed=gap("billed"),
        rate="",
        cost=f"{Decimal(money['cost_usd']):+}" if Decimal(money["cost_usd"]) else "0.00",
        idle_hours=gap("idle_hours"),
        idle=f"{Decimal(money['idle_cost_usd']):+}" if Decimal(money["idle_cost_usd"]) else "0.00",
        total=f"{Decimal(money['total_cost_usd']):+}"
        if Decimal(money["total_cost_usd"])
        else "0.00",
        kind="rounding",
    )
    figures = (line.allocated, line.used, line.billed, line.idle_hours, line.cost, line.idle)
    if all(f in ("0", "0.00", "—") for f in (*figures, line.total)):
        return None
    return line


def _rate_used(r: Mapping[str, Any]) -> str:
    rate = r.get("rate_usd_per_gpu_h")
    text = "no rate (charged 0)" if rate is None else f"{_list_rate(rate)} USD per GPU-hour"
    out = f"{r['flavor']}: {text} from {_when(r['from_s'])} to {_when(r['to_s'])}"
    if r.get("repriced"):
        when = "" if r.get("set_s") is None else f" on {_when(r['set_s'])}"
        out += f" (re-priced: set{when}, after the time it applies from)"
    return out


def _list_rate(value: object) -> str:
    exact = _decimal(value)
    return "—" if exact is None else str(_rate_printings(exact)[0])


def _hours(value: float | None, places: int) -> str:
    if value is None:
        return "—"
    return f"{_quantize(Decimal(repr(value)), places):,}"


def _group_text(value: object) -> str:
    return "(none)" if value is None else str(value)


def _when(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _quantize(x: Decimal, places: int) -> Decimal:
    return x.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def _decimal(value: object) -> Decimal | None:
    if value is None or value in {"", "—"}:
        return None
    try:
        out = Decimal(str(value).replace(",", ""))
    except InvalidOperation:
        return None
    return out if out.is_finite() else None
