"""Teams, quotas and priority classes: who may use how many GPUs of which flavor.

A quota's `guaranteed_gpus` is what a team always gets back (by preemption if
lent out); `limit_gpus` caps what it may reach by borrowing idle capacity.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

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


# Each team's guarantee of every flavor in a run without a teams file (`gpufleet schedule`,
# `gpufleet simulate`): beyond any team's use and any job's need, so the quota check never
# binds and jobs wait only for room. A guarantee of the cluster's size counted the team's own
# running jobs against it: a gang waiting for room read "team x quota 8/16 in use, no cohort
# to borrow from", and, set aside as beyond its quota, got no backfill reservation. (The
# quota book counts thousandths of a GPU in Python integers: no overflow.)
OPEN_QUOTA_GPUS: Final = sys.maxsize // 1000


class Quota(Spec):
    flavor: AcceleratorName = Field(description="Accelerator this quota is for.")
    guaranteed_gpus: NonNegativeInt = 0
    limit_gpus: NonNegativeInt | None = Field(
        default=None, description="Most GPUs the team may hold, borrowing included."
    )
    borrowing: bool = Field(default=True, description="May borrow idle GPUs beyond guaranteed.")
    lending: bool = Field(default=True, description="Lends its idle guaranteed GPUs to others.")
    borrowing_limit_gpus: NonNegativeInt | None = Field(
        default=None,
        description="Most GPUs borrowed beyond guaranteed from the cohort (Kueue borrowingLimit); "
        "none: up to what the cohort has idle.",
    )
    lending_limit_gpus: NonNegativeInt | None = Field(
        default=None,
        description="Most of its guaranteed GPUs lent to the cohort (Kueue lendingLimit); "
        "none: all that are idle.",
    )

    @model_validator(mode="after")
    def _limit_covers_guarantee(self) -> Self:
        if self.limit_gpus is not None and self.limit_gpus < self.guaranteed_gpus:
            raise ValueError(
                f"limit_gpus ({self.limit_gpus}) is below guaranteed_gpus ({self.guaranteed_gpus})"
            )
        if self.lending_limit_gpus is not None and self.lending_limit_gpus > self.guaranteed_gpus:
            raise ValueError(
                f"lending_limit_gpus ({self.lending_limit_gpus}) exceeds guaranteed_gpus "
                f"({self.guaranteed_gpus})"
            )
        return self

    @property
    def max_gpus(self) -> int | None:
        """Most GPUs of this flavor the team may hold, borrowing included (None: no cap)."""
        if not self.borrowing:
            return self.guaranteed_gpus
        caps = [c for c in (self.limit_gpus,) if c is not None]
        if self.borrowing_limit_gpus is not None:
            caps.append(self.guaranteed_gpus + self.borrowing_limit_gpus)
        return min(caps) if caps else None

    @property
    def lendable_gpus(self) -> int:
        if not self.lending:
            return 0
        if self.lending_limit_gpus is None:
            return self.guaranteed_gpus
        return self.lending_limit_gpus


def _team_schema(schema: dict[str, Any]) -> None:
    """Document the short quota form the before-validator expands."""
    per_flavor = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
    props = schema.setdefault("properties", {})
    props["quota"] = {**per_flavor, "description": "Guaranteed GPUs per flavor."}
    props["borrowing_limit"] = {**per_flavor, "description": "Borrowable beyond quota."}
    props["lending_limit"] = {**per_flavor, "description": "Lendable out of quota."}
    props["fair_share_weight"] = {"type": "number", "exclusiveMinimum": 0}


class Team(Spec):
    """A team and its quotas. Besides `quotas:` entries, the short form of the scheduler's
    teams file is accepted: `quota: {flavor: n}`, `borrowing_limit: {flavor: n}`,
    `lending_limit: {flavor: n}` and `fair_share_weight`."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=_team_schema)

    name: str = Field(min_length=1)
    cohort: str | None = Field(
        default=None, description="Teams in one cohort lend each other unused quota."
    )
    weight: PositiveFloat = Field(default=1.0, description="Fair-share weight.")
    quotas: list[Quota] = Field(default_factory=list)
    projects: list[str] = Field(default_factory=list)
    default_priority: str = "standard"
    idle_policy: Literal["off", "notify", "reclaim"] = Field(
        default="notify",
        description="A job of the team flagged idle: off (nothing), notify (an event and the "
        "portal's idle list) or reclaim (also stopped, not requeued).",
    )
    max_priority_class: str | None = Field(
        default=None,
        description="The highest priority class the team's leads and members may use "
        "(default: its default_priority); admins may use any.",
    )

    # Keys of the short form, for did-you-mean hints on typos.
    extra_keys: ClassVar[tuple[str, ...]] = (
        "quota",
        "borrowing_limit",
        "lending_limit",
        "fair_share_weight",
    )

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        if "fair_share_weight" in out:
            out["weight"] = out.pop("fair_share_weight")
        short = {k: out.pop(k) for k in ("quota", "borrowing_limit", "lending_limit") if k in out}
        if not short:
            return out
        for key, value in short.items():
            if not isinstance(value, Mapping):
                raise ValueError(f"{key}: expected a mapping of flavor to GPUs, e.g. {{h100: 64}}")
        quota = short.get("quota", {})
        for key in ("borrowing_limit", "lending_limit"):
            stray = [f for f in short.get(key, {}) if f not in quota]
            if stray:
                raise ValueError(f"{key}: {', '.join(map(str, stray))} has no entry in quota")
        entries = list(out.get("quotas") or [])
        for flavor, gpus in quota.items():
            entries.append(
                {
                    "flavor": flavor,
                    "guaranteed_gpus": gpus,
                    "borrowing_limit_gpus": short.get("borrowing_limit", {}).get(flavor),
                    "lending_limit_gpus": short.get("lending_limit", {}).get(flavor),
                }
            )
        out["quotas"] = entries
        return out

    def quota_for(self, flavor: str) -> Quota | None:
        return next((q for q in self.quotas if q.flavor == flavor), None)


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
            if team.max_priority_class is not None and team.max_priority_class not in classes:
                problems.append(
                    f"teams[{i}].max_priority_class: unknown priority class "
                    f"'{team.max_priority_class}'; known: {', '.join(classes)}"
                )
            flavors = [q.flavor for q in team.quotas]
            if len(set(flavors)) != len(flavors):
                problems.append(f"teams[{i}].quotas: one quota per flavor")
        if problems:
            raise ValueError("\n".join(problems))
        return self
