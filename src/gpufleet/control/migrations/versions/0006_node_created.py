"""when each node joined the cluster

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Idle capacity is counted from when a node existed (issue 30: a 7-minute-old cluster
    # was charged idle from the 1st of the month). A node recorded before this migration
    # is taken to exist since it was last updated: the earliest time the store can vouch for.
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("created_s", sa.Float(), nullable=True))
    op.execute("UPDATE nodes SET created_s = updated_s")


def downgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("created_s")
