"""Request dependencies: a session per request, and the caller resolved from its token.

The dependencies are `async` on purpose: FastAPI runs a sync dependency in a worker thread,
one hop each, and these do no I/O on the common path (the caller comes from a cache; the
session opens its connection only when the handler, in its worker thread, first queries).
A cache miss asks the store in a worker thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request
from pydantic import Field
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from gpufleet.api.context import AppContext
from gpufleet.control.admin import NAME_RE
from gpufleet.control.auth import AuthError, Principal, authenticate_cached, digest
from gpufleet.control.models import MAX_UNIX_S
from gpufleet.control.sessions import CSRF_HEADER, SESSION_COOKIE, cookie_principal
from gpufleet.errors import UserError


class RateLimitedError(UserError):
    """Too many requests for one token (HTTP 429)."""


def context(request: Request) -> AppContext:
    ctx: AppContext = request.app.state.ctx
    return ctx


async def _context(request: Request) -> AppContext:  # the dependency: no worker-thread hop
    return context(request)


async def session(request: Request) -> AsyncIterator[Session]:
    s = context(request).sessions()
    try:
        yield s
    finally:
        s.close()  # a no-op after `ReleasingRoute` closed it; else in a rare error path


async def read_session(request: Request) -> AsyncIterator[Session]:
    s = context(request).read_sessions()  # see `db.read_sessions`
    try:
        yield s
    finally:
        s.close()


async def principal(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Principal:
    ctx = context(request)
    cookie = request.cookies.get(SESSION_COOKIE)  # the portal's session (issue 9)
    who: Principal | None
    if cookie and not authorization:
        with failures_counted(ctx, request):
            who = await run_in_threadpool(_cookie_caller, ctx, request, cookie)
    else:
        token = None
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value:
                raise AuthError("use 'Authorization: Bearer <token>'")
            token = value.strip()
        now = ctx.clock()
        who = ctx.principals.get(digest(token), now) if token else None
        if who is None:
            with failures_counted(ctx, request):
                who = await run_in_threadpool(_bearer_caller, ctx, token, now)
    if not ctx.limiter.allow(who.token_id):
        raise RateLimitedError("too many requests for this token; slow down")
    return who


@contextmanager
def failures_counted(ctx: AppContext, request: Request) -> Iterator[None]:
    """Authenticate inside this block: an address whose failures used up its bucket gets
    429 before the store is asked, and an AuthError raised inside counts against it. A
    token the workers have cached is never stopped here (it needs no lookup)."""
    client = request.client.host if request.client else ""
    if ctx.auth_failures.blocked(client):
        raise RateLimitedError(
            "too many failed authentications from this address; wait a minute and check the token"
        )
    try:
        yield
    except AuthError:
        ctx.auth_failures.spend(client)
        raise


def _bearer_caller(ctx: AppContext, token: str | None, now_s: float) -> Principal:
    with ctx.sessions() as s:
        who = authenticate_cached(ctx.principals, s, token, now_s)
        s.commit()  # last-used time
    return who


def _cookie_caller(ctx: AppContext, request: Request, cookie: str) -> Principal:
    with ctx.sessions() as s:
        who = cookie_principal(
            s,
            cookie,
            ctx.clock(),
            method=request.method,
            csrf_header=request.headers.get(CSRF_HEADER),
        )
        s.commit()  # last-seen and last-used times
    return who


Ctx = Annotated[AppContext, Depends(_context)]
Db = Annotated[Session, Depends(session)]
ReadDb = Annotated[Session, Depends(read_session)]  # a handler that never writes
Caller = Annotated[Principal, Depends(principal)]

MAX_ID = 2**63 - 1  # ids are 64-bit integers in both stores (migration 0005)
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="The job's id.")]
TokenId = Annotated[int, Path(ge=1, le=MAX_ID, description="The token's id.")]

# Unix times a client may send (`models.MAX_UNIX_S`); a time in the future is clamped where
# it must not be later than now (a checkpoint)
UnixTime = Annotated[float, Field(ge=0, le=MAX_UNIX_S, allow_inf_nan=False)]
# names in list filters: team and project names are DNS labels (`admin.NAME_RE`); anything
# else (a NUL byte, which PostgreSQL refuses in text) matches no row and is refused at once
NameFilter = Annotated[str | None, Query(min_length=1, max_length=63, pattern=NAME_RE.pattern)]
