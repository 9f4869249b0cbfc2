"""The comparison as documents: compare.html (charts inline), compare.md (charts as SVG files).

Rendered from `sim.compare.summarize`'s dict alone, so a compare.json can be rendered
again without re-running anything, and pure: the same summary gives the same bytes. As
the plan report does (`gpufleet.report`), charts are SVG written by hand with the plan
report's drawing helpers: no plotting library, no scripts, nothing fetched, so the HTML
is one file that can be mailed or printed.

Charts: the GPU allocation ratio over time (one line per profile, its first seed); the
CDFs of queue wait and of job completion time (pooled over seeds, log time axis, since
both span seconds to days); each team's share of GPU-hours; lost GPU-hours with their
confidence intervals.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from markupsafe import Markup

from gpufleet.formatting import MISSING, fmt_duration, fmt_label, fmt_num
from gpufleet.report.charts import (
    GRID,
    INK,
    MUTED,
    Scale,
    Svg,
    coord,
    count_compact,
    nice_ticks,
    row_labels,
    x_axis,
)
from gpufleet.report.render import css, html_env, markdown_env
from gpufleet.sim.metrics import PERCENTILES, SCALARS

# One colour per profile, in the order profiles were given (Tableau 10, as the plan report).
PALETTE: Final = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
)
CHART_FILES: Final = {
    "allocation": "compare-allocation.svg",
    "wait_cdf": "compare-wait-cdf.svg",
    "jct_cdf": "compare-jct-cdf.svg",
    "team_shares": "compare-team-shares.svg",
    "lost_gpu_hours": "compare-lost-gpu-hours.svg",
}
# Rows of the summary table and the per-seed table, in reading order; other metrics follow.
HEADLINE: Final = (
    *SCALARS[:4],
    *(f"{m}.{p}" for m in ("wait_s", "jct_s") for p in PERCENTILES),
    "slowdown.mean",
    "slowdown.p95",
    "inference_wait_s.mean",  # inference replicas apart from the headline wait
    "inference_wait_s.p95",
    *SCALARS[4:],
)
PER_SEED: Final = (
    "gpu_allocation_ratio",
    "goodput_ratio",
    "wait_s.p95",
    "jct_s.p95",
    "lost_gpu_hours",
    "jobs_completed",
)
LABELS: Final = {
    "gpu_allocation_ratio": "GPU allocation",
    "busy_utilization": "Busy utilization",
    "goodput_ratio": "Goodput",
    "wait_s.mean": "Wait mean",
    "wait_s.p50": "Wait p50",
    "wait_s.p95": "Wait p95",
    "wait_s.p99": "Wait p99",
    "jct_s.mean": "JCT mean",
    "jct_s.p50": "JCT p50",
    "jct_s.p95": "JCT p95",
    "jct_s.p99": "JCT p99",
    "jain_fairness": "Jain fairness",
    "slo_attainment": "SLO attainment",
    "preemptions": "Preemptions",
    "lost_gpu_hours": "Lost GPU-hours",
    "gang_wait_gpu_hours": "GPU-hours held by partial gangs",
    "in_progress_gpu_hours": "GPU-hours of work in progress at the end",
    "idle_held_gpu_hours": "GPU-hours held beyond requests",
    "fragmented_gpus_mean": "Fragmented GPUs (mean)",
    "jobs_completed": "Jobs completed",
    "jobs_unfinished": "Jobs unfinished",
    "jct_jobs": "Jobs in wait, JCT, slowdown",
    "gpu_hours_completed": "GPU-hours completed",
    "jobs_per_day": "Jobs per day",
    "gpu_hours_per_day": "GPU-hours per day",
    "failures": "Node failures",
    "spot_reclaims": "Spot reclaims",
    "relayout_proposals": "MIG re-layout proposals",
    "relayouts_applied": "MIG re-layouts applied",
    "busy_declared_share": "Busy declared share",
    "duration_s": "Simulated span",
    "makespan_s": "Makespan",
    "gpu_allocation_while_arriving": "GPU allocation while jobs arrive",
    "gpu_allocation_in_window": "GPU allocation in the window",
    "window_from_s": "Window from (after the first arrival)",
    "window_to_s": "Window to",
    "slowdown.mean": "Slowdown mean",
    "slowdown.p50": "Slowdown p50",
    "slowdown.p95": "Slowdown p95",
    "slowdown.p99": "Slowdown p99",
    "inference_wait_s.mean": "Inference wait mean",
    "inference_wait_s.p50": "Inference wait p50",
    "inference_wait_s.p95": "Inference wait p95",
    "inference_wait_s.p99": "Inference wait p99",
}
PERCENT_METRICS: Final = frozenset(
    {
        "gpu_allocation_ratio",
        "gpu_allocation_while_arriving",
        "gpu_allocation_in_window",
        "busy_utilization",
        "busy_declared_share",
        "goodput_ratio",
        "slo_attainment",
    }
)
DASHES: Final = (None, "8 4", "2 3", "12 3 2 3", "4 4")
# Log time axis ticks: (seconds, label).
TIME_TICKS: Final = (
    (1.0, "1 s"),
    (10.0, "10 s"),
    (60.0, "1 min"),
    (600.0, "10 min"),
    (3_600.0, "1 h"),
    (36_000.0, "10 h"),
    (86_400.0, "1 d"),
    (864_000.0, "10 d"),
    (8_640_000.0, "100 d"),
)


# -- numbers for people --------------------------------------------------------------------


def fmt_value(metric: str, value: float | None) -> str:
    """One metric value formatted by what it measures (by its stable name)."""
    if value is None or not math.isfinite(value):
        return MISSING
    if metric in PERCENT_METRICS:
        return f"{value * 100:,.1f}%"
    if metric.endswith("_s") or metric.startswith(("wait_s.", "jct_s.", "inference_wait_s.")):
        return fmt_duration(value)
    if metric == "jain_fairness":
        return f"{value:.3f}"
    if metric.startswith("slowdown."):
        return f"×{value:,.2f}"
    if "gpu_hours" in metric:
        return f"{fmt_num(value)} GPU-h"
    return fmt_num(value)


def fmt_estimate(metric: str, est: Mapping[str, Any]) -> str:
    """'41.2% ± 1.3%': the mean and the half-width of its interval (none for one seed)."""
    mean, low, high = est.get("mean"), est.get("ci_low"), est.get("ci_high")
    text = fmt_value(metric, mean)
    if mean is None or low is None or high is None:
        return text
    return f"{text} ± {fmt_value(metric, (high - low) / 2)}"


def headline_note(summary: Mapping[str, Any]) -> str:
    """Which jobs the wait, JCT and slowdown rows cover, as the reports print it (a
    compare.json from before `headline_jobs` covered every completed job)."""
    jobs = summary.get("headline_jobs", "completed jobs, inference replicas included")
    return (
        f"Wait, JCT and slowdown are over the completed {jobs}. Inference replicas run for "
        "a serving window fixed in advance, so their completion time is that window: their "
        "wait is reported apart (Inference wait), where they completed."
        if "headline_jobs" in summary
        else f"Wait, JCT and slowdown are over all {jobs}."
    )


def metric_label(metric: str) -> str:
    return LABELS.get(metric) or fmt_label(metric.replace(".", "_"))


def metric_order(summary: Mapping[str, Any]) -> list[str]:
    """Headline metrics first, then any other metric the summary has, in its order."""
    present: dict[str, None] = {}
    for per_profile in summary["metrics"].values():
        present.update(dict.fromkeys(per_profile))
    return [m for m in HEADLINE if m in present] + [m for m in present if m not in HEADLINE]


# -- charts --------------------------------------------------------------------------------


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _dash(i: int) -> str | None:
    """Dash pattern of the i-th line: profiles that behave alike draw over each other, and
    dashes keep each one visible (and tell lines apart without colour)."""
    return DASHES[i % len(DASHES)]


def _polyline(svg: Svg, points: Sequence[tuple[float, float]], i: int) -> None:
    dash = _dash(i)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    coords = " ".join(f"{coord(x)},{coord(y)}" for x, y in points)
    svg.parts.append(
        f'<polyline points="{coords}" fill="none" stroke="{_colour(i)}" stroke-width="2"{dashed}/>'
    )


def _legend(svg: Svg, names: Sequence[str], x: float, y: float) -> None:
    for i, name in enumerate(names):
        svg.line(x, y + i * 18, x + 24, y + i * 18, _colour(i), width=2, dash=_dash(i))
        svg.text(x + 30, y + i * 18 + 4, name)


def _log_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """The time ticks covering [low, high], one below and one above."""
    below = [t for t in TIME_TICKS if t[0] <= low] or [TIME_TICKS[0]]
    above = [t for t in TIME_TICKS if t[0] >= high] or [TIME_TICKS[-1]]
    return [t for t in TIME_TICKS if below[-1][0] <= t[0] <= above[0][0]]


def line_chart_svg(
    chart_id: str,
    title: str,
    desc: str,
    series: Mapping[str, Sequence[Sequence[float]]],
    *,
    x_label: str,
    y_label: str,
    x_log_time: bool = False,
    x_scale: float = 1.0,
    y_scale: float = 1.0,
    y_max: float | None = None,
) -> str | None:
    """Lines, one per series (a profile), on linear axes or a log time axis in seconds.

    `x_scale`/`y_scale` divide the data before plotting (seconds to hours, a ratio to
    percent is a scale of 0.01). On a log axis values under 1 s are drawn at 1 s.
    """
    lines = {name: pts for name, pts in series.items() if pts}
    if not lines:
        return None
    names = list(series)
    left, right, top, bottom, width = 70.0, 600.0, 36.0, 276.0, 760.0
    xs_all = [p[0] / x_scale for pts in lines.values() for p in pts]
    ys_all = [p[1] / y_scale for pts in lines.values() for p in pts]
    y_ticks = nice_ticks(0.0, y_max if y_max is not None else max([*ys_all, 0.0]) or 1.0)
    ys = Scale(0.0, y_ticks[-1], bottom, top)
    svg = Svg(chart_id, width, bottom + 56, title, desc)
    svg.text(8, 18, title, bold=True, size=12)
    if x_log_time:
        lowest, highest = min(xs_all), max(xs_all)
        ticks = _log_ticks(max(1.0, lowest), max(1.0, highest))
        lo, hi = math.log10(ticks[0][0]), math.log10(ticks[-1][0])
        span = Scale(lo, hi if hi > lo else lo + 1, left, right)

        def x_of(v: float) -> float:
            return span(math.log10(max(v, 1.0)))

        for value, label in ticks:
            x = x_of(value)
            svg.line(x, top, x, bottom, GRID)
            svg.text(x, bottom + 16, label, anchor="middle")
    else:
        x_ticks = nice_ticks(min([*xs_all, 0.0]), max(xs_all) or 1.0, 6)
        linear = Scale(x_ticks[0], x_ticks[-1], left, right)

        def x_of(v: float) -> float:
            return linear(v)

        for tick in x_ticks:
            x = x_of(tick)
            svg.line(x, top, x, bottom, GRID)
            svg.text(x, bottom + 16, count_compact(tick), anchor="middle")
    for tick in y_ticks:
        y = ys(tick)
        svg.line(left, y, right, y, GRID)
        svg.text(left - 6, y + 4, count_compact(tick), anchor="end")
    svg.line(left, bottom, right, bottom, INK)
    svg.line(left, top, left, bottom, INK)
    svg.text((left + right) / 2, bottom + 38, x_label, anchor="middle", bold=True)
    svg.text(18, (top + bottom) / 2, y_label, anchor="middle", bold=True, rotate=True)
    for i, name in enumerate(names):
        pts = lines.get(name)
        if pts:
            _polyline(svg, [(x_of(p[0] / x_scale), ys(p[1] / y_scale)) for p in pts], i)
    _legend(svg, names, right + 16, top + 8)
    return svg.render()


def _hbars_with_ci(
    chart_id: str,
    title: str,
    desc: str,
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    axis_label: str,
) -> str | None:
    """One bar per profile (its mean) with a whisker over the confidence interval."""
    if not rows:
        return None
    row_h, top, left, width = 30.0, 36.0, 170.0, 700.0
    right = width - 40
    tops = [
        max(v for v in (e.get("ci_high"), e.get("mean")) if v is not None)
        for _, e in rows
        if e.get("mean") is not None
    ]
    ticks = nice_ticks(0.0, max([*tops, 0.0]) or 1.0)
    scale = Scale(0.0, ticks[-1], left, right)
    bottom = top + row_h * len(rows)
    svg = Svg(chart_id, width, bottom + 48, title, desc)
    svg.text(8, 18, title, bold=True, size=12)
    row_labels(svg, [name for name, _ in rows], left - 8, top, row_h)
    x_axis(svg, scale, ticks, top=top, bottom=bottom, label=axis_label, money=False)
    for i, (_, est) in enumerate(rows):
        y = top + i * row_h
        mean = est.get("mean")
        if mean is None:
            svg.text(left + 4, y + row_h / 2 + 4, "n/a", fill=MUTED)
            continue
        svg.rect(left, y + row_h * 0.2, scale(mean) - left, row_h * 0.6, _colour(i))
        low, high = est.get("ci_low"), est.get("ci_high")
        if low is not None and high is not None:
            mid = y + row_h / 2
            svg.line(scale(max(low, 0.0)), mid, scale(high), mid, INK, width=1.5)
            for end in (max(low, 0.0), high):
                svg.line(scale(end), mid - 5, scale(end), mid + 5, INK, width=1.5)
        label = count_compact(mean)
        svg.text(scale(max(high or mean, mean)) + 6, y + row_h / 2 + 4, label)
    return svg.render()


def team_shares_svg(summary: Mapping[str, Any]) -> str | None:
    """Grouped bars: per team, one bar per profile, its mean share of GPU-hours held (%)."""
    shares: Mapping[str, Mapping[str, Mapping[str, Any]]] = summary["team_shares"]
    profiles = list(summary["profiles"])
    teams = sorted({t for per in shares.values() for t in per})
    if not teams:
        return None
    bar_h, gap, top, left, width = 12.0, 10.0, 36.0, 150.0, 760.0
    right = width - 150
    group_h = bar_h * len(profiles) + gap
    ticks = nice_ticks(0.0, 100.0)
    scale = Scale(0.0, ticks[-1], left, right)
    bottom = top + group_h * len(teams)
    svg = Svg(
        "chart-team-shares",
        width,
        max(bottom + 48, top + 18 * len(profiles) + 16),
        "Share of GPU-hours by team (%)",
        "Grouped horizontal bars: for each team, one bar per scheduling profile giving the "
        "team's mean share of the GPU-hours held, in percent.",
    )
    svg.text(8, 18, "Share of GPU-hours by team", bold=True, size=12)
    x_axis(svg, scale, ticks, top=top, bottom=bottom, label="GPU-hours held (%)", money=False)
    for t, team in enumerate(teams):
        y0 = top + t * group_h + gap / 2
        svg.text(left - 8, y0 + bar_h * len(profiles) / 2 + 4, team, anchor="end")
        for i, profile in enumerate(profiles):
            mean = shares.get(profile, {}).get(team, {}).get("mean") or 0.0
            svg.rect(left, y0 + i * bar_h + 1, scale(mean * 100) - left, bar_h - 2, _colour(i))
    for i, name in enumerate(profiles):
        svg.rect(right + 16, top + 2 + i * 18, 14, 10, _colour(i))
        svg.text(right + 36, top + 11 + i * 18, name)
    return svg.render()


def all_charts(summary: Mapping[str, Any]) -> dict[str, str]:
    """The charts the summary has data for, by name (keys of `CHART_FILES`)."""
    plots = summary["plots"]
    alloc = plots["allocation_first_seed"]
    span_h = max((pts[-1][0] for pts in alloc.values() if pts), default=0.0) / 3_600
    in_days = span_h > 72
    built = {
        "allocation": line_chart_svg(
            "chart-allocation",
            "GPU allocation over time (first seed)",
            "One line per scheduling profile: GPUs held by jobs as a percentage of the "
            "cluster's GPUs, sampled over the simulated time of each profile's first seed.",
            alloc,
            x_label=f"Simulated time ({'days' if in_days else 'hours'})",
            y_label="GPUs allocated (%)",
            x_scale=86_400.0 if in_days else 3_600.0,
            y_scale=0.01,
            y_max=100.0,
        ),
        "wait_cdf": line_chart_svg(
            "chart-wait-cdf",
            "Queue wait: cumulative distribution",
            "One line per scheduling profile: the share of completed training, batch and "
            "interactive jobs (percent; not inference replicas) that waited at most the time "
            "on the logarithmic x axis, over all seeds.",
            plots["wait_cdf_s"],
            x_label="Wait, first start − arrival (log scale; under 1 s drawn at 1 s)",
            y_label="Jobs (%)",
            x_log_time=True,
            y_scale=0.01,
            y_max=100.0,
        ),
        "jct_cdf": line_chart_svg(
            "chart-jct-cdf",
            "Job completion time: cumulative distribution",
            "One line per scheduling profile: the share of completed training, batch and "
            "interactive jobs (percent; not inference replicas, which end with their serving "
            "window) that completed within the time on the logarithmic x axis, over all seeds.",
            plots["jct_cdf_s"],
            x_label="Completion time, end − arrival (log scale)",
            y_label="Jobs (%)",
            x_log_time=True,
            y_scale=0.01,
            y_max=100.0,
        ),
        "team_shares": team_shares_svg(summary),
        "lost_gpu_hours": _hbars_with_ci(
            "chart-lost-gpu-hours",
            "Lost GPU-hours (mean, confidence interval)",
            "Horizontal bars, one per scheduling profile: the mean GPU-hours of work lost to "
            "preemption, failures, spot reclaims and restart overhead, with a whisker over "
            "the confidence interval across seeds.",
            [(p, summary["metrics"][p].get("lost_gpu_hours", {})) for p in summary["profiles"]],
            axis_label="GPU-hours lost",
        ),
    }
    return {name: svg for name, svg in built.items() if svg is not None}


# -- documents -----------------------------------------------------------------------------


def _context(summary: Mapping[str, Any], html: bool) -> dict[str, Any]:
    charts = all_charts(summary)
    metrics = metric_order(summary)
    profiles = list(summary["profiles"])
    per_metric = summary["metrics"]
    table = [
        (
            metric_label(m),
            [fmt_estimate(m, per_metric[p].get(m, {})) for p in profiles],
        )
        for m in metrics
    ]
    per_seed = [
        (
            p,
            seed_index,
            [
                fmt_value(m, _seed_value(per_metric[p].get(m, {}), seed_index))
                for m in PER_SEED
                if m in metrics
            ],
        )
        for p in profiles
        for seed_index in range(len(summary["seeds"]))
    ]
    return {
        "s": summary,
        "headline_note": headline_note(summary),
        "profiles": profiles,
        "table": table,
        "per_seed_headers": [metric_label(m) for m in PER_SEED if m in metrics],
        "per_seed": per_seed,
        "confidence_pct": f"{summary['confidence'] * 100:g}",
        "charts": {k: Markup(v) for k, v in charts.items()} if html else {},
        "chart_files": {k: CHART_FILES[k] for k in charts},
        "css": Markup(css()) if html else "",
    }


def _seed_value(est: Mapping[str, Any], index: int) -> float | None:
    values = est.get("values") or []
    value = values[index] if index < len(values) else None
    return None if value is None else float(value)


def render_html(summary: Mapping[str, Any]) -> str:
    return html_env().get_template("compare.html.j2").render(_context(summary, html=True))


def render_markdown(summary: Mapping[str, Any]) -> str:
    return markdown_env().get_template("compare.md.j2").render(_context(summary, html=False))


def render_json(summary: Mapping[str, Any]) -> str:
    """compare.json: the summary as is (NaN refused: the JSON must load anywhere)."""
    return json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def compare_files(summary: Mapping[str, Any]) -> dict[str, bytes]:
    """Every file of the comparison by name: compare.json, .html, .md and the charts the
    Markdown links. Rendered in memory, so a failure writes nothing."""
    renderers: dict[str, Callable[[Mapping[str, Any]], str]] = {
        "compare.json": render_json,
        "compare.md": render_markdown,
        "compare.html": render_html,
    }
    files = {name: render(summary).encode("utf-8") for name, render in renderers.items()}
    for key, svg in all_charts(summary).items():
        files[CHART_FILES[key]] = (svg + "\n").encode("utf-8")
    return files
