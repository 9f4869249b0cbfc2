"""Schema migrations: the chain applies from nothing, the models match the head, and a
store one version behind is refused until upgraded."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine

from gpufleet.control.db import (
    StoreError,
    current_revision,
    head_revision,
    make_engine,
    require_current,
    upgrade,
)
from gpufleet.control.models import Base


def test_models_match_the_migrations(engine: Engine) -> None:
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], "models changed without a migration: run alembic revision --autogenerate"


def test_an_old_store_is_refused_until_upgraded(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/old.db")
    upgrade(engine, "0001")
    with pytest.raises(StoreError, match="gpufleet db upgrade"):
        require_current(engine)
    upgrade(engine)
    require_current(engine)
    upgrade(engine)  # idempotent


def test_bad_urls_say_what_to_use() -> None:
    with pytest.raises(StoreError, match="sqlite:///"):
        make_engine("not a url")
    with pytest.raises(StoreError, match="SQLite or PostgreSQL"):
        make_engine("mysql://x@y/z")
