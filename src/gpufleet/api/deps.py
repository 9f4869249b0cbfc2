"""Request dependencies: a session per request, and the caller resolved from its token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from sqlalchemy.orm import Session

from gpufleet.api.context import AppContext
from gpufleet.control.auth import AuthError, Principal, authenticate
from gpufleet.errors import UserError
from gpufleet.portal.sessions import CSRF_HEADER, SESSION_COOKIE, cookie_principal


class RateLimitedError(UserError):
    """Too many requests for one token (HTTP 429)."""


def context(request: Request) -> AppContext:
    ctx: AppContext = request.app.state.ctx
    return ctx


def session(request: Request) -> Iterator[Session]:
    with context(request).sessions() as s:
        yield s


def principal(
    request: Request,
    s: Annotated[Session, Depends(session)],
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    ctx = context(request)
    cookie = request.cookies.get(SESSION_COOKIE)  # the portal's session (issue 9)
    if cookie and not authorization:
        who = cookie_principal(
            s,
            cookie,
            ctx.clock(),
            method=request.method,
            csrf_header=request.headers.get(CSRF_HEADER),
        )
    else:
        token = None
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value:
                raise AuthError("use 'Authorization: Bearer <token>'")
            token = value.strip()
        who = authenticate(s, token, ctx.clock())
    s.commit()  # last-used time
    if not ctx.limiter.allow(who.token_id):
        raise RateLimitedError("too many requests for this token; slow down")
    return who


Ctx = Annotated[AppContext, Depends(context)]
Db = Annotated[Session, Depends(session)]
Caller = Annotated[Principal, Depends(principal)]

MAX_ID = 2**63 - 1  # ids are 64-bit integers in both stores
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="The job's id.")]
TokenId = Annotated[int, Path(ge=1, le=MAX_ID, description="The token's id.")]
