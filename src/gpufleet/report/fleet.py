"""Render a multi-team plan (`plan.fleet_model.FleetPlan`) as plan.json/.md/.html/.pdf.

Pure, like the single-workload report (`report.render`): the same plan gives the same
bytes. The tables are worded once here (`_context`) and laid out by two templates, so
Markdown and HTML say the same thing. Charts are hand-written SVG with the simulator
report's line chart (`report.comparison.line_chart_svg`, built on `report.charts`): per team its
p50 and p95 wait against cluster size with the target drawn flat, and utilisation
against cluster size per scheduling profile. HTML is one self-contained file; the PDF is
WeasyPrint printing it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from markupsafe import Markup

from gpufleet.formatting import MISSING, fmt_count, fmt_duration, fmt_num, fmt_pct, fmt_usd
from gpufleet.plan.fleet_model import FleetPlan, Interval, SearchResult, SizePoint
from gpufleet.report.comparison import line_chart_svg
from gpufleet.report.render import (
    DERIVED_LEGEND,
    DERIVED_MARK,
    css,
    html_env,
    markdown_env,
    pdf_available,
    write_files,
)

HOUR_S = 3_600.0
WAIT_CLIP_FACTOR = 4.0  # the wait charts stop at this many times the team's target


def _interval(i: Interval | None, fmt: Any = fmt_duration) -> str:
    if i is None or i.mean is None:
        return MISSING
    if i.low is None or i.high is None:
        return str(fmt(i.mean))
    return f"{fmt(i.mean)} [{fmt(i.low)}, {fmt(i.high)}]"


def _pct_interval(i: Interval | None) -> str:
    return _interval(i, fmt_pct)


def _rec_search(plan: FleetPlan) -> SearchResult | None:
    rec = plan.recommendation
    if rec is None:
        return None
    return next(
        (
            c
            for c in plan.candidates
            if c.label == rec.label and c.profile == rec.profile and c.arrival_scale == 1.0
        ),
        None,
    )


def _size_text(c: SearchResult) -> str:
    if c.gpus is None:
        return MISSING
    text = f"{c.gpus:,} GPUs ({c.nodes} nodes × {c.gpus_per_node}"
    if c.service_accelerator is not None:
        text += f" + {c.service_gpus:,} {c.service_accelerator} for the services"
    return text + ")"


def _point(search: SearchResult | None, nodes: int | None) -> SizePoint | None:
    if search is None or nodes is None:
        return None
    return next((p for p in search.points if p.nodes == nodes), None)


# -- charts --------------------------------------------------------------------------------


def wait_chart(search: SearchResult, team: str, index: int) -> str | None:
    """p50 and p95 (means over seeds), the p95's upper bound against GPUs, and the target
    as a flat line."""
    rows = []
    target: float | None = None
    for p in search.points:
        t = next((t for t in p.teams if t.team == team), None)
        if t is None or t.wait_p95_s is None or t.wait_p95_s.mean is None:
            continue
        target = t.wait_target_s
        upper = t.wait_p95_s.high if t.wait_p95_s.high is not None else t.wait_p95_s.mean
        p50 = (t.wait_p50_s or 0.0) / HOUR_S
        rows.append((float(p.gpus), t.wait_p95_s.mean / HOUR_S, upper / HOUR_S, p50))
    if not rows:
        return None
    top = (target or max(r[2] for r in rows) * HOUR_S) * WAIT_CLIP_FACTOR / HOUR_S
    series: dict[str, list[list[float]]] = {
        "p50, mean": [[g, min(p50, top)] for g, _, _, p50 in rows],
        "p95, mean": [[g, min(m, top)] for g, m, _, _ in rows],
        "p95, upper bound": [[g, min(u, top)] for g, _, u, _ in rows],
    }
    if target is not None:
        xs = [r[0] for r in rows]
        series["target"] = [[min(xs), target / HOUR_S], [max(xs), target / HOUR_S]]
    return line_chart_svg(
        f"chart-wait-{index}",
        f"{team}: queue wait vs cluster size",
        f"Lines against the cluster's GPU count for team {team}: the means over seeds of its "
        "median and 95th-percentile queue wait, the upper end of the p95 mean's 95 % "
        "confidence interval, "
        f"and its target; values above {WAIT_CLIP_FACTOR:g} × the target are drawn at that "
        "height.",
        series,
        x_label="Cluster size (GPUs)",
        y_label="Queue wait (hours)",
        y_max=top,
    )


def utilisation_chart(plan: FleetPlan) -> str | None:
    rec = plan.recommendation
    if rec is None:
        return None
    series: dict[str, list[list[float]]] = {}
    for c in plan.candidates:
        if c.label != rec.label or c.arrival_scale != 1.0 or not c.points:
            continue
        series[c.profile] = [[float(p.gpus), (p.allocation.mean or 0.0) * 100] for p in c.points]
    return line_chart_svg(
        "chart-utilisation",
        f"GPU allocation vs cluster size ({rec.label})",
        "One line per scheduling profile: the GPUs held by jobs as a percentage of the "
        "cluster's GPUs over the measured window, mean over seeds, against the cluster's GPU "
        "count.",
        series,
        x_label="Cluster size (GPUs)",
        y_label="GPUs allocated (%)",
        y_max=100.0,
    )


def all_charts(plan: FleetPlan) -> dict[str, str]:
    search = _rec_search(plan)
    out: dict[str, str] = {}
    if search is not None:
        for i, t in enumerate(plan.teams):
            svg = wait_chart(search, t.team, i)
            if svg is not None:
                out[f"wait:{t.team}"] = svg
    util = utilisation_chart(plan)
    if util is not None:
        out["utilisation"] = util
    return out


# -- tables --------------------------------------------------------------------------------


def _dur(s: float | None) -> str:
    return fmt_duration(s)


def _context(plan: FleetPlan, html: bool) -> dict[str, Any]:
    search = _rec_search(plan)
    rec = plan.recommendation
    answer = _point(search, rec.nodes if rec else None)
    marker: str | Markup = (
        Markup('<span class="derived" title="derived by gpufleet">†</span>')
        if html
        else DERIVED_MARK
    )
    seeds = plan.method.get("seeds", [])
    n_seeds = len(seeds) if isinstance(seeds, list) else 0
    period = cost_period(plan)
    candidates = [
        {
            "accelerator": c.label,
            "status": c.status,
            "size": _size_text(c),
            "cost": MISSING if c.cost is None else fmt_usd(c.cost.total_usd),
            "deployment": MISSING if c.cost is None else c.cost.deployment,
            "binding": ", ".join(c.binding) or MISSING,
            "searched": ", ".join(str(n) for n in c.searched_nodes) or MISSING,
            "problems": "; ".join(c.problems),
        }
        for c in plan.candidates
        if c.arrival_scale == 1.0 and c.profile in ("", plan.method.get("profile"))
    ]
    team_names = [t.team for t in plan.teams]
    sizes = []
    if search is not None:
        for p in search.points:
            by_team = {t.team: t for t in p.teams}
            sizes.append(
                {
                    "gpus": f"{p.gpus:,}",
                    "nodes": p.nodes,
                    "passed": "yes" if p.passed else "no",
                    "allocation": _pct_interval(p.allocation),
                    "cells": [
                        _interval(by_team[n].wait_p95_s) if n in by_team else MISSING
                        for n in team_names
                    ],
                }
            )
    answer_rows = []
    if answer is not None:
        for t in answer.teams:
            answer_rows.append(
                {
                    "team": t.team,
                    "wait": _interval(t.wait_p95_s),
                    "wait_target": _dur(t.wait_target_s),
                    "long": f"{_dur(t.long_run_wait_p95_s)} ({t.long_runs} runs)"
                    if t.long_runs
                    else MISSING,
                    "long_target": _dur(t.long_run_target_s),
                    "slo": _pct_interval(t.slo_attainment),
                    "slo_target": MISSING if t.slo_target is None else fmt_pct(t.slo_target),
                    "held": fmt_num(t.held_gpus_mean),
                    "passed": "yes" if t.passed else "no",
                    "reasons": "; ".join(t.reasons),
                }
            )
    services = [
        {
            "team": s.team,
            "service": s.service,
            "model": s.model,
            "rate": f"{s.request_rate:g} req/s",
            "how": s.how,
            "gpus": fmt_num(s.gpu_equivalent),
            "ttft": f"{fmt_num(s.ttft_ms)} ms",
            "tpot": f"{fmt_num(s.tpot_ms)} ms",
        }
        for s in (search.services if search is not None else [])
    ]
    quotas = plan.quotas
    quota_rows = (
        [
            {
                "team": q.team,
                "guaranteed": fmt_count(q.guaranteed_gpus)
                + (
                    " ("
                    + ", ".join(f"{n:,} {a}" for a, n in q.guaranteed_by_accelerator.items())
                    + ")"
                    if q.guaranteed_by_accelerator
                    else ""
                ),
                "burst": fmt_count(q.burst_limit_gpus),
                "mean": fmt_num(q.mean_gpus_held),
                "p99": fmt_num(q.p99_gpus_held),
                "inference": fmt_num(q.inference_peak_gpus),
            }
            for q in quotas.teams
        ]
        if quotas
        else []
    )
    engine_rows = []
    if quotas is not None and plan.recommendation is not None:
        acc = plan.recommendation.accelerator
        tres = acc.replace("-", "_")
        for q in quotas.teams:
            # a mix: the training pool's guarantee; its limit is the burst less the
            # services' guarantee (as `fleet_quotas._variant_quotas` simulated them)
            g = q.guaranteed_by_accelerator.get(acc, q.guaranteed_gpus)
            limit = max(g, q.burst_limit_gpus - (q.guaranteed_gpus - g))
            engine_rows.append(
                {
                    "team": q.team,
                    "kueue": f"nominalQuota {g:,}, borrowingLimit {limit - g:,}",
                    "volcano": f"deserved {g:,}, capability {limit:,}",
                    # the plain total too: Slurm counts an untyped --gres=gpu:N only
                    # against it (`export.slurm`; one accelerator: the same number)
                    "slurm": f"GrpTRES=gres/gpu={limit:,},gres/gpu:{tres}={limit:,}",
                }
            )
    verified_rows = []
    if quotas is not None and quotas.verified is not None:
        for t in quotas.verified.teams:
            verified_rows.append(
                {
                    "team": t.team,
                    "wait": _interval(t.wait_p95_s),
                    "target": _dur(t.wait_target_s),
                    "slo": _pct_interval(t.slo_attainment),
                    "passed": "yes" if t.passed else "no",
                    "reasons": "; ".join(t.reasons),
                }
            )
    policies = [
        {
            "profile": p.profile,
            "status": p.status,
            "gpus": MISSING if p.gpus is None else f"{p.gpus:,}",
            "extra": MISSING if p.extra_gpus is None else f"{p.extra_gpus:+,}",
            "cost": fmt_usd(p.cost_usd),
            "extra_cost": MISSING
            if p.extra_cost_usd is None
            else f"{'+' if p.extra_cost_usd >= 0 else '-'}{fmt_usd(abs(p.extra_cost_usd))}",
        }
        for p in plan.policies
    ]
    queue_rows = [
        {
            "team": name,
            "cells": [
                next(
                    ((_interval(t.wait_p95_s), t.passed) for t in q.point.teams if t.team == name),
                    (MISSING, True),
                )
                for q in plan.queue_policies
            ],
        }
        for name in team_names
    ]
    queue_heads = [
        {
            "profile": q.profile,
            "order": q.queue_order,
            "allocation": _pct_interval(q.point.allocation),
            "passed": "yes" if q.point.passed else "no",
        }
        for q in plan.queue_policies
    ]
    sensitivity = [
        {
            "scale": f"× {s.arrival_scale:g}",
            "status": s.status,
            "gpus": MISSING if s.gpus is None else f"{s.gpus:,}",
            "cost": fmt_usd(s.cost_usd),
        }
        for s in plan.sensitivity
    ]
    # the recommendation's own price (its size may be above the search's, for its quotas)
    cost = rec.cost if rec is not None else None
    if cost is None and search is not None:  # a plan.json written before it was recorded
        cost = search.cost
    cost_rows: list[tuple[str, str]] = []
    if cost is not None:
        cost_rows = [
            ("Deployment", cost.deployment),
            (f"Total {cost.period}", fmt_usd(cost.total_usd)),
            ("On-prem TCO", fmt_usd(cost.on_prem_tco_usd)),
            ("Renting (cloud)", fmt_usd(cost.cloud_usd)),
            ("Cloud purchase", cost.cloud_method or MISSING),
            (
                "On-prem cost per delivered GPU-hour",
                MISSING if cost.per_gpu_hour_usd is None else f"${cost.per_gpu_hour_usd:,.2f}",
            ),
            ("System", cost.system or MISSING),
            ("Nodes", fmt_count(cost.nodes)),
            ("Racks", fmt_count(cost.racks)),
            (
                "IT power",
                MISSING if cost.it_power_kw is None else f"{fmt_num(cost.it_power_kw)} kW",
            ),
        ]
    method_rows = [
        ("Scheduling profile", str(plan.method.get("profile"))),
        (
            "Seeds",
            f"{n_seeds} ({', '.join(str(s) for s in seeds) if isinstance(seeds, list) else seeds})",
        ),
        (
            "Confidence",
            f"{(_f(plan.method.get('confidence')) or 0.95) * 100:g} % two-sided Student-t "
            "interval of the mean over seeds",
        ),
        ("Simulated window (horizon)", _dur(_f(plan.method.get("horizon_s")))),
        ("Warm-up (not measured)", _dur(_f(plan.method.get("warmup_s")))),
        ("Each run ends at", _dur(_f(plan.method.get("run_end_s")))),
        ("Wait statistic", str(plan.method.get("wait_statistic"))),
        ("Long runs", str(plan.method.get("long_run_check"))),
        ("Services", str(plan.method.get("slo_statistic"))),
        ("Search", str(plan.method.get("search"))),
        ("Durations", str(plan.method.get("durations"))),
        ("Sensitivity", str(plan.method.get("sensitivity"))),
        ("Quotas while sizing", str(plan.method.get("quotas_while_sizing"))),
        ("Failures", str(plan.method.get("failures"))),
        ("Topology", str(plan.method.get("topology"))),
        (
            "Scheduling cycle",
            f"every {fmt_num(_f(plan.method.get('cycle_interval_s')))} s at most; restart "
            f"overhead {fmt_num(_f(plan.method.get('restart_overhead_s')))} s",
        ),
    ]
    headline = "No candidate met every target within the search limit."
    if rec is not None:
        headline = (
            f"Recommended: {rec.cluster_text}, {rec.deployment}"
            + (f", {fmt_usd(rec.cost_usd)} {period}" if rec.cost_usd is not None else "")
            + f"; {plan.targets_text}."
        )
    # the policy and sensitivity tables compare searches with open quotas: their first row is
    # the plan's own search, which is below the recommendation when the quotas grew it
    grown = rec is not None and rec.grown_for_quotas
    base = {
        "gpus": MISSING if search is None or search.gpus is None else f"{search.gpus:,}",
        "cost": fmt_usd(search.cost.total_usd if search and search.cost else None),
        "label": ", open quotas" if grown else "",
        "note": (
            f"Every size here is with open quotas (fair share alone). The recommended cluster "
            f"is larger, {rec.gpus:,} GPUs, because no quota split tried held every target "
            f"at {rec.fair_share_gpus:,}."
            if grown and rec is not None and rec.fair_share_gpus is not None
            else ""
        ),
    }
    charts = all_charts(plan) if html else {}
    return {
        "plan": plan,
        "headline": headline,
        "base": base,
        "rec": rec,
        "teams": plan.teams,
        "team_names": team_names,
        "candidates": candidates,
        "sizes": sizes,
        "answer_rows": answer_rows,
        "services": services,
        "mig_gpus": search.mig_gpus if search is not None else 0,
        "capacity": plan.capacity,
        "quotas": quotas,
        "quota_rows": quota_rows,
        "verified_rows": verified_rows,
        "engine_rows": engine_rows,
        "policies": policies,
        "queue_rows": queue_rows,
        "queue_heads": queue_heads,
        "sensitivity": sensitivity,
        "cost_rows": cost_rows,
        "cost_period": period,
        "method_rows": method_rows,
        "dur": _dur,
        "num": fmt_num,
        "pct": fmt_pct,
        "charts": {k: Markup(v) for k, v in charts.items()},
        "css": Markup(css()) if html else "",
        "D": marker,
        "legend": DERIVED_LEGEND,
    }


def cost_period(plan: FleetPlan) -> str:
    """The period every cost of the plan covers ("over 3 years"): the spec's horizon_years,
    for which the cluster is owned or rented, not the simulated window the Method table
    shows (the headline said "over the horizon" beside a 14-day Horizon)."""
    rec = plan.recommendation
    costs = [rec.cost] if rec is not None and rec.cost is not None else []
    costs += [c.cost for c in plan.candidates if c.cost is not None]
    return costs[0].period if costs else "over the plan's horizon_years"


def _f(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(float(value)) else None


# -- formats -------------------------------------------------------------------------------


def render_json(plan: FleetPlan) -> str:
    return plan.model_dump_json(indent=2)


def render_markdown(plan: FleetPlan) -> str:
    return markdown_env().get_template("fleet.md.j2").render(_context(plan, html=False))


def render_html(plan: FleetPlan) -> str:
    return html_env().get_template("fleet.html.j2").render(_context(plan, html=True))


def render_pdf(plan: FleetPlan) -> bytes:
    from weasyprint import HTML  # type: ignore[import-untyped]

    pdf: bytes = HTML(string=render_html(plan), base_url=None).write_pdf()
    return pdf


def write_fleet_reports(
    plan: FleetPlan, out_dir: Path, *, pdf: bool = True, extra: Mapping[str, str] | None = None
) -> dict[str, Path]:
    """plan.json, plan.md, plan.html and (when WeasyPrint can run and `pdf`) plan.pdf, all
    rendered in memory first and written whole with the `extra` files (name -> text: the
    answer's cluster.yaml and teams.yaml) (see `report.render.write_files`)."""
    contents: dict[str, bytes] = {
        "json": render_json(plan).encode("utf-8"),
        "md": render_markdown(plan).encode("utf-8"),
        "html": render_html(plan).encode("utf-8"),
    }
    if pdf and pdf_available() is None:
        contents["pdf"] = render_pdf(plan)
    contents.update({name: text.encode("utf-8") for name, text in (extra or {}).items()})
    return write_files(contents, out_dir)
