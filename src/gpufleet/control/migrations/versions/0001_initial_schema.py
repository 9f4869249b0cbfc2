"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at_s", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=63), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=48), nullable=False),
        sa.Column("target", sa.String(length=255), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "flavor_rates",
        sa.Column("flavor", sa.String(length=63), nullable=False),
        sa.Column("usd_micro_per_gpu_h", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("flavor"),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("expires_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("accelerator", sa.String(length=63), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("updated_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "priority_classes",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "queue_snapshot",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=False),
        sa.Column("at_s", sa.Float(), nullable=False),
        sa.Column("order", sa.JSON(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("etas", sa.JSON(), nullable=False),
        sa.Column("eta_at_s", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("cohort", sa.String(length=63), nullable=True),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("default_priority", sa.String(length=63), nullable=False),
        sa.Column("monthly_budget_gpu_h", sa.Float(), nullable=True),
        sa.Column("budget_gate", sa.Boolean(), nullable=False),
        sa.Column("created_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "usage_ledger",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(length=63), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=True),
        sa.Column("user_name", sa.String(length=63), nullable=False),
        sa.Column("flavor", sa.String(length=63), nullable=False),
        sa.Column("priority_class", sa.String(length=63), nullable=False),
        sa.Column("start_s", sa.Float(), nullable=False),
        sa.Column("end_s", sa.Float(), nullable=False),
        sa.Column("gpu_milli", sa.Integer(), nullable=False),
        sa.Column("used_gpu_s", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("usage_ledger", schema=None) as batch_op:
        batch_op.create_index("ix_usage_period", ["end_s"], unique=False)

    op.create_table(
        "devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(length=63), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=96), nullable=False),
        sa.Column("mig", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["node"], ["nodes.name"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("node", "index"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=True),
        sa.Column("user_name", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("priority_class", sa.String(length=63), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.Column("checkpoint_interval_s", sa.Float(), nullable=True),
        sa.Column("runtime_estimate_s", sa.Float(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("submitted_s", sa.Float(), nullable=False),
        sa.Column("queued_s", sa.Float(), nullable=False),
        sa.Column("started_s", sa.Float(), nullable=True),
        sa.Column("finished_s", sa.Float(), nullable=True),
        sa.Column("attained_gpu_s", sa.Float(), nullable=False),
        sa.Column("last_checkpoint_s", sa.Float(), nullable=True),
        sa.Column("flavor", sa.String(length=63), nullable=True),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("crashes", sa.Integer(), nullable=False),
        sa.Column("not_before_s", sa.Float(), nullable=True),
        sa.Column("stop_deadline_s", sa.Float(), nullable=True),
        sa.Column("stop_for", sa.String(length=16), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_state", ["state"], unique=False)
        batch_op.create_index("ix_jobs_team_state", ["team_id", "state"], unique=False)

    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("team_id", "name"),
    )
    op.create_table(
        "quotas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("flavor", sa.String(length=63), nullable=False),
        sa.Column("guaranteed_gpus", sa.Integer(), nullable=False),
        sa.Column("limit_gpus", sa.Integer(), nullable=True),
        sa.Column("borrowing", sa.Boolean(), nullable=False),
        sa.Column("lending", sa.Boolean(), nullable=False),
        sa.Column("borrowing_limit_gpus", sa.Integer(), nullable=True),
        sa.Column("lending_limit_gpus", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("team_id", "flavor"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("created_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("node", sa.String(length=63), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=True),
        sa.Column("slice_id", sa.String(length=255), nullable=True),
        sa.Column("device", sa.String(length=255), nullable=False),
        sa.Column("milli", sa.Integer(), nullable=False),
        sa.Column("flavor", sa.String(length=63), nullable=False),
        sa.Column("allocated_s", sa.Float(), nullable=False),
        sa.Column("released_s", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.create_index("ix_allocations_active", ["released_s"], unique=False)
        batch_op.create_index("ix_allocations_job", ["job_id", "attempt"], unique=False)
        batch_op.create_index(
            "ux_allocations_active_device",
            ["device"],
            unique=True,
            sqlite_where=sa.text("released_s IS NULL AND kind != 'share'"),
            postgresql_where=sa.text("released_s IS NULL AND kind != 'share'"),
        )

    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("at_s", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(length=24), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.create_index("ix_job_events_job", ["job_id"], unique=False)

    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_s", sa.Float(), nullable=False),
        sa.Column("expires_s", sa.Float(), nullable=True),
        sa.Column("last_used_s", sa.Float(), nullable=True),
        sa.Column("revoked_s", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("digest"),
    )


def downgrade() -> None:

    op.drop_table("tokens")
    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.drop_index("ix_job_events_job")

    op.drop_table("job_events")
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_index(
            "ux_allocations_active_device",
            sqlite_where=sa.text("released_s IS NULL AND kind != 'share'"),
            postgresql_where=sa.text("released_s IS NULL AND kind != 'share'"),
        )
        batch_op.drop_index("ix_allocations_job")
        batch_op.drop_index("ix_allocations_active")

    op.drop_table("allocations")
    op.drop_table("users")
    op.drop_table("quotas")
    op.drop_table("projects")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_team_state")
        batch_op.drop_index("ix_jobs_state")

    op.drop_table("jobs")
    op.drop_table("devices")
    with op.batch_alter_table("usage_ledger", schema=None) as batch_op:
        batch_op.drop_index("ix_usage_period")

    op.drop_table("usage_ledger")
    op.drop_table("teams")
    op.drop_table("queue_snapshot")
    op.drop_table("priority_classes")
    op.drop_table("nodes")
    op.drop_table("leases")
    op.drop_table("flavor_rates")
    op.drop_table("audit_log")
