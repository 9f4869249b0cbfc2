"""Submit: a form for a job, its JSON request previewed as it is typed, errors by field.

Submitting goes through the API's own handler (`api.routes_jobs.submit_job`), so the form
accepts exactly what `POST /api/v1/jobs` accepts and stores nothing when it refuses.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.api import routes_jobs as api_jobs
from gpufleet.api.context import AppContext
from gpufleet.api.schemas import held_gpu_fraction
from gpufleet.control.jobs import MAX_DATA, JobRequest
from gpufleet.control.models import PriorityClass, Team
from gpufleet.errors import UserError
from gpufleet.portal.forms import (
    DATA_ROW,
    FORM,
    data_row_count,
    parse_submit,
    submit_errors,
    validation_errors,
)
from gpufleet.portal.web import PREFIX, Caller, Ctx, Db, Form, Me, render, text

router = APIRouter()
DEFAULTS = {
    "kind": "batch",
    "request_type": "gpus",
    "gpus": "1",
    "workers": "1",
    "preemptible": "on",
}
FIELDS = (
    "name",
    "team",
    "project",
    "kind",
    "request_type",
    "gpus",
    "mig_profile",
    "gpu_fraction",
    "accelerator",
    "workers",
    "priority_class",
    "preemptible",
    "checkpoint_interval",
    "runtime_estimate",
    "command",
    "env",
)


def _options(s: Session, ctx: AppContext, me: Me) -> dict[str, Any]:
    """What the form's selects offer: the caller's teams and their projects, the cluster's
    accelerators and MIG profiles, the priority classes."""
    teams = s.scalars(select(Team).order_by(Team.name)).all()
    mine = [t for t in teams if me.who.sees_team(t.id)]
    cluster = ctx.cluster
    profiles = sorted({p for n in cluster.nodes for layout in n.mig for p, _ in layout})
    classes = s.scalars(select(PriorityClass).order_by(PriorityClass.value.desc())).all()
    return {
        "teams": [t.name for t in mine],
        "projects": sorted({p.name for t in mine for p in t.projects}),
        "default_priority": {t.name: t.default_priority for t in mine},
        "kinds": get_args(JobRequest.model_fields["kind"].annotation),
        "accelerators": sorted(cluster.gpus_by_accelerator),
        "mig_profiles": profiles,
        "fractions": any(n.fractions for n in cluster.nodes),
        "classes": classes,
    }


def _page(
    request: Request,
    me: Me,
    s: Session,
    ctx: AppContext,
    values: dict[str, str],
    *,
    errors: dict[str, str] | None = None,
    preview: dict[str, Any] | None = None,
    valid: bool = False,
    status_code: int = 200,
    data_rows: int = 1,
) -> HTMLResponse:
    options = _options(s, ctx, me)
    asked = (preview or {}).get("gpu_fraction")
    return render(
        request,
        "submit.html.j2",
        me,
        status_code,
        nav="submit",
        v=values,
        errors=_placed(errors or {}, options, me),
        preview=json.dumps(preview or {}, indent=2),
        valid=valid,
        data_rows=max(1, data_rows),
        field_label=field_label,
        field_anchor=field_anchor,
        max_data=MAX_DATA,
        # the share the scheduler would hold and bill, beside the preview as it is typed
        asked_fraction=asked if isinstance(asked, float) and 0 < asked < 1 else None,
        held_fraction=held_gpu_fraction(asked)
        if isinstance(asked, float) and 0 < asked < 1
        else None,
        **options,
    )


LABELS = {
    "name": "Name",
    "team": "Team",
    "project": "Project",
    "kind": "Kind",
    "request_type": "GPUs",
    "gpus": "GPUs per worker",
    "mig_profile": "MIG profile",
    "gpu_fraction": "Fraction of a GPU",
    "accelerator": "Accelerator",
    "workers": "Workers",
    "priority_class": "Priority class",
    "checkpoint_interval": "Checkpoint interval",
    "runtime_estimate": "Runtime estimate",
    "command": "Command",
    "env": "Environment",
    "data": "Data to stage",
}


def field_label(name: str) -> str:
    """A field's label in the error summary (data rows: "Input 2: to")."""
    found = DATA_ROW.match(name)
    if found:
        part = "copy from" if found.group(1) == "source" else "to"
        return f"Input {int(found.group(2)) + 1}: {part}"
    return LABELS.get(name, name)


def field_anchor(name: str) -> str:
    """The id of the control an error is about (the summary links to it)."""
    special = {"data": "data-fieldset", "request_type": "request-type-gpus"}
    return special.get(name, name.replace("_", "-"))


def _placed(errors: dict[str, str], options: dict[str, Any], me: Me) -> dict[str, str]:
    """Errors about fields this form does not show (no MIG or fractions in the cluster, a
    team to choose only for admins) go to the top of the form, so none is lost."""
    hidden = set()
    if not options["mig_profiles"]:
        hidden.add("mig_profile")
    if not options["fractions"]:
        hidden.add("gpu_fraction")
    if not me.who.is_admin:
        hidden.add("team")
    out = {k: v for k, v in errors.items() if k not in hidden}
    moved = [v for k, v in errors.items() if k in hidden]
    if moved:
        out[FORM] = "; ".join([*([out[FORM]] if FORM in out else []), *moved])
    return dict(sorted(out.items(), key=lambda item: _form_order(item[0])))


def _form_order(name: str) -> tuple[int, int]:
    """Where a field is on the form, so the error summary reads top to bottom."""
    found = DATA_ROW.match(name)
    if found:
        return len(FIELDS) + 1, 2 * int(found.group(2)) + (found.group(1) == "target")
    order = [FORM, *FIELDS, "data"]
    return (order.index(name) if name in order else len(order)), 0


@router.get("/submit", name="submit", response_class=HTMLResponse)
def submit_form(request: Request, me: Caller, ctx: Ctx, s: Db) -> HTMLResponse:
    return _page(request, me, s, ctx, dict(DEFAULTS), preview=parse_submit(DEFAULTS).data)


@router.post("/submit", name="submit_post", response_model=None)
def submit(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> Response:
    """`action=preview` only checks and previews; otherwise the job is queued and the
    browser goes to its page."""
    values = {name: text(form, name) for name in FIELDS}
    rows = min(MAX_DATA, data_row_count(dict.fromkeys(form, "")))
    for row in range(rows):
        for part in ("source", "target"):
            values[f"data_{part}_{row}"] = text(form, f"data_{part}_{row}")
    action = text(form, "action")
    parsed = parse_submit(values)
    errors = dict(parsed.errors)
    req: JobRequest | None = None
    try:
        req = JobRequest.model_validate(parsed.data)
    except ValidationError as exc:
        for name, message in validation_errors(exc, parsed.data_rows).items():
            errors.setdefault(name, message)
    preview = req.model_dump(mode="json", exclude_defaults=True) if req else parsed.data
    if action == "add_data":  # another empty row, without JavaScript
        rows = min(MAX_DATA, rows + 1)
    if action in ("preview", "add_data") or errors or req is None:
        status = 422 if errors and action not in ("preview", "add_data") else 200
        return _page(
            request,
            me,
            s,
            ctx,
            values,
            errors=errors,
            preview=preview,
            valid=not errors,
            status_code=status,
            data_rows=rows,
        )
    try:
        job = api_jobs.submit_job(req, me.who, ctx, s)
    except UserError as exc:
        s.rollback()
        return _page(
            request,
            me,
            s,
            ctx,
            values,
            errors=submit_errors(exc),
            preview=preview,
            status_code=422,
            data_rows=rows,
        )
    return RedirectResponse(f"{PREFIX}/jobs/{job.id}", status_code=303)
