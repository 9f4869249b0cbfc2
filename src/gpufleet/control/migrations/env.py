"""Alembic environment: runs on the engine `gpufleet.control.db.upgrade` passes in."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from gpufleet.control.models import Base

engine = context.config.attributes.get("engine")
if not isinstance(engine, Engine):  # pragma: no cover - only via gpufleet.control.db
    raise RuntimeError("run migrations through `gpufleet db upgrade`")

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=engine.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
