"""The portal as a sub-application mounted at /portal on the control plane's app.

A sub-application keeps the portal out of the API's OpenAPI schema (a form is not an API)
and gives it its own error surface: HTML pages instead of JSON, the login page instead of
a 401. It shares the API's context (store, cluster, clock, executor, rate limiter), so
both see the same state and enforce the same rules.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException

from gpufleet.api.app import JOB_CHANGED
from gpufleet.api.context import AppContext
from gpufleet.api.deps import RateLimitedError, context
from gpufleet.control.auth import AuthError, ForbiddenError, NotFoundError
from gpufleet.control.jobs import JobChangedError
from gpufleet.control.sessions import SESSION_COOKIE, resolve
from gpufleet.errors import UserError
from gpufleet.portal import (
    heavy,
    routes_admin,
    routes_auth,
    routes_chargeback,
    routes_jobs,
    routes_overview,
    routes_planner,
    routes_submit,
    routes_team,
    routes_whatif,
)
from gpufleet.portal.web import PREFIX, LoginRequiredError, Me, render

log = logging.getLogger(__name__)

# Scripts only from this origin (htmx and Chart.js are vendored; no inline script runs);
# inline styles are allowed for the plan report, which carries its own stylesheet. Framing
# is refused by X-Frame-Options, not `frame-ancestors`: the planner shows its report in a
# srcdoc frame, which inherits this policy, and Chromium then refuses to draw it.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def create_portal(ctx: AppContext) -> FastAPI:
    """The portal application (mount it at `PREFIX`)."""
    portal = FastAPI(title="gpufleet portal", docs_url=None, redoc_url=None, openapi_url=None)
    portal.state.ctx = ctx
    heavy.install(portal, ctx)  # the planner's and what-if's runner and its limits
    static = resources.files("gpufleet.portal") / "static"
    portal.mount("/static", StaticFiles(directory=str(static)), name="static")
    for module in (
        routes_auth,
        routes_overview,
        routes_jobs,
        routes_submit,
        routes_team,
        routes_chargeback,
        routes_planner,
        routes_whatif,
        routes_admin,
    ):
        portal.include_router(module.router)
    _errors(portal)

    @portal.middleware("http")
    async def headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        if not request.url.path.startswith(f"{PREFIX}/static/"):
            response.headers.setdefault("Cache-Control", "no-store")  # pages are per user
        return response

    return portal


def _errors(portal: FastAPI) -> None:
    """Errors as pages: a person reads them (and a script uses the API instead)."""

    @portal.exception_handler(LoginRequiredError)
    async def login(request: Request, exc: LoginRequiredError) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        url = f"{PREFIX}/login?next={quote(target, safe='')}"
        if request.headers.get("HX-Request"):  # htmx follows HX-Redirect, not a 303
            return Response(status_code=204, headers={"HX-Redirect": url})
        return RedirectResponse(url, status_code=303)

    def page(
        request: Request, status: int, title: str, message: str, *, lookup: bool = True
    ) -> Response:
        caller = _caller(request, lookup=lookup)
        return render(
            request, "error.html.j2", caller, status, title=title, message=message, status=status
        )

    @portal.exception_handler(UserError)
    async def user_error(request: Request, exc: UserError) -> Response:
        if isinstance(exc, NotFoundError):
            return page(request, 404, "Not found", str(exc))
        if isinstance(exc, ForbiddenError):
            return page(request, 403, "Not allowed", str(exc))
        if isinstance(exc, RateLimitedError):
            return page(request, 429, "Too many requests", str(exc))
        if isinstance(exc, JobChangedError):  # the API's 409: reloading shows the change
            return page(request, 409, "The job changed", str(exc))
        return page(request, 422, "That did not work", str(exc))

    @portal.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        title = "Not found" if exc.status_code == 404 else "Error"
        detail = "No such page." if exc.status_code == 404 else str(exc.detail)
        return page(request, exc.status_code, title, detail)

    @portal.exception_handler(RequestValidationError)
    async def bad_path(request: Request, exc: RequestValidationError) -> Response:
        return page(request, 404, "Not found", "No such page.")

    @portal.exception_handler(IntegrityError)
    async def conflict(request: Request, exc: IntegrityError) -> Response:
        return page(request, 409, "Conflict", "That conflicts with the current state; retry.")

    @portal.exception_handler(StaleDataError)
    async def changed(request: Request, exc: StaleDataError) -> Response:
        # as the API's: a write over a job changed since it was read, on a path no
        # `jobs.checked_writes` covers, wrote nothing; the person reloads and decides again
        log.warning("%s %s: %s (unwrapped: a 409)", request.method, request.url.path, exc)
        message = JOB_CHANGED[:1].upper() + JOB_CHANGED[1:] + "."
        return page(request, 409, "The job changed", message)

    @portal.exception_handler(OperationalError)
    async def busy(request: Request, exc: OperationalError) -> Response:
        return page(request, 503, "Busy", "The store is busy or unavailable; retry.", lookup=False)

    @portal.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> Response:
        # Starlette logs the exception and re-raises it after this page is sent; the page
        # says nothing of it (a traceback may hold another team's data).
        return page(
            request,
            500,
            "Something went wrong",
            "The portal could not show this page. The error is in the server's log; "
            "try again, or tell your admin if it keeps happening.",
            lookup=False,
        )


def _caller(request: Request, *, lookup: bool) -> Me | None:
    """Who an error page is for, so it keeps the nav bar: the caller the page's dependency
    already resolved, else (an unknown path or a malformed id never reaches it) the
    session behind the cookie, looked up once more when `lookup` allows it."""
    known = getattr(request.state, "portal_me", None)
    if isinstance(known, Me):
        return known
    cookie = request.cookies.get(SESSION_COOKIE)
    if not lookup or not cookie:
        return None
    ctx = context(request)
    try:
        with ctx.sessions() as s:
            user = resolve(s, cookie, ctx.clock())
    except (AuthError, SQLAlchemyError):
        return None
    return Me(user.who, user.csrf)


def install_portal(app: FastAPI, ctx: AppContext) -> None:
    """Mount the portal at /portal and send the site root there."""
    app.mount(PREFIX, create_portal(ctx))

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=307)
