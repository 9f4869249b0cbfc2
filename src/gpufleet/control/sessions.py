"""Portal sessions: an API token pasted once becomes a server-side session behind a cookie.

The cookie never holds the token: it holds a random 256-bit session id, and the store keeps
only the id's SHA-256 (as for tokens), so neither a stolen database nor a logged cookie
reveals a token, and logging out (deleting the row) ends the session everywhere at once.
A session acts with the rights of its token, re-checked at every request, so revoking a
token or letting it expire closes its sessions too. Sessions last `SESSION_TTL_S` from
login, however active.

CSRF: each session stores its own random CSRF value. Every POST form carries it in a hidden
field and htmx sends it as the `X-CSRF-Token` header; a request that changes something
without it is refused, whether it comes to a portal page or, with the cookie, to the API.
(The cookie is also SameSite=Strict, which stops cross-site requests in current browsers;
the token does not rely on that.)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import delete
from sqlalchemy.orm import Session

from gpufleet.control.auth import (
    AuthError,
    ForbiddenError,
    Principal,
    authenticate,
    digest,
    principal_of,
)
from gpufleet.control.models import PortalSession

SESSION_COOKIE = "gpufleet_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SESSION_TTL_S = 12 * 3600.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Opened:
    """A new session: the id for the cookie (shown to nobody else) and its CSRF value."""

    session_id: str
    csrf: str
    expires_s: float


@dataclass(frozen=True, slots=True)
class SessionUser:
    """Who a request's session belongs to, and the CSRF value its forms must carry."""

    who: Principal
    csrf: str
    expires_s: float


def open_session(s: Session, token: str, now_s: float) -> tuple[Opened, Principal]:
    """Check `token` as the API would and open a session for it (caller commits).

    Raises AuthError for a missing, unknown, revoked or expired token. Expired sessions of
    everyone are deleted on the way, so the table holds at most a day's logins."""
    who = authenticate(s, token.strip(), now_s)
    s.execute(delete(PortalSession).where(PortalSession.expires_s <= now_s))
    session_id = secrets.token_urlsafe(32)  # 256 random bits
    csrf = secrets.token_urlsafe(32)
    expires = now_s + SESSION_TTL_S
    s.add(
        PortalSession(
            digest=digest(session_id),
            token_id=who.token_id,
            csrf=csrf,
            created_s=now_s,
            expires_s=expires,
            last_seen_s=now_s,
        )
    )
    return Opened(session_id, csrf, expires), who


def resolve(s: Session, session_id: str | None, now_s: float) -> SessionUser:
    """The session behind a cookie value, with its token re-checked. Raises AuthError."""
    if not session_id:
        raise AuthError("not logged in")
    row = s.get(PortalSession, digest(session_id))
    if row is None:
        raise AuthError("this session has ended; log in again")
    if row.expires_s <= now_s:
        raise AuthError("this session has expired; log in again")
    who = principal_of(row.token, now_s)
    if now_s - row.last_seen_s >= 60:  # at most one write a minute per session
        row.last_seen_s = now_s
    return SessionUser(who, row.csrf, row.expires_s)


def close_session(s: Session, session_id: str | None) -> None:
    """Delete the session (logout); nothing happens for an unknown or empty id."""
    if session_id:
        s.execute(delete(PortalSession).where(PortalSession.digest == digest(session_id)))


def csrf_ok(expected: str, presented: str | None) -> bool:
    """Constant-time comparison of the session's CSRF value with what a request sent."""
    return bool(presented) and secrets.compare_digest(expected, presented or "")


def cookie_principal(
    s: Session, session_id: str, now_s: float, *, method: str, csrf_header: str | None
) -> Principal:
    """The API's cookie path: the session's principal; a request that is not a read must
    carry the session's CSRF value in `X-CSRF-Token` (bearer requests need none: a browser
    never adds an Authorization header on its own)."""
    user = resolve(s, session_id, now_s)
    if method.upper() not in SAFE_METHODS and not csrf_ok(user.csrf, csrf_header):
        raise ForbiddenError(f"a request with the session cookie needs the {CSRF_HEADER} header")
    return user.who
