"""What-if: the live queue simulated forward on another profile or with more GPUs.

Both the baseline and the scenario run through `control.eta.estimate_starts` — the
simulator's engine calling the scheduler's `decide()`, the path the live ETAs take — on
the same snapshot of the store (running jobs with their placements, pending jobs with
their specs), so the two differ only in what the scenario changes. Added GPUs are new
nodes cloned from a node of that accelerator (same topology place and MIG layout, their
own scale-up domain), which is what buying more of them would look like.

The simulation takes seconds to minutes of CPU, so the page runs it through `compute` in
the portal's worker process (`portal.heavy`): its inputs and result pickle.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.cluster import Cluster, Node
from gpufleet.control.eta import EtaResult, estimate_starts, queue_cycle_s
from gpufleet.control.jobs import LiveQueue
from gpufleet.errors import UserError
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import Quota, TeamsSpec

MAX_ADDED_GPUS = 4096


@dataclass(frozen=True, slots=True)
class Scenario:
    """Another profile, and/or `add_gpus` more GPUs of `accelerator` guaranteed to
    `to_team` (None: added as capacity nobody is guaranteed)."""

    profile: str
    add_gpus: int = 0
    accelerator: str | None = None
    to_team: str | None = None


@dataclass(frozen=True, slots=True)
class JobWait:
    """One pending job: how long it has waited, and its predicted wait from submission
    (None: it does not start within the simulated horizon) now and in the scenario."""

    job_id: int
    team: str
    queued_s: float
    baseline_wait_s: float | None
    scenario_wait_s: float | None


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    mean_wait_s: float | None
    median_wait_s: float | None
    max_wait_s: float | None
    never: int  # jobs that do not start within the horizon


@dataclass(frozen=True)
class WhatIf:
    rows: tuple[JobWait, ...]
    baseline: Summary
    scenario: Summary
    gpus_before: dict[str, int]
    gpus_after: dict[str, int]
    assumed_runtime: int  # jobs whose runtime was assumed (they declare none)
    wall_s: float


@dataclass(frozen=True, slots=True)
class Visible:
    """Whose jobs a caller sees: an admin everyone's, anyone else their team's (a callable
    that pickles, unlike a lambda)."""

    admin: bool
    team: str | None

    def __call__(self, team: str) -> bool:
        return self.admin or team == self.team


_NODE_FIELDS = tuple(f.name for f in dataclasses.fields(Node) if f.init)


@dataclass(frozen=True, slots=True)
class PortableCluster:
    """A cluster as it travels to a worker process: its nodes' fields, rebuilt there (a
    node's labels are a mappingproxy, which does not pickle; the cluster's lookup tables
    are rebuilt rather than copied). 1,000 nodes: 1 MB, under 0.1 s both ways."""

    levels: tuple[str, ...]
    nodes: tuple[tuple[Any, ...], ...]
    name: str

    @classmethod
    def of(cls, cluster: Cluster) -> PortableCluster:
        nodes = tuple(
            tuple(dict(node.labels) if n == "labels" else getattr(node, n) for n in _NODE_FIELDS)
            for node in cluster.nodes
        )
        return cls(cluster.levels, nodes, cluster.name)

    def cluster(self) -> Cluster:
        nodes = tuple(Node(**dict(zip(_NODE_FIELDS, values, strict=True))) for values in self.nodes)
        return Cluster(self.levels, nodes, name=self.name)


@dataclass(frozen=True)
class Inputs:
    """What one what-if needs, in a form that travels to a worker process."""

    snap: LiveQueue
    cluster: PortableCluster
    scenario: Scenario
    now_s: float
    baseline_profile: str
    visible: Visible
    unavailable: frozenset[str] = frozenset()  # nodes down or drained (`replay_queue`)
    done_s: Mapping[str, float] = dataclasses.field(default_factory=dict)  # saved work
    not_before: Mapping[str, float] = dataclasses.field(default_factory=dict)  # backoffs


def compute(inputs: Inputs) -> WhatIf:
    """`run` on inputs that crossed to a worker process."""
    return run(
        inputs.snap,
        inputs.cluster.cluster(),
        inputs.scenario,
        now_s=inputs.now_s,
        baseline_profile=inputs.baseline_profile,
        visible=inputs.visible,
        unavailable=inputs.unavailable,
        done_s=inputs.done_s,
        not_before=inputs.not_before,
    )


def grow(cluster: Cluster, accelerator: str, add_gpus: int) -> Cluster:
    """`cluster` with `add_gpus` more GPUs of `accelerator`, in nodes like its own."""
    if not 0 <= add_gpus <= MAX_ADDED_GPUS:
        raise UserError(f"add between 0 and {MAX_ADDED_GPUS} GPUs")
    if add_gpus == 0:
        return cluster
    template = next((n for n in cluster.nodes if n.accelerator == accelerator), None)
    if template is None:
        raise UserError(f"the cluster has no {accelerator} node to model new ones on")
    extra: list[Node] = []
    left = add_gpus
    while left > 0:
        gpus = min(template.gpus, left)
        extra.append(
            dataclasses.replace(
                template,
                name=f"what-if-{len(extra)}",
                gpus=gpus,
                group="what-if",
                domains=(),
                mig=template.mig[:gpus],
            )
        )
        left -= gpus
    return Cluster(cluster.levels, (*cluster.nodes, *extra), name=cluster.name)


def with_guarantee(teams: TeamsSpec, team: str, flavor: str, add_gpus: int) -> TeamsSpec:
    """`teams` with `add_gpus` more GPUs of `flavor` guaranteed to `team` (its limit, if it
    has one, raised by as much): new GPUs are bought for someone, and under a quota
    scheduler capacity that no team is guaranteed is only ever borrowed."""
    if team not in {t.name for t in teams.teams}:
        raise UserError(f"no team {team!r}")
    changed = []
    for t in teams.teams:
        if t.name != team:
            changed.append(t)
            continue
        quotas = [q for q in t.quotas if q.flavor != flavor]
        old = next((q for q in t.quotas if q.flavor == flavor), None)
        if old is None:
            quotas.append(Quota(flavor=flavor, guaranteed_gpus=add_gpus))
        else:
            limit = None if old.limit_gpus is None else old.limit_gpus + add_gpus
            quotas.append(
                old.model_copy(
                    update={"guaranteed_gpus": old.guaranteed_gpus + add_gpus, "limit_gpus": limit}
                )
            )
        changed.append(t.model_copy(update={"quotas": quotas}))
    return teams.model_copy(update={"teams": changed})


def run(
    snap: LiveQueue,
    cluster: Cluster,
    scenario: Scenario,
    *,
    now_s: float,
    baseline_profile: str,
    visible: Callable[[str], bool],
    unavailable: frozenset[str] = frozenset(),
    done_s: Mapping[str, float] | None = None,
    not_before: Mapping[str, float] | None = None,
) -> WhatIf:
    """Predicted waits of the jobs in `snap` the caller may see, now and in `scenario`
    (`snap` in the replay's form, `control.eta_refresh.replay_queue`, with its nodes that
    take no new job, saved work and restart backoffs: `estimate_starts` reads them)."""
    replayed = Replayed(unavailable, done_s or {}, not_before or {})
    if scenario.profile not in PROFILES:
        raise UserError(f"no scheduling profile {scenario.profile!r}")
    accelerator = scenario.accelerator or (cluster.accelerators[0] if cluster.accelerators else "")
    bigger = grow(cluster, accelerator, scenario.add_gpus)
    changed = snap
    if scenario.to_team and scenario.add_gpus and snap.teams is not None:
        teams = with_guarantee(snap.teams, scenario.to_team, accelerator, scenario.add_gpus)
        changed = dataclasses.replace(snap, teams=teams)
    base = _estimate(snap, cluster, baseline_profile, now_s, replayed)
    other = _estimate(changed, bigger, scenario.profile, now_s, replayed)
    rows = tuple(
        JobWait(
            job_id=int(j.name),
            team=j.team,
            queued_s=j.submitted_s,
            baseline_wait_s=_wait(base, j),
            scenario_wait_s=_wait(other, j),
        )
        for j in snap.pending
        if visible(j.team)
    )
    return WhatIf(
        rows=rows,
        baseline=_summary([r.baseline_wait_s for r in rows]),
        scenario=_summary([r.scenario_wait_s for r in rows]),
        gpus_before=dict(cluster.gpus_by_accelerator),
        gpus_after=dict(bigger.gpus_by_accelerator),
        assumed_runtime=len(base.assumed_runtime if base else ()),
        wall_s=(base.wall_s if base else 0.0) + (other.wall_s if other else 0.0),
    )


@dataclass(frozen=True, slots=True)
class Replayed:
    """What the replay reads beside the queue (`control.eta_refresh.ReplayQueue`)."""

    unavailable: frozenset[str]
    done_s: Mapping[str, float]
    not_before: Mapping[str, float]


def _estimate(
    snap: LiveQueue, cluster: Cluster, profile: str, now_s: float, replayed: Replayed
) -> EtaResult | None:
    if snap.teams is None or not snap.pending:
        return None
    return estimate_starts(
        cluster,
        snap.teams,
        snap.running,
        snap.pending,
        now_s=now_s,
        profile=profile,
        cycle_interval_s=queue_cycle_s(len(snap.pending)),
        unavailable=replayed.unavailable,
        done_s=replayed.done_s,
        not_before=replayed.not_before,
    )


def _wait(result: EtaResult | None, job: JobSpec) -> float | None:
    if result is None:
        return None
    start = result.start_s.get(job.name)
    return None if start is None else max(0.0, start - job.submitted_s)


def _summary(waits: Sequence[float | None]) -> Summary:
    known = [w for w in waits if w is not None]
    return Summary(
        jobs=len(waits),
        mean_wait_s=statistics.fmean(known) if known else None,
        median_wait_s=statistics.median(known) if known else None,
        max_wait_s=max(known) if known else None,
        never=len(waits) - len(known),
    )
