"""API tokens and who may do what.

A token is 256 random bits shown once; the store keeps only its SHA-256, so a
leaked database does not leak tokens (a slow hash buys nothing for random
secrets of this size). Roles, strongest first: `admin` (everything, every team),
`lead` (a team's jobs, including reprioritising them), `member` (submit, read and
cancel within the team), `viewer` (read within the team).

Team isolation answers "not found" rather than "forbidden" for another team's
objects, so the existence of a job does not leak across teams.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass, field
from typing import Literal, get_args

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.control.models import Token
from gpufleet.control.shared import SharedState
from gpufleet.errors import UserError

Role = Literal["admin", "lead", "member", "viewer"]
ROLES: tuple[Role, ...] = get_args(Role)
TOKEN_PREFIX = "gpf_"


class AuthError(UserError):
    """No valid token: missing, unknown, expired or revoked (HTTP 401)."""


class ForbiddenError(UserError):
    """A valid token whose role may not do this (HTTP 403)."""


class NotFoundError(UserError):
    """No such object, or one the caller may not see (HTTP 404)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: resolved once per request from the token."""

    user: str
    role: Role
    team_id: int | None  # None only for admins
    team: str | None
    token_id: int

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def sees_team(self, team_id: int) -> bool:
        return self.is_admin or self.team_id == team_id

    def require(self, *roles: Role) -> None:
        if self.role not in roles:
            raise ForbiddenError(
                f"this needs the role {' or '.join(roles)}; your token is {self.role}"
            )

    def require_team_write(self, team_id: int) -> None:
        """Submit or cancel within one team: admins anywhere, leads and members in theirs."""
        if not self.sees_team(team_id):
            raise NotFoundError("no such team")
        if self.role == "viewer":
            raise ForbiddenError("a viewer token can only read")


def new_token() -> tuple[str, str]:
    """(token, digest): the token for the user, the digest for the store."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, digest(token)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(session: Session, token: str | None, now_s: float) -> Principal:
    """The principal of a bearer token; records its last use. Raises AuthError."""
    row = _token_row(session, digest(_present(token)))
    return principal_of(row, now_s)


def _present(token: str | None) -> str:
    if not token:
        raise AuthError("missing token: send 'Authorization: Bearer <token>'")
    return token


def _token_row(session: Session, token_digest: str) -> Token:
    row = session.scalar(select(Token).where(Token.digest == token_digest))
    if row is None:
        raise AuthError("unknown token")
    return row


def principal_of(row: Token, now_s: float) -> Principal:
    """The principal of a stored token, checked as at every use (revoked, expired); records
    its last use. Shared by bearer tokens and the portal's sessions, which act with the
    rights of the token that opened them. Raises AuthError."""
    if row.revoked_s is not None:
        raise AuthError("this token was revoked")
    if row.expires_s is not None and row.expires_s <= now_s:
        raise AuthError("this token has expired; ask an admin for a new one")
    if row.last_used_s is None or now_s - row.last_used_s >= 60:  # at most one write a minute
        row.last_used_s = now_s
    if row.role not in ROLES:  # pragma: no cover - the store only holds valid roles
        raise AuthError("token has an unknown role")
    return Principal(
        user=row.user.name,
        role=row.role,
        team_id=row.team_id,
        team=row.team.name if row.team else None,
        token_id=row.id,
    )


@dataclass
class PrincipalCache:
    """Bearer token digest -> its principal, for `ttl_s` seconds: the API's hot path asks the
    store for a token at most once per `ttl_s` (the lookup and its lazy loads were half of
    a request's store work). Expiry is still checked at every use; a revocation made
    through this server's API is forgotten at once by every worker process (through
    `shared`'s epoch, when the server has several), one made elsewhere (the CLI, another
    server) takes effect within `ttl_s`."""

    ttl_s: float = 5.0
    shared: SharedState | None = None
    _entries: dict[str, tuple[Principal, float | None, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _epoch: int = 0

    def get(self, token_digest: str, now_s: float) -> Principal | None:
        if self.shared is not None and self.shared.epoch != self._epoch:
            with self._lock:  # another worker revoked a token: forget every principal
                self._epoch = self.shared.epoch
                self._entries.clear()
            return None
        entry = self._entries.get(token_digest)
        if entry is None:
            return None
        who, expires_s, cached_until_s = entry
        if now_s >= cached_until_s or (expires_s is not None and expires_s <= now_s):
            with self._lock:
                self._entries.pop(token_digest, None)
            return None
        return who

    def put(self, token_digest: str, who: Principal, expires_s: float | None, now_s: float) -> None:
        with self._lock:
            if len(self._entries) > 10_000:  # bounded: drop everything rather than grow
                self._entries.clear()
            self._entries[token_digest] = (who, expires_s, now_s + self.ttl_s)

    def forget(self, token_id: int) -> None:
        with self._lock:
            for key in [k for k, (w, _, _) in self._entries.items() if w.token_id == token_id]:
                del self._entries[key]
            if self.shared is not None:  # every worker, this one too, forgets its cache
                self.shared.bump_epoch()


def authenticate_cached(
    cache: PrincipalCache, session: Session, token: str | None, now_s: float
) -> Principal:
    """`authenticate`, answered from `cache` when it can; a miss asks the store (and records
    the token's last use, committed by the caller) and fills the cache."""
    key = digest(_present(token))
    who = cache.get(key, now_s)
    if who is not None:
        return who
    row = _token_row(session, key)
    who = principal_of(row, now_s)
    cache.put(key, who, row.expires_s, now_s)
    return who
