"""The FastAPI app of the JSON API: routers, the error surface (status codes from the error
types), health and Prometheus metrics. `server.app.create_app(ctx)` adds the portal."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.orm.exc import StaleDataError

from gpufleet import __version__
from gpufleet.api import routes_admin, routes_cluster, routes_jobs
from gpufleet.api.body_limit import BodyLimit
from gpufleet.api.context import AppContext
from gpufleet.api.deps import RateLimitedError
from gpufleet.api.metrics import render_metrics
from gpufleet.api.schemas import PLAIN_TEXT, ReadyOut, UnreadyOut, errors
from gpufleet.control.admin import AdminError
from gpufleet.control.auth import AuthError, ForbiddenError, NotFoundError
from gpufleet.control.db import SchemaMismatchError, StoreError, require_current
from gpufleet.errors import SpecError, UnknownNameError, UserError

STATUS: tuple[tuple[type[Exception], int], ...] = (
    (AuthError, 401),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (RateLimitedError, 429),
    (AdminError, 409),
    (UnknownNameError, 422),
    (SpecError, 422),
    (StoreError, 503),
    (UserError, 422),
)


log = logging.getLogger(__name__)
SCHEMA_RECHECK_S = 60.0  # /readyz: how long a passed schema check stands
# a write over a job changed since the request read it, on a path no `jobs.checked_writes`
# covers: the same advice as its JobChangedError, without naming a job it cannot know
JOB_CHANGED = "a job changed while the request ran; reload and retry"


def validation_details(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """FastAPI's 422 body (`loc`, `msg`, `type`), with the offending `input` only where it is
    a short JSON value. The default handler echoed every input back: a NaN it could not
    encode (a 500 in place of the 422) and whole megabytes of a rejected body."""
    out: list[dict[str, Any]] = []
    for e in errors:
        item = {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e["type"]}
        value = e.get("input")
        if _echoable(value):
            item["input"] = value
        out.append(item)
    return out


def validation_sentence(issues: Sequence[dict[str, Any]]) -> str:
    """One sentence for a 422 that failed validation, as every other error has: the first
    problem and where it is, and how many more there are (all of them are in `errors`).
    Clients read `detail` as a sentence (docs/guide/control-plane.md, Errors): a list there
    printed as "[{'loc': ['body', 'gpus'], ...}]"."""
    if not issues:
        return "the request is not valid"
    first = issues[0]
    loc = [str(p) for p in first["loc"]]
    msg = str(first["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):  # pydantic's, before our sentence
        msg = msg.removeprefix(prefix)
    if first["type"] == "json_invalid":
        at = f" (at character {loc[1]})" if len(loc) > 1 else ""
        text = f"the body is not valid JSON{at}"
    else:
        place, names = (loc[0], loc[1:]) if loc else ("body", [])
        where = ".".join(names)
        kind = {"body": "field", "query": "query parameter", "path": "path parameter"}.get(
            place, place
        )
        what = _lowered(msg) if msg else "not valid"
        if where:
            text = f"{kind} {where}: {what}"
        elif place == "body":
            text = f"the body: {what}"
        else:
            text = what
    more = len(issues) - 1
    if more:
        text += f" (and {more} more problem{'s' if more > 1 else ''}: see errors)"
    return text


def _sentence(exc: UserError) -> str:
    """The one sentence an API error says. A spec error words itself for a file ("quota:
    invalid spec" and one indented line per problem); here its problems are the sentence:
    "limit_gpus (2) is below guaranteed_gpus (4)"."""
    if isinstance(exc, SpecError) and exc.problems:
        return "; ".join(p.strip() for p in exc.problems)
    return str(exc)


def _lowered(sentence: str) -> str:
    """A message's first letter in lower case, to follow "field x: ", unless its first word
    is a name written in capitals (CUDA_VISIBLE_DEVICES, NaN, GPU): lowered it names
    nothing ("cUDA_VISIBLE_DEVICES is set by gpufleet")."""
    first = sentence.split(" ", 1)[0]
    if len(first) > 1 and not first[1:].islower():
        return sentence
    return sentence[:1].lower() + sentence[1:]


def _echoable(value: object) -> bool:
    if value is None or isinstance(value, bool | int):
        return not isinstance(value, int) or abs(value) < 2**63
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and len(value) <= 200 and "\x00" not in value


def create_api(ctx: AppContext) -> FastAPI:
    """The JSON API alone; `server.app.create_app` adds the portal (the app `serve` runs)."""
    app = FastAPI(
        title="gpufleet",
        version=__version__,
        description="A multi-tenant GPU scheduler: submit jobs, see queue positions and "
        "ETAs, quotas, usage and chargeback. Every endpoint but /healthz, /readyz and "
        "/metrics needs `Authorization: Bearer <token>`.",
    )
    app.state.ctx = ctx
    app.add_middleware(BodyLimit)
    app.include_router(routes_jobs.router)
    app.include_router(routes_cluster.router)
    app.include_router(routes_admin.router)

    @app.exception_handler(UserError)
    async def user_error(_: Request, exc: UserError) -> JSONResponse:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"detail": _sentence(exc)}, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        issues = validation_details(exc.errors())
        return JSONResponse({"detail": validation_sentence(issues), "errors": issues}, 422)

    @app.exception_handler(IntegrityError)
    async def conflict(_: Request, exc: IntegrityError) -> JSONResponse:
        return JSONResponse({"detail": "conflict with the current state; retry"}, 409)

    @app.exception_handler(StaleDataError)
    async def changed(request: Request, exc: StaleDataError) -> JSONResponse:
        # the safety net under `jobs.checked_writes`: the write failed and wrote nothing
        # (`Job.version`), so it is the caller's conflict to retry, not a server error. The
        # log names the path, which should have said which job changed
        log.warning("%s %s: %s (unwrapped: a 409)", request.method, request.url.path, exc)
        return JSONResponse({"detail": JOB_CHANGED}, 409)

    @app.exception_handler(DataError)
    async def unstorable(_: Request, exc: DataError) -> JSONResponse:
        # a value the store refuses (PostgreSQL: a NUL byte in text, a number out of range)
        # that no check before it caught: the request's fault, never a 500
        return JSONResponse({"detail": "a value in the request cannot be stored"}, 422)

    @app.exception_handler(OperationalError)
    async def unavailable(_: Request, exc: OperationalError) -> JSONResponse:
        return JSONResponse({"detail": "the store is busy or unavailable; retry"}, 503)

    @app.get("/healthz", tags=["health"], responses=errors(413))
    def healthz() -> dict[str, str | int]:
        """The process is up; `pid`: the API worker process that answered (a server runs
        several, `gpufleet serve --workers`)."""
        return {"status": "ok", "pid": os.getpid()}

    # the schema check reads Alembic's scripts (~0.7 s): done once a minute, not per probe
    schema_checked_at = [-math.inf]

    @app.get(
        "/readyz",
        tags=["health"],
        response_model=None,
        responses={
            200: {"model": ReadyOut, "description": "Ready."},
            **errors(413),
            503: {
                "model": UnreadyOut,
                "description": "The store does not answer, or its schema is not this version's.",
            },
        },
    )
    def readyz() -> Response:
        """The store answers and its schema is the one this version needs; `leader`: this
        server's reconciler holds the lease; `reconciler`: its process runs (a standby's
        too), false for a few seconds after a start."""
        try:
            with ctx.sessions() as s:
                s.execute(text("SELECT 1"))
                now = time.monotonic()
                if now - schema_checked_at[0] > SCHEMA_RECHECK_S:
                    require_current(s.get_bind())  # type: ignore[arg-type]
                    schema_checked_at[0] = now
        except (StoreError, OperationalError) as exc:
            schema_checked_at[0] = -math.inf  # checked again at the next call
            # anyone may ask: the store's address, user and error text go to the log only
            log.warning("not ready: %s", exc)
            detail = (
                f"the store is at schema {exc.current or 'none'}, this version needs "
                f"{exc.needed}: run `gpufleet db upgrade`"
                if isinstance(exc, SchemaMismatchError)
                else "the store does not answer (the server's log says why)"
            )
            return JSONResponse({"status": "unavailable", "detail": detail}, 503)
        return JSONResponse(
            {"status": "ready", "leader": ctx.leader(), "reconciler": ctx.reconciler_running()}
        )

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=Response,  # no media type of its own: errors stay declared as JSON
        responses={200: PLAIN_TEXT, **errors(413, 503)},
    )
    def metrics() -> Response:
        """Prometheus exposition: gpufleet_* gauges and counters in base units."""
        body, content_type = render_metrics(ctx)
        return Response(body, media_type=content_type)

    return app
