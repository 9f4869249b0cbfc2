"""Schema migrations: the chain applies from nothing, the models match the head, and a
store one version behind is refused until upgraded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, text

from gpufleet.control.db import (
    StoreError,
    _alembic_config,
    current_revision,
    head_revision,
    make_engine,
    require_current,
    upgrade,
)
from gpufleet.control.models import Base

from .conftest import _pg_engine


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


@pytest.fixture(params=["sqlite", "postgresql"])
def bare(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An empty store on each backend, migrated by the test itself."""
    if request.param == "sqlite":
        eng = make_engine(f"sqlite:///{tmp_path}/bare.db")
        yield eng
        eng.dispose()
    else:
        yield from _pg_engine()


def test_0010_keeps_old_rates_as_in_force_since_the_epoch_and_downgrades(bare: Engine) -> None:
    """Rates of a store before 0010 priced all time: they become history in force since
    1970, so upgrading re-prices nothing; set_s is their last audit entry. Downgrading keeps
    each flavor's rate in force now (a flavor with only a future rate has none)."""
    upgrade(bare, "0009")
    with bare.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO flavor_rates (flavor, usd_micro_per_gpu_h) VALUES "
                "('h100-sxm5-80gb', 2124738), ('l4', 456700)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO audit_log (at_s, actor, role, action, target, detail) VALUES "
                "(1780000000.0, 'admin', 'admin', 'rate.set', 'flavor/l4', '{}'), "
                "(1780000500.0, 'admin', 'admin', 'rate.set', 'flavor/l4', '{}')"
            )
        )
    upgrade(bare)
    with bare.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT flavor, usd_micro_per_gpu_h, effective_s, set_s, set_by, repriced "
                "FROM flavor_rate_history ORDER BY flavor"
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        ("h100-sxm5-80gb", 2124738, 0.0, 0.0, "migration 0010", False),
        ("l4", 456700, 0.0, 1780000500.0, "migration 0010", False),
    ]
    with bare.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO flavor_rate_history "
                "(flavor, usd_micro_per_gpu_h, effective_s, set_s, set_by, repriced) VALUES "
                "('h100-sxm5-80gb', 3000000, 1000.0, 2000.0, 'admin', TRUE), "
                "('a100-sxm4-80gb', 1000000, 4102444800.0, 2000.0, 'admin', FALSE)"
            )
        )
    command.downgrade(_alembic_config(bare), "0009")
    assert current_revision(bare) == "0009"
    with bare.connect() as conn:
        rates = conn.execute(
            text("SELECT flavor, usd_micro_per_gpu_h FROM flavor_rates ORDER BY flavor")
        ).all()
    assert [tuple(r) for r in rates] == [("h100-sxm5-80gb", 3000000), ("l4", 456700)]
    upgrade(bare)
    require_current(bare)
