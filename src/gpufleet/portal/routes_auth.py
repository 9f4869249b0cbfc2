"""Login (paste an API token) and logout.

The login form has no session yet, so its CSRF token is a double-submit value: a random
cookie set with the form, echoed in a hidden field and compared on POST. It stops a
cross-site page from logging a browser into someone else's session.
"""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from gpufleet.api.deps import RateLimitedError, context, failures_counted
from gpufleet.control import sessions
from gpufleet.control.auth import AuthError
from gpufleet.control.sessions import CSRF_FIELD, SESSION_COOKIE, SESSION_TTL_S, csrf_ok
from gpufleet.portal.web import PREFIX, Db, Form, local_next, render, text

router = APIRouter()
LOGIN_COOKIE = "gpufleet_login"


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _login_page(
    request: Request, next_url: str, error: str | None = None, status_code: int = 200
) -> Response:
    csrf = secrets.token_urlsafe(32)
    response = render(
        request,
        "login.html.j2",
        None,
        status_code,
        login_csrf=csrf,
        next_url=next_url,
        error=error,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        csrf,
        max_age=3600,
        path=f"{PREFIX}/login",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    return response


@router.get("/login", name="login")
def login_form(request: Request, next: str | None = None) -> Response:
    return _login_page(request, local_next(next, f"{PREFIX}/"))


@router.post("/login", name="login_submit")
async def login(request: Request, s: Db) -> Response:
    form = await request.form()
    next_url = local_next(text(form, "next"), f"{PREFIX}/")
    field = form.get(CSRF_FIELD)
    presented = field if isinstance(field, str) else None
    if not csrf_ok(request.cookies.get(LOGIN_COOKIE, ""), presented):
        return _login_page(request, next_url, "The form expired; try again.", 403)
    token = text(form, "token")
    ctx = context(request)
    try:
        with failures_counted(ctx, request):
            opened, _ = sessions.open_session(s, token, ctx.clock())
    except RateLimitedError as exc:
        return _login_page(request, next_url, f"Login refused: {exc}.", 429)
    except AuthError as exc:
        s.rollback()
        return _login_page(request, next_url, f"Login failed: {exc}.", 401)
    sessions.close_session(s, request.cookies.get(SESSION_COOKIE))  # no session fixation
    s.commit()
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        opened.session_id,
        max_age=int(SESSION_TTL_S),
        path="/",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    response.delete_cookie(LOGIN_COOKIE, path=f"{PREFIX}/login")
    return response


@router.post("/logout", name="logout")
def logout(request: Request, form: Form, s: Db) -> Response:
    """End the session in the store (not only in this browser) and drop the cookie."""
    sessions.close_session(s, request.cookies.get(SESSION_COOKIE))
    s.commit()
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
