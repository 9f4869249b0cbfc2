"""portal sessions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "portal_sessions",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("created_s", sa.Float(), nullable=False),
        sa.Column("expires_s", sa.Float(), nullable=False),
        sa.Column("last_seen_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["tokens.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("digest"),
    )
    with op.batch_alter_table("portal_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_portal_sessions_expires", ["expires_s"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("portal_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_portal_sessions_expires")
    op.drop_table("portal_sessions")
