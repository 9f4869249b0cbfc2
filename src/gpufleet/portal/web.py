"""What every portal page needs: the logged-in user, CSRF-checked forms, and rendering.

Pages resolve the caller from the session cookie (`sessions.resolve`), with the same
rights and the same per-token rate limit as the API; a caller without a live session is
sent to the login page rather than answered 401, since a person, not a script, is reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from gpufleet.api.context import AppContext
from gpufleet.api.deps import RateLimitedError, context, failures_counted, session
from gpufleet.control.auth import AuthError, ForbiddenError, Principal
from gpufleet.control.sessions import CSRF_FIELD, CSRF_HEADER, SESSION_COOKIE, csrf_ok, resolve
from gpufleet.portal import fmt

PREFIX = "/portal"


class LoginRequiredError(Exception):
    """No live session: the portal answers with the login page (a redirect)."""


class CsrfError(ForbiddenError):
    """A form or htmx request without this session's CSRF token (HTTP 403)."""


@dataclass(frozen=True, slots=True)
class Me:
    """The logged-in caller of a page: who they are and their session's CSRF token."""

    who: Principal
    csrf: str

    @property
    def can_write(self) -> bool:
        return self.who.role != "viewer"

    @property
    def can_prioritise(self) -> bool:
        return self.who.role in ("admin", "lead")


def me(request: Request, s: Annotated[Session, Depends(session)]) -> Me:
    """The page's caller, or LoginRequiredError. Commits the session's last-seen time."""
    ctx = context(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    try:
        if cookie:  # a lookup: failures count against the address (`failures_counted`)
            with failures_counted(ctx, request):
                user = resolve(s, cookie, ctx.clock())
        else:
            user = resolve(s, cookie, ctx.clock())
    except AuthError as exc:
        raise LoginRequiredError(str(exc)) from None
    s.commit()
    caller = Me(user.who, user.csrf)
    request.state.portal_me = caller  # for an error page of this request (its nav bar)
    if not ctx.limiter.allow(user.who.token_id):
        raise RateLimitedError("too many requests for this token; slow down")
    return caller


async def checked_form(request: Request, caller: Annotated[Me, Depends(me)]) -> FormData:
    """The request's form, once its CSRF token (field or htmx header) matches the session."""
    form = await request.form()
    field = form.get(CSRF_FIELD)
    presented = request.headers.get(CSRF_HEADER) or (field if isinstance(field, str) else None)
    if not csrf_ok(caller.csrf, presented):
        raise CsrfError("this form has expired or did not come from this portal; reload the page")
    return form


Caller = Annotated[Me, Depends(me)]
Form = Annotated[FormData, Depends(checked_form)]
Ctx = Annotated[AppContext, Depends(context)]
Db = Annotated[Session, Depends(session)]


def text(form: FormData, name: str) -> str:
    """A form field as stripped text ('' when absent or a file)."""
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


@pass_context
def _path_for(jinja_ctx: Mapping[str, Any], name: str, /, **params: Any) -> str:
    """A portal URL path (no scheme or host), with `query` as its query string."""
    request: Request = jinja_ctx["request"]
    query = params.pop("query", None)
    # the portal's own routes under its mount point: `request.url_for` searches the whole
    # site, where an API route of the same name (the API's `chargeback`) would shadow it
    own = request.app.url_path_for(name, **{k: str(v) for k, v in params.items()})
    path = request.scope.get("root_path", "") + str(own)
    clean = {k: v for k, v in (query or {}).items() if v not in (None, "")}
    return f"{path}?{urlencode(clean, doseq=True)}" if clean else path


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("gpufleet.portal", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(fmt.FILTERS)
    env.globals["path_for"] = _path_for
    return env


templates = Jinja2Templates(env=_environment())


def render(
    request: Request,
    name: str,
    caller: Me | None,
    status_code: int = 200,
    **values: Any,
) -> HTMLResponse:
    """A page of the portal: the template gets the caller, the clock and the values."""
    ctx = context(request)
    base = {
        "me": caller,
        "now_s": ctx.clock(),
        "csrf_field": CSRF_FIELD,
        "nav": "",
    }
    return templates.TemplateResponse(request, name, {**base, **values}, status_code=status_code)


def local_next(target: str | None, default: str) -> str:
    """A redirect target from a form or query: only a path of this portal, else `default`
    (an open redirect would let a link send a logged-in user anywhere)."""
    if target and target.startswith(PREFIX + "/") and "//" not in target and "\\" not in target:
        return target
    return default
