"""GPU telemetry summed per team and per hour, and each GPU's latest reading

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

The portal's overview read the per-GPU tables at every render: its utilisation chart summed
them over the whole window (at 1,000 GPUs: 5.76 M raw rows a day, 8.64 M five-minute
roll-ups a month) and its heat map searched the raw day for each GPU's latest reading.
Four tables hold what it needs, written beside the per-GPU rows by `telemetry_store.ingest`
and `roll_up`, as a time-series store's continuous aggregates:

- gpu_team_samples: each reading round summed per team (NULL: GPUs no one team holds) and
  for the whole cluster (`cluster` true);
- gpu_team_5m: the same per five-minute bucket, from the per-GPU roll-ups;
- gpu_team_1h: the same per hour whose buckets are all rolled up, for long windows;
- gpu_latest: each GPU's latest reading.

They are back-filled here from the rows a store already has, with the sums the writers
use, so a chart reads the same numbers before and after the upgrade.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

Int64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    for table, time_col, counts in (
        ("gpu_team_samples", "time_s", ("readings", "mem_readings")),
        ("gpu_team_5m", "bucket_s", ("samples", "rounds", "mem_samples")),
        ("gpu_team_1h", "hour_s", ("samples", "rounds", "mem_samples")),
    ):
        op.create_table(
            table,
            sa.Column("id", Int64, nullable=False),
            sa.Column(time_col, sa.Float(), nullable=False),
            sa.Column("cluster", sa.Boolean(), nullable=False),
            sa.Column("team", sa.String(length=63), nullable=True),
            *(sa.Column(name, sa.Integer(), nullable=False) for name in counts),
            sa.Column("util_sum_pct", sa.Float(), nullable=False),
            sa.Column("mem_used_sum_bytes", sa.Float(), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
    op.create_table(
        "gpu_latest",
        sa.Column("node", sa.String(length=63), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("job_id", Int64, nullable=True),
        sa.Column("team", sa.String(length=63), nullable=True),
        sa.Column("util_pct", sa.Float(), nullable=False),
        sa.Column("mem_used_bytes", Int64, nullable=True),
        sa.Column("mem_total_bytes", Int64, nullable=True),
        sa.Column("healthy", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("node", "gpu"),
    )
    # each GPU's last row written: readings are stored in time order, so its latest one
    op.execute(
        "INSERT INTO gpu_latest (node, gpu, time_s, job_id, team, util_pct, mem_used_bytes, "
        "mem_total_bytes, healthy) SELECT node, gpu, time_s, job_id, team, util_pct, "
        "mem_used_bytes, mem_total_bytes, healthy FROM gpu_samples "
        "WHERE id IN (SELECT MAX(id) FROM gpu_samples GROUP BY node, gpu)"
    )
    op.create_index("ix_gpu_team_samples_time", "gpu_team_samples", ["cluster", "time_s"])
    op.create_index("ix_gpu_team_5m_bucket", "gpu_team_5m", ["cluster", "bucket_s"])
    op.create_index("ix_gpu_team_1h_hour", "gpu_team_1h", ["cluster", "hour_s"])
    # the sums `ingest` and `roll_up` write from now on, of the rows already there: per team
    # (NULL: no one team), then the whole cluster
    for cluster, team, group in (("FALSE", "team", ", team"), ("TRUE", "NULL", "")):
        op.execute(
            "INSERT INTO gpu_team_samples (time_s, cluster, team, readings, util_sum_pct, "
            "mem_used_sum_bytes, mem_readings) "
            f"SELECT time_s, {cluster}, {team}, COUNT(*), SUM(util_pct), "
            "COALESCE(SUM(mem_used_bytes), 0), COUNT(mem_used_bytes) "
            f"FROM gpu_samples GROUP BY time_s{group}"
        )
        op.execute(
            "INSERT INTO gpu_team_5m (bucket_s, cluster, team, samples, rounds, util_sum_pct, "
            "mem_used_sum_bytes, mem_samples) "
            f"SELECT bucket_s, {cluster}, {team}, SUM(samples), MAX(samples), "
            "SUM(util_mean_pct * samples), COALESCE(SUM(mem_used_max_bytes * samples), 0), "
            "SUM(CASE WHEN mem_used_max_bytes IS NULL THEN 0 ELSE samples END) "
            f"FROM gpu_samples_5m GROUP BY bucket_s{group}"
        )
    # hours whose buckets are all rolled up (`roll_up` writes each later one as it closes)
    sqlite = op.get_bind().dialect.name == "sqlite"
    hour = "CAST(bucket_s / 3600 AS INTEGER) * 3600" if sqlite else "FLOOR(bucket_s / 3600) * 3600"
    op.execute(
        "INSERT INTO gpu_team_1h (hour_s, cluster, team, samples, rounds, util_sum_pct, "
        "mem_used_sum_bytes, mem_samples) "
        f"SELECT {hour}, cluster, team, SUM(samples), SUM(rounds), SUM(util_sum_pct), "
        "SUM(mem_used_sum_bytes), SUM(mem_samples) FROM gpu_team_5m "
        f"WHERE {hour} + 3600 <= "
        "(SELECT rolled_up_to_s FROM telemetry_state WHERE name = 'rollup') "
        f"GROUP BY {hour}, cluster, team"
    )


def downgrade() -> None:
    op.drop_table("gpu_latest")
    op.drop_index("ix_gpu_team_1h_hour", table_name="gpu_team_1h")
    op.drop_table("gpu_team_1h")
    op.drop_index("ix_gpu_team_5m_bucket", table_name="gpu_team_5m")
    op.drop_table("gpu_team_5m")
    op.drop_index("ix_gpu_team_samples_time", table_name="gpu_team_samples")
    op.drop_table("gpu_team_samples")
