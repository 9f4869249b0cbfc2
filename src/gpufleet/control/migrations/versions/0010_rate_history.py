"""chargeback rates as history: each rate in force from a time

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05

`flavor_rates` held one rate per flavor, overwritten by every `PUT /admin/rates`, and every
report priced all GPU time at it: a rate set today re-priced last month's closed bill
(0.00 became 0.72). `flavor_rate_history` keeps every rate with the time it takes effect;
reports price each GPU-second at the rate in force when it was used.

The rates a store already has are taken as in force since the epoch (`effective_s` 0): that
is what every report made before the upgrade charged, so upgrading re-prices nothing. (Their
creation time is not known: a rate's audit entries say when it was last set, not which
earlier value each period was billed at, and the reports ignored them anyway.) Their
`set_s` is the last `rate.set` in the audit log, 0 where there is none.

Downgrading keeps, per flavor, the rate in force at the time of the downgrade (the latest
one that took effect by then); a flavor whose only rates start later has none (reports list
it as unpriced, as before the rate existed). The history is lost.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

Int64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "flavor_rate_history",
        sa.Column("id", Int64, nullable=False),
        sa.Column("flavor", sa.String(length=63), nullable=False),
        sa.Column("usd_micro_per_gpu_h", Int64, nullable=False),
        sa.Column("effective_s", sa.Float(), nullable=False),
        sa.Column("set_s", sa.Float(), nullable=False),
        sa.Column("set_by", sa.String(length=63), nullable=False),
        sa.Column("repriced", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_flavor_rate_history_flavor", "flavor_rate_history", ["flavor", "effective_s"]
    )
    op.execute(
        "INSERT INTO flavor_rate_history "
        "(flavor, usd_micro_per_gpu_h, effective_s, set_s, set_by, repriced) "
        "SELECT flavor, usd_micro_per_gpu_h, 0, "
        "COALESCE((SELECT MAX(at_s) FROM audit_log WHERE action = 'rate.set' "
        "AND target = 'flavor/' || flavor_rates.flavor), 0), 'migration 0010', FALSE "
        "FROM flavor_rates ORDER BY flavor"
    )
    op.drop_table("flavor_rates")


def downgrade() -> None:
    op.create_table(
        "flavor_rates",
        sa.Column("flavor", sa.String(length=63), nullable=False),
        sa.Column("usd_micro_per_gpu_h", Int64, nullable=False),
        sa.PrimaryKeyConstraint("flavor"),
    )
    now_s = time.time()
    rows = op.get_bind().execute(
        sa.text(
            "SELECT flavor, usd_micro_per_gpu_h FROM flavor_rate_history "
            "WHERE effective_s <= :now ORDER BY flavor, effective_s, id"
        ),
        {"now": now_s},
    )
    in_force = {str(f): int(m) for f, m in rows}  # the last per flavor wins
    if in_force:
        op.bulk_insert(
            sa.table(
                "flavor_rates",
                sa.column("flavor", sa.String()),
                sa.column("usd_micro_per_gpu_h", Int64),
            ),
            [{"flavor": f, "usd_micro_per_gpu_h": m} for f, m in sorted(in_force.items())],
        )
    op.drop_index("ix_flavor_rate_history_flavor", table_name="flavor_rate_history")
    op.drop_table("flavor_rate_history")
