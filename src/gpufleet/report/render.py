"""Render a `Plan` as plan.json, plan.md, plan.html and plan.pdf.

The renderers read only the `Plan` (the planner's complete output) and are pure:
the same plan gives the same text. Numbers are written for people (thousands
separators, $ with cents only for unit prices, decimal GB/TB); every number that
gpufleet computed is marked with a dagger so a reader can tell it from inputs,
catalog values and the planner's choices, which the assumptions table sources.

HTML is one self-contained file (inline CSS and SVG, no scripts, nothing fetched)
so it can be mailed around and printed by WeasyPrint as is. Markdown is escaped
by a `finalize` hook, so every value that reaches the page is escaped unless a
template writes markup literally, the Markdown analogue of HTML autoescaping.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeGuard

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from gpufleet.formatting import (
    MISSING,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_label,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    fmt_usd,
    fmt_usd_rate,
)
from gpufleet.outputs import write_folder
from gpufleet.plan.cost.prices import ON_DEMAND
from gpufleet.plan.cost.tco import per_gpu_hour_text
from gpufleet.plan.cost.verdict import RentOrOwn
from gpufleet.plan.design.power import rack_power_note
from gpufleet.plan.model import ExecutiveSummary, Plan
from gpufleet.plan.summary import (
    alternative_gpus,
    executive_summary,
    gpus_at_once,
    headline_gpus,
    rentable_alternative,
)
from gpufleet.report import charts

DERIVED_MARK = "†"
DERIVED_LEGEND = "† derived by gpufleet"

REPORT_FILES: dict[str, str] = {
    "json": "plan.json",
    "md": "plan.md",
    "html": "plan.html",
    "pdf": "plan.pdf",
}


# -- numbers for people ------------------------------------------------------


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


_FRACTION_KEYS = (
    "mfu",
    "utilization",
    "utilisation",
    "goodput",
    "efficiency",
    "_fraction",
    "_rate",
)


def fmt_keyed(key: str, value: object, default: str = "num") -> str:
    """Format a value from an open dict by what its key says it is (suffix units)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not _is_number(value):
        return str(value)
    v = float(value)
    k = key.lower()
    if k.endswith(("per_gpu_hour", "_usd_per_hour", "_usd_per_kwh", "per_hour")) or (
        "per_million" in k and k.endswith("_usd")
    ):
        return fmt_usd_rate(v)
    if k.endswith("_usd") or k == "usd":
        return fmt_usd(v)
    if k.endswith("gpu_hours"):
        return f"{fmt_count(round(v))} GPU-h"
    if k.endswith("_hours"):
        return f"{fmt_num(v)} h"
    if k.endswith("_days") or "_days_" in k:
        # below a day in the unit a person would say: a 3-minute run is not "0.0 days"
        return f"{v:,.1f} days" if abs(v) >= 1 or v == 0 else fmt_duration(v * 86_400.0)
    if k.endswith("_months"):
        return f"{v:,.1f} months"
    if k.endswith("_years"):
        return f"{fmt_num(v)} years"
    if k.endswith("_ms"):
        return f"{fmt_num(v)} ms"
    if k.endswith("_bytes"):
        return fmt_bytes(v)
    if k.endswith("_gbytes_per_s"):
        return f"{fmt_num(v)} GB/s"
    if k.endswith("_gbit_per_s"):
        return f"{fmt_num(v)} Gb/s"
    if k.endswith("_per_s"):
        return f"{fmt_num(v)}/s"
    if k.endswith("_kw"):
        return f"{fmt_num(v)} kW"
    if k.endswith("_gpus") or k in {"gpus", "replicas", "nodes", "instances"}:
        return fmt_count(v)
    if any(part in k for part in _FRACTION_KEYS) and -1.5 <= v <= 1.5:
        return fmt_pct(v)
    if k == "pue" or k.endswith("_ratio"):
        return fmt_num(v)
    if default == "usd":
        return fmt_usd(v)
    return fmt_count(v) if isinstance(value, int) else fmt_num(v)


# Metrics whose key alone reads wrong: the cost per million tokens read "Cost per million
# output tokens cost $2.47", and said neither the price nor the GPUs it is at (the search's:
# the service's own GPUs at the on-demand list price, whatever the plan rents or owns).
_METRIC_LABELS = {
    "cost_per_million_output_tokens_usd": (
        "Cost per million output tokens (its own GPUs, on-demand list price)"
    ),
}


def fmt_metric(key: str, value: float | None) -> str:
    """One workload metric as a phrase: 'TTFT p99 412 ms', '2,431,000 tokens/s'."""
    if key in _METRIC_LABELS:
        return f"{_METRIC_LABELS[key]} {fmt_keyed(key, value)}"
    if key.endswith("_per_s") and not key.endswith(("gbytes_per_s", "gbit_per_s")):
        noun = fmt_label(key.removesuffix("_per_s"), strip_unit=False).lower()
        return f"{MISSING if value is None else fmt_num(value)} {noun}/s"
    return f"{fmt_label(key)} {fmt_keyed(key, value)}"


def fmt_metrics(metrics: Mapping[str, float | None]) -> str:
    return " · ".join(fmt_metric(k, v) for k, v in metrics.items()) or MISSING


def fmt_param(key: str, value: int | str | bool) -> str:
    return f"{fmt_label(key, strip_unit=False)} {fmt_keyed(key, value)}"


def fmt_params(params: Mapping[str, int | str | bool]) -> str:
    """Parallelism as 'TP 8 · PP 4 · DP 32 · Sequence parallel yes'."""
    return " · ".join(fmt_param(k, v) for k, v in params.items()) or MISSING


# -- environments ------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*|<>])")
_MD_ENTITY = re.compile(r"&(?=#?\w+;)")


def md_escape(value: object) -> str:
    """Text that Markdown shows as written: no emphasis, tags, entities or table breaks."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return _MD_ENTITY.sub(r"\\&", _MD_SPECIAL.sub(r"\\\1", text))


_PLAIN_WORD = re.compile(r"[a-z]+ ")


def fmt_sentences(items: Sequence[str]) -> str:
    """Clauses as sentences, one after another: each ends with a full stop and one that
    opens with a plain word ("the recommendation costs ...") takes a capital; one that opens
    with a name (a workload, an accelerator) keeps it as written. Joined with a bare space,
    "(with the optimised purchase mix) train-llama-3-70b: 256 × ..." read as one sentence."""
    out: list[str] = []
    for item in items:
        text = " ".join(str(item).split())
        if not text:
            continue
        if _PLAIN_WORD.match(text):
            text = text[0].upper() + text[1:]
        out.append(text if text.endswith((".", "?", "!")) else f"{text}.")
    return " ".join(out)


# The TCO rows whose key alone does not say what divides by what: chat-70b's "Per GPU-hour
# $2.71" (÷ 80 % of its hours) sat beside a demand table whose owned fleet served 100 % of
# them, and no row said which GPU-hours it was per (CFO review).
_TCO_LABELS = {
    "held_gpu_hours": "GPU-hours held (GPUs × horizon hours)",
    "served_gpu_hours": "Served by the owned fleet (the planned work)",
    "delivered_gpu_hours": "Delivered GPU-hours (held × utilization, or served where more)",
    "per_gpu_hour": "Per delivered GPU-hour (owning ÷ delivered GPU-hours)",
}


def fmt_tco_label(key: str) -> str:
    """A TCO row's label: `_TCO_LABELS`, else the key in words."""
    return _TCO_LABELS.get(key) or fmt_label(key)


_FILTERS: dict[str, Callable[..., str]] = {
    "sentences": fmt_sentences,
    "tco_label": fmt_tco_label,
    "num": fmt_num,
    "count": fmt_count,
    "usd": fmt_usd,
    "usd_rate": fmt_usd_rate,
    "pct": fmt_pct,
    "bytes": fmt_bytes,
    "ratio": fmt_ratio,
    "label": fmt_label,
    "keyed": fmt_keyed,
    "metric": fmt_metric,
    "metrics": fmt_metrics,
    "param": fmt_param,
    "params": fmt_params,
}


# Keys of the open cost dicts (mix, tco) that echo the spec rather than compute anything.
INPUT_KEYS = frozenset(
    {
        "horizon_years",
        "depreciation_years",
        "facility_life_years",
        "utilization",
        "expected_utilization",
        "pue",
        "discount_rate",
    }
)


def is_input_key(key: str) -> bool:
    """True for a cost-dict entry that is an input, so it gets no derived mark."""
    return key in INPUT_KEYS


def _environment(markdown: bool) -> Environment:
    env = Environment(
        loader=PackageLoader("gpufleet.report", "templates"),
        autoescape=not markdown,
        finalize=md_escape if markdown else None,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(_FILTERS)
    env.tests["input_key"] = is_input_key
    return env


@cache
def html_env() -> Environment:
    return _environment(markdown=False)


@cache
def markdown_env() -> Environment:
    return _environment(markdown=True)


@cache
def css() -> str:
    """The stylesheet of every gpufleet report: one look for plan, fleet and comparison."""
    return (resources.files("gpufleet.report") / "templates" / "report.css").read_text("utf-8")


def payback_note(plan: Plan) -> str:
    """What the break-even sentence adds after its month: that the payback falls after the
    horizon, and that owning is then ahead only through the residual value (empty without
    a verdict, or when neither holds)."""
    if not plan.cost.rent_or_own:
        return ""
    v = RentOrOwn.from_json(plan.cost.rent_or_own)
    if not v.payback_after_horizon:
        return ""
    note = f", after the {fmt_num(v.horizon_months)}-month horizon ends"
    if v.owning_needs_residual(v.rent_at_stated_usd):
        note += (
            f": in cash over the horizon owning pays {fmt_usd(v.own_cash_usd)} against "
            f"{fmt_usd(v.rent_at_stated_usd)} to rent, ahead only through the "
            f"{fmt_usd(v.own_residual_usd)} book value credited at the end"
        )
    return note


def workloads_note(plan: Plan) -> str:
    """The Workloads table's footnote, from the plan's numbers: what its GPU-hours and cost
    are, and for each workload whose cost pays for more GPUs than it uses (whole instances;
    the services share theirs and split the idle GPUs by GPUs), how many. A service's cost
    read $25.32 per GPU-hour of its work against a $14.24 list price, with nothing saying
    that it carried idle GPUs (shared-cluster's product-chat: 12.4 paid for, 7 used)."""
    rec = plan.recommendation
    per = int(plan.cost.mix.get("instance_gpus") or 0)
    text = (
        "GPU-hours: the work's; training includes failures and restarts; inference covers "
        "the plan's horizon at the stated load. Cost: renting the work at on-demand list "
        "prices"
        + (f" on whole {per}-GPU instances" if per > 1 else "")
        + (
            ", for comparison (this plan owns its GPUs: see Cost)"
            if rec.deployment == "on-prem"
            else ""
        )
        + "."
    )
    paid = [
        f"{w.workload} {w.rented_gpus:,.1f} GPUs paid for, {w.gpus:,} used"
        for w in rec.workloads
        if w.rented_gpus is not None and w.rented_gpus > w.gpus + 1e-9
    ]
    if paid and per > 1:
        text += (
            " A training run rents instances of its own; the services share theirs and split "
            "the idle GPUs by GPUs, so a cost pays for more GPUs than the work uses: "
            + "; ".join(paid)
            + "."
        )
    if any("cost_per_million_output_tokens_usd" in w.metrics for w in rec.workloads):
        text += (
            " Cost per million output tokens: the on-demand list price of the service's own "
            "GPUs over the tokens they serve, without the idle GPUs of shared instances."
        )
    return text


def reserved_note(plan: Plan) -> str:
    """What the Reserved / committed total buys: the GPUs in use at the busiest hour, for the
    whole horizon ('' when not priced, or in a plan.json from before it said). Its GPUs went
    unsaid while it reserved twice the busiest hour's (year-of-runs: 1,064 against 528)."""
    cost = plan.cost
    if cost.reserved is None or not cost.reserved_gpus:
        return ""
    per = int(cost.mix.get("instance_gpus") or 1)
    instances = f" ({fmt_count(cost.reserved_gpus / per)} × {per}-GPU instances)" if per > 1 else ""
    return (
        f"Reserved / committed: every hour's work on reservations alone, "
        f"{fmt_count(cost.reserved_gpus)} GPUs{instances}, those in use at the busiest hour, "
        "reserved for the whole horizon at the cheapest term."
    )


def rent_or_own_verdict(plan: Plan) -> RentOrOwn | None:
    """The plan's rent-or-own verdict (None without one), with the GPU-hours its burst rent
    pays for read from the demand curve where the verdict does not carry them (a plan.json
    from before it did, or a planner that does not pass them): the table counts them."""
    if not plan.cost.rent_or_own:
        return None
    v = RentOrOwn.from_json(plan.cost.rent_or_own)
    if v.burst_gpu_hours is None and plan.demand_curve is not None:
        v = replace(v, own_burst_gpu_hours=plan.demand_curve.rented_gpu_hours)
    return v


def rent_or_own_note(plan: Plan) -> str:
    """The sentence above the rent-or-own table (`RentOrOwn.same_hours_text`); '' without."""
    v = rent_or_own_verdict(plan)
    return v.same_hours_text() if v is not None else ""


def rent_or_own_rows(plan: Plan) -> list[tuple[str, str, str, bool]]:
    """The two comparisons side by side (`plan.cost.verdict`): (row, the planned work, the
    fleet at the stated utilisation, whether that cell is derived); empty without a TCO.

    Where owning rents the demand above the fleet, the stated column's GPU-hours are the
    fleet's steady use and those above it, as its totals are on both sides; a row says how
    many are above the fleet, the rates say which GPU-hours each is for, and a row says
    what of the TCO rents them. The GPU-hours row counted the fleet's alone beside totals
    that held the burst (year-of-runs: 1,667,904 GPU-h at $3.77 is $6,280,918, beside
    $7,773,719 to rent and a TCO of $5,814,000, each with $1,492,801 for 303,662 GPU-h)."""
    v = rent_or_own_verdict(plan)
    if v is None:
        return []
    own = fmt_usd(v.own_usd)
    steady_gpu_hours = v.stated_fleet_gpu_hours
    stated_gpu_hours = v.rent_at_stated_gpu_hours
    steady_rate = v.rate_text(
        v.rent_at_stated_usd_per_gpu_hour, v.rent_at_stated_basis or "steady use"
    )
    burst = v.own_burst_rent_usd
    burst_gpu_hours = v.burst_gpu_hours
    burst_rate = v.burst_usd_per_gpu_hour
    rows: list[tuple[str, str, str, bool]] = [
        (
            "GPU-hours",
            f"{fmt_count(round(v.work_gpu_hours))} GPU-h",
            f"{fmt_count(round(steady_gpu_hours))} GPU-h on the fleet and the demand above it"
            if stated_gpu_hours is None
            else f"{fmt_count(round(stated_gpu_hours))} GPU-h",
            True,
        ),
    ]
    if burst:
        above = MISSING if burst_gpu_hours is None else f"{fmt_count(round(burst_gpu_hours))} GPU-h"
        rows.append(("Of them above the owned fleet, rented on both sides", above, above, True))
    rows += [
        ("Fleet busy", fmt_pct(v.work_utilization), fmt_pct(v.stated_utilization), False),
        ("Renting them", fmt_usd(v.rent_work_usd), fmt_usd(v.rent_at_stated_usd), True),
        (
            "Rented at",
            f"{fmt_usd_rate(v.rent_usd_per_gpu_hour)}/GPU-h, blended over the work",
            steady_rate
            if not burst
            else f"{steady_rate}, for the fleet's {fmt_count(round(steady_gpu_hours))} GPU-h; "
            + (
                f"{fmt_usd(burst)} above the fleet"
                if burst_rate is None
                else f"{fmt_usd_rate(burst_rate)}/GPU-h above it"
            ),
            True,
        ),
        ("Owning the fleet (TCO)", own, own, True),
    ]
    if burst:
        rows.append(("Of it renting above the fleet", fmt_usd(burst), fmt_usd(burst), True))
    rows.append(("Cheaper", v.cheaper_for_work, v.cheaper_at_stated, True))
    if v.own_pv_usd is not None and v.rent_work_pv_usd is not None:
        rate = fmt_pct(v.discount_rate)
        own_pv = fmt_usd(v.own_pv_usd)
        rows += [
            (
                f"Renting them, present value at {rate}",
                fmt_usd(v.rent_work_pv_usd),
                fmt_usd(v.rent_at_stated_pv_usd),
                True,
            ),
            (f"Owning, present value at {rate}", own_pv, own_pv, True),
            (
                "Cheaper in present value",
                v.cheaper_for_work_pv or "—",
                v.cheaper_at_stated_pv or "—",
                True,
            ),
        ]
    return rows


def summary_of(plan: Plan) -> ExecutiveSummary:
    """The plan's executive summary; built from its parts for a plan.json written before
    the summary existed, so every format shows one."""
    if plan.summary is not None:
        return plan.summary
    return executive_summary(
        plan.recommendation,
        plan.alternatives,
        plan.design,
        plan.cost,
        plan.demand_curve,
        cloud_notes=plan.cloud_notes,
    )


def headline_cost(plan: Plan) -> tuple[float | None, str]:
    """The recommended deployment's own number and what it is (`plan.summary`)."""
    summary = summary_of(plan)
    return summary.cost_usd, summary.cost_what


def _chart_slots(plan: Plan) -> dict[str, Markup | None]:
    """Every chart the template can show, None where the plan has no data for it (a plan
    with no cloud price has no cost chart), so a missing chart is left out, never an error."""
    built = charts.all_charts(plan)
    return {name: Markup(built[name]) if name in built else None for name in charts.CHART_NAMES}


def _sensitivity_extra_keys(rows: list[charts.SensitivityRow]) -> list[str]:
    """Columns a planner added to the tornado rows beyond the ones the report knows."""
    keys: list[str] = []
    for row in rows:
        for key, _ in row.extra:
            if key not in keys:
                keys.append(key)
    return keys


def _context(plan: Plan, html: bool) -> dict[str, Any]:
    sensitivity = charts.sensitivity_rows(plan.cost)
    option_what, option_costs = charts.option_costs(plan)
    marker: str | Markup = (
        Markup('<span class="derived" title="derived by gpufleet">†</span>')
        if html
        else DERIVED_MARK
    )
    return {
        "plan": plan,
        "rec": plan.recommendation,
        # the alternatives table: what each option was ranked on, and its list price
        "option_costs": option_costs,
        "option_what": option_what,
        "option_ranked": any(o.plan_usd is not None for o in option_costs[1:]),
        "headline": headline_cost(plan),
        "rent_or_own": rent_or_own_rows(plan),
        "rent_or_own_note": rent_or_own_note(plan),
        "workloads_note": workloads_note(plan),
        "reserved_note": reserved_note(plan),
        # whose on-demand price the mix's saving is against (`plan.cost.reference`), as
        # plan.json stores it; a plan.json from before it did says "on-demand prices"
        "on_demand_reference": plan.cost.price_caveats.get(ON_DEMAND, "on-demand prices"),
        "price_notes": {k: v for k, v in plan.cost.price_caveats.items() if k != ON_DEMAND},
        # what the cost per delivered GPU-hour divides by what (`plan.cost.tco`)
        "tco_note": per_gpu_hour_text(plan.cost.tco),
        # the GPUs in use at the busiest hour, beside every workload's added up
        "at_once": gpus_at_once(plan.recommendation, plan.demand_curve),
        "payback_note": payback_note(plan),
        "cost_options": charts.cost_options(plan.cost),
        "sensitivity": sensitivity,
        "sensitivity_labels": any(r.low_label or r.high_label for r in sensitivity),
        "sensitivity_extra": _sensitivity_extra_keys(sensitivity),
        "sensitivity_base": charts.sensitivity_base_usd(plan),
        "sensitivity_other": charts.sensitivity_rows(plan.cost, alternative=True),
        "sensitivity_other_base": next(
            (float(b) for r in plan.cost.sensitivity_alternative if (b := r.get("base_usd"))),
            None,
        ),
        "other_deployment": "renting" if plan.recommendation.deployment == "on-prem" else "owning",
        "summary": summary_of(plan),
        # the GPUs each option's headline pays for, with those used beside them
        "rec_gpus": headline_gpus(
            plan.recommendation, plan.design, plan.demand_curve, plan.cost.mix
        ),
        "alt_gpus": [alternative_gpus(a) for a in plan.alternatives],
        "rack_note": rack_power_note(plan.design) if plan.design is not None else None,
        "no_rent_price": plan.cost.on_demand is None and not plan.cost.mix,
        "rentable_alternative": rentable_alternative(plan.alternatives),
        "charts": _chart_slots(plan) if html else {},
        "css": Markup(css()) if html else "",
        "D": marker,
        "legend": DERIVED_LEGEND,
    }


# -- the four formats --------------------------------------------------------


def render_json(plan: Plan) -> str:
    """plan.json: the model's own serialisation (field order is the model's)."""
    return plan.model_dump_json(indent=2)


def render_markdown(plan: Plan) -> str:
    return markdown_env().get_template("plan.md.j2").render(_context(plan, html=False))


def render_html(plan: Plan) -> str:
    return html_env().get_template("plan.html.j2").render(_context(plan, html=True))


class PdfUnavailableError(RuntimeError):
    """WeasyPrint cannot load the system libraries it needs (Pango)."""


def pdf_available() -> str | None:
    """None when PDFs can be rendered, else what to install (WeasyPrint needs Pango)."""
    try:
        import weasyprint  # type: ignore[import-untyped]  # noqa: F401
    except OSError as exc:  # missing shared libraries surface as OSError at import
        return (
            f"PDF skipped: WeasyPrint cannot load its system libraries ({exc}); on Debian "
            "install them with: apt-get install libpango-1.0-0 libpangoft2-1.0-0"
        )
    return None


def render_pdf(plan: Plan) -> bytes:
    """plan.pdf: WeasyPrint prints the HTML (A4, print CSS in the same stylesheet)."""
    missing = pdf_available()
    if missing is not None:
        raise PdfUnavailableError(missing)
    from weasyprint import HTML

    pdf: bytes = HTML(string=render_html(plan), base_url=None).write_pdf()
    return pdf


def write_reports(plan: Plan, out_dir: Path) -> dict[str, Path]:
    """Write plan.json, plan.md, plan.html and plan.pdf into `out_dir` (created).

    Everything is rendered in memory first, so a renderer failing writes nothing.
    Each file is then written as `NAME.partial`, synced and renamed over `NAME`:
    readers never see half a file, and a failure leaves no `.partial` behind.
    Returns the paths by format: json, md, html, pdf. Without the system libraries a PDF
    needs, the PDF is left out (`pdf_available()` says why) and the rest is written.
    """
    contents: dict[str, bytes] = {
        "json": render_json(plan).encode("utf-8"),
        "md": render_markdown(plan).encode("utf-8"),
        "html": render_html(plan).encode("utf-8"),
    }
    if pdf_available() is None:
        contents["pdf"] = render_pdf(plan)
    return write_files(contents, out_dir)


def write_files(contents: Mapping[str, bytes], out_dir: Path) -> dict[str, Path]:
    """Write rendered reports (by format: json, md, html, pdf; any other key is a file name)
    into `out_dir` whole or not at all (`outputs.write_folder`). Returns the paths by key."""
    names = {kind: REPORT_FILES.get(kind, kind) for kind in contents}
    written = write_folder(out_dir, {names[kind]: data for kind, data in contents.items()})
    return {kind: written[names[kind]] for kind in contents}
