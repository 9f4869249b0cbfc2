"""The capacity plan as data: what `plan.json` holds, field by field.

Every module of the planner fills one part (workloads, design, cloud, cost,
teams) and the report renderers read only this; the JSON field names are
stable snake_case. Money is USD. The renderers mark derived numbers (computed
by gpufleet rather than read from a source) with †.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field


class PlanPart(BaseModel):
    model_config = ConfigDict(frozen=True)


class Assumption(PlanPart):
    name: str
    value: str
    source: str


class WorkloadChoice(PlanPart):
    """One configuration for one workload on one accelerator."""

    workload: str
    kind: str  # training | inference
    accelerator: str
    gpus: int
    parallelism: dict[str, int | str | bool]
    metrics: dict[str, float | None]  # e.g. train_time_days, mfu, ttft_ms, tokens_per_s
    gpu_hours: float | None  # training: with failures; inference: over the plan's horizon
    cost_usd: float | None  # on-demand list price for the run / for serving over the horizon
    meets_constraints: bool
    notes: list[str] = Field(default_factory=list)
    # What the cluster design needs from a training run (traffic, checkpoint, dataset).
    design_inputs: dict[str, float] = Field(default_factory=dict)
    # The GPUs `cost_usd` pays for, on the whole instances the plan rents: a run's own
    # instances, a service its share (by GPUs) of the instances the services share, idle
    # GPUs included (`plan.cost.instances.priced_on_instances`); None where priced per GPU.
    rented_gpus: float | None = None


class Recommendation(PlanPart):
    accelerator: str
    deployment: str  # cloud | on-prem
    provider: str | None
    workloads: list[WorkloadChoice]
    total_gpus: int  # every workload's GPUs added up, as if all ran together
    why: list[str]  # plain sentences
    # GPUs in use at the busiest hour: runs that never overlap are never all in use (None in
    # plan.json files from before it was recorded)
    gpus_at_once: int | None = None


class Alternative(PlanPart):
    accelerator: str
    workloads: list[WorkloadChoice]
    total_gpus: int
    cost_usd: float | None  # the work at on-demand list prices, on whole instances
    compared: list[str]  # sentences against the recommendation
    # What it is ranked on: the headline cost of the plan it would give (the optimised mix
    # when renting, the TCO when owning; `plan.ranking`), and what that figure is, as the
    # summary's `cost_what`. None in plan.json files from when the list price ranked.
    plan_cost_usd: float | None = None
    plan_cost_what: str = ""
    # the GPUs that plan cost pays for (whole nodes owned or whole instances rented) and
    # those in use at the busiest hour (None in plan.json files from before: `total_gpus`)
    priced_gpus: int | None = None
    gpus_at_once: int | None = None


class Fabric(PlanPart):
    name: str
    topology: str  # e.g. "rail-optimised two-level fat-tree"
    port_gbit_per_s: float
    nics: int
    leaf_switches: int
    spine_switches: int
    switch_radix: int
    oversubscription: float
    cables: int
    required_gbit_per_s_per_gpu: float  # what the workloads need across nodes
    available_gbit_per_s_per_gpu: float
    verdict: str  # e.g. "NDR 400 needed" / "RoCE 200G suffices"


class Storage(PlanPart):
    capacity_bytes: float
    dataset_bytes: float
    checkpoint_bytes: float
    checkpoints_retained: int
    read_gbytes_per_s: float
    checkpoint_write_gbytes_per_s: float
    choice: str  # storage.csv row name
    units: float | None  # TiB provisioned (every storage.csv sizing rule gives TiB)
    rationale: str


class Design(PlanPart):
    """On-prem cluster for the recommendation."""

    system: str
    accelerator: str
    gpus: int
    nodes: int
    racks: int
    rack_power_kw: float
    power_kw: dict[str, float]  # it, facility
    scaleup_domain_gpus: int
    fabric: Fabric
    storage: Storage
    # a power-capped site (`on_prem.site_power_kw`): the largest fleet of this system it holds
    site_power_kw: float | None = None
    site_max_gpus: int | None = None
    site_max_racks: int | None = None
    # the spec's rack power budget where one unit draws more (`design.power.size_racks`):
    # `rack_power_kw` is then the unit's draw, and `rack_power_note` says so (None: it held)
    rack_power_stated_kw: float | None = None


class CloudOffer(PlanPart):
    provider: str
    instance: str
    region: str
    instances: int
    gpus: int
    on_demand_usd_per_hour: float | None
    spot_usd_per_hour: float | None
    networking: str  # what to ask for: placement group, EFA, TCPX, InfiniBand


class CostBreakdown(PlanPart):
    on_demand: float | None
    reserved: float | None
    spot: float | None
    # the GPUs the reserved-only total reserves: those in use at the busiest hour
    reserved_gpus: float | None = None
    mix: dict[
        str, float
    ]  # e.g. {"reserved_gpus": ..., "on_demand_gpu_hours": ..., "total_usd": ...}
    savings_vs_on_demand: float | None  # fraction
    # the mix's dollars by the provider selling each part, largest first
    mix_by_provider: dict[str, float] = Field(default_factory=dict)
    # what to know about a price before relying on it, by price key (e.g. reserved_3y)
    price_caveats: dict[str, str] = Field(default_factory=dict)
    tco: dict[str, float]  # on-prem: capex, opex_per_year, total, per_gpu_hour
    break_even_months: float | None
    sensitivity: list[dict[str, float | str]]  # tornado: factor, low, high (total cost)
    # the same for the way of paying not recommended (owning when renting, and the reverse)
    sensitivity_alternative: list[dict[str, float | str]] = Field(default_factory=list)
    # rent or own on one basis at a time (`plan.cost.verdict`); empty without a TCO
    rent_or_own: dict[str, float | str | None] = Field(default_factory=dict)


class DemandCurve(PlanPart):
    """The plan's hourly GPU demand and the owned fleet sized from it (`plan.demand_curve`)."""

    policy: str  # peak | p99 | p95 | p90 | p75 | p50
    fleet_gpus: int  # owned GPUs the policy asks for (the design rounds up to whole systems)
    peak_gpus: float
    mean_gpus: float
    percentile_gpus: dict[str, float]  # p50 ... p99 of the hours
    owned_gpu_hours: float  # demand served by the owned fleet
    rented_gpu_hours: float  # demand above it: serving excess and training runs rented whole
    rented_serving_gpu_hours: float
    rented_runs: list[str]
    daily_max_gpus: list[float]  # the curve for the chart: each day's busiest hour
    rent_usd: float | None = None  # what renting the rest costs (the purchase mix)


class Driver(PlanPart):
    """One of the inputs that move the headline cost most: a tornado row."""

    factor: str  # the tornado's key, e.g. gpu_price
    name: str  # as the reader sees it, e.g. "GPU price"
    low_label: str  # e.g. "-30 %"
    high_label: str
    low_usd: float  # the headline total with this input at its low end
    high_usd: float


class ExecutiveSummary(PlanPart):
    """The first page (`plan.summary`): every figure read from the plan's other parts."""

    decision: str  # one sentence: what to buy, how, and its headline cost
    cost_usd: float | None  # the headline: the deployment's own number
    cost_what: str  # what the headline is ("on-prem TCO over 3 years", ...)
    cost_low_usd: float | None
    cost_high_usd: float | None
    range_method: str
    drivers: list[Driver]  # the widest tornado rows, widest first
    would_change: list[str]  # sentences, each from the numbers it names
    # the GPUs the headline cost pays for (whole nodes owned, whole instances rented), those
    # the workloads use at the busiest hour, and every workload's GPUs added up (the
    # recommendation's `total_gpus`); None in plan.json files from before
    headline_gpus: int | None = None
    gpus_used_at_once: int | None = None
    workload_gpus_added_up: int | None = None
    # what the decision rests on that a buyer must check: a rack budget the design could
    # not hold, renting that could not be priced (sentences from the numbers they name)
    caveats: list[str] = Field(default_factory=list)


class TeamQuota(PlanPart):
    team: str
    demand_gpus: float
    guaranteed_gpus: int
    burst_gpus: int
    method: str


class Plan(PlanPart):
    name: str
    generated_by: str
    recommendation: Recommendation
    summary: ExecutiveSummary | None = None  # None in plan.json files from before issue 27
    alternatives: list[Alternative]
    design: Design | None
    demand_curve: DemandCurve | None = None  # None for a cloud plan
    cloud: dict[str, list[CloudOffer]]  # per provider
    # what the catalog does not rent where the plan allows (`plan.cloud_gaps`): providers
    # with no instance of the accelerator, or none in the plan's regions
    cloud_notes: list[str] = Field(default_factory=list)
    cost: CostBreakdown
    teams: list[TeamQuota]
    infeasible: list[str]  # what would make it feasible, when nothing is
    assumptions: list[Assumption]


@dataclass
class Portfolio:
    """Every workload sized on one accelerator."""

    accelerator: str
    choices: list[WorkloadChoice] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # the headline cost of the plan it would give and what that is (`plan.ranking`)
    plan_cost_usd: float | None = None
    plan_cost_what: str = ""
    plan_gpus: int | None = None  # the GPUs that plan cost pays for

    @property
    def feasible(self) -> bool:
        return not self.failures

    @property
    def peak_gpus(self) -> int:
        return sum(c.gpus for c in self.choices)

    @property
    def cost_usd(self) -> float | None:
        costs = [c.cost_usd for c in self.choices]
        if not costs or any(c is None for c in costs):
            return None
        return float(sum(c for c in costs if c is not None))
