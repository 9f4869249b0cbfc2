"""`kind: workload`: a synthetic mixed-cluster workload, described by distributions per team.

Real traces say what one cluster did once; a generator spec says what a cluster of
this shape would see, so a planner can replay many seeds of it and vary one part at a
time (twice the notebooks, bigger gangs). Each team lists workload entries:

- `training` / `batch`: Poisson arrivals of gangs whose total GPUs follow a weighted
  choice, split into whole-node workers, with a duration distribution;
- `inference`: long-running replicas asking for a MIG slice, a GPU fraction or whole
  GPUs, optionally scaled over the day by a diurnal load curve;
- `interactive`: Poisson notebook sessions asking for a slice, fraction or GPUs.

The spec only describes; `gpufleet.sim.generate.generate` draws the jobs from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from gpufleet.catalog.mig import mig_accelerators, mig_profiles_for
from gpufleet.errors import suggest
from gpufleet.quantities import PositiveSeconds
from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.load import load
from gpufleet.specs.names import AcceleratorName


def _choices_schema(schema: dict[str, Any]) -> None:
    """Document the short form (`gpus: 8`) that the before-validator expands."""
    as_object = dict(schema)
    description = as_object.pop("description", None)
    title = as_object.pop("title", None)
    schema.clear()
    schema["anyOf"] = [{"type": "integer", "minimum": 1}, as_object]
    if title is not None:
        schema["title"] = title
    if description is not None:
        schema["description"] = description


class GpuChoices(Spec):
    """Total GPUs of a job, drawn from `choices` with probabilities proportional to `weights`.

    A bare number (`gpus: 8`) means that one size always."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=_choices_schema)

    choices: list[PositiveInt] = Field(
        min_length=1, description="Possible total GPU counts of a job (all workers together)."
    )
    weights: list[NonNegativeFloat] | None = Field(
        default=None,
        description="Relative weight of each choice, same length as choices "
        "(need not sum to 1). Default: equal weights.",
    )

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"choices": [data]}
        return data

    @model_validator(mode="after")
    def _weights_match(self) -> Self:
        if self.weights is None:
            return self
        if len(self.weights) != len(self.choices):
            raise ValueError(
                f"{len(self.weights)} weights for {len(self.choices)} choices; "
                "give one weight per choice"
            )
        if sum(self.weights) <= 0:
            raise ValueError("weights must not all be 0")
        return self

    @property
    def probabilities(self) -> tuple[float, ...]:
        """Weights normalized to sum to 1 (equal when none were given)."""
        weights = self.weights or [1.0] * len(self.choices)
        total = sum(weights)
        return tuple(w / total for w in weights)


class DurationDist(Spec):
    """How long a job runs when never interrupted: exactly one of `fixed`,
    `lognormal_median` (with `sigma`) or `exponential_mean`; draws are kept within
    [`min`, `max`]."""

    fixed: PositiveSeconds | None = Field(default=None, description="Always this long, e.g. 2h.")
    lognormal_median: PositiveSeconds | None = Field(
        default=None,
        description="Median of a lognormal duration, e.g. 4h (half the jobs run longer).",
    )
    sigma: PositiveFloat | None = Field(
        default=None,
        description="Spread of the lognormal: the standard deviation of ln(duration). "
        "Only with lognormal_median; default 1.0 (p90 ≈ 3.6 × median).",
    )
    exponential_mean: PositiveSeconds | None = Field(
        default=None, description="Mean of an exponential duration, e.g. 3h."
    )
    min: PositiveSeconds = Field(
        default=1.0, description="Shortest duration; shorter draws become this. Default 1 s."
    )
    max: PositiveSeconds | None = Field(
        default=None, description="Longest duration; longer draws become this. Default: none."
    )

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        forms = [k for k in ("fixed", "lognormal_median", "exponential_mean") if getattr(self, k)]
        if len(forms) != 1:
            given = " and ".join(forms) if forms else "none"
            raise ValueError(
                f"give exactly one of fixed, lognormal_median or exponential_mean (got {given})"
            )
        if self.sigma is not None and self.lognormal_median is None:
            raise ValueError("sigma applies only to lognormal_median")
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max:g} s) is below min ({self.min:g} s)")
        return self

    @property
    def lognormal_sigma(self) -> float:
        return 1.0 if self.sigma is None else self.sigma


class RuntimeEstimate(Spec):
    """What users declare as their run time: the scheduler's backfill plans with it, and
    real estimates are rarely right, so it is the true duration times a factor."""

    factor: PositiveFloat = Field(
        description="Declared estimate = factor × true duration (1.5: users ask 50% extra)."
    )


class Diurnal(Spec):
    """A daily load curve: load(hour) = trough + (1 − trough) × (0.5 + 0.5 cos(2π(hour −
    peak_hour)/24)); 1 at the peak hour, `trough_ratio` twelve hours later. Hour 0 is
    time 0 of the workload (midnight)."""

    peak_hour: float = Field(
        default=14.0, ge=0, lt=24, description="Hour of day (0–24) of the highest load."
    )
    trough_ratio: float = Field(
        ge=0, le=1, description="Lowest load as a share of the peak (0.3: 30% at night)."
    )


class Slo(Spec):
    """An inference latency target the simulator reports against."""

    ttft_p99_ms: PositiveFloat | None = Field(
        default=None, description="99th-percentile time to first token, milliseconds."
    )


class _Entry(Spec):
    """What every workload entry may say, whatever its kind."""

    name: str | None = Field(
        default=None,
        min_length=1,
        description="Label in job names, <team>-<name>-<n>. Default: the kind.",
    )
    priority_class: str | None = Field(
        default=None, description="Priority class of its jobs. Default: the team's."
    )
    preemptible: bool | None = Field(
        default=None,
        description="Whether its jobs may be preempted. Default: true for training and "
        "batch, false for inference and interactive.",
    )
    accelerators: list[AcceleratorName] = Field(
        default_factory=list, description="Acceptable accelerator types. Default: any."
    )
    project: str | None = Field(default=None, description="Project its jobs are charged to.")
    runtime_estimate: RuntimeEstimate | None = Field(
        default=None, description="Declared run time of its jobs. Default: none declared."
    )
    busy_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Mean share of time its GPUs are busy while it runs. Default: unknown.",
    )


class TrainingEntry(_Entry):
    """Gangs arriving as a Poisson process: training (or batch) jobs of several workers."""

    kind: Literal["training", "batch"] = Field(description="training or batch.")
    arrivals_per_day: NonNegativeFloat = Field(
        description="Mean jobs submitted per day (a Poisson process)."
    )
    diurnal: Diurnal | None = Field(
        default=None,
        description="Vary the arrival rate over the day; arrivals_per_day stays the daily mean.",
    )
    gpus: GpuChoices = Field(
        description="Total GPUs per job: {choices: [8, 16], weights: [0.7, 0.3]} or a number."
    )
    gpus_per_worker: PositiveInt = Field(
        default=8,
        description="GPUs per worker (8: a whole node). A job of fewer GPUs is one worker; "
        "larger jobs must be a multiple of it.",
    )
    duration: DurationDist = Field(description="Run time when never interrupted.")
    checkpoint_interval: PositiveSeconds | None = Field(
        default=None, description="Time between checkpoints, e.g. 1h. Default: none."
    )

    @model_validator(mode="after")
    def _gangs_split(self) -> Self:
        bad = [
            g for g in self.gpus.choices if g > self.gpus_per_worker and g % self.gpus_per_worker
        ]
        if bad:
            sizes = ", ".join(map(str, bad))
            raise ValueError(
                f"gpus: {sizes} is not a multiple of gpus_per_worker ({self.gpus_per_worker}); "
                "a gang is whole workers"
            )
        return self


class _SliceRequest(_Entry):
    """Exactly one of a MIG slice, a GPU fraction or whole GPUs per job."""

    mig_profile: str | None = Field(
        default=None, description="A MIG profile, e.g. 3g.40gb (see `gpufleet catalog mig`)."
    )
    gpu_fraction: float | None = Field(
        default=None, gt=0, lt=1, description="A share of one GPU, e.g. 0.25."
    )
    gpus: PositiveInt | None = Field(default=None, description="Whole GPUs per job.")

    @model_validator(mode="after")
    def _one_request(self) -> Self:
        forms = [k for k in ("mig_profile", "gpu_fraction", "gpus") if getattr(self, k)]
        if len(forms) != 1:
            given = " and ".join(forms) if forms else "none"
            raise ValueError(f"give exactly one of mig_profile, gpu_fraction or gpus (got {given})")
        if self.mig_profile is not None:
            problem = _unknown_profile(self.mig_profile, self.accelerators)
            if problem:
                raise ValueError(problem)
        return self


def _unknown_profile(profile: str, accelerators: list[str]) -> str | None:
    """A typo in a profile name would leave every job pending forever; say so at load time."""

    wanted = profile.strip().lower()
    candidates = accelerators or list(mig_accelerators())
    known = sorted({p.profile for acc in candidates for p in mig_profiles_for(acc)})
    if wanted in known:
        return None
    where = ", ".join(accelerators) if accelerators else "any accelerator in the catalog"
    hint = suggest(wanted, known, limit=2)
    if accelerators:  # a short list: show it all
        tail = f"known: {', '.join(known)}" if known else "these accelerators have no MIG"
    elif hint:
        tail = f"did you mean {' or '.join(repr(h) for h in hint)}?"
    else:
        tail = "see `gpufleet catalog mig`"
    return f"mig_profile: '{profile}' is not a MIG profile of {where}; {tail}"


class InferenceEntry(_SliceRequest):
    """Long-running serving replicas, optionally more of them at the daily peak."""

    kind: Literal["inference"] = Field(description="inference.")
    services: PositiveInt = Field(
        description="Replicas at peak load; without diurnal, replicas for the whole run."
    )
    diurnal: Diurnal | None = Field(
        default=None,
        description="Scale replicas with a daily load curve: ceil(services × trough_ratio) run "
        "throughout; each hour adds replicas up to round(services × load(hour)) for that hour.",
    )
    duration: DurationDist | None = Field(
        default=None,
        description="Run time of the long-running replicas. Default: the horizon.",
    )
    slo: Slo | None = Field(default=None, description="Latency target. Default: none.")


class InteractiveEntry(_SliceRequest):
    """Notebook sessions arriving as a Poisson process."""

    kind: Literal["interactive"] = Field(description="interactive.")
    arrivals_per_day: NonNegativeFloat = Field(
        description="Mean sessions started per day (a Poisson process)."
    )
    diurnal: Diurnal | None = Field(
        default=None,
        description="Vary the arrival rate over the day; arrivals_per_day stays the daily mean.",
    )
    duration: DurationDist = Field(description="Session length.")


WorkloadEntry = Annotated[
    TrainingEntry | InferenceEntry | InteractiveEntry, Field(discriminator="kind")
]


class TeamWorkloads(Spec):
    """One team and the workloads it submits."""

    name: str = Field(min_length=1, description="Team name (as in the teams spec).")
    priority_class: str | None = Field(
        default=None,
        description="Default priority class of the team's jobs. Default: none given, so the "
        "scheduler uses the team's default priority.",
    )
    workloads: list[WorkloadEntry] = Field(
        min_length=1, description="Training/batch, inference and interactive entries."
    )


class WorkloadSpec(Spec):
    """A synthetic workload: per team, distributions of what arrives over `horizon`."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["workload"] = "workload"
    horizon: PositiveSeconds = Field(
        description="Arrivals are generated in [0, horizon), e.g. 14d."
    )
    teams: list[TeamWorkloads] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_teams(self) -> Self:
        names = [t.name for t in self.teams]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"teams: names must be unique; repeated: {', '.join(dupes)}")
        return self


def load_workload_spec(path: Path) -> WorkloadSpec:
    """Read a `kind: workload` file; problems come back as a `SpecError`, one line each."""
    return load(WorkloadSpec, path)
