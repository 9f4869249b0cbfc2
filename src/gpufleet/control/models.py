"""The control plane's tables (SQLAlchemy 2, typed): one schema for SQLite and PostgreSQL.

Times are float seconds since the Unix epoch (`*_s`), read from an injected clock, so
the reconciler hands `decide()` the same kind of clock the simulator does. GPU amounts
are exact integers: whole GPUs, or thousandths of a GPU (`*_milli`, 1000 = one GPU).

Two guarantees live in the schema itself, not only in code, so that no crash, race or
second server can break them:
- an active allocation row per physical device (a whole GPU or a MIG slice) is unique
  (partial unique index on `allocations.device` where `released_s IS NULL`): a GPU can
  never be handed to two jobs;
- the usage ledger is insert-only (the store never updates or deletes its rows).
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAME = 63  # names follow Kubernetes DNS labels: at most 63 characters

# Row ids (and micro-dollar rates) are 64-bit in both stores, as the API's paths are: BIGINT
# on PostgreSQL (a busy cluster writes 2^31 job events in weeks), SQLite's INTEGER, which is
# 64-bit already and must stay spelled INTEGER for a primary key to be the rowid (0005).
Int64 = BigInteger().with_variant(Integer(), "sqlite")

# The latest Unix time a client may store: finite and before 2100, a time the portal can
# print and `JobSpec` takes (1e308 as a token expiry made the admin page fail to render).
MAX_UNIX_S = 4_102_444_800.0  # 2100-01-01T00:00:00Z


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME), unique=True)
    cohort: Mapped[str | None] = mapped_column(String(NAME))
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    default_priority: Mapped[str] = mapped_column(String(NAME), default="standard")
    monthly_budget_gpu_h: Mapped[float | None] = mapped_column(Float)
    budget_gate: Mapped[bool] = mapped_column(Boolean, default=False)
    created_s: Mapped[float] = mapped_column(Float)
    # the highest priority class its leads and members may use (NULL: its default class);
    # admins grant more, e.g. a non-preemptible production class (issue 30)
    max_priority_class: Mapped[str | None] = mapped_column(String(NAME))
    # what happens to a job whose GPUs sit idle (issue 30): off | notify | reclaim
    idle_policy: Mapped[str] = mapped_column(String(8), default="notify", server_default="notify")

    quotas: Mapped[list[Quota]] = relationship(
        back_populates="team", cascade="all, delete-orphan", order_by="Quota.flavor"
    )
    projects: Mapped[list[Project]] = relationship(
        back_populates="team", cascade="all, delete-orphan", order_by="Project.name"
    )


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("team_id", "name"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    team_id: Mapped[int] = mapped_column(Int64, ForeignKey("teams.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(NAME))

    team: Mapped[Team] = relationship(back_populates="projects")


class Quota(Base):
    """A team's quota for one flavor (accelerator), as in `specs.teams.Quota`."""

    __tablename__ = "quotas"
    __table_args__ = (UniqueConstraint("team_id", "flavor"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    team_id: Mapped[int] = mapped_column(Int64, ForeignKey("teams.id", ondelete="CASCADE"))
    flavor: Mapped[str] = mapped_column(String(NAME))
    guaranteed_gpus: Mapped[int] = mapped_column(Integer, default=0)
    limit_gpus: Mapped[int | None] = mapped_column(Integer)
    borrowing: Mapped[bool] = mapped_column(Boolean, default=True)
    lending: Mapped[bool] = mapped_column(Boolean, default=True)
    borrowing_limit_gpus: Mapped[int | None] = mapped_column(Integer)
    lending_limit_gpus: Mapped[int | None] = mapped_column(Integer)

    team: Mapped[Team] = relationship(back_populates="quotas")


class PriorityClass(Base):
    __tablename__ = "priority_classes"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    value: Mapped[int] = mapped_column(Integer)
    preemptible: Mapped[bool] = mapped_column(Boolean, default=True)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME), unique=True)
    team_id: Mapped[int | None] = mapped_column(Int64, ForeignKey("teams.id", ondelete="SET NULL"))
    created_s: Mapped[float] = mapped_column(Float)


class Token(Base):
    """An API token: only its SHA-256 is stored; the token itself is shown once."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # shown in listings to tell tokens apart
    user_id: Mapped[int] = mapped_column(Int64, ForeignKey("users.id", ondelete="CASCADE"))
    team_id: Mapped[int | None] = mapped_column(Int64, ForeignKey("teams.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))
    created_s: Mapped[float] = mapped_column(Float)
    expires_s: Mapped[float | None] = mapped_column(Float)
    last_used_s: Mapped[float | None] = mapped_column(Float)
    revoked_s: Mapped[float | None] = mapped_column(Float)

    user: Mapped[User] = relationship()
    team: Mapped[Team | None] = relationship()


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_state", "state"),
        Index("ix_jobs_team_state", "team_id", "state"),
    )

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME))
    team_id: Mapped[int] = mapped_column(Int64, ForeignKey("teams.id"))
    project: Mapped[str | None] = mapped_column(String(NAME))
    user_name: Mapped[str] = mapped_column(String(NAME))
    kind: Mapped[str] = mapped_column(String(16), default="batch")
    priority_class: Mapped[str] = mapped_column(String(NAME))
    # the resource request, in `JobSpec` field names (gpus | mig_profile | gpu_fraction,
    # workers, accelerators, topology, ...): what the scheduler reads
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    command: Mapped[list[Any]] = mapped_column(JSON)
    env: Mapped[dict[str, Any]] = mapped_column(JSON)
    data: Mapped[list[Any]] = mapped_column(JSON)
    preemptible: Mapped[bool] = mapped_column(Boolean, default=True)
    checkpoint_interval_s: Mapped[float | None] = mapped_column(Float)
    runtime_estimate_s: Mapped[float | None] = mapped_column(Float)

    state: Mapped[str] = mapped_column(String(16), default="pending")
    attempt: Mapped[int] = mapped_column(Integer, default=0)  # grows at every (re)start
    submitted_s: Mapped[float] = mapped_column(Float)
    queued_s: Mapped[float] = mapped_column(Float)  # joined the queue (again, if requeued)
    # a lead's order within the team's class (docs/design/0013); NULL: by queued_s
    queue_order_s: Mapped[float | None] = mapped_column(Float)
    started_s: Mapped[float | None] = mapped_column(Float)
    finished_s: Mapped[float | None] = mapped_column(Float)
    attained_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    lost_gpu_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    last_checkpoint_s: Mapped[float | None] = mapped_column(Float)
    flavor: Mapped[str | None] = mapped_column(String(NAME))
    placement: Mapped[list[Any]] = mapped_column(JSON, default=list)  # planned or held
    reason: Mapped[str] = mapped_column(Text, default="")
    exit_code: Mapped[int | None] = mapped_column(Integer)
    crashes: Mapped[int] = mapped_column(Integer, default=0)  # crash restarts so far
    not_before_s: Mapped[float | None] = mapped_column(Float)  # restart backoff
    stop_deadline_s: Mapped[float | None] = mapped_column(Float)  # preemption grace ends
    stop_for: Mapped[str | None] = mapped_column(String(16))  # preempt | cancel | requeue
    version: Mapped[int] = mapped_column(Integer, default=0)

    # Optimistic concurrency: every ORM UPDATE of a job sets `version` one higher and carries
    # `WHERE version = <the version read>`, so a write over a job another writer changed since
    # it was read fails (StaleDataError) instead of overwriting the change. PostgreSQL reads
    # committed rows: the reconciler read job 32 as pending, a cancel committed, and the
    # reconciler's placement was written over "cancelled" (its GPUs stayed allocated to a
    # cancelled job). The counter is also the key of the scheduler's cached view of a job
    # (`Reconciler._specs`), so no change can leave that view stale. A Core UPDATE of jobs
    # must raise the version itself.
    __mapper_args__ = {"version_id_col": version}  # noqa: RUF012 - SQLAlchemy types it

    team: Mapped[Team] = relationship()
    events: Mapped[list[JobEvent]] = relationship(
        back_populates="job", cascade="all, delete-orphan", order_by="JobEvent.id", viewonly=True
    )


class JobEvent(Base):
    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job", "job_id"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    job_id: Mapped[int] = mapped_column(Int64, ForeignKey("jobs.id", ondelete="CASCADE"))
    at_s: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(24))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    message: Mapped[str] = mapped_column(Text, default="")

    job: Mapped[Job] = relationship(back_populates="events", viewonly=True)


class Allocation(Base):
    """One device (whole GPU, MIG slice) or GPU share held by one attempt of one job."""

    __tablename__ = "allocations"
    __table_args__ = (
        Index(
            "ux_allocations_active_device",
            "device",
            unique=True,
            sqlite_where=text("released_s IS NULL AND kind != 'share'"),
            postgresql_where=text("released_s IS NULL AND kind != 'share'"),
        ),
        Index("ix_allocations_job", "job_id", "attempt"),
        Index("ix_allocations_active", "released_s"),
    )

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    job_id: Mapped[int] = mapped_column(Int64, ForeignKey("jobs.id"))
    attempt: Mapped[int] = mapped_column(Integer)
    worker: Mapped[int] = mapped_column(Integer, default=0)
    kind: Mapped[str] = mapped_column(String(8))  # whole | slice | share
    node: Mapped[str] = mapped_column(String(NAME))
    gpu: Mapped[int | None] = mapped_column(Integer)  # GPU index on the node
    slice_id: Mapped[str | None] = mapped_column(String(255))
    device: Mapped[str] = mapped_column(String(255))  # "node/gpuN" or the slice id
    milli: Mapped[int] = mapped_column(Integer)  # thousandths of a GPU (1000: whole)
    flavor: Mapped[str] = mapped_column(String(NAME))
    allocated_s: Mapped[float] = mapped_column(Float)
    released_s: Mapped[float | None] = mapped_column(Float)


class UsageEntry(Base):
    """Append-only usage ledger: one row per closed allocation interval of one job attempt."""

    __tablename__ = "usage_ledger"
    __table_args__ = (Index("ix_usage_period", "end_s"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    job_id: Mapped[int] = mapped_column(Int64)
    attempt: Mapped[int] = mapped_column(Integer)
    team: Mapped[str] = mapped_column(String(NAME))
    project: Mapped[str | None] = mapped_column(String(NAME))
    user_name: Mapped[str] = mapped_column(String(NAME))
    flavor: Mapped[str] = mapped_column(String(NAME))
    priority_class: Mapped[str] = mapped_column(String(NAME))
    start_s: Mapped[float] = mapped_column(Float)
    end_s: Mapped[float] = mapped_column(Float)
    gpu_milli: Mapped[int] = mapped_column(Integer)  # held throughout the interval
    used_gpu_s: Mapped[float | None] = mapped_column(Float)  # where utilisation is reported


class FlavorRate(Base):
    """One chargeback price of a flavor's GPU-hour, in integer micro-dollars, in force from
    `effective_s` until the flavor's next rate (migration 0010).

    Rates are history, never overwritten: a report prices each GPU-second at the rate in
    force when it was used, so setting a rate today leaves last month's bill as it was
    (one row per flavor, overwritten, re-priced every closed period). Of two rates with the
    same `effective_s` the later row (higher id) wins. `repriced`: an admin set this rate
    for a time already past (`set_s` > `effective_s`) on purpose, re-pricing GPU time used
    then; reports over that time say so."""

    __tablename__ = "flavor_rate_history"
    __table_args__ = (Index("ix_flavor_rate_history_flavor", "flavor", "effective_s"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    flavor: Mapped[str] = mapped_column(String(NAME))
    usd_micro_per_gpu_h: Mapped[int] = mapped_column(Int64)
    effective_s: Mapped[float] = mapped_column(Float)
    set_s: Mapped[float] = mapped_column(Float)  # when it was entered
    set_by: Mapped[str] = mapped_column(String(NAME))
    repriced: Mapped[bool] = mapped_column(Boolean, default=False)


class NodeRecord(Base):
    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    accelerator: Mapped[str] = mapped_column(String(NAME))
    gpus: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(8), default="up")  # up | down | drain
    reason: Mapped[str] = mapped_column(Text, default="")
    updated_s: Mapped[float] = mapped_column(Float)
    # when it joined the cluster: idle capacity is counted from then (migration 0006)
    created_s: Mapped[float | None] = mapped_column(Float, nullable=True)


class Device(Base):
    __tablename__ = "devices"
    __table_args__ = (UniqueConstraint("node", "index"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    node: Mapped[str] = mapped_column(ForeignKey("nodes.name", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    uuid: Mapped[str] = mapped_column(String(96))
    mig: Mapped[list[Any]] = mapped_column(JSON, default=list)  # slice ids and their UUIDs


class AuditEntry(Base):
    __tablename__ = "audit_log"
    # an admin's view of a preempted job reads its `job.preempted` entries by target
    __table_args__ = (Index("ix_audit_target", "target"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    at_s: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(String(NAME))
    role: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(48))
    target: Mapped[str] = mapped_column(String(255))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class QueueSnapshot(Base):
    """The last cycle's view of the queue, one row, written by the reconciler in the cycle's
    transaction: pending job ids in the order the scheduler considered them, each one's
    reason, and the latest ETAs. The API reads positions from it instead of re-running the
    queue order per request, and every server (leader or not) sees the same answer."""

    __tablename__ = "queue_snapshot"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    cycle: Mapped[int] = mapped_column(Integer)
    at_s: Mapped[float] = mapped_column(Float)
    # the queue in `control.snapshot`'s form: job ids, their teams and reasons as columns
    order: Mapped[dict[str, Any]] = mapped_column(JSON)
    reasons: Mapped[dict[str, Any]] = mapped_column(JSON)
    etas: Mapped[dict[str, Any]] = mapped_column(JSON)  # job id (text) -> start_s or None
    eta_at_s: Mapped[float | None] = mapped_column(Float)


class Lease(Base):
    """Leader lease: the server whose lease is current runs the reconciler."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    expires_s: Mapped[float] = mapped_column(Float)


class PortalSession(Base):
    """A browser session of the portal (issue 9), opened by pasting an API token.

    The cookie holds a random 256-bit id; the store keeps only its SHA-256 (`digest`), so a
    leaked database opens no sessions, as for tokens. The session acts with its token's
    rights, checked at every request (a revoked or expired token ends its sessions), and
    lapses `expires_s` after login however active it is. `csrf` is a random value sent back
    with every form and htmx request of the session (a per-session CSRF token)."""

    __tablename__ = "portal_sessions"
    __table_args__ = (Index("ix_portal_sessions_expires", "expires_s"),)

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[int] = mapped_column(Int64, ForeignKey("tokens.id", ondelete="CASCADE"))
    csrf: Mapped[str] = mapped_column(String(64))
    created_s: Mapped[float] = mapped_column(Float)
    expires_s: Mapped[float] = mapped_column(Float)
    last_seen_s: Mapped[float] = mapped_column(Float)

    token: Mapped[Token] = relationship()


class GpuSample(Base):
    """One reading of one GPU (issue 30), kept raw for a day (`control.telemetry_store`).

    `job_id`/`team` are who held the GPU when it was read (from the active allocation,
    not from the collector), so a sample is attributed to the same holder the ledger bills.
    Utilisation is the collector's busy percentage (NVML/DCGM GPU_UTIL: the share of time a
    kernel ran; SM_ACTIVE where the collector has it is kept beside it)."""

    __tablename__ = "gpu_samples"
    __table_args__ = (
        Index("ix_gpu_samples_time", "time_s"),
        Index("ix_gpu_samples_job", "job_id", "time_s"),
    )

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    time_s: Mapped[float] = mapped_column(Float)
    node: Mapped[str] = mapped_column(String(NAME))
    gpu: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[int | None] = mapped_column(Int64)
    team: Mapped[str | None] = mapped_column(String(NAME))
    util_pct: Mapped[float] = mapped_column(Float)
    sm_active_pct: Mapped[float | None] = mapped_column(Float)
    mem_used_bytes: Mapped[int | None] = mapped_column(Int64)  # None: the source has no figure
    mem_total_bytes: Mapped[int | None] = mapped_column(Int64)
    power_w: Mapped[float | None] = mapped_column(Float)
    temp_c: Mapped[float | None] = mapped_column(Float)
    healthy: Mapped[bool] = mapped_column(Boolean, default=True)
    health: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(16))


class GpuSample5m(Base):
    """Five-minute roll-up of `gpu_samples` per GPU and holder, kept for 90 days."""

    __tablename__ = "gpu_samples_5m"
    __table_args__ = (
        Index("ix_gpu_5m_bucket", "bucket_s"),
        Index("ix_gpu_5m_job", "job_id", "bucket_s"),
    )

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    bucket_s: Mapped[float] = mapped_column(Float)  # start of the 5-minute bucket
    node: Mapped[str] = mapped_column(String(NAME))
    gpu: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[int | None] = mapped_column(Int64)
    team: Mapped[str | None] = mapped_column(String(NAME))
    samples: Mapped[int] = mapped_column(Integer)
    util_mean_pct: Mapped[float] = mapped_column(Float)
    util_max_pct: Mapped[float] = mapped_column(Float)
    mem_used_max_bytes: Mapped[int | None] = mapped_column(Int64)
    mem_total_bytes: Mapped[int | None] = mapped_column(Int64)
    power_mean_w: Mapped[float | None] = mapped_column(Float)
    unhealthy_samples: Mapped[int] = mapped_column(Integer, default=0)


class GpuLatest(Base):
    """The latest reading of each GPU (migration 0009), kept by `ingest` beside the raw rows
    and pruned with them: the heat map, `/metrics` and the cluster API read one row per
    GPU here instead of searching the raw day (5.76 M rows at 1,000 GPUs)."""

    __tablename__ = "gpu_latest"

    node: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    gpu: Mapped[int] = mapped_column(Integer, primary_key=True)
    time_s: Mapped[float] = mapped_column(Float)
    job_id: Mapped[int | None] = mapped_column(Int64)
    team: Mapped[str | None] = mapped_column(String(NAME))
    util_pct: Mapped[float] = mapped_column(Float)
    mem_used_bytes: Mapped[int | None] = mapped_column(Int64)
    mem_total_bytes: Mapped[int | None] = mapped_column(Int64)
    healthy: Mapped[bool] = mapped_column(Boolean)


class GpuTeamSample(Base):
    """One reading round summed per holding team and for the whole cluster (migration 0009):
    a continuous aggregate of `gpu_samples`, written by `ingest` beside the raw rows and
    pruned with them. The utilisation series read a few rows per round here instead of one
    per GPU (at 1,000 GPUs the raw day is 5.76 M rows, too many to scan for a page).
    Memory sums are floats: summed over a long window they pass 2^63."""

    __tablename__ = "gpu_team_samples"
    __table_args__ = (Index("ix_gpu_team_samples_time", "cluster", "time_s"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    time_s: Mapped[float] = mapped_column(Float)
    # True: the whole cluster's row (team None); else one team's (None: GPUs no team holds)
    cluster: Mapped[bool] = mapped_column(Boolean)
    team: Mapped[str | None] = mapped_column(String(NAME))
    readings: Mapped[int] = mapped_column(Integer)  # GPUs read
    util_sum_pct: Mapped[float] = mapped_column(Float)  # sum of their busy %
    mem_used_sum_bytes: Mapped[float] = mapped_column(Float)  # over the readings with memory
    mem_readings: Mapped[int] = mapped_column(Integer)


class GpuTeam5m(Base):
    """Five-minute roll-up per holding team and for the whole cluster (migration 0009):
    `gpu_samples_5m` summed over GPUs by `roll_up`, kept as long (90 days). `rounds` is the
    most readings one GPU (of the team, or of the cluster) had in the bucket: the reading
    rounds the bucket saw."""

    __tablename__ = "gpu_team_5m"
    __table_args__ = (Index("ix_gpu_team_5m_bucket", "cluster", "bucket_s"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    bucket_s: Mapped[float] = mapped_column(Float)  # start of the 5-minute bucket
    cluster: Mapped[bool] = mapped_column(Boolean)  # as in `GpuTeamSample`
    team: Mapped[str | None] = mapped_column(String(NAME))
    samples: Mapped[int] = mapped_column(Integer)  # readings, all GPUs
    rounds: Mapped[int] = mapped_column(Integer)
    util_sum_pct: Mapped[float] = mapped_column(Float)  # sum of util_mean_pct x samples
    mem_used_sum_bytes: Mapped[float] = mapped_column(Float)  # sum of mem_used_max x samples
    mem_samples: Mapped[int] = mapped_column(Integer)  # samples of GPUs with a memory figure


class GpuTeam1h(Base):
    """Hourly roll-up per holding team and for the whole cluster (migration 0009): the sums of
    an hour's `gpu_team_5m` rows, written by `roll_up` once the hour's last bucket is rolled
    up, pruned with them. A month's chart reads 720 hours per team instead of 8,640
    buckets; `series` takes an hour whole only where all its buckets fall in one step."""

    __tablename__ = "gpu_team_1h"
    __table_args__ = (Index("ix_gpu_team_1h_hour", "cluster", "hour_s"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True)
    hour_s: Mapped[float] = mapped_column(Float)  # start of the hour
    cluster: Mapped[bool] = mapped_column(Boolean)  # as in `GpuTeamSample`
    team: Mapped[str | None] = mapped_column(String(NAME))
    samples: Mapped[int] = mapped_column(Integer)
    rounds: Mapped[int] = mapped_column(Integer)  # the sum of its buckets' rounds
    util_sum_pct: Mapped[float] = mapped_column(Float)
    mem_used_sum_bytes: Mapped[float] = mapped_column(Float)
    mem_samples: Mapped[int] = mapped_column(Integer)


class JobUtilization(Base):
    """What telemetry says about one running attempt, updated at every reading: the busy
    GPU-seconds behind the ledger's `used_gpu_s`, and the idle detector's state."""

    __tablename__ = "job_utilization"

    job_id: Mapped[int] = mapped_column(
        Int64, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    attempt: Mapped[int] = mapped_column(Integer)
    busy_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    sampled_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)  # GPU-seconds observed
    last_sample_s: Mapped[float | None] = mapped_column(Float)
    last_util_pct: Mapped[float | None] = mapped_column(Float)
    mem_used_bytes: Mapped[int | None] = mapped_column(Int64)
    low_since_s: Mapped[float | None] = mapped_column(Float)  # below the idle threshold since
    idle_flagged_s: Mapped[float | None] = mapped_column(Float)  # flagged idle at (None: not)


class TelemetryState(Base):
    """One row per roll-up: the last five-minute bucket already rolled up."""

    __tablename__ = "telemetry_state"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    rolled_up_to_s: Mapped[float] = mapped_column(Float)
    # raw rows before this were pruned (None: none ever was): series read roll-ups there
    raw_pruned_to_s: Mapped[float | None] = mapped_column(Float)
