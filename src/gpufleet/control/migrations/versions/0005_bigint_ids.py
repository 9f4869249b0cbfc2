"""64-bit row ids and rates on PostgreSQL; the audit log indexed by target

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03

The API takes ids up to 2^63 - 1 in its paths, but PostgreSQL's `serial` columns are 32-bit:
an id from 2^31 on failed in the driver (a 500, and the connection reset). Ids, the columns
that refer to them, and the micro-dollar rates (2,147.48 $/GPU-h was the largest rate a
32-bit column held) become BIGINT, and each id sequence `AS bigint`. SQLite's INTEGER is
already 64-bit, so nothing changes there. On both stores the audit log gets an index on
`target`: an admin's view of a preempted job reads that job's `job.preempted` entries.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# (table, column, is the table's serial id)
COLUMNS = (
    ("teams", "id", True),
    ("projects", "id", True),
    ("projects", "team_id", False),
    ("quotas", "id", True),
    ("quotas", "team_id", False),
    ("users", "id", True),
    ("users", "team_id", False),
    ("tokens", "id", True),
    ("tokens", "user_id", False),
    ("tokens", "team_id", False),
    ("jobs", "id", True),
    ("jobs", "team_id", False),
    ("job_events", "id", True),
    ("job_events", "job_id", False),
    ("allocations", "id", True),
    ("allocations", "job_id", False),
    ("usage_ledger", "id", True),
    ("usage_ledger", "job_id", False),
    ("devices", "id", True),
    ("audit_log", "id", True),
    ("portal_sessions", "token_id", False),
    ("flavor_rates", "usd_micro_per_gpu_h", False),
)


def _alter(kind: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite: INTEGER is 64-bit, and a primary key must stay INTEGER
    for table, column, serial in COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger() if kind == "bigint" else sa.Integer())
        if serial:
            op.execute(
                f"ALTER SEQUENCE IF EXISTS {table}_{column}_seq AS {kind}"
                if kind == "bigint"
                else f"ALTER SEQUENCE IF EXISTS {table}_{column}_seq AS integer"
            )


def upgrade() -> None:
    _alter("bigint")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index("ix_audit_target", ["target"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_target")
    _alter("integer")
