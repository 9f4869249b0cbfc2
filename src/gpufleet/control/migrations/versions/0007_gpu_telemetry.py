"""GPU telemetry: raw samples, 5-minute roll-ups, per-attempt utilisation, idle policy

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

Int64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "gpu_samples",
        sa.Column("id", Int64, nullable=False),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("node", sa.String(length=63), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("job_id", Int64, nullable=True),
        sa.Column("team", sa.String(length=63), nullable=True),
        sa.Column("util_pct", sa.Float(), nullable=False),
        sa.Column("sm_active_pct", sa.Float(), nullable=True),
        sa.Column("mem_used_bytes", Int64, nullable=True),
        sa.Column("mem_total_bytes", Int64, nullable=True),
        sa.Column("power_w", sa.Float(), nullable=True),
        sa.Column("temp_c", sa.Float(), nullable=True),
        sa.Column("healthy", sa.Boolean(), nullable=False),
        sa.Column("health", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_gpu_samples_time", "gpu_samples", ["time_s"])
    op.create_index("ix_gpu_samples_job", "gpu_samples", ["job_id", "time_s"])
    op.create_table(
        "gpu_samples_5m",
        sa.Column("id", Int64, nullable=False),
        sa.Column("bucket_s", sa.Float(), nullable=False),
        sa.Column("node", sa.String(length=63), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("job_id", Int64, nullable=True),
        sa.Column("team", sa.String(length=63), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("util_mean_pct", sa.Float(), nullable=False),
        sa.Column("util_max_pct", sa.Float(), nullable=False),
        sa.Column("mem_used_max_bytes", Int64, nullable=True),
        sa.Column("mem_total_bytes", Int64, nullable=True),
        sa.Column("power_mean_w", sa.Float(), nullable=True),
        sa.Column("unhealthy_samples", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_gpu_5m_bucket", "gpu_samples_5m", ["bucket_s"])
    op.create_index("ix_gpu_5m_job", "gpu_samples_5m", ["job_id", "bucket_s"])
    op.create_table(
        "job_utilization",
        sa.Column("job_id", Int64, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("busy_gpu_s", sa.Float(), nullable=False),
        sa.Column("sampled_gpu_s", sa.Float(), nullable=False),
        sa.Column("last_sample_s", sa.Float(), nullable=True),
        sa.Column("last_util_pct", sa.Float(), nullable=True),
        sa.Column("mem_used_bytes", Int64, nullable=True),
        sa.Column("low_since_s", sa.Float(), nullable=True),
        sa.Column("idle_flagged_s", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_table(
        "telemetry_state",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("rolled_up_to_s", sa.Float(), nullable=False),
        sa.Column("raw_pruned_to_s", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("idle_policy", sa.String(length=8), nullable=False, server_default="notify")
        )


def downgrade() -> None:
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_column("idle_policy")
    op.drop_table("telemetry_state")
    op.drop_table("job_utilization")
    op.drop_index("ix_gpu_5m_job", table_name="gpu_samples_5m")
    op.drop_index("ix_gpu_5m_bucket", table_name="gpu_samples_5m")
    op.drop_table("gpu_samples_5m")
    op.drop_index("ix_gpu_samples_job", table_name="gpu_samples")
    op.drop_index("ix_gpu_samples_time", table_name="gpu_samples")
    op.drop_table("gpu_samples")
