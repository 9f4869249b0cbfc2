"""Leader election by a lease row: one server runs the reconciler, the others serve the API.

`renew` is one conditional UPDATE (take the lease if it is ours or has expired), so it
is atomic on SQLite and PostgreSQL alike without advisory locks. The lease is renewed
at the start of a cycle and again inside the cycle's commit transaction: a server that
lost its lease mid-cycle (paused, partitioned) rolls its decisions back instead of
committing them next to the new leader's (fencing).
"""

from __future__ import annotations

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpufleet.control.models import Lease


class LeaseLost(Exception):  # noqa: N818 - a signal, not an error a user sees
    """Another server holds the lease now."""


def renew(session: Session, name: str, holder: str, now_s: float, ttl_s: float) -> bool:
    """Take or extend the lease `name` for `holder`; True if `holder` holds it now."""
    result = session.execute(
        update(Lease)
        .where(Lease.name == name, or_(Lease.holder == holder, Lease.expires_s < now_s))
        .values(holder=holder, expires_s=now_s + ttl_s)
    )
    if result.rowcount:  # type: ignore[attr-defined]
        return True
    if session.get(Lease, name) is not None:
        return False
    try:
        with session.begin_nested():
            session.add(Lease(name=name, holder=holder, expires_s=now_s + ttl_s))
    except IntegrityError:
        return False  # another server created it first
    return True


def release(session: Session, name: str, holder: str) -> None:
    """Give the lease up on a clean shutdown, so a standby takes over at once."""
    session.execute(
        update(Lease).where(Lease.name == name, Lease.holder == holder).values(expires_s=0.0)
    )
