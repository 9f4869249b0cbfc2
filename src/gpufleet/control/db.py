"""Opening the store: SQLite (WAL) by default, PostgreSQL in production; Alembic migrations.

The URL comes from `--db`, else `GPUFLEET_DB`, else a SQLite file in the working
directory, so a newcomer installs nothing. SQLite gets WAL (readers never block
the reconciler's writer), a busy timeout (a second process waits instead of
failing) and foreign keys on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from gpufleet.errors import UserError

DEFAULT_SQLITE = "gpufleet.db"
MIGRATIONS = Path(__file__).parent / "migrations"


class StoreError(UserError):
    """The store cannot be opened or is not at the schema this version needs."""


class SchemaMismatchError(StoreError):
    """The store answers, at another schema revision than this version's (`current`, `needed`)."""

    def __init__(self, message: str, current: str | None, needed: str | None) -> None:
        super().__init__(message)
        self.current, self.needed = current, needed


def database_url(url: str | None = None) -> str:
    """`url`, else `$GPUFLEET_DB`, else a SQLite file in the working directory."""
    chosen = url or os.environ.get("GPUFLEET_DB") or f"sqlite:///{DEFAULT_SQLITE}"
    try:
        parsed = make_url(chosen)
    except ArgumentError:
        raise StoreError(
            f"not a database URL: {chosen!r} (use sqlite:///gpufleet.db or "
            "postgresql+psycopg://user@host/db)"
        ) from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported database {parsed.get_backend_name()!r}: use SQLite or PostgreSQL"
        )
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        chosen = str(parsed.set(drivername="postgresql+psycopg").render_as_string(False))
    return chosen


# More pooled connections than the API's worker threads (anyio's default: 40). With fewer,
# every worker can end up waiting for a connection while the requests holding the
# connections wait for a worker to finish their response: a deadlock under load, found by
# the API benchmark (docs/benchmarks.md).
POOL_SIZE = 20
POOL_OVERFLOW = 30


def make_engine(url: str | None = None, *, pre_ping: bool = True, **kwargs: Any) -> Engine:
    """`pre_ping`: test a pooled PostgreSQL connection before each use (one round trip), so a
    database restart costs nothing visible; without it the requests in flight at a restart
    fail once (503, retry) and the pool reconnects. The API turns it off: on its hot path
    the round trip was a tenth of a request's time."""
    resolved = database_url(url)
    if make_url(resolved).database not in (None, "", ":memory:"):  # a pooled store
        kwargs.setdefault("pool_size", POOL_SIZE)
        kwargs.setdefault("max_overflow", POOL_OVERFLOW)
    if resolved.startswith("sqlite"):
        engine = create_engine(
            resolved, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(resolved, pool_pre_ping=pre_ping, **kwargs)


def _sqlite_pragmas(dbapi_connection: Any, _: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def read_sessions(engine: Engine) -> sessionmaker[Session]:
    """Sessions for requests that only read. On PostgreSQL their connections run in
    autocommit: no BEGIN before the first statement and no ROLLBACK when the session
    closes, two of a GET's five round trips. Nothing is lost by it: PostgreSQL's default
    READ COMMITTED takes a new snapshot for every statement inside a transaction too.
    Elsewhere (SQLite: in-process, its BEGIN costs nothing) the ordinary sessions."""
    if engine.dialect.name != "postgresql":
        return sessions(engine)
    return sessionmaker(
        engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False
    )


def _alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (idempotent: nothing happens when it is current)."""
    try:
        command.upgrade(_alembic_config(engine), revision)
    except OperationalError as exc:
        raise StoreError(f"cannot migrate {_safe(engine)}: {exc.orig}") from None


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def require_current(engine: Engine) -> None:
    """Refuse to serve a store whose schema is behind (or ahead of) this version."""
    try:
        current = current_revision(engine)
    except OperationalError as exc:
        raise StoreError(f"cannot open {_safe(engine)}: {exc.orig}") from None
    head = head_revision()
    if current != head:
        raise SchemaMismatchError(
            f"{_safe(engine)} is at schema {current or 'none'}, this gpufleet needs {head}: "
            "run `gpufleet db upgrade`",
            current,
            head,
        )


def _safe(engine: Engine) -> str:
    """The engine's URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)
