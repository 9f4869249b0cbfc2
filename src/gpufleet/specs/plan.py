"""Plan spec: one or more workloads (possibly per team) plus deployment preferences.

A workload entry is a training or inference spec without its own `hardware`
section requirement: the planner chooses the hardware. Constraints narrow the
choice (deadline, GPU ceiling, budget, allowed accelerators).
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from gpufleet.catalog.instances import load_instances
from gpufleet.catalog.pricing import PriceScope, cheapest_gpu_hour, no_price_reason
from gpufleet.errors import suggest
from gpufleet.quantities import PositiveSeconds, Seconds
from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.hardware import HardwareSpec
from gpufleet.specs.inference import InferenceParallelism, ServingParams
from gpufleet.specs.model_ref import ModelSpec
from gpufleet.specs.names import AcceleratorName
from gpufleet.specs.training import Parallelism, Reliability, TrainingParams

Deployment = Literal["cloud", "on-prem", "both"]
Provider = Literal["aws", "gcp", "azure"]


class Constraints(Spec):
    deadline: PositiveSeconds | None = Field(default=None, description="e.g. 90d")
    max_gpus: PositiveInt | None = None
    budget_usd: PositiveFloat | None = None
    accelerators: list[AcceleratorName] = Field(
        default_factory=list, description="Only these accelerators (default: the planner's set)."
    )


class TrainingWorkload(Spec):
    name: str = Field(min_length=1)
    kind: Literal["training"]
    team: str | None = None
    model: ModelSpec
    training: TrainingParams
    hardware: HardwareSpec | None = None
    parallelism: Parallelism | None = None
    reliability: Reliability | None = None
    constraints: Constraints = Constraints()
    start: Seconds = Field(
        default=0.0,
        description="When the run starts, from the start of the plan (e.g. 120d).",
    )


class InferenceWorkload(Spec):
    name: str = Field(min_length=1)
    kind: Literal["inference"]
    team: str | None = None
    model: ModelSpec
    serving: ServingParams
    hardware: HardwareSpec | None = None
    parallelism: InferenceParallelism | None = None
    constraints: Constraints = Constraints()
    daily_trough: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description=(
            "The request rate at the quietest hour as a share of serving.request_rate (the "
            "peak); 1 = flat. Shapes the demand curve an owned fleet is sized from."
        ),
    )
    peak_hour: int = Field(default=14, ge=0, le=23, description="Hour of the day of the peak.")


Workload = Annotated[TrainingWorkload | InferenceWorkload, Field(discriminator="kind")]


class OnPremPreferences(Spec):
    rack_power_kw: PositiveFloat = Field(
        default=30.0, description="Power a rack can deliver and cool (air ~30 kW, liquid ~60+ kW)."
    )
    pue: PositiveFloat = Field(default=1.3, ge=1.0, description="Facility power / IT power.")
    electricity_usd_per_kwh: PositiveFloat = 0.10
    facility: Literal["colocation", "build", "existing"] = Field(
        default="colocation",
        description=(
            "Where the fleet lives: rented colocation space (colocation_usd_per_kw_month of IT "
            "power), a facility built for it (facility_build_usd_per_mw of IT power, amortised "
            "over facility_life_years), or an existing building already paid for (not costed)."
        ),
    )
    colocation_usd_per_kw_month: float | None = Field(
        default=None, ge=0, description="Default: the sourced midpoint in onprem_costs.csv."
    )
    facility_build_usd_per_mw: PositiveFloat | None = Field(
        default=None, description="Default: the sourced midpoint in onprem_costs.csv."
    )
    facility_life_years: PositiveFloat = 15.0
    fleet_policy: Literal["peak", "p99", "p95", "p90", "p75", "p50"] = Field(
        default="peak",
        description=(
            "How many GPUs to own, from the plan's hourly demand curve: its peak, or a "
            "percentile; demand above the owned fleet is rented (serving hour by hour, a "
            "training run whole when it does not fit)."
        ),
    )
    site_power_kw: PositiveFloat | None = Field(
        default=None,
        description=(
            "Facility power the site can supply (e.g. 2000 for 2 MW): the design must fit, and "
            "the plan states the largest fleet that would."
        ),
    )
    depreciation_years: PositiveFloat = 4.0
    staff_fte_per_100_nodes: float = Field(default=1.5, ge=0)
    fte_usd_per_year: PositiveFloat = 200_000.0
    support_fraction_per_year: float = Field(default=0.1, ge=0, le=1)
    discount_rate: float = Field(
        default=0.07,
        ge=0,
        lt=1,
        description="Yearly rate for present values of owning and renting (your cost of capital).",
    )


class CloudPreferences(Spec):
    """What the clouds will let this plan have, and what a spot reclaim costs it."""

    spot_max_gpus: int = Field(
        default=64,
        ge=0,
        description=(
            "The most GPUs spot may hold at once: a larger gang never runs on spot, and all "
            "spot work together stays within it (gpufleet assumption; 0 = no spot)."
        ),
    )
    spot_reclaims_per_node_day: float = Field(
        default=0.1,
        gt=0,
        description=(
            "How often a spot node is reclaimed (gpufleet assumption, no sourced rate; set "
            "yours from history). Priced as extra interruptions in the goodput model."
        ),
    )
    capacity_block_max_gpus: int = Field(
        default=512,
        ge=0,
        description=(
            "The most GPUs one capacity block holds: a larger gang never runs on blocks "
            "(gpufleet assumption; set what your provider offers you; 0 = no blocks)."
        ),
    )


def _all_providers() -> list[Provider]:
    return ["aws", "gcp", "azure"]


class PlanSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["plan"] = "plan"
    name: str = "plan"
    deployment: Deployment = "both"
    providers: list[Provider] = Field(default_factory=_all_providers)
    regions: list[str] = Field(default_factory=list)
    currency: Literal["USD"] = "USD"
    expected_utilization: float = Field(default=0.7, gt=0, le=1)
    horizon_years: PositiveFloat = Field(default=3.0, description="TCO and break-even horizon.")
    accelerators: list[AcceleratorName] = Field(
        default_factory=list, description="Candidates for every workload (default: a standard set)."
    )
    on_prem: OnPremPreferences = OnPremPreferences()
    cloud: CloudPreferences = CloudPreferences()
    workloads: list[Workload] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        names = [w.name for w in self.workloads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"workloads: names must be unique; repeated: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _runs_start_within_the_horizon(self) -> Self:
        horizon_s = self.horizon_years * 365 * 86_400
        late = [
            f"workloads: {w.name} starts at day {w.start / 86_400:,.0f}, after the "
            f"{self.horizon_years:g}-year horizon ends (day {horizon_s / 86_400:,.0f}); start it "
            "earlier or raise horizon_years"
            for w in self.workloads
            if isinstance(w, TrainingWorkload) and w.start >= horizon_s
        ]
        if late:
            raise ValueError("\n".join(late))
        return self

    @model_validator(mode="after")
    def _regions_exist(self) -> Self:
        """A region must be one the providers list in the catalog (a typo would otherwise
        filter every offer away); a cloud plan's named accelerators need an offer there."""
        if not self.regions:
            return self
        known = {r.region for r in load_instances() if r.provider in self.providers}
        problems = []
        for region in self.regions:
            if region not in known:
                hint = suggest(region, known, limit=1)
                tail = f"; did you mean '{hint[0]}'?" if hint else ""
                problems.append(
                    f"regions: '{region}' is not a region of {', '.join(self.providers)} "
                    f"in the catalog{tail}"
                )
        if not problems and self.deployment == "cloud":
            scope = PriceScope(tuple(self.providers), tuple(self.regions))
            for name in self.accelerators:
                if cheapest_gpu_hour(name, scope) is None:
                    problems.append(f"accelerators: {no_price_reason(name, scope)}")
        if problems:
            raise ValueError("\n".join(problems))
        return self
