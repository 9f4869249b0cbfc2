"""Every spec kind by its `kind:` value, for loading any file and printing schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gpufleet.catalog.architecture import ModelArch
from gpufleet.errors import SpecError, suggest
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.fleet import FleetPlanSpec, PlanFile, plan_model_for
from gpufleet.specs.inference import InferenceSpec
from gpufleet.specs.jobs import JobsSpec
from gpufleet.specs.load import read_yaml, validate
from gpufleet.specs.plan import PlanSpec
from gpufleet.specs.teams import TeamsSpec
from gpufleet.specs.training import TrainingSpec
from gpufleet.specs.workload import WorkloadSpec

SPEC_KINDS: dict[str, type[BaseModel]] = {
    "training": TrainingSpec,
    "inference": InferenceSpec,
    "cluster": ClusterSpec,
    "teams": TeamsSpec,
    "plan": PlanSpec,
    "jobs": JobsSpec,
    "workload": WorkloadSpec,
}
# Schemas users may ask for: every kind, the multi-team plan, the parts worth reading alone.
SCHEMAS: dict[str, type[BaseModel]] = {
    **SPEC_KINDS,
    "plan": PlanFile,
    "plan-teams": FleetPlanSpec,
    "model": ModelArch,
}


def kind_of(data: Any, source: str) -> type[BaseModel]:
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise SpecError(source, [f"expected a mapping of fields at the top level, got {kind}"])
    kinds = ", ".join(SPEC_KINDS)
    if "kind" not in data:
        raise SpecError(source, [f"kind: required field missing; one of {kinds}"])
    kind = str(data["kind"])
    if kind not in SPEC_KINDS:
        hint = suggest(kind, SPEC_KINDS, limit=1)
        tail = f"; did you mean '{hint[0]}'?" if hint else f"; one of {kinds}"
        raise SpecError(source, [f"kind: unknown kind '{kind}'{tail}"])
    return SPEC_KINDS[kind]


def load_spec(path: Path) -> BaseModel:
    """Load any spec file, choosing the model by its `kind:` field (and, for plans, by
    `teams:`, which makes it a multi-team plan)."""
    data = read_yaml(path)
    model = kind_of(data, str(path))
    if model is PlanSpec:
        model = plan_model_for(data)
    return validate(model, data, str(path))
