"""The planner form -> a plan spec (`kind: plan`), the same input `gpufleet plan` reads.

The form covers one training or one inference workload; anything more (several
workloads, teams, on-prem prices) goes in the spec box as YAML, which then replaces the
form. Validation is the spec's own (`specs.load.validate`); its problems, one line per
field path, are put next to the form field they name. The plan itself (`compute`) runs in
the portal's worker (`portal.heavy`), so it and what it returns must pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

import yaml

from gpufleet.catalog.models import load_model_presets
from gpufleet.errors import SpecError
from gpufleet.formatting import fmt_count, fmt_num, fmt_usd
from gpufleet.plan.model import Plan
from gpufleet.plan.planner import DEFAULT_ACCELERATORS, InfeasiblePlanError, plan
from gpufleet.plan.summary import fleet_gpus, gpus_at_once
from gpufleet.report.render import render_html
from gpufleet.specs.fleet import FleetPlanSpec, plan_model_for
from gpufleet.specs.inference import Engine, ServingPrecision
from gpufleet.specs.load import validate
from gpufleet.specs.plan import Deployment, PlanSpec
from gpufleet.specs.training import Framework, TrainingPrecision

FORM = "_form"
MAX_YAML_BYTES = 64 * 1024
# a multi-team spec (`teams:`) is sized by simulation: tens of CPU-seconds to minutes, past a
# portal run's cap and a person's budget (`portal.heavy`), so the page says where to run it
# rather than listing the fields the single-plan spec lacks
MULTI_TEAM = (
    "a multi-team plan (a spec with teams:) is sized by simulation, which takes minutes: run "
    "`gpufleet plan SPEC --out DIR`. The planner here plans workloads (a spec with workloads:)"
)
DEFAULTS: dict[str, str] = {
    "name": "my-plan",
    "workload_kind": "training",
    "model": "llama-3-8b",
    "deployment": "cloud",
    "seq_len": "4096",
    "global_batch": "256",
    "tokens": "50B",
    "training_precision": "bf16",
    "framework": "fsdp",
    "deadline": "14d",
    "max_gpus": "256",
    "serving_precision": "fp8",
    "engine": "vllm",
    "input_tokens": "1024",
    "output_tokens": "256",
    "request_rate": "10",
    "ttft_p99_ms": "1000",
    "tpot_p99_ms": "100",
}
FIELDS = (*DEFAULTS, "spec_yaml")
# the last segment of a spec problem's path -> the form field that sets it
_FIELD_OF_PATH = {
    "name": "name",
    "model": "model",
    "deployment": "deployment",
    "accelerators": "accelerators",
    "seq_len": "seq_len",
    "global_batch": "global_batch",
    "tokens": "tokens",
    "framework": "framework",
    "deadline": "deadline",
    "max_gpus": "max_gpus",
    "engine": "engine",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "request_rate": "request_rate",
    "ttft_p99_ms": "ttft_p99_ms",
    "tpot_p99_ms": "tpot_p99_ms",
}


@dataclass
class PlanForm:
    """A validated spec, or the problems by form field."""

    spec: PlanSpec | None = None
    errors: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Planned:
    """A plan and its report, or the advice of a plan that cannot be met."""

    result: Plan | None
    report_html: str | None
    advice: tuple[str, ...] = ()


def compute(spec: PlanSpec) -> Planned:
    """`gpufleet plan` on `spec`: the plan and its HTML report (the same file the command
    writes). Infeasibility is an answer here, not an error (its advice is shown)."""
    try:
        result = plan(spec)
    except InfeasiblePlanError as exc:
        return Planned(None, None, tuple(exc.advice))
    return Planned(result, render_html(result))


@dataclass(frozen=True)
class Headline:
    """The figures the page puts above the report, each read from the plan, never worked out
    again here: the page once showed `recommendation.total_gpus` (every workload's GPUs
    added up, as if all ran at once) as the plan's size, which for workloads that run at
    different times is more GPUs than the plan buys or rents (year-of-runs: 1,296 against
    the 528 it rents at once), and fewer than an on-prem cluster of whole nodes holds
    (shared-cluster: 553 against 560)."""

    decision: str | None  # the report's own sentence (None in a plan from before issue 27)
    accelerator: str
    deployment: str
    provider: str | None
    fleet_gpus: int  # the fleet the decision buys or rents
    fleet_how: str  # e.g. "to build and own: 70 dgx-b200 nodes, 35 racks"
    gpus_at_once: int  # in use at the busiest hour
    gpus_added_up: int  # each workload's GPUs added up
    workloads: int
    cost_usd: float | None
    cost_what: str
    cost_low_usd: float | None
    cost_high_usd: float | None
    work_gpu_hours: float | None  # the report's demand GPU-hours

    @property
    def fleet_text(self) -> str:
        return f"{fmt_count(self.fleet_gpus)} × {self.accelerator}"

    @property
    def cost_text(self) -> str:
        if self.cost_usd is None:
            return ""
        likely = (
            f" (likely {fmt_usd(self.cost_low_usd)} to {fmt_usd(self.cost_high_usd)})"
            if self.cost_low_usd is not None and self.cost_high_usd is not None
            else ""
        )
        return f"{fmt_usd(self.cost_usd)} {self.cost_what}{likely}"

    @property
    def work_text(self) -> str:
        """The GPU-hours as the report rounds them ("758,466")."""
        return fmt_num(self.work_gpu_hours)


def headline(result: Plan) -> Headline:
    """The fleet as the plan's decision names it (`plan.summary`, which writes the sentence
    from these same fields): on-prem, the designed cluster of whole nodes; renting, the
    whole instances rented where they hold more GPUs than are in use at once, else the GPUs
    in use at once. Runs that never overlap share that fleet, so it is not the workloads'
    GPUs added up; that sum is kept apart, labelled as such."""
    rec, design, mix = result.recommendation, result.design, result.cost.mix
    at_once = gpus_at_once(rec, result.demand_curve)
    fleet = fleet_gpus(rec, design, result.demand_curve, mix)
    if rec.deployment == "on-prem" and design is not None:
        how = (
            f"to build and own: {fmt_count(design.nodes)} {design.system} "
            f"node{'s' if design.nodes != 1 else ''}, {fmt_count(design.racks)} "
            f"rack{'s' if design.racks != 1 else ''}"
        )
        curve = result.demand_curve
        if curve is not None and curve.rented_gpu_hours > 0:
            # a fleet sized below the peak (`on_prem.fleet_policy`): the rest is rented
            how += f"; the demand above it is rented ({fmt_num(curve.rented_gpu_hours)} GPU-hours)"
    elif rec.deployment == "on-prem":
        how = "to build and own"
    elif fleet > at_once:
        instances, per = int(mix.get("rented_instances") or 0), int(mix.get("instance_gpus") or 0)
        how = f"rented at once as {fmt_count(instances)} {per}-GPU instances"
    else:
        how = "rented at once"
    if rec.provider and rec.deployment != "on-prem":
        how += f" on {rec.provider}"
    summary = result.summary
    return Headline(
        decision=summary.decision if summary else None,
        accelerator=rec.accelerator,
        deployment=rec.deployment,
        provider=rec.provider,
        fleet_gpus=fleet,
        fleet_how=how,
        gpus_at_once=at_once,
        gpus_added_up=rec.total_gpus,
        workloads=len(rec.workloads),
        cost_usd=summary.cost_usd if summary else None,
        cost_what=summary.cost_what if summary else "",
        cost_low_usd=summary.cost_low_usd if summary else None,
        cost_high_usd=summary.cost_high_usd if summary else None,
        work_gpu_hours=mix.get("demand_gpu_hours"),
    )


def options() -> dict[str, Any]:
    """What the planner form's selects offer."""
    return {
        "models": [p.name for p in load_model_presets()],
        "deployments": get_args(Deployment),
        "training_precisions": get_args(TrainingPrecision),
        "frameworks": get_args(Framework),
        "serving_precisions": get_args(ServingPrecision),
        "engines": get_args(Engine),
        "candidate_accelerators": DEFAULT_ACCELERATORS,
    }


def spec_data(values: Mapping[str, str], accelerators: list[str]) -> dict[str, Any]:
    """The plan spec the form stands for (strings are left for the spec to parse, so
    "50B" tokens and "14d" deadlines read as they do in a YAML file)."""
    kind = values.get("workload_kind", "training")
    workload: dict[str, Any] = {"name": values.get("name") or "workload", "kind": kind}
    workload["model"] = {"preset": values.get("model", "")}
    constraints: dict[str, Any] = {}
    if values.get("max_gpus"):
        constraints["max_gpus"] = values["max_gpus"]
    if kind == "inference":
        workload["serving"] = {
            "precision": values.get("serving_precision"),
            "engine": values.get("engine"),
            "input_tokens": values.get("input_tokens"),
            "output_tokens": values.get("output_tokens"),
            "request_rate": values.get("request_rate"),
            "slo": {k: values[k] for k in ("ttft_p99_ms", "tpot_p99_ms") if values.get(k)},
        }
    else:
        workload["training"] = {
            "seq_len": values.get("seq_len"),
            "global_batch": values.get("global_batch"),
            "tokens": values.get("tokens") or None,
            "precision": values.get("training_precision"),
            "framework": values.get("framework"),
        }
        if values.get("deadline"):
            constraints["deadline"] = values["deadline"]
    if constraints:
        workload["constraints"] = constraints
    data: dict[str, Any] = {
        "kind": "plan",
        "name": values.get("name") or "plan",
        "deployment": values.get("deployment") or "both",
        "workloads": [workload],
    }
    if accelerators:
        data["accelerators"] = accelerators
    return data


def read_form(values: Mapping[str, str], accelerators: list[str]) -> PlanForm:
    """Validate the spec box's YAML when given, else the form's fields."""
    out = PlanForm()
    raw = values.get("spec_yaml", "")
    if raw.strip():
        if len(raw.encode()) > MAX_YAML_BYTES:
            out.errors["spec_yaml"] = [f"at most {MAX_YAML_BYTES // 1024} KiB"]
            return out
        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            out.errors["spec_yaml"] = [f"not valid YAML: {exc}"]
            return out
        if plan_model_for(data) is FleetPlanSpec:
            out.errors["spec_yaml"] = [MULTI_TEAM]
            return out
        target = "spec_yaml"
    else:
        data = spec_data(values, accelerators)
        target = ""
    try:
        out.spec = validate(PlanSpec, data, "the plan spec")
    except SpecError as exc:
        for problem in exc.problems:
            path = problem.split(":", 1)[0]
            last = path.rsplit(".", 1)[-1].split("[", 1)[0]
            name = target or _FIELD_OF_PATH.get(last, FORM)
            out.errors.setdefault(name, []).append(
                problem if name in (FORM, "spec_yaml") else problem.split(":", 1)[-1].strip()
            )
    return out
