"""Response bodies of the API and its error surface (requests are `control.jobs.JobRequest`,
the models beside each route, and the string rules below)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from gpufleet.control.admin import NAME_RE
from gpufleet.control.eta import HORIZON_S
from gpufleet.control.eta_refresh import EtaKind
from gpufleet.sched.requests import FRACTION_STEPS, fraction_eighths

# Strings in requests. Team, project, cohort and user names are DNS labels (`admin.NAME_RE`):
# the schema states the rule so that clients and fuzzers see it, and the core enforces it
# (`admin.check_name`: a 409 whose sentence says the rule), so the API and the portal, which
# validates its forms with these models, answer alike. Other text that reaches the store must
# not hold a NUL byte: PostgreSQL refuses it in text (that was a 500), SQLite stored it.
NAME_PATTERN = NAME_RE.pattern
TEXT_PATTERN = r"^[^\x00]*$"
Name = Annotated[
    str, Field(max_length=63, json_schema_extra={"minLength": 1, "pattern": NAME_PATTERN})
]
ShortText = Annotated[str, Field(min_length=1, max_length=63, pattern=TEXT_PATTERN)]


class QueuePosition(BaseModel):
    team: int = Field(description="1-based position among the team's pending jobs.")
    cluster: int = Field(description="1-based position among all pending jobs.")


class EventOut(BaseModel):
    at_s: float
    kind: str
    attempt: int
    message: str


class JobUtilizationOut(BaseModel):
    """Telemetry of a job's current (or last) attempt, from `control.telemetry_store`."""

    attempt: int
    util_pct: float | None = Field(description="Mean busy % of its GPUs at the latest reading.")
    busy_share: float | None = Field(description="Busy / observed GPU-seconds of the attempt.")
    mem_used_bytes: int | None
    read_s: float | None
    idle_since_s: float | None = Field(description="Under the idle threshold since (None: busy).")
    flagged_idle_s: float | None = Field(description="When the idle detector flagged it.")


class JobOut(BaseModel):
    id: int
    name: str
    team: str
    project: str | None
    user: str
    kind: str
    state: str
    priority_class: str
    preemptible: bool
    request: dict[str, Any]
    command: list[str]
    attempt: int
    submitted_s: float
    queued_s: float
    started_s: float | None
    finished_s: float | None
    exit_code: int | None
    flavor: str | None
    placement: list[dict[str, Any]]
    reason: str
    waits: list[WaitOut] = Field(
        default_factory=list,
        description="The reason's parts as numbers (pending jobs the scheduler looked at).",
    )
    queue_position: QueuePosition | None = None
    eta_s: float | None = Field(
        default=None,
        description="Estimated start (Unix seconds) from a forward simulation. None when "
        "there is none: `eta_kind` says why.",
    )
    eta_is_estimate: bool = True
    eta_kind: EtaKind | None = Field(
        default=None,
        description="What the last ETA refresh said of a waiting job: `at` (a start time, in "
        "`eta_s`; admitted and starting jobs: now), `never` (it cannot start with the nodes "
        "and quotas of now: `reason` says why), `beyond` (not within the simulation's horizon "
        f"of {HORIZON_S / 86_400:g} days), or `unknown` (no estimate yet: submitted or "
        "requeued since the last refresh). None for a job not waiting to start (running "
        "or ended).",
    )
    eta_estimated_at_s: float | None = Field(
        default=None,
        description="When the estimate in `eta_kind` and `eta_s` was made (Unix seconds): "
        "estimates are refreshed less often than queue positions, so one made before a "
        "cancel, a move or a node going down is as old as this says. None when there is "
        "none (`eta_kind` unknown or None).",
    )
    gpu_hours: float = 0.0
    lost_gpu_hours: float = Field(
        default=0.0, description="GPU-hours redone after preemptions and crashes (no checkpoint)."
    )
    last_checkpoint_s: float | None
    checkpoint_interval_s: float | None
    runtime_estimate_s: float | None
    events: list[EventOut] | None = None
    utilization: JobUtilizationOut | None = Field(
        default=None, description="What telemetry read of this attempt (None: never read)."
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="The share of a GPU a `gpu_fraction` job holds and is billed for: the "
        "request rounded up to whole eighths of a GPU (0.3 holds 0.375). None for other jobs."
    )
    @property
    def held_gpu_fraction(self) -> float | None:
        """Derived from `request`, so every body that has one says it, cached ones too."""
        asked = self.request.get("gpu_fraction")
        return held_gpu_fraction(float(asked)) if asked else None


def held_gpu_fraction(asked: float) -> float:
    """The share of a GPU the scheduler holds for `asked` (`sched.requests.requests_for`:
    whole eighths, at least one). The scheduler places and bills that, not the request, so
    the API and the portal say it rather than leave 0.3 to read as 0.3."""
    return fraction_eighths(asked) / FRACTION_STEPS


class WaitOut(BaseModel):
    """One part of a pending job's reason as numbers (`sched.waits`): the sentence is made
    from them, so the two always agree."""

    kind: str = Field(
        description="capacity, quota, mig-slice, gpu-share, reserved, reservation, "
        "no-reservation, strict-fifo, preemption, no-accelerator, no-quota, quota-never (the "
        "team's quotas of now never let it start), unknown-team, unknown-level, too-large (a "
        "gang no set of the cluster's nodes could hold, even empty), or other (a "
        "sentence only)."
    )
    text: str = Field(description="This part of the reason, as the sentence says it.")
    accelerator: str | None = None
    needed_gpus: float | None = Field(default=None, description="What the job needs of it.")
    blocking_job: str | None = Field(
        default=None, description="The job it waits behind (another team's: not named)."
    )
    numbers: dict[str, Any] = Field(
        default_factory=dict, description="Every number the sentence names, by kind."
    )


class JobList(BaseModel):
    jobs: list[JobOut]
    next_after_id: int | None = Field(default=None, description="Pass as after_id for more.")


class QuotaOut(BaseModel):
    flavor: str
    guaranteed_gpus: int
    limit_gpus: int | None
    borrowing_limit_gpus: int | None
    lending_limit_gpus: int | None
    used_gpus: float
    borrowed_gpus: float
    lent_gpus: float


class TeamOut(BaseModel):
    name: str
    cohort: str | None
    weight: float
    default_priority: str
    idle_policy: str = Field(
        default="notify", description="What happens to its jobs flagged idle: off, notify, reclaim."
    )
    max_priority_class: str = Field(
        description="Highest priority class its leads and members may use (admins: any)."
    )
    projects: list[str]
    quotas: list[QuotaOut]
    pending_jobs: int
    running_jobs: int
    fair_share: float = Field(description="Weighted dominant share of the cluster held now.")
    monthly_budget_gpu_h: float | None
    month_gpu_h: float
    budget_alerts: list[str] = Field(
        default_factory=list, description="Alerts at 80% and 100% of the monthly budget."
    )


class QueueOut(BaseModel):
    team: str
    pending: int
    running: int
    first: list[int]


NodeState = Literal["up", "down", "drain"]


class DeviceOut(BaseModel):
    index: int
    uuid: str = Field(description="From nvidia-smi where the executor found it, else node/gpuN.")
    allocated_milli: int = Field(description="Thousandths of this GPU held (1000: whole).")
    util_pct: float | None = Field(
        default=None, description="Busy % at the latest reading (None: no recent reading)."
    )
    mem_used_bytes: int | None = None
    healthy: bool | None = Field(default=None, description="None: no recent reading.")
    read_s: float | None = Field(default=None, description="When it was last read.")


class NodeOut(BaseModel):
    name: str
    accelerator: str
    gpus: int
    state: NodeState
    allocated_milli: int
    mig: list[list[Any]]
    devices: list[DeviceOut] = Field(default_factory=list)


class ClusterOut(BaseModel):
    name: str
    gpus: dict[str, int]
    allocated_gpus: dict[str, float]
    allocation_ratio: float
    utilization: float | None = Field(
        default=None, description="Busy share of the GPUs; None until utilisation is collected."
    )
    nodes: list[NodeOut]


class ChargebackRowOut(BaseModel):
    """One group of the report; the group's keys (`team`, `project`, ...) come first."""

    model_config = ConfigDict(extra="allow")

    flavors: list[str]
    gpu_hours_allocated: float
    gpu_hours_used: float | None
    gpu_hours_billed: float = Field(
        description="What the cost is on: allocated hours, or used ones on the usage basis."
    )
    gpu_hours_idle: float = Field(description="Idle capacity this line pays for.")
    gpu_efficiency: float | None
    rate_usd_per_gpu_h: str | None = Field(
        description="A decimal string: the list rate, or the rate averaged over the billed "
        "hours (several flavors or rates; exact to 1e-10). None: some of its time had no rate."
    )
    cost_usd: str = Field(description="Billed hours x rate, rounded to the cent (a decimal).")
    idle_cost_usd: str
    total_cost_usd: str


class RoundingOut(BaseModel):
    """The TOTAL less the sum of the lines above it: each line is rounded to the cent on
    its own, the TOTAL once."""

    cost_usd: str
    idle_cost_usd: str
    total_cost_usd: str


class RateUsedOut(BaseModel):
    """A flavor's rate over part of the period, [from_s, to_s)."""

    flavor: str
    from_s: float
    to_s: float
    rate_usd_per_gpu_h: str | None = Field(description="None: no rate then (charged 0).")
    set_s: float | None
    repriced: bool = Field(description="Set after the time it applies from (re-priced).")


class ChargebackOut(BaseModel):
    period_start_s: float
    period_end_s: float
    basis: Literal["allocation", "usage"]
    basis_note: str
    group_by: list[str]
    idle_method: Literal["none", "uniform", "proportional"]
    rows: list[ChargebackRowOut]
    totals: ChargebackRowOut
    idle: ChargebackRowOut | None
    idle_gpu_hours: float | None = Field(
        description="The cluster's idle GPU-hours in the period; null in a team's own report."
    )
    capacity_gpu_hours: float | None = Field(
        description="The cluster's GPU-hours in the period; null in a team's own report."
    )
    unpriced_flavors: list[str]
    rounding: RoundingOut
    rates: list[RateUsedOut] = Field(description="The rates used, by flavor and time.")
    repriced: bool = Field(description="A rate of the period was set after it took effect.")


class ReadyOut(BaseModel):
    status: Literal["ready"]
    leader: bool = Field(description="This server's reconciler holds the lease.")
    reconciler: bool = Field(description="This server's reconciler process runs.")


class UnreadyOut(BaseModel):
    status: Literal["unavailable"]
    detail: str


# The error surface (docs/design/0010-control-plane.md, "Errors and status codes"): what
# `app.py`'s handlers, `deps.principal` and the body cap really send, declared once here and
# attached per router and per route with `errors(...)`.


class ErrorOut(BaseModel):
    """Every error: one sentence for a person (422s may add `errors`)."""

    model_config = ConfigDict(extra="forbid")

    detail: str


class ValidationIssue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    loc: list[str | int] = Field(description='Where: ["body", "gpus"], ["query", "limit"], ...')
    msg: str
    type: str = Field(description="Pydantic's error type, e.g. `missing`, `int_parsing`.")
    input: Any = Field(
        default=None,
        description="The value refused, only where it is a short JSON scalar (absent else).",
    )


class ValidationErrorOut(BaseModel):
    """422: the request failed validation, or it was valid but cannot be done as asked (an
    unknown name, a state that forbids it). `detail` is always one sentence, as for every
    other error; a request that failed validation also lists each problem in `errors`."""

    model_config = ConfigDict(extra="forbid")

    detail: str = Field(description="One sentence: the (first) problem and where.")
    errors: list[ValidationIssue] | None = Field(
        default=None, description="Every field that failed validation (absent otherwise)."
    )


_ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    400: (ErrorOut, "The body cannot be read as text (it is not UTF-8)."),
    401: (ErrorOut, "No token, or an unknown, expired or revoked one."),
    403: (
        ErrorOut,
        "The token's role may not do this (or a budget gate, or a session cookie without "
        "its CSRF header).",
    ),
    404: (ErrorOut, "No such object, or one of another team."),
    409: (
        ErrorOut,
        "Conflicts with the current state (an admin request that cannot be done as asked, "
        "or a write that lost a race: retry).",
    ),
    413: (ErrorOut, "The request body is larger than 1 MiB."),
    422: (ValidationErrorOut, "The request is not valid, or cannot be done as asked."),
    429: (ErrorOut, "Too many requests for this token; slow down."),
    503: (ErrorOut, "The store is busy or unavailable, or its schema is not this version's."),
}
_WWW_AUTHENTICATE = {
    "WWW-Authenticate": {
        "description": "`Bearer`",
        "required": True,
        "schema": {"type": "string"},
    }
}


def errors(*codes: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a router or route for these error codes; `described` overrides a
    description by code (`e403="..."`) where a route can say more than the generic one."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        model, description = _ERRORS[code]
        entry: dict[str, Any] = {
            "model": model,
            "description": described.pop(f"e{code}", description),
        }
        if code == 401:
            entry["headers"] = dict(_WWW_AUTHENTICATE)
        out[code] = entry
    if described:
        raise TypeError(f"descriptions for codes not asked for: {', '.join(described)}")
    return out


# a 200 of plain text, for a route whose `response_class` has no media type (`Response`),
# so that FastAPI declares its error bodies as JSON rather than as the route's media type
PLAIN_TEXT: dict[str, Any] = {
    "description": "Plain text.",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}

# every operation behind a token: the token (401), its rate (429), the body cap (413),
# validation (422) and the store (503)
AUTHED = (401, 413, 422, 429, 503)
