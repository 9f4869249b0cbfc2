"""Planner: a training or inference workload -> the capacity plan report, in the page.

The same engine and report as `gpufleet plan` (`plan.planner.plan`, `report.render`): the
report is shown in a sandboxed frame (its own stylesheet, no scripts) and can be
downloaded as the same HTML file the command writes. A plan takes seconds of CPU, so it is
computed through `portal.heavy` (a worker process, a few at a time, a budget per person);
a refusal is shown on this page, with the form as the person filled it in.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from gpufleet.plan.model import Plan
from gpufleet.portal.heavy import Heavy, HeavyError, heavy_of
from gpufleet.portal.planner import DEFAULTS, FIELDS, compute, headline, options, read_form
from gpufleet.portal.web import Caller, Form, Me, render, text

router = APIRouter()


def _heavy(request: Request) -> Heavy:
    return heavy_of(request)


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
        headline=None,
        report_html=None,
        advice=[],
        refused=None,
        **options(),
    )


@router.post("/planner", name="planner_post", response_model=None)
async def run_planner(
    request: Request, me: Caller, form: Form, heavy: Annotated[Heavy, Depends(_heavy)]
) -> Response:
    """Plan the workload; `action=download` answers with the report file itself. On the
    heavy runner's own threads (`Heavy.call`): waiting for a run holds no request thread."""
    return await heavy.call(_run_planner, request, me, form, heavy)


def _run_planner(request: Request, me: Me, form: FormData, heavy: Heavy) -> Response:
    values = {name: text(form, name) for name in FIELDS}
    values["spec_yaml"] = str(form.get("spec_yaml") or "")  # keep its indentation
    chosen = [str(a) for a in form.getlist("accelerators") if str(a)]
    parsed = read_form(values, chosen)
    result: Plan | None = None
    report_html = None
    advice: list[str] = []
    refused: HeavyError | None = None
    errors = parsed.errors
    if parsed.spec is not None:
        try:
            planned = heavy.run(me.who.user, compute, parsed.spec)
        except HeavyError as exc:
            refused = exc
        else:
            result, report_html, advice = planned.result, planned.report_html, list(planned.advice)
            if report_html is not None and text(form, "action") == "download":
                name = f"plan-{parsed.spec.name}.html".replace("/", "-")
                return Response(
                    report_html,
                    media_type="text/html; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'},
                )
    status = refused.status_code if refused else 422 if errors else 200
    response = render(
        request,
        "planner.html.j2",
        me,
        status,
        nav="planner",
        v=values,
        chosen=chosen,
        errors=errors,
        result=result,
        headline=headline(result) if result is not None else None,
        report_html=report_html,
        advice=advice,
        refused=refused,
        **options(),
    )
    if refused:
        response.headers.update(refused.headers)
    return response
