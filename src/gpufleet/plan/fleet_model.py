"""The multi-team capacity plan as data: what its plan.json holds, field by field.

Filled by `plan.fleet`, read by `report.fleet`. Field names are stable snake_case; times
are seconds (`_s`), money USD (`_usd`). Every interval is the mean over seeds with its
two-sided Student-t confidence interval (`sim.compare.mean_ci`); `low`/`high` are None
with a single seed. Nothing here holds a wall-clock time, so the same spec, seeds and
code give the same JSON whatever the number of worker processes.
"""

from __future__ import annotations

from pydantic import Field

from gpufleet.plan.model import Assumption, PlanPart


def mix_label(accelerator: str, service_accelerator: str | None) -> str:
    return accelerator if service_accelerator is None else f"{accelerator} + {service_accelerator}"


class Interval(PlanPart):
    mean: float | None
    low: float | None
    high: float | None
    n: int


class TeamPoint(PlanPart):
    """One team at one cluster size: its measured service level against its targets."""

    team: str
    jobs_per_seed: float
    unstarted: int  # over all seeds: jobs never started by the end of the run
    wait_p50_s: float | None  # mean over seeds
    wait_p95_s: Interval | None
    wait_target_s: float | None
    long_runs: int  # over all seeds
    long_run_wait_p95_s: float | None  # pooled over seeds
    long_run_target_s: float | None
    slo_attainment: Interval | None
    slo_target: float | None
    held_gpus_mean: float
    passed: bool
    reasons: list[str] = Field(default_factory=list)


class SizePoint(PlanPart):
    """One cluster size, simulated on every seed."""

    nodes: int
    gpus: int
    passed: bool
    teams: list[TeamPoint]
    allocation: Interval  # GPUs held ÷ GPUs, over [warmup, horizon]
    running_jobs_mean: float
    running_jobs_p95: float
    running_jobs_max: float
    preemptions_per_seed: float
    lost_gpu_hours_per_seed: float
    jobs_per_seed: float


class Service(PlanPart):
    """An inference entry sized on one accelerator (at its peak rate)."""

    team: str
    service: str
    model: str
    accelerator: str
    request_rate: float
    replicas: int
    gpus_per_replica: int
    mig_profile: str | None
    gpu_equivalent: float
    ttft_ms: float
    tpot_ms: float
    how: str


class ClusterCost(PlanPart):
    deployment: str  # on-prem | cloud
    gpus: int | None = None  # the GPUs priced (a mix: both pools)
    total_usd: float | None  # over horizon_years, of the deployment
    on_prem_tco_usd: float | None
    cloud_usd: float | None
    cloud_method: str | None
    per_gpu_hour_usd: float | None  # on-prem: per delivered GPU-hour at the simulated use
    system: str | None
    nodes: int | None
    racks: int | None
    it_power_kw: float | None
    notes: list[str] = Field(default_factory=list)
    # the years `total_usd` covers (the spec's horizon_years, not the simulated window);
    # None in plan.json files from before it was recorded
    horizon_years: float | None = None

    @property
    def period(self) -> str:
        """ "over 3 years": the period of `total_usd`, which a headline says beside it (it
        read "over the horizon" while the Method table's Horizon was the 14-day simulated
        window)."""
        if self.horizon_years is None:
            return "over the plan's horizon_years"
        years = f"{self.horizon_years:g}"
        return f"over {years} year{'' if years == '1' else 's'}"


class SearchResult(PlanPart):
    """The bisection for one accelerator, profile and arrival scale."""

    accelerator: str
    profile: str
    arrival_scale: float
    status: str  # met | not met | infeasible
    nodes: int | None
    gpus: int | None
    gpus_per_node: int
    searched_nodes: list[int]  # in the order evaluated
    points: list[SizePoint]  # by size
    binding: list[str]  # teams that miss a target one node below the answer
    cost: ClusterCost | None
    problems: list[str] = Field(default_factory=list)
    services: list[Service] = Field(default_factory=list)
    mig_gpus: int = 0
    # a mix: the services' own pool (another accelerator, fixed at their peak); `nodes`
    # and `gpus_per_node` are the searched training pool's, `gpus` both pools'
    service_accelerator: str | None = None
    service_gpus: int = 0

    @property
    def label(self) -> str:
        """The accelerator, or "training + services" accelerators for a mix."""
        return mix_label(self.accelerator, self.service_accelerator)


class TeamQuota(PlanPart):
    team: str
    guaranteed_gpus: int  # a mix: both pools together
    burst_limit_gpus: int
    mean_gpus_held: float
    p99_gpus_held: float
    inference_peak_gpus: float
    # a mix: the guarantee per accelerator (the service pool's and the training pool's)
    guaranteed_by_accelerator: dict[str, int] = Field(default_factory=dict)


class Quotas(PlanPart):
    method: str
    teams: list[TeamQuota]
    verified: SizePoint | None  # the check run: `gpus` GPUs with exactly these quotas
    notes: list[str] = Field(default_factory=list)
    gpus: int = 0  # the cluster size the quotas split (the answer's, or a larger one)
    nodes: int = 0  # ... in nodes of the searched accelerator (a mix: its training pool)
    rule: str = "mean"  # the `fleet.QUOTA_RULES` entry that made them
    verdict: str = ""  # one sentence: verified at which size, or not a recommendation
    tried: list[str] = Field(default_factory=list)  # each split checked, in order

    @property
    def recommended(self) -> bool:
        """Whether a check run met every target with them (else they are only shown)."""
        return self.verified is not None and self.verified.passed


class PolicyComparison(PlanPart):
    profile: str
    status: str
    nodes: int | None
    gpus: int | None
    cost_usd: float | None
    extra_gpus: int | None  # over the plan's profile
    extra_cost_usd: float | None


class QueuePolicy(PlanPart):
    """One queue policy at the answer's size with the printed quotas (or open quotas where no
    split was verified): what a platform lead compares before choosing one."""

    profile: str
    queue_order: str  # fair-share, priority, fifo, ...
    preemption: list[str]
    quotas: str  # "the recommended quotas" or "open quotas"
    point: SizePoint


class Sensitivity(PlanPart):
    arrival_scale: float
    status: str
    nodes: int | None
    gpus: int | None
    cost_usd: float | None


class Capacity(PlanPart):
    running_jobs_mean: float
    running_jobs_p95: float
    running_jobs_max: float
    median_jobs_at_once: dict[str, int]  # team -> its median training job, how many fit at once


class FleetRecommendation(PlanPart):
    """The cluster the plan recommends, priced, and the one its cluster.yaml and teams.yaml
    describe: the smallest size where a quota split's check run met every target (it may be
    larger than the search's answer with open quotas, `fair_share_nodes`), or the search's
    answer when no split tried did (then the quotas are shown but not recommended)."""

    accelerator: str
    profile: str
    nodes: int  # of the searched accelerator (a mix: its training pool)
    gpus: int  # a mix: both pools
    deployment: str
    cost_usd: float | None
    why: list[str]
    service_accelerator: str | None = None  # a mix: where the services run
    service_gpus: int = 0
    # what `gpus` cost (design, racks, power): the size the quotas were verified at, which
    # may be larger than the search's answer with open quotas (`fair_share_gpus`)
    cost: ClusterCost | None = None
    fair_share_nodes: int | None = None  # the search's answer with open quotas
    fair_share_gpus: int | None = None

    @property
    def label(self) -> str:
        return mix_label(self.accelerator, self.service_accelerator)

    @property
    def grown_for_quotas(self) -> bool:
        """Whether the quotas need more nodes than fair share alone (the search's answer)."""
        return self.fair_share_nodes is not None and self.fair_share_nodes != self.nodes

    @property
    def cluster_text(self) -> str:
        """ "280 × h100-sxm5-80gb (35 nodes)", with a mix's service pool after it."""
        nodes = f"{self.gpus - self.service_gpus:,} × {self.accelerator} ({self.nodes} nodes)"
        if self.service_accelerator is None:
            return nodes
        return (
            f"{nodes} for training + {self.service_gpus:,} × {self.service_accelerator} for "
            "the services"
        )


class TeamInput(PlanPart):
    team: str
    priority: str
    fair_share_weight: float
    wait_target_s: float | None
    long_run_target_s: float | None
    slo_target: float
    workloads: list[str]  # one line each
    offered_gpus: float  # mean GPUs its jobs ask for (seed 0, first candidate)
    trace: list[str] = Field(default_factory=list)  # the reader's report


class FleetPlan(PlanPart):
    kind: str = "multi-team-plan"
    name: str
    generated_by: str
    method: dict[str, str | float | int | list[int]]
    teams: list[TeamInput]
    candidates: list[SearchResult]
    recommendation: FleetRecommendation | None
    capacity: Capacity | None
    quotas: Quotas | None
    policies: list[PolicyComparison]
    queue_policies: list[QueuePolicy] = Field(default_factory=list)
    queue_policy_summary: str = ""  # one sentence from `queue_policies`
    sensitivity: list[Sensitivity]
    sensitive_to: list[str]  # sentences: which target binds, what moves the answer
    assumptions: list[Assumption]

    @property
    def targets_text(self) -> str:
        """Under what every team meets its targets at the recommended size: the clause the
        headline ends with, from the quotas' check run, so that it never claims more than
        the exported cluster and quotas were shown to do."""
        rec = self.recommendation
        if rec is None:
            return "no candidate met every target within the search limit"
        profile = f"every team meets its targets under the {rec.profile} profile"
        if self.quotas is not None and self.quotas.recommended:
            return f"{profile} with the recommended quotas"
        return f"{profile} with open quotas (fair share alone); no quota split tried holds them"
