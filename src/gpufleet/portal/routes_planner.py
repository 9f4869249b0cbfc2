"""Planner: a training or inference workload -> the capacity plan report, in the page.

The same engine and report as `gpufleet plan` (`plan.planner.plan`, `report.render`): the
report is shown in a sandboxed frame (its own stylesheet, no scripts) and can be
downloaded as the same HTML file the command writes.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from gpufleet.plan.planner import InfeasiblePlanError, plan
from gpufleet.portal.planner import DEFAULTS, FIELDS, options, read_form
from gpufleet.portal.web import Caller, Form, render, text
from gpufleet.report.render import render_html

router = APIRouter()


@router.get("/planner", name="planner", response_class=HTMLResponse)
def planner_form(request: Request, me: Caller) -> HTMLResponse:
    return render(
        request,
        "planner.html.j2",
        me,
        nav="planner",
        v=dict(DEFAULTS),
        chosen=[],
        errors={},
        result=None,
        report_html=None,
        advice=[],
        **options(),
    )


@router.post("/planner", name="planner_post", response_model=None)
def run_planner(request: Request, me: Caller, form: Form) -> Response:
    """Plan the workload; `action=download` answers with the report file itself."""
    values = {name: text(form, name) for name in FIELDS}
    values["spec_yaml"] = str(form.get("spec_yaml") or "")  # keep its indentation
    chosen = [str(a) for a in form.getlist("accelerators") if str(a)]
    parsed = read_form(values, chosen)
    result = None
    report_html = None
    advice: list[str] = []
    errors = parsed.errors
    if parsed.spec is not None:
        try:
            result = plan(parsed.spec, lambda _: None)
        except InfeasiblePlanError as exc:
            advice = list(exc.advice)
        else:
            report_html = render_html(result)
            if text(form, "action") == "download":
                name = f"plan-{parsed.spec.name}.html".replace("/", "-")
                return Response(
                    report_html,
                    media_type="text/html; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'},
                )
    status = 422 if errors else 200
    return render(
        request,
        "planner.html.j2",
        me,
        status,
        nav="planner",
        v=values,
        chosen=chosen,
        errors=errors,
        result=result,
        report_html=report_html,
        advice=advice,
        **options(),
    )
