"""a team's highest priority class for its leads and members

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Issue 30: a lead could raise a job to the non-preemptible production class with no
    # policy. Teams that existed before keep what they could do: their cap is the highest
    # class there is (NULL, for a new team, means its default class).
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_priority_class", sa.String(length=63), nullable=True))
    op.execute(
        "UPDATE teams SET max_priority_class = "
        "(SELECT name FROM priority_classes ORDER BY value DESC LIMIT 1)"
    )


def downgrade() -> None:
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_column("max_priority_class")
