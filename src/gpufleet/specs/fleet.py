"""Multi-team plan spec: `kind: plan` with `teams:`, sized by simulation (`gpufleet plan`).

A `kind: plan` file with a `teams:` list asks a different question from one with
`workloads:`: not "what does this one run need" but "how large must a shared cluster be
so that every team gets its service level". Each team says what it submits (training
or batch jobs as distributions, inference services by model, rate and SLO, or a trace
of its past jobs) and what it expects (a p95 queue wait, SLO attainment). The planner
replays many seeds of that workload on candidate clusters (`gpufleet.plan.fleet`).

The two plan forms share `kind: plan`, the deployment and cost preferences; which model
a file is read as follows from the presence of `teams:` (`plan_model_for`), so a file
that mixes `teams:` and `workloads:` is one clear error, not a silently ignored half.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    RootModel,
    model_validator,
)

from gpufleet.errors import SpecError, suggest
from gpufleet.quantities import PositiveSeconds
from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.inference import Engine, ServingPrecision, Slo, TokenLength
from gpufleet.specs.load import read_yaml, validate
from gpufleet.specs.model_ref import ModelSpec
from gpufleet.specs.names import AcceleratorName
from gpufleet.specs.plan import (
    Deployment,
    OnPremPreferences,
    PlanSpec,
    Provider,
    _all_providers,
)
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import DEFAULT_PRIORITY_CLASSES
from gpufleet.specs.workload import Diurnal, TrainingEntry

PRIORITIES = tuple(c.name for c in DEFAULT_PRIORITY_CLASSES)
TRACE_FORMATS = ("openb", "philly", "helios", "sacct", "gpufleet")
# What an inference entry's requests look like when the spec does not say (assumptions,
# logged in the report): a chat-style prompt and answer.
DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
DEFAULT_SLO_ATTAINMENT = 0.999
LONG_RUN_FACTOR = 2.0  # long runs may wait this many times the team's wait target


def _priority(value: str) -> str:
    if value not in PRIORITIES:
        raise ValueError(f"unknown priority class '{value}'; one of {', '.join(PRIORITIES)}")
    return value


class Targets(Spec):
    """What a team expects from the cluster; the planner checks every one at every size."""

    wait_p95: PositiveSeconds | None = Field(
        default=None,
        description="95th percentile of the queue wait (first start − submission) of the "
        "team's training and batch jobs, e.g. 2h. Required when the team submits any.",
    )
    long_run_wait_p95: PositiveSeconds | None = Field(
        default=None,
        description="The same for its long runs (the top decile of its jobs by GPU-hours), "
        "so a cluster cannot meet wait_p95 by starving them. Default: 2 × wait_p95.",
    )
    slo_attainment: float = Field(
        default=DEFAULT_SLO_ATTAINMENT,
        gt=0,
        le=1,
        description="Share of the wanted serving time its inference replicas must hold "
        "their GPUs (the latency SLO is met by sizing the replicas). Default 0.999.",
    )

    @model_validator(mode="after")
    def _long_not_shorter(self) -> Self:
        if (
            self.wait_p95 is not None
            and self.long_run_wait_p95 is not None
            and self.long_run_wait_p95 < self.wait_p95
        ):
            raise ValueError(
                f"long_run_wait_p95 ({self.long_run_wait_p95:g} s) is below wait_p95 "
                f"({self.wait_p95:g} s); long runs cannot be held to a tighter target"
            )
        return self

    @property
    def long_run_limit_s(self) -> float | None:
        if self.long_run_wait_p95 is not None:
            return self.long_run_wait_p95
        return None if self.wait_p95 is None else LONG_RUN_FACTOR * self.wait_p95


class PlanTrainingEntry(TrainingEntry):
    """Training or batch gangs as distributions (the generator's training entry)."""

    @model_validator(mode="after")
    def _no_accelerators(self) -> Self:
        if self.accelerators:
            raise ValueError(
                "accelerators: a multi-team plan chooses the accelerator; list candidates in "
                "the top-level accelerators instead"
            )
        return self


class PlanInferenceEntry(Spec):
    """A service: a model at a request rate within latency SLOs.

    The inference estimator sizes its replicas on each candidate accelerator (GPUs per
    replica, replicas for the rate within its SLOs, queue wait included; a MIG slice when
    one is enough) and the simulation runs them as long-running services that hold their
    GPUs.
    """

    kind: Literal["inference"] = Field(description="inference.")
    name: str | None = Field(default=None, min_length=1, description="Label in job names.")
    model: ModelSpec
    request_rate: PositiveFloat = Field(
        description="Requests per second at the daily peak (the whole day without diurnal)."
    )
    slo: Slo = Field(
        default_factory=Slo, description="Latency targets (p99 TTFT, TPOT and end-to-end)."
    )
    input_tokens: PositiveInt | TokenLength = Field(
        default=DEFAULT_INPUT_TOKENS, description="Prompt tokens. Default 1,024 (assumption)."
    )
    output_tokens: PositiveInt | TokenLength = Field(
        default=DEFAULT_OUTPUT_TOKENS, description="Output tokens. Default 256 (assumption)."
    )
    precision: ServingPrecision = "bf16"
    engine: Engine = "vllm"
    diurnal: Diurnal | None = Field(
        default=None,
        description="Daily load curve: replicas follow request_rate × load(hour).",
    )
    mig: bool = Field(
        default=True,
        description="Allow a MIG slice per replica when the estimator says one is "
        "enough (on accelerators with MIG).",
    )
    priority_class: str = Field(
        default="production",
        description="Priority class of its replicas. Default production (not preemptible).",
    )

    @model_validator(mode="after")
    def _known_priority(self) -> Self:
        _priority(self.priority_class)
        return self


PlanEntry = Annotated[PlanTrainingEntry | PlanInferenceEntry, Field(discriminator="kind")]


class TraceRef(Spec):
    """A team's past jobs, read by one of the simulator's trace readers."""

    path: Path = Field(description="The trace file, relative to the spec file.")
    format: Literal["openb", "philly", "helios", "sacct", "gpufleet"] = Field(
        description="Trace format (see docs/guide/traces.md)."
    )


class PlanTeam(Spec):
    """One tenant: what it submits, what it expects, its priority and fair-share weight."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    targets: Targets = Field(default_factory=Targets)
    workloads: list[PlanEntry] = Field(default_factory=list)
    trace: TraceRef | None = None
    priority: str = Field(
        default="standard",
        description="Priority class of its training and batch jobs: production, standard or "
        "opportunistic.",
    )
    fair_share_weight: PositiveFloat = Field(
        default=1.0, description="Its weight in fair share (2: twice the share of a 1)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _priority(self.priority)
        if not self.workloads and self.trace is None:
            raise ValueError("give workloads, a trace, or both")
        batchy = self.trace is not None or any(
            isinstance(w, PlanTrainingEntry) for w in self.workloads
        )
        if batchy and self.targets.wait_p95 is None:
            raise ValueError(
                "targets.wait_p95: required for a team with training or batch jobs or a trace, "
                "e.g. targets: {wait_p95: 2h}"
            )
        names = [w.name or w.kind for w in self.workloads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(
                f"workloads: labels repeat ({', '.join(dupes)}); give each entry a name"
            )
        return self


class FleetPlanSpec(Spec):
    """A shared cluster for several teams, sized by simulation."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["plan"] = "plan"
    name: str = "plan"
    deployment: Deployment = "both"
    providers: list[Provider] = Field(default_factory=_all_providers)
    regions: list[str] = Field(default_factory=list)
    currency: Literal["USD"] = "USD"
    accelerators: list[AcceleratorName] = Field(
        min_length=1, description="Candidate accelerators; each is sized on its own."
    )
    mixes: bool = Field(
        True,
        description="Also search mixes of two candidates: services on one accelerator (a pool "
        "sized at their peak), training and batch on another (searched). Needs at least two "
        "accelerators, services and training.",
    )
    horizon: PositiveSeconds = Field(
        default=14 * 86_400.0, description="Simulated window of arrivals, e.g. 14d."
    )
    durations_on: AcceleratorName | None = Field(
        default=None,
        description="Accelerator the training and batch durations (and trace run times) were "
        "measured on; on another candidate they scale by the ratio of dense BF16 throughput. "
        "Default: the same durations on every candidate.",
    )
    warmup: PositiveSeconds | None = Field(
        default=None,
        description="Jobs arriving before this are simulated but not measured (the cluster "
        "starts empty). Default: 1 day, at most a quarter of the horizon.",
    )
    horizon_years: PositiveFloat = Field(default=3.0, description="TCO and rental horizon.")
    on_prem: OnPremPreferences = OnPremPreferences()
    profile: str = Field(default="default", description="The scheduling profile to size for.")
    compare_profiles: list[str] = Field(
        default_factory=lambda: ["k8s-default"],
        description="Profiles whose cluster size is compared with the profile's.",
    )
    queue_policies: list[str] = Field(
        default_factory=lambda: ["default", "priority", "fifo"],
        description="Profiles run side by side at the answer's size with its quotas: each "
        "team's p95 wait and the allocation under fair share (default), priority and FIFO "
        "queues. Empty skips it.",
    )
    max_gpus: PositiveInt | None = Field(
        default=None, description="Largest cluster the search tries. Default: 8 × the offered load."
    )
    arrival_sensitivity: float = Field(
        default=0.2,
        ge=0,
        lt=1,
        description="Re-size with training arrivals × (1 ± this); 0 skips it. Default 0.2.",
    )
    teams: list[PlanTeam] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems: list[str] = []
        names = [t.name for t in self.teams]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            problems.append(f"teams: names must be unique; repeated: {', '.join(dupes)}")
        for field, profiles in (
            ("profile", [self.profile]),
            ("compare_profiles", self.compare_profiles),
            ("queue_policies", self.queue_policies),
        ):
            for p in profiles:
                if p not in PROFILES:
                    hint = suggest(p, PROFILES, limit=1)
                    tail = f"; did you mean '{hint[0]}'?" if hint else ""
                    problems.append(f"{field}: unknown scheduling profile '{p}'{tail}")
        if self.warmup is not None and self.warmup >= self.horizon:
            problems.append(
                f"warmup ({self.warmup:g} s) must be shorter than the horizon ({self.horizon:g} s)"
            )
        if len(set(self.accelerators)) != len(self.accelerators):
            problems.append("accelerators: each candidate once")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def warmup_s(self) -> float:
        if self.warmup is not None:
            return self.warmup
        return min(86_400.0, self.horizon / 4)


def _plan_file_schema(schema: dict[str, Any]) -> None:
    """`gpufleet schema plan`: either form (anyOf), with every top-level key listed for
    editors; the strict check is the branch that matches."""
    props: dict[str, Any] = {}
    for model in (PlanSpec, FleetPlanSpec):
        for name, info in model.model_fields.items():
            props.setdefault(name, {"description": info.description or ""})
    schema["type"] = "object"
    schema["properties"] = props
    schema["required"] = ["kind"]
    schema["description"] = (
        "A plan spec: with `workloads:` sized by the estimators, with `teams:` a shared "
        "cluster sized by simulation."
    )


class PlanFile(RootModel[PlanSpec | FleetPlanSpec]):
    """Either plan form, for the JSON Schema `gpufleet schema plan` prints."""

    model_config = ConfigDict(json_schema_extra=_plan_file_schema)


def plan_model_for(data: Any) -> type[BaseModel]:
    """The plan model a `kind: plan` mapping is read as: with `teams:`, the multi-team one."""
    if isinstance(data, Mapping) and "teams" in data:
        return FleetPlanSpec
    return PlanSpec


def load_plan(path: Path) -> PlanSpec | FleetPlanSpec:
    """Read a `kind: plan` file of either form; problems are one `SpecError`, one line each."""

    data = read_yaml(path)
    if isinstance(data, Mapping) and data.get("kind") not in (None, "plan"):
        raise SpecError(
            str(path), [f"kind: this command reads plan specs; this file is kind '{data['kind']}'"]
        )
    spec = validate(plan_model_for(data), data, str(path))
    assert isinstance(spec, PlanSpec | FleetPlanSpec)
    return spec
