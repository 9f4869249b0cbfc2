"""Charts for the plan report as inline SVG, drawn from the plan's numbers.

The report must be one self-contained file that WeasyPrint can also print, so
charts are plain SVG strings (no JavaScript, no fonts or images fetched, no
matplotlib). Each chart has a `<title>`, a `<desc>` and axis labels with units;
every piece of text is escaped. A chart whose data is missing is `None` and the
report leaves it out.

The readings of the plan that charts and tables must agree on live here too:
which totals are compared (`cost_options`), the tornado rows in either spelling
(`sensitivity_rows`) and how a snake_case key reads (`fmt_label`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape

from gpufleet.formatting import fmt_label
from gpufleet.plan.cost.tco import Asset
from gpufleet.plan.model import CostBreakdown, Plan
from gpufleet.plan.summary import (
    alternative_gpus,
    headline_cost,
    headline_gpus,
    workloads_cost_usd,
)

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
INK = "#1f2933"
GRID = "#d9dee3"
MUTED = "#6b7785"
BAR = "#4c78a8"
HIGHLIGHT = "#f58518"
LOW = "#54a24b"
HIGH = "#e45756"
CLOUD_LINE = "#4c78a8"
ONPREM_LINE = "#f58518"


# -- numbers -----------------------------------------------------------------


def money_compact(value: float) -> str:
    """$1.2M style for axis ticks and bar labels, where space is short."""
    sign = "-" if value < 0 else ""
    v = abs(value)
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if v >= limit:
            scaled = v / limit
            text = f"{scaled:.1f}".removesuffix(".0") if scaled < 100 else f"{scaled:.0f}"
            return f"{sign}${text}{suffix}"
    return f"{sign}${v:,.0f}"


def count_compact(value: float) -> str:
    if abs(value - round(value)) < 1e-9:
        return f"{round(value):,}"
    return f"{value:,.1f}"


def nice_ticks(low: float, high: float, target: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high < low:
        low, high = high, low
    if high == low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude * 10
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if factor * magnitude >= raw:
            step = factor * magnitude
            break
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    return [i * step for i in range(first, last + 1)]


# -- drawing -----------------------------------------------------------------


def coord(value: float) -> str:
    """Coordinates with at most one decimal: small, stable SVG text."""
    text = f"{value:.1f}"
    return text.removesuffix(".0") if text != "-0.0" else "0"


class Svg:
    def __init__(self, chart_id: str, width: float, height: float, title: str, desc: str) -> None:
        self.chart_id = chart_id
        self.width = width
        self.height = height
        self.title = title
        self.desc = desc
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str) -> None:
        self.parts.append(
            f'<rect x="{coord(x)}" y="{coord(y)}" width="{coord(max(w, 0.0))}" '
            f'height="{coord(max(h, 0.0))}" fill="{fill}"/>'
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        stroke: str,
        *,
        width: float = 1.0,
        dash: str | None = None,
    ) -> None:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<line x1="{coord(x1)}" y1="{coord(y1)}" x2="{coord(x2)}" y2="{coord(y2)}" '
            f'stroke="{stroke}" stroke-width="{coord(width)}"{dashed}/>'
        )

    def polyline(self, points: Sequence[tuple[float, float]], stroke: str) -> None:
        coords = " ".join(f"{coord(x)},{coord(y)}" for x, y in points)
        self.parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{stroke}" stroke-width="2"/>'
        )

    def circle(self, x: float, y: float, r: float, fill: str) -> None:
        self.parts.append(f'<circle cx="{coord(x)}" cy="{coord(y)}" r="{coord(r)}" fill="{fill}"/>')

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        anchor: str = "start",
        size: float = 11,
        fill: str = INK,
        bold: bool = False,
        rotate: bool = False,
    ) -> None:
        weight = ' font-weight="bold"' if bold else ""
        turn = f' transform="rotate(-90 {coord(x)} {coord(y)})"' if rotate else ""
        self.parts.append(
            f'<text x="{coord(x)}" y="{coord(y)}" text-anchor="{anchor}" font-size="{coord(size)}" '
            f'fill="{fill}"{weight}{turn}>{escape(content, quote=False)}</text>'
        )

    def render(self) -> str:
        title_id = f"{self.chart_id}-title"
        desc_id = f"{self.chart_id}-desc"
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{self.chart_id}" '
            f'role="img" aria-labelledby="{title_id} {desc_id}" '
            f'width="{coord(self.width)}" height="{coord(self.height)}" '
            f'viewBox="0 0 {coord(self.width)} {coord(self.height)}" '
            f'font-family="{FONT}" font-size="11">'
            f'<title id="{title_id}">{escape(self.title, quote=False)}</title>'
            f'<desc id="{desc_id}">{escape(self.desc, quote=False)}</desc>'
        )
        return head + "".join(self.parts) + "</svg>"


@dataclass(frozen=True)
class Scale:
    """Maps a data interval onto a pixel interval (linear)."""

    d0: float
    d1: float
    p0: float
    p1: float

    def __call__(self, value: float) -> float:
        span = self.d1 - self.d0 or 1.0
        return self.p0 + (value - self.d0) / span * (self.p1 - self.p0)


def x_axis(
    svg: Svg,
    scale: Scale,
    ticks: Sequence[float],
    *,
    top: float,
    bottom: float,
    label: str,
    money: bool = True,
) -> None:
    """Vertical grid lines, tick labels under the plot and the axis title."""
    for tick in ticks:
        x = scale(tick)
        svg.line(x, top, x, bottom, GRID)
        svg.text(
            x, bottom + 14, money_compact(tick) if money else count_compact(tick), anchor="middle"
        )
    svg.line(scale.p0, bottom, scale.p1, bottom, INK)
    svg.text((scale.p0 + scale.p1) / 2, bottom + 32, label, anchor="middle", bold=True)


def _hbar_panel(
    svg: Svg,
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    left: float,
    right: float,
    top: float,
    row_h: float,
    axis_label: str,
    money: bool,
    highlight: int | None = None,
) -> None:
    """Horizontal bars from zero, one row per label; `None` prints n/a."""
    present = [v for v in values if v is not None]
    ticks = nice_ticks(0.0, max([*present, 0.0]) or 1.0)
    scale = Scale(0.0, ticks[-1], left, right)
    bottom = top + row_h * len(labels)
    x_axis(svg, scale, ticks, top=top, bottom=bottom, label=axis_label, money=money)
    for i, value in enumerate(values):
        y = top + i * row_h
        if value is None:
            svg.text(left + 4, y + row_h / 2 + 4, "n/a", fill=MUTED)
            continue
        width = scale(value) - left
        svg.rect(left, y + row_h * 0.2, width, row_h * 0.6, HIGHLIGHT if i == highlight else BAR)
        shown = money_compact(value) if money else count_compact(value)
        inside = width > 60
        svg.text(
            left + width + (-4 if inside else 4),
            y + row_h / 2 + 4,
            shown,
            anchor="end" if inside else "start",
            fill="#ffffff" if inside else INK,
        )


def row_labels(svg: Svg, labels: Sequence[str], x: float, top: float, row_h: float) -> None:
    for i, label in enumerate(labels):
        svg.text(x, top + i * row_h + row_h / 2 + 4, label, anchor="end")


# -- the four charts ---------------------------------------------------------


def reference_total_usd(plan: Plan) -> float | None:
    """The total the recommendation costs: on-prem TCO or the cloud purchase mix."""
    cost = plan.cost
    if plan.recommendation.deployment == "on-prem":
        return cost.tco.get("total")
    for candidate in (cost.mix.get("total_usd"), cost.reserved, cost.on_demand):
        if candidate is not None:
            return candidate
    return None


def cost_options(cost: CostBreakdown) -> list[tuple[str, float]]:
    """(label, total USD) for each way to pay that the plan priced."""
    rows: list[tuple[str, float | None]] = [
        ("On-demand", cost.on_demand),
        ("Reserved / committed", cost.reserved),
        ("Spot", cost.spot),
        ("Optimised mix", cost.mix.get("total_usd")),
        ("On-prem TCO", cost.tco.get("total")),
    ]
    return [(label, value) for label, value in rows if value is not None]


def cost_comparison_svg(plan: Plan) -> str | None:
    options = cost_options(plan.cost)
    if not options:
        return None
    labels = [label for label, _ in options]
    recommended = "On-prem TCO" if plan.recommendation.deployment == "on-prem" else "Optimised mix"
    highlight = labels.index(recommended) if recommended in labels else None
    row_h, top, left, width = 30.0, 36.0, 150.0, 640.0
    height = top + row_h * len(options) + 48
    svg = Svg(
        "chart-cost",
        width,
        height,
        "Total cost by way of paying (USD)",
        "Horizontal bars: total cost in US dollars for on-demand, reserved, spot, the "
        "optimised purchase mix and on-prem total cost of ownership; the recommended "
        "deployment is highlighted.",
    )
    svg.text(8, 18, "Total cost by way of paying", bold=True, size=12)
    row_labels(svg, labels, left - 8, top, row_h)
    _hbar_panel(
        svg,
        labels,
        [value for _, value in options],
        left=left,
        right=width - 30,
        top=top,
        row_h=row_h,
        axis_label="Total cost (USD)",
        money=True,
        highlight=highlight,
    )
    return svg.render()


# The plan model documents tornado rows as factor/low/high; the cost module writes
# low_usd/high_usd/base_usd with low_label/high_label. Both spellings are read.
_LOW_KEYS = ("low_usd", "low")
_HIGH_KEYS = ("high_usd", "high")
_BASE_KEYS = ("base_usd", "base")
_KNOWN_SENSITIVITY_KEYS = frozenset(
    {"factor", "low_label", "high_label", "swing_usd", "swing"}
    | set(_LOW_KEYS + _HIGH_KEYS + _BASE_KEYS)
)


@dataclass(frozen=True)
class SensitivityRow:
    """One tornado row: the total cost with one factor at its low and at its high end."""

    factor: str
    low_usd: float
    high_usd: float
    low_label: str | None
    high_label: str | None
    extra: tuple[tuple[str, float | str], ...]

    @property
    def name(self) -> str:
        return fmt_label(self.factor, strip_unit=False)

    @property
    def swing_usd(self) -> float:
        return abs(self.high_usd - self.low_usd)


def _first_number(row: Mapping[str, float | str], keys: Sequence[str]) -> float | None:
    for key in keys:
        value = row.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _text(row: Mapping[str, float | str], key: str) -> str | None:
    value = row.get(key)
    return None if value is None else str(value)


def sensitivity_rows(cost: CostBreakdown, *, alternative: bool = False) -> list[SensitivityRow]:
    """The rows with both totals, widest swing first (stable for equal swings); with
    `alternative`, those of the deployment not recommended."""
    rows: list[SensitivityRow] = []
    for row in cost.sensitivity_alternative if alternative else cost.sensitivity:
        low, high = _first_number(row, _LOW_KEYS), _first_number(row, _HIGH_KEYS)
        if low is None or high is None:
            continue
        extra = tuple((k, v) for k, v in row.items() if k not in _KNOWN_SENSITIVITY_KEYS)
        rows.append(
            SensitivityRow(
                factor=str(row.get("factor", "?")),
                low_usd=low,
                high_usd=high,
                low_label=_text(row, "low_label"),
                high_label=_text(row, "high_label"),
                extra=extra,
            )
        )
    return sorted(rows, key=lambda r: -r.swing_usd)


def sensitivity_base_usd(plan: Plan) -> float | None:
    """The total the tornado swings around: as the rows state it, else the recommendation's."""
    for row in plan.cost.sensitivity:
        base = _first_number(row, _BASE_KEYS)
        if base is not None:
            return base
    return reference_total_usd(plan)


def tornado_svg(plan: Plan) -> str | None:
    rows = sensitivity_rows(plan.cost)
    if not rows:
        return None
    base = sensitivity_base_usd(plan)
    values = [v for row in rows for v in (row.low_usd, row.high_usd)]
    if base is not None:
        values.append(base)
    ticks = nice_ticks(min(values), max(values))
    row_h, top, left, width = 30.0, 66.0, 150.0, 640.0
    height = top + row_h * len(rows) + 48
    scale = Scale(ticks[0], ticks[-1], left, width - 30)
    svg = Svg(
        "chart-tornado",
        width,
        height,
        "Sensitivity of the total cost (tornado, USD)",
        "For each factor, a bar from the base total to the total at the factor's low end "
        "(green) and at its high end (red); the widest swing is on top.",
    )
    svg.text(8, 18, "Sensitivity of the total cost", bold=True, size=12)
    svg.rect(left, 28, 10, 10, LOW)
    svg.text(left + 14, 37, "factor at its low end")
    svg.rect(left + 150, 28, 10, 10, HIGH)
    svg.text(left + 164, 37, "factor at its high end")
    bottom = top + row_h * len(rows)
    x_axis(svg, scale, ticks, top=top, bottom=bottom, label="Total cost (USD)")
    row_labels(svg, [row.name for row in rows], left - 8, top, row_h)
    for i, row in enumerate(rows):
        low, high = row.low_usd, row.high_usd
        y = top + i * row_h + row_h * 0.2
        h = row_h * 0.6
        if base is None:
            a, b = sorted((scale(low), scale(high)))
            svg.rect(a, y, b - a, h, BAR)
            continue
        for value, colour in ((low, LOW), (high, HIGH)):
            a, b = sorted((scale(base), scale(value)))
            svg.rect(a, y, b - a, h, colour)
    if base is not None:
        x = scale(base)
        svg.line(x, top - 4, x, bottom, INK, width=1.5)
        svg.text(x, top - 8, f"base {money_compact(base)}", anchor="middle", fill=MUTED, size=10)
    return svg.render()


@dataclass(frozen=True)
class OptionCost:
    """An option's row in the alternatives table and chart: the figure it was ranked on
    (the headline cost of the plan it would give) and its work at on-demand list prices."""

    plan_usd: float | None
    plan_what: str  # what the plan cost is, "" when the same as the recommendation's
    list_usd: float | None


def option_costs(plan: Plan) -> tuple[str, list[OptionCost]]:
    """(what the recommendation's plan cost is, a row for it and each alternative).

    The recommendation's plan cost is its headline (`summary.headline_cost`), each
    alternative's the one the planner ranked it on, so the table and the chart show the
    order the plan chose in. A plan.json from when the list price ranked has no plan cost
    for its alternatives: their cells are empty and the chart falls back to list prices."""
    base, what = headline_cost(plan.recommendation, plan.cost)
    rows = [OptionCost(base, "", workloads_cost_usd(plan.recommendation))]
    for a in plan.alternatives:
        other = "" if a.plan_cost_usd is None or a.plan_cost_what == what else a.plan_cost_what
        rows.append(OptionCost(a.plan_cost_usd, other, a.cost_usd))
    return what, rows


def alternatives_svg(plan: Plan) -> str | None:
    if not plan.alternatives:
        return None
    labels = [f"{plan.recommendation.accelerator} (recommended)"] + [
        a.accelerator for a in plan.alternatives
    ]
    # the GPUs each option's headline pays for, as the table's GPUs column counts them
    rec = plan.recommendation
    gpus: list[float | None] = [
        float(headline_gpus(rec, plan.design, plan.demand_curve, plan.cost.mix).priced)
    ]
    gpus += [float(alternative_gpus(a).priced) for a in plan.alternatives]
    _, rows = option_costs(plan)
    ranked = any(r.plan_usd is not None for r in rows[1:])
    costs: list[float | None] = [r.plan_usd if ranked else r.list_usd for r in rows]
    cost_name = "Plan cost" if ranked else "On-demand cost"
    row_h, top, left, width = 30.0, 52.0, 210.0, 760.0
    mid = left + (width - left) / 2
    height = top + row_h * len(labels) + 48
    svg = Svg(
        "chart-alternatives",
        width,
        height,
        f"Recommendation and alternatives: GPUs (count) and {cost_name.lower()} (USD)",
        "Two bar panels per option: the GPUs its cost pays for and "
        + (
            "the headline cost in US dollars of the plan each option would give (what the "
            "plan ranks them on)"
            if ranked
            else "the on-demand cost in US dollars"
        )
        + ", for the recommendation and each alternative.",
    )
    svg.text(8, 18, "Recommendation and alternatives", bold=True, size=12)
    svg.text(left, 40, "GPUs", bold=True)
    svg.text(mid + 20, 40, cost_name, bold=True)
    row_labels(svg, labels, left - 8, top, row_h)
    for values, x0, x1, axis_label, money in (
        (gpus, left, mid - 20, "GPUs (count)", False),
        (costs, mid + 20, width - 30, f"{cost_name} (USD)", True),
    ):
        _hbar_panel(
            svg,
            labels,
            values,
            left=x0,
            right=x1,
            top=top,
            row_h=row_h,
            axis_label=axis_label,
            money=money,
            highlight=0,
        )
    return svg.render()


@dataclass(frozen=True)
class BreakEven:
    """Cumulative-cost lines: on-prem = capex + opex·t (+ each purchase again at the end of
    its life, `purchases`), cloud = rate·t, equal at `months`."""

    months: float
    capex_usd: float
    onprem_usd_per_month: float
    cloud_usd_per_month: float
    purchases: tuple[tuple[float, float], ...] = ()  # (month, USD) bought again after day 0

    def onprem_points(self, horizon_months: float) -> list[tuple[float, float]]:
        """The owning line to `horizon_months`: a straight run between purchases and a step
        up at each (the hardware bought again after its depreciation life, as the TCO and
        the payback count it; the chart drew one straight line through them)."""
        points = [(0.0, self.capex_usd)]
        spent = self.capex_usd
        for month, usd in self.purchases:
            if month >= horizon_months:
                break
            points.append((month, spent + self.onprem_usd_per_month * month))
            spent += usd
            points.append((month, spent + self.onprem_usd_per_month * month))
        points.append((horizon_months, spent + self.onprem_usd_per_month * horizon_months))
        return points


def _purchases(tco: Mapping[str, float], limit_months: float) -> tuple[tuple[float, float], ...]:
    """(month, USD) of every purchase after day 0 within `limit_months`: the hardware every
    depreciation life, the facility build every facility life (older plan.json files lack
    the lives: none)."""
    capex, facility = tco.get("capex"), tco.get("capex_facility", 0.0)
    out: list[tuple[float, float]] = []
    for life, usd in (
        (tco.get("depreciation_years"), None if capex is None else capex - facility),
        (tco.get("facility_life_years"), facility),
    ):
        if not life or not usd or life <= 0:
            continue
        again = Asset(usd, life).purchase_years(limit_months / 12.0)[1:]  # the TCO's schedule
        out += [(years * 12.0, usd) for years in again]
    return tuple(sorted(out))


def break_even_lines(cost: CostBreakdown) -> BreakEven | None:
    """The cloud rate is the one the break-even implies: capex / months + on-prem opex (the
    payback comes before any replacement purchase, so only the first capex is in it)."""
    months = cost.break_even_months
    capex = cost.tco.get("capex")
    opex_year = cost.tco.get("opex_per_year")
    if months is None or capex is None or opex_year is None or months <= 0:
        return None
    opex_month = opex_year / 12
    horizon = _chart_horizon(months)
    return BreakEven(
        months, capex, opex_month, capex / months + opex_month, _purchases(cost.tco, horizon)
    )


def _chart_horizon(months: float) -> float:
    """The break-even chart's last month: twice the payback, on a round tick, at least a year."""
    horizon = max(12.0, nice_ticks(0.0, months * 2)[-1])
    return nice_ticks(0.0, horizon, 6)[-1]


def _grid(
    svg: Svg,
    xs: Scale,
    ys: Scale,
    x_ticks: Sequence[float],
    y_ticks: Sequence[float],
    *,
    labels: tuple[str, str],
    y_text: Callable[[float], str],
) -> None:
    """Gridlines, ticks, both axes and their labels of a line chart on `xs` × `ys`."""
    left, right = xs.p0, xs.p1
    bottom, top = ys.p0, ys.p1
    for tick in y_ticks:
        y = ys(tick)
        svg.line(left, y, right, y, GRID)
        svg.text(left - 6, y + 4, y_text(tick), anchor="end")
    for tick in x_ticks:
        x = xs(tick)
        svg.line(x, bottom, x, bottom + 4, INK)
        svg.text(x, bottom + 16, count_compact(tick), anchor="middle")
    svg.line(left, bottom, right, bottom, INK)
    svg.line(left, top, left, bottom, INK)
    svg.text((left + right) / 2, bottom + 36, labels[0], anchor="middle", bold=True)
    svg.text(18, (top + bottom) / 2, labels[1], anchor="middle", bold=True, rotate=True)


def _legend(svg: Svg, right: float, *entries: tuple[str, str]) -> None:
    """A line legend to the right of the plot: (stroke, label) per entry, top down."""
    for i, (stroke, label) in enumerate(entries):
        y = 60 + 20 * i
        svg.line(right + 14, y, right + 34, y, stroke, width=2)
        svg.text(right + 40, y + 4, label)


def break_even_svg(plan: Plan) -> str | None:
    lines = break_even_lines(plan.cost)
    if lines is None:
        return None
    horizon = _chart_horizon(lines.months)
    x_ticks = nice_ticks(0.0, horizon, 6)
    end_cloud = lines.cloud_usd_per_month * horizon
    onprem = lines.onprem_points(horizon)
    end_onprem = onprem[-1][1]
    y_ticks = nice_ticks(0.0, max(end_cloud, end_onprem))
    left, right, top, bottom = 90.0, 610.0, 40.0, 300.0
    xs = Scale(0.0, horizon, left, right)
    ys = Scale(0.0, y_ticks[-1], bottom, top)
    svg = Svg(
        "chart-break-even",
        760,
        360,
        "Break-even: cumulative cloud vs on-prem cost (USD over months)",
        "Two lines of cumulative cost in US dollars over months: renting in the cloud and "
        "owning on-prem (capex then opex"
        + (", and the hardware bought again at the end of its life" if len(onprem) > 2 else "")
        + f"); they cross at {lines.months:.1f} months.",
    )
    svg.text(8, 18, "Cumulative cost: renting vs owning", bold=True, size=12)
    _grid(
        svg,
        xs,
        ys,
        x_ticks,
        y_ticks,
        labels=("Months", "Cumulative cost (USD)"),
        y_text=money_compact,
    )
    svg.polyline([(xs(0), ys(0)), (xs(horizon), ys(end_cloud))], CLOUD_LINE)
    svg.polyline([(xs(m), ys(usd)) for m, usd in onprem], ONPREM_LINE)
    cross_x = xs(lines.months)
    cross_y = ys(lines.cloud_usd_per_month * lines.months)
    svg.line(cross_x, cross_y, cross_x, bottom, MUTED, dash="4 3")
    svg.circle(cross_x, cross_y, 4, INK)
    svg.text(cross_x + 8, cross_y + 18, f"break-even {lines.months:.1f} months")
    _legend(svg, right, (CLOUD_LINE, "cloud"), (ONPREM_LINE, "on-prem"))
    return svg.render()


def demand_svg(plan: Plan) -> str | None:
    """The plan's demand curve (each day's busiest hour) against the owned fleet."""
    curve = plan.demand_curve
    if curve is None or not curve.daily_max_gpus:
        return None
    days = len(curve.daily_max_gpus)
    x_ticks = nice_ticks(0.0, float(days), 6)
    y_ticks = nice_ticks(0.0, max(*curve.daily_max_gpus, float(curve.fleet_gpus)))
    left, right, top, bottom = 70.0, 610.0, 40.0, 280.0
    xs = Scale(0.0, x_ticks[-1], left, right)
    ys = Scale(0.0, y_ticks[-1], bottom, top)
    svg = Svg(
        "chart-demand",
        760,
        340,
        "GPU demand over the horizon against the owned fleet (GPUs over days)",
        f"A line of the GPUs the plan needs at each day's busiest hour over {days} days, and "
        f"a flat line at the owned fleet of {curve.fleet_gpus:,} GPUs ({curve.policy}); demand "
        "above the fleet is rented.",
    )
    svg.text(8, 18, "GPU demand against the owned fleet", bold=True, size=12)
    _grid(
        svg, xs, ys, x_ticks, y_ticks, labels=("Day of the horizon", "GPUs"), y_text=count_compact
    )
    points: list[tuple[float, float]] = []
    for day, gpus in enumerate(curve.daily_max_gpus):  # steps: a day is flat at its peak
        points += [(xs(day), ys(gpus)), (xs(day + 1), ys(gpus))]
    svg.polyline(points, CLOUD_LINE)
    fleet_y = ys(curve.fleet_gpus)
    svg.line(left, fleet_y, right, fleet_y, ONPREM_LINE, width=2)
    _legend(svg, right, (CLOUD_LINE, "demand"), (ONPREM_LINE, "owned fleet"))
    return svg.render()


CHART_NAMES = ("cost", "tornado", "alternatives", "break_even", "demand")


def all_charts(plan: Plan) -> dict[str, str]:
    """The charts this plan has data for, by name."""
    built = {
        "cost": cost_comparison_svg(plan),
        "tornado": tornado_svg(plan),
        "alternatives": alternatives_svg(plan),
        "break_even": break_even_svg(plan),
        "demand": demand_svg(plan),
    }
    return {name: svg for name, svg in built.items() if svg is not None}
