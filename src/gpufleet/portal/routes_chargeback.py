"""Chargeback: a period picker, the report by team/project/user/accelerator, CSV and PDF.

The numbers come from the API's report handler (`/api/v1/reports/chargeback`, called as a
function), so the page, its CSV and a script's download are the same report to the cent,
with the same rules: members and leads see their team only; idle capacity only in
admins' reports. The PDF is this page's table printed by WeasyPrint. Both print it as
`chargeback_table` does, so that a reader can check every row and the total from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from gpufleet.api import routes_cluster
from gpufleet.api.context import AppContext
from gpufleet.control.chargeback_report import GROUP_KEYS
from gpufleet.errors import UserError
from gpufleet.portal.chargeback_table import chargeback_table
from gpufleet.portal.period import PERIODS, Period, day, resolve_period
from gpufleet.portal.web import Caller, Ctx, Db, Me, render, templates
from gpufleet.report.render import pdf_available

router = APIRouter()
GROUPS = tuple(k for k in GROUP_KEYS if k != "job")  # a job per row is the API's job
Basis = Literal["allocation", "usage"]
Idle = Literal["none", "uniform", "proportional"]


@dataclass(frozen=True)
class Choice:
    """What the picker asked for, as the form shows it again."""

    period: str
    from_date: str
    to_date: str
    group_by: tuple[str, ...]
    basis: str
    idle: str

    def query(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "from": self.from_date,
            "to": self.to_date,
            "group_by": list(self.group_by),
            "basis": self.basis,
            "idle": self.idle,
        }


def choice(
    ctx: Ctx,
    *,
    period: str = "this-month",
    from_: Annotated[str, Query(alias="from")] = "",
    to: str = "",
    group_by: Annotated[list[str] | None, Query()] = None,
    basis: str = "allocation",
    idle: str = "none",
) -> Choice:
    """The picker's query parameters, with anything unknown replaced by its default."""
    now_s = ctx.clock()
    keys = tuple(g for g in GROUPS if g in (group_by or ())) or ("team",)
    return Choice(
        period if period in PERIODS else "this-month",
        from_ or day(now_s - 30 * 86_400),
        to or day(now_s),
        keys,
        basis if basis in ("allocation", "usage") else "allocation",
        idle if idle in ("none", "uniform", "proportional") else "none",
    )


Picked = Annotated[Choice, Depends(choice)]


def _report(
    me: Me, ctx: AppContext, s: Db, c: Choice, fmt: Literal["json", "csv"]
) -> tuple[Period, Any]:
    p = resolve_period(c.period, c.from_date, c.to_date, ctx.clock())
    out = routes_cluster.chargeback(
        who=me.who,
        ctx=ctx,
        s=s,
        from_=repr(p.start_s),
        to=repr(p.end_s),
        group_by=",".join(c.group_by),
        format=fmt,
        basis=cast(Basis, c.basis),  # one of them: `choice` checked it
        idle=cast(Idle, c.idle),
    )
    return p, out


@router.get("/chargeback", name="chargeback", response_class=HTMLResponse)
def chargeback_page(request: Request, me: Caller, ctx: Ctx, s: Db, c: Picked) -> HTMLResponse:
    error = None
    p: Period | None = None
    report = None
    try:
        p, report = _report(me, ctx, s, c, "json")
    except UserError as exc:
        error = str(exc)
    return render(
        request,
        "chargeback.html.j2",
        me,
        422 if error else 200,
        nav="chargeback",
        c=c,
        q=c.query(),
        periods=PERIODS,
        groups=GROUPS,
        period=p,
        report=report,
        table=None if report is None else chargeback_table(report),
        error=error,
        pdf_missing=pdf_available(),
    )


def _download_name(p: Period, ext: str) -> str:
    """The file's name by the first and the last day it covers, both inclusive as the
    picker's dates are: a period that ends at midnight does not cover that day. May
    (2026-05-01 to 2026-05-31 in the picker) was saved as "...-to-2026-06-01"."""
    last = p.end_s - 1 if p.end_s == _midnight_of(p.end_s) else p.end_s
    return f"chargeback-{day(p.start_s)}-to-{day(max(p.start_s, last))}.{ext}"


def _midnight_of(t_s: float) -> float:
    """The UTC midnight at or before `t_s`."""
    return t_s - t_s % 86_400


@router.get("/chargeback.csv", name="chargeback_csv")
def chargeback_csv(me: Caller, ctx: Ctx, s: Db, c: Picked) -> Response:
    """The API's CSV (comment lines saying how it was computed, rows, TOTAL last)."""
    p, out = _report(me, ctx, s, c, "csv")
    assert isinstance(out, Response)
    return Response(
        bytes(out.body),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{_download_name(p, "csv")}"'},
    )


@router.get("/chargeback.pdf", name="chargeback_pdf")
def chargeback_pdf(me: Caller, ctx: Ctx, s: Db, c: Picked) -> Response:
    """The report table as a PDF (WeasyPrint, as the plan reports are printed)."""
    missing = pdf_available()
    if missing is not None:
        raise UserError(missing)
    p, report = _report(me, ctx, s, c, "json")
    html = templates.get_template("chargeback_pdf.html.j2").render(
        c=c, period=p, report=report, table=chargeback_table(report), me=me, now_s=ctx.clock()
    )
    from weasyprint import HTML  # type: ignore[import-untyped]

    pdf: bytes = HTML(string=html, base_url=None).write_pdf()
    return Response(
        pdf,
        media_type="application/pdf",
        headers={"Content-Disposition": f'attachment; filename="{_download_name(p, "pdf")}"'},
    )
