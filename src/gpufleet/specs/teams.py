"""Teams, quotas and priority classes: who may use how many GPUs of which flavor.

A quota's `guaranteed_gpus` is what a team always gets back (by preemption if
lent out); `limit_gpus` caps what it may reach by borrowing idle capacity.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import ConfigDict, Field, NonNegativeInt, PositiveFloat, model_validator

from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.names import AcceleratorName


class PriorityClass(Spec):
    name: str = Field(min_length=1)
    value: int = Field(description="Higher runs first and may preempt lower.")
    preemptible: bool = Field(default=True, description="Jobs of this class may be preempted.")


DEFAULT_PRIORITY_CLASSES = (
    PriorityClass(name="production", value=1000, preemptible=False),
    PriorityClass(name="standard", value=500, preemptible=True),
    PriorityClass(name="opportunistic", value=100, preemptible=True),
)


class Quota(Spec):
    flavor: AcceleratorName = Field(description="Accelerator this quota is for.")
    guaranteed_gpus: NonNegativeInt = 0
    limit_gpus: NonNegativeInt | None = Field(
        default=None, description="Most GPUs the team may hold, borrowing included."
    )
    borrowing: bool = Field(default=True, description="May borrow idle GPUs beyond guaranteed.")
    lending: bool = Field(default=True, description="Lends its idle guaranteed GPUs to others.")

    @model_validator(mode="after")
    def _limit_covers_guarantee(self) -> Self:
        if self.limit_gpus is not None and self.limit_gpus < self.guaranteed_gpus:
            raise ValueError(
                f"limit_gpus ({self.limit_gpus}) is below guaranteed_gpus ({self.guaranteed_gpus})"
            )
        return self


class Team(Spec):
    name: str = Field(min_length=1)
    weight: PositiveFloat = Field(default=1.0, description="Fair-share weight.")
    quotas: list[Quota] = Field(default_factory=list)
    projects: list[str] = Field(default_factory=list)
    default_priority: str = "standard"


class TeamsSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["teams"] = "teams"
    priority_classes: list[PriorityClass] = Field(
        default_factory=lambda: list(DEFAULT_PRIORITY_CLASSES)
    )
    teams: list[Team] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems: list[str] = []
        classes = [p.name for p in self.priority_classes]
        if len(set(classes)) != len(classes):
            problems.append("priority_classes: names must be unique")
        names: set[str] = set()
        for i, team in enumerate(self.teams):
            if team.name in names:
                problems.append(f"teams[{i}].name: '{team.name}' is used by another team")
            names.add(team.name)
            if team.default_priority not in classes:
                problems.append(
                    f"teams[{i}].default_priority: unknown priority class "
                    f"'{team.default_priority}'; known: {', '.join(classes)}"
                )
            flavors = [q.flavor for q in team.quotas]
            if len(set(flavors)) != len(flavors):
                problems.append(f"teams[{i}].quotas: one quota per flavor")
        if problems:
            raise ValueError("\n".join(problems))
        return self
