"""Hypothesis over event sequences: submit, finish and scheduling cycles applied in turn.

A small driver keeps a `State` and the job lists, runs `decide()` at each cycle
and applies the decisions with `sched.apply` (as the simulator does). Three
properties:

- **books stay straight** (every profile): decide never changes the state; no
  device, slice or share is double-booked (applying would raise); gangs land
  whole; victims are running, preemptible and never admitted in the same cycle;
  free counts stay within [0, capacity]; a team never exceeds its cap;
- **guarantee back within one cycle**: with capacity behind every guarantee and
  preemptible borrowers, after one cycle each team holds at least
  min(its guarantee, what it held + what it asks for);
- **no starvation**: under the default profile (fair share + EASY backfill), a
  large gang submitted into an adversarial stream of small jobs with truthful
  runtime estimates (from its own team or another) starts within the longest
  estimate of the jobs running when it arrived (plus a cycle): a stream of
  small jobs never pushes its reservation back.

GPUFLEET_PROPERTY_SCALE multiplies max_examples.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from gpufleet.cluster import MILLI, Cluster, Node, State
from gpufleet.sched.apply import apply
from gpufleet.sched.decide import decide
from gpufleet.sched.fairshare import DecayedUsage
from gpufleet.sched.quota import usage_milli
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import TeamsSpec

from .scenarios import H100

SCALE = float(os.environ.get("GPUFLEET_PROPERTY_SCALE", "1"))
CYCLE_S = 60.0


class World:
    """The driver: a state, the running and pending jobs, a clock and actual end times."""

    def __init__(self, cluster: Cluster, teams: TeamsSpec, profile: str = "default") -> None:
        self.cluster, self.teams, self.profile = cluster, teams, profile
        self.state = State(cluster)
        self.running: dict[str, JobSpec] = {}
        self.pending: dict[str, JobSpec] = {}
        self.actual_s: dict[str, float] = {}  # job -> how long it really runs
        self.history = DecayedUsage(half_life_s=3600.0)
        self.now_s = 0.0
        self.cycles = 0
        self.preemptions = self.reserved = 0  # for hypothesis.event: what the run exercised

    def submit(self, job: JobSpec, actual_s: float | None = None) -> None:
        self.pending[job.name] = job.model_copy(update={"submitted_s": self.now_s})
        if actual_s is not None:
            self.actual_s[job.name] = actual_s

    def finish_due(self) -> None:
        for name, job in list(self.running.items()):
            actual = self.actual_s.get(name)
            started = job.started_s
            if actual is not None and started is not None and started + actual <= self.now_s:
                self.finish(name)

    def finish(self, name: str) -> None:
        self.state.release_job(name)
        del self.running[name]

    def team_milli(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for name, job in self.running.items():
            for acc, m in usage_milli(self.state.usage(name)).items():
                out[(job.team, acc)] = out.get((job.team, acc), 0) + m
        return out

    def cycle(self, dt_s: float = CYCLE_S) -> None:
        """One decide() + apply, checking the books on the way; then the clock moves `dt_s`."""
        before = (self.state.dump(), self.state.version)
        d = decide(
            self.cluster,
            self.state,
            list(self.running.values()),
            list(self.pending.values()),
            self.teams,
            profile=self.profile,
            now_s=self.now_s,
            history=self.history,
            cycle=self.cycles,
        )
        assert (self.state.dump(), self.state.version) == before
        self.preemptions += len(d.preempted)
        self.reserved += len(d.reserved)
        assert set(d.admitted) | set(d.pending_reasons) == set(self.pending)
        assert not set(d.admitted) & set(d.pending_reasons)
        for victim, reason in d.preempted.items():
            job = self.running[victim]
            default = next(t.default_priority for t in self.teams.teams if t.name == job.team)
            wanted = job.priority_class or default
            cls = next((c for c in self.teams.priority_classes if c.name == wanted), None)
            assert job.preemptible
            assert cls is not None
            assert cls.preemptible
            assert victim not in d.admitted
            assert reason.preemptor in d.admitted
            assert reason.text().startswith(f"preempted by job {reason.preemptor!r}")
        for name, placements in d.admitted.items():
            job = self.pending[name]
            if job.gpus:
                assert len(placements) == job.workers
                assert all(len(p.gpus) == job.gpus for p in placements)
        # applying raises if anything is double-booked; a gang is one all-or-nothing call
        self.running, self.pending = apply(self.state, d, self.running, self.pending, self.now_s)
        for node in self.cluster.nodes:
            assert 0 <= self.state.free_gpus(node.name) <= node.gpus
        for acc in self.cluster.accelerators:
            cap = sum(n.gpus for n in self.cluster.nodes if n.accelerator == acc)
            assert 0 <= self.state.free_total(acc) <= cap
        held = self.team_milli()
        for (team, acc), m in held.items():
            assert m >= 0
            spec = next(t for t in self.teams.teams if t.name == team)
            q = spec.quota_for(acc)
            assert q is not None
            if q.max_gpus is not None:
                assert m <= q.max_gpus * MILLI
        held_gpus = {k: v / MILLI for k, v in held.items()}
        self.history = self.history.advance(self.now_s + dt_s, held_gpus)
        self.now_s += dt_s
        self.cycles += 1


def h100_nodes(draw: st.DrawFn, max_nodes: int = 4) -> tuple[Node, ...]:
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        leaf = f"l{i % 2}"
        nodes.append(
            Node(f"n{i}", H100, draw(st.sampled_from([4, 8])), ("b1", leaf), fractions=i == 0)
        )
    return tuple(nodes)


CLASSES = [
    {"name": "high", "value": 1000, "preemptible": False},
    {"name": "mid", "value": 500, "preemptible": True},
    {"name": "low", "value": 100, "preemptible": True},
]


@st.composite
def job_specs(draw: st.DrawFn, name: str, teams: list[str], max_gpus: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "team": draw(st.sampled_from(teams)),
        "priority_class": draw(st.sampled_from(["high", "mid", "low", "low"])),
        "preemptible": draw(st.sampled_from([True, True, True, False])),
        "kind": draw(st.sampled_from(["training", "batch", "interactive"])),
    }
    if draw(st.integers(0, 5)) == 0:
        spec["gpu_fraction"] = draw(st.sampled_from([0.125, 0.25, 0.5]))
    else:
        spec["gpus"] = draw(st.sampled_from([g for g in (1, 2, 4, 8) if g <= max_gpus]))
        spec["workers"] = draw(st.integers(1, 2))
        if draw(st.integers(0, 3)) == 0:
            spec["topology"] = {"required": draw(st.sampled_from(["leaf", "node"]))}
    if draw(st.booleans()):
        spec["runtime_estimate_s"] = draw(st.sampled_from([120.0, 600.0, 1800.0]))
    return spec


@st.composite
def sequences(draw: st.DrawFn) -> tuple[World, list[tuple[str, Any]]]:
    nodes = h100_nodes(draw, max_nodes=3)
    cluster = Cluster(("block", "leaf", "node"), nodes)
    capacity = sum(n.gpus for n in nodes)
    team_specs: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 3))):
        entry: dict[str, Any] = {
            "name": f"t{t}",
            "cohort": draw(st.sampled_from(["c", "c", None])),
            "quota": {H100: draw(st.integers(capacity // 2, capacity))},
            "default_priority": "mid",
        }
        if draw(st.booleans()):
            entry["borrowing_limit"] = {H100: draw(st.integers(0, capacity))}
        team_specs.append(entry)
    teams = TeamsSpec.model_validate(
        {"kind": "teams", "priority_classes": CLASSES, "teams": team_specs}
    )
    world = World(cluster, teams, draw(st.sampled_from(sorted(PROFILES))))
    names = [t["name"] for t in team_specs]
    events: list[tuple[str, Any]] = []
    for i in range(draw(st.integers(6, 24))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "cycle", "cycle", "finish"]))
        if kind == "submit":
            spec = draw(job_specs(f"j{i}", names, max(n.gpus for n in nodes)))
            events.append(("submit", (JobSpec.model_validate(spec), draw(st.floats(60, 3600)))))
        elif kind == "finish":
            events.append(("finish", draw(st.integers(0, 99))))
        else:  # long gaps let jobs pass the minimum runtime, so priority preemption can fire
            events.append(("cycle", draw(st.sampled_from([60.0, 300.0, 900.0]))))
    events.append(("cycle", CYCLE_S))
    return world, events


@settings(max_examples=int(600 * SCALE), deadline=None)
@given(sequences())
def test_event_sequences_keep_the_books_straight(
    case: tuple[World, list[tuple[str, Any]]],
) -> None:
    world, events = case
    for kind, arg in events:
        if kind == "submit":
            job, actual = arg
            world.submit(job, actual)
        elif kind == "finish" and world.running:
            names = sorted(world.running)
            world.finish(names[arg % len(names)])
        elif kind == "cycle":
            world.finish_due()
            world.cycle(arg)
    event(f"{world.profile}: preempted {world.preemptions > 0}, reserved {world.reserved > 0}")


@st.composite
def reclaim_worlds(draw: st.DrawFn) -> tuple[World, dict[str, int]]:
    """One-GPU jobs; guarantees that capacity covers; borrowers running, owners asking."""
    nodes = tuple(Node(f"n{i}", H100, 8, ("b1", "l1")) for i in range(draw(st.integers(1, 3))))
    capacity = 8 * len(nodes)
    n_teams = draw(st.integers(2, 3))
    cuts = sorted(
        draw(st.lists(st.integers(0, capacity), min_size=n_teams - 1, max_size=n_teams - 1))
    )
    guarantees = [b - a for a, b in zip([0, *cuts], [*cuts, capacity], strict=True)]
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [
                {"name": f"t{i}", "cohort": "c", "quota": {H100: g}}
                for i, g in enumerate(guarantees)
            ],
        }
    )
    cluster = Cluster(("block", "leaf", "node"), nodes)
    world = World(cluster, teams, draw(st.sampled_from(["default", "priority"])))
    # fill the cluster with running 1-GPU jobs of random teams (some borrow), started long ago
    k = 0
    for node in nodes:
        for g in range(8):
            if draw(st.integers(0, 4)) == 0:
                continue
            team = f"t{draw(st.integers(0, n_teams - 1))}"
            job = JobSpec.model_validate(
                {
                    "name": f"r{k}",
                    "team": team,
                    "gpus": 1,
                    "state": "running",
                    "started_s": 0.0,
                    "placement": [{"node": node.name, "gpus": [g]}],
                }
            )
            world.state.allocate(job.name, *_claims(job))
            world.running[job.name] = job
            k += 1
    asks: dict[str, int] = {}
    for i in range(n_teams):
        n = draw(st.integers(0, 6))
        asks[f"t{i}"] = n
        for j in range(n):
            world.submit(JobSpec.model_validate({"name": f"p{i}-{j}", "team": f"t{i}", "gpus": 1}))
    world.now_s = 86_400.0
    return world, dict(zip([f"t{i}" for i in range(n_teams)], guarantees, strict=True)) | {
        f"ask:{t}": n for t, n in asks.items()
    }


def _claims(job: JobSpec) -> list[Any]:
    from gpufleet.cluster import Whole

    return [Whole(p.node, tuple(p.gpus)) for p in job.placement]


@settings(max_examples=int(600 * SCALE), deadline=None)
@given(reclaim_worlds())
def test_a_team_under_its_guarantee_gets_it_back_within_one_cycle(
    case: tuple[World, dict[str, int]],
) -> None:
    world, info = case
    before = {t: m // MILLI for (t, _), m in world.team_milli().items()}
    world.cycle()
    after = {t: m // MILLI for (t, _), m in world.team_milli().items()}
    event(f"reclaimed: {world.preemptions > 0}")
    for team in (t.name for t in world.teams.teams):
        owed = min(info[team], before.get(team, 0) + info[f"ask:{team}"])
        assert after.get(team, 0) >= owed, (team, before, after, info)


@st.composite
def streams(draw: st.DrawFn) -> tuple[World, JobSpec, list[list[tuple[JobSpec, float]]]]:
    nodes = tuple(Node(f"n{i}", H100, 8, ("b1", "l1")) for i in range(draw(st.integers(2, 4))))
    cluster = Cluster(("block", "leaf", "node"), nodes)
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [
                {"name": "big", "quota": {H100: 64}},
                {"name": "stream", "quota": {H100: 64}},
            ],
        }
    )
    world = World(cluster, teams, "default")
    workers = draw(st.integers(2, len(nodes)))
    gang = JobSpec.model_validate({"name": "gang", "team": "big", "gpus": 8, "workers": workers})
    same_team = draw(st.booleans())
    arrivals: list[list[tuple[JobSpec, float]]] = []
    k = 0
    for _ in range(40):
        batch = []
        for _ in range(draw(st.integers(0, 4))):
            estimate = draw(st.sampled_from([300.0, 900.0, 1800.0, 3600.0]))
            job = JobSpec.model_validate(
                {
                    "name": f"s{k}",
                    "team": "big" if same_team else "stream",
                    "gpus": draw(st.sampled_from([1, 2, 4])),
                    "runtime_estimate_s": estimate,
                }
            )
            batch.append((job, estimate * draw(st.floats(0.3, 1.0))))
            k += 1
        arrivals.append(batch)
    return world, gang, arrivals


@settings(max_examples=int(150 * SCALE), deadline=None)
@given(streams())
def test_a_large_gang_is_not_starved_by_a_stream_of_small_jobs(
    case: tuple[World, JobSpec, list[list[tuple[JobSpec, float]]]],
) -> None:
    world, gang, arrivals = case
    for batch in arrivals[:5]:  # the cluster fills with small jobs first
        for job, actual in batch:
            world.submit(job, actual)
        world.finish_due()
        world.cycle()
    while world.pending:  # ... until none is queued ahead of the gang
        world.finish_due()
        world.cycle()
    world.submit(gang, 10 * 3600.0)
    submitted = world.now_s
    for batch in arrivals[5:]:
        for job, actual in batch:
            world.submit(job, actual)
        world.finish_due()
        world.cycle()
        if "gang" in world.running:
            break
    else:
        while "gang" not in world.running and world.now_s - submitted <= 3600 + 2 * CYCLE_S:
            world.finish_due()
            world.cycle()
    assert "gang" in world.running
    event(f"gang waited: {world.reserved > 0}")
    started = world.running["gang"].started_s
    assert started is not None
    assert started - submitted <= 3600.0 + CYCLE_S
