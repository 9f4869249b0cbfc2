"""Conservation checks of a simulation: the GPU-seconds it reports add up.

A utilisation metric that is fed twice, or not at all, does not crash: it prints 0 % or
300 % and every decision built on it (quotas, sizes) is wrong in silence. The checks
here are a pure function of one run's result (`SimResult.metrics` and
`SimResult.ledger`), so they can run after every simulation in the tests and in debug
runs (GPUFLEET_DEBUG_CHECKS=1), and a broken metric fails the build instead:

- **team integral** — each team's GPUs held, integrated over the run, equals the sum of
  its jobs' GPU-seconds held, which the engine keeps per job on its own;
- **share** — a job's GPUs, once all its units hold them, are its request: whole GPUs ×
  workers, a fraction in eighths (as it is placed), a MIG slice by its share of the
  GPU's compute slices (within the thousandth a slice weighs by position) — or one
  whole GPU for a slice or a fraction under a whole-GPU-only profile; and no job held
  more GPU-seconds than that share for as long as it existed;
- **capacity** — at every sample, 0 <= GPUs held <= the cluster's GPUs (and at every
  change of the change log when kept, where no team's level goes below zero either);
- **team sum** — the teams' integrals add up to the cluster's, and the reported
  allocation ratio and per-team GPU-hours are those integrals;
- **goodput** — each job's GPU-seconds held are its useful work, its lost work, what
  its pods held waiting for the rest of its gang and what it held beyond its request
  (exactly, for a completed job); that last part is the eighths a fraction is rounded up
  to, or the rest of the whole GPU a whole-GPU-only profile runs a slice or a fraction
  on, in proportion to the time it held it, and nothing for any other job (work is
  counted on the GPUs a job asked for, so a 0.25-GPU job on a whole GPU is not credited
  a whole GPU of work, nor a 0.32-GPU job its three eighths); and the reported
  completed, in-progress, lost, gang-wait and idle-held GPU-hours and the goodput ratio
  are those sums;
- **change log** — when kept, each team's changes integrate to its integral (what the
  multi-team plan reads as usage over time is what the recorder counted).

Tolerances are for float rounding only: a billionth of the cluster's GPU-seconds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from gpufleet.catalog.mig import mig_profiles_for, whole_gpu_slices
from gpufleet.cluster import MILLI
from gpufleet.sched.registry import resolve
from gpufleet.sched.requests import FRACTION_STEPS, fraction_eighths
from gpufleet.sim.ledger import JobHeld, Ledger
from gpufleet.sim.metrics import SimMetrics
from gpufleet.sim.result import SimResult
from gpufleet.sim.workload import TraceJob

DEBUG_ENV: Final = "GPUFLEET_DEBUG_CHECKS"
RELATIVE: Final = 1e-9  # of the cluster's GPU-seconds over the run
ABSOLUTE_GPU_S: Final = 1e-6
LEVEL_GPUS: Final = 1e-6  # a level's rounding, in GPUs


@dataclass(frozen=True)
class Violation:
    rule: str  # team-integral | share | capacity | team-sum | goodput | change-log | ledger
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


class ConservationError(AssertionError):
    """A run's GPU-seconds do not add up: a bug in the engine or its metrics, not in the
    input (an AssertionError, so it is never mistaken for a user error)."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        shown = "\n  ".join(str(v) for v in violations[:10])
        more = f"\n  … and {len(violations) - 10} more" if len(violations) > 10 else ""
        super().__init__(f"the simulation's GPU accounting does not add up:\n  {shown}{more}")


def enabled() -> bool:
    """Whether debug checks are on (GPUFLEET_DEBUG_CHECKS set to anything but "" or "0")."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def enforce(result: SimResult) -> None:
    """Raise `ConservationError` listing every violation of `check(result)`."""
    found = check(result)
    if found:
        raise ConservationError(found)


def check(result: SimResult) -> list[Violation]:
    """Every violation of the rules in the module docstring (empty: the run adds up)."""
    if result.ledger is None:
        return [Violation("ledger", "the result carries no ledger to check")]
    return check_ledger(result.metrics, result.ledger)


def check_ledger(metrics: SimMetrics, ledger: Ledger) -> list[Violation]:
    """`check` on the parts of a result (a pure function of them)."""
    span_s = max(0.0, ledger.end_s - ledger.start_s)
    tol = RELATIVE * ledger.capacity_gpus * span_s + ABSOLUTE_GPU_S
    out: list[Violation] = []
    out += _team_integrals(ledger, tol)
    out += _shares(ledger)
    out += _capacity(metrics, ledger)
    out += _team_sums(metrics, ledger, span_s, tol)
    out += _goodput(metrics, ledger, tol)
    if ledger.changes is not None:
        out += _change_log(ledger, tol)
    return out


def expected_share(job: TraceJob, flavor: str | None, whole_only: bool) -> tuple[float, float]:
    """GPUs `job` should hold once placed, and the rounding allowed: whole GPUs × workers;
    a fraction rounded up to eighths (at least one), as requests are placed; a MIG slice
    by its compute slices over the GPU's (placed slices weigh within a thousandth of it,
    by position); one whole GPU for a slice or a fraction under a whole-GPU-only profile.
    (0, inf) when the job names none of these."""
    if job.gpus:
        return float(job.gpus * job.workers), 0.0
    if job.gpu_fraction is None and job.mig_profile is None:
        return 0.0, math.inf
    if whole_only:
        return 1.0, 0.0
    if job.gpu_fraction is not None:
        return fraction_eighths(job.gpu_fraction) / FRACTION_STEPS, 0.0
    acc = flavor or (job.accelerators[0] if job.accelerators else None)
    if acc is None:
        return 0.0, math.inf
    whole = whole_gpu_slices(acc)
    compute = next(
        (p.compute_slices for p in mig_profiles_for(acc) if p.profile == job.mig_profile), None
    )
    if compute is None:
        return 0.0, math.inf
    return compute / whole, 1.0 / MILLI


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol


def _per_team(
    a: Mapping[str, float],
    b: Mapping[str, float],
    tol: float,
    rule: str,
    say: Callable[[str, float, float], str],
) -> list[Violation]:
    """A violation of `rule` for every team whose two figures differ (a missing one is 0)."""
    return [
        Violation(rule, say(team, a.get(team, 0.0), b.get(team, 0.0)))
        for team in sorted(set(a) | set(b))
        if not _close(a.get(team, 0.0), b.get(team, 0.0), tol)
    ]


def _team_integrals(ledger: Ledger, tol: float) -> list[Violation]:
    by_team: dict[str, float] = {}
    for held in ledger.jobs.values():
        team = held.trace.team
        by_team[team] = by_team.get(team, 0.0) + held.held_gpu_s
    return _per_team(
        ledger.team_held_gpu_s,
        by_team,
        tol,
        "team-integral",
        lambda team, area, jobs: (
            f"team {team} held {_h(area)} GPU-hours by the recorder "
            f"but its jobs held {_h(jobs)} (difference {_h(area - jobs)})"
        ),
    )


def _shares(ledger: Ledger) -> list[Violation]:

    whole_only = resolve(ledger.profile).profile.whole_gpus_only
    out = []
    for name, held in ledger.jobs.items():
        out += _job_share(name, held, ledger, whole_only)
    return out


def _job_share(name: str, held: JobHeld, ledger: Ledger, whole_only: bool) -> list[Violation]:
    job = held.trace
    want, rounding = expected_share(job, held.flavor, whole_only)
    out = []
    if held.placed_gpus and not _close(held.placed_gpus, want, rounding + LEVEL_GPUS):
        out.append(
            Violation(
                "share",
                f"job {name} (team {job.team}, {_request(job)}) held {held.placed_gpus:.4g} "
                f"GPUs once placed; its share is {want:.4g}",
            )
        )
    existed_s = max(0.0, ledger.end_s - max(job.submit_s, ledger.start_s))
    most = max(want + rounding, held.placed_gpus) * existed_s
    if held.held_gpu_s < -ABSOLUTE_GPU_S or held.held_gpu_s > most + ABSOLUTE_GPU_S:
        out.append(
            Violation(
                "share",
                f"job {name} (team {job.team}) held {held.held_gpu_s:.6g} GPU-seconds, "
                f"outside [0, {most:.6g}] (its share for the {existed_s:.6g} s it existed)",
            )
        )
    return out


def _capacity(metrics: SimMetrics, ledger: Ledger) -> list[Violation]:
    out = []
    slack = LEVEL_GPUS / ledger.capacity_gpus if ledger.capacity_gpus else 0.0
    for s in metrics.samples:
        if not -slack <= s.allocated_ratio <= 1.0 + slack:
            out.append(
                Violation(
                    "capacity",
                    f"at {s.t_s:.6g} s the jobs held {s.allocated_ratio:.6%} of the cluster",
                )
            )
    return out


def _team_sums(metrics: SimMetrics, ledger: Ledger, span_s: float, tol: float) -> list[Violation]:
    out = []
    teams = math.fsum(ledger.team_held_gpu_s.values())
    if not _close(teams, ledger.held_gpu_s, tol):
        out.append(
            Violation(
                "team-sum",
                f"the teams held {_h(teams)} GPU-hours, the cluster {_h(ledger.held_gpu_s)}",
            )
        )
    reported = metrics.gpu_allocation_ratio * ledger.capacity_gpus * span_s
    if not _close(reported, ledger.held_gpu_s, tol):
        out.append(
            Violation(
                "team-sum",
                f"the allocation ratio {metrics.gpu_allocation_ratio:.6%} is "
                f"{_h(reported)} GPU-hours; the cluster held {_h(ledger.held_gpu_s)}",
            )
        )
    reported_teams = {t: float(v.get("gpu_hours", 0.0)) * 3600 for t, v in metrics.per_team.items()}
    return out + _per_team(
        reported_teams,
        ledger.team_held_gpu_s,
        tol,
        "team-sum",
        lambda team, r, area: f"team {team} is reported with {_h(r)} GPU-hours; it held {_h(area)}",
    )


def _goodput(metrics: SimMetrics, ledger: Ledger, tol: float) -> list[Violation]:
    """Every GPU-second a job held was useful, lost, held by a partial gang waiting for
    its other pods, or held beyond its request: exactly so for a completed job (its useful
    work is its trace's on the GPUs it asked for, counted independently of what it held);
    for an unfinished one the work in progress is the rest, which may not be negative.
    What a job held beyond its request is what its placement and request say (`_idle`),
    so work cannot be hidden there. The reported totals and the goodput ratio are these
    sums."""
    out = []
    whole_only = resolve(ledger.profile).profile.whole_gpus_only
    sums = {"completed": 0.0, "in progress": 0.0, "lost": 0.0, "gang wait": 0.0, "idle held": 0.0}
    for name, held in ledger.jobs.items():
        parts = held.useful_gpu_s + held.lost_gpu_s + held.gang_wait_gpu_s + held.idle_gpu_s
        job_tol = RELATIVE * held.held_gpu_s + ABSOLUTE_GPU_S
        if min(held.useful_gpu_s, held.lost_gpu_s, held.gang_wait_gpu_s) < -job_tol or (
            held.completed and not _close(parts, held.held_gpu_s, job_tol)
        ):
            out.append(
                Violation(
                    "goodput",
                    f"job {name} held {held.held_gpu_s:.6g} GPU-seconds: useful "
                    f"{held.useful_gpu_s:.6g} + lost {held.lost_gpu_s:.6g} + gang wait "
                    f"{held.gang_wait_gpu_s:.6g} + idle held {held.idle_gpu_s:.6g} = {parts:.6g}",
                )
            )
        idle = _idle(held, whole_only)
        if not _close(held.idle_gpu_s, idle, job_tol):
            out.append(
                Violation(
                    "goodput",
                    f"job {name} (team {held.trace.team}, {_request(held.trace)}) held "
                    f"{held.idle_gpu_s:.6g} GPU-seconds beyond its request; holding "
                    f"{held.placed_gpus:.4g} GPUs for {held.held_gpu_s:.6g} GPU-seconds, "
                    f"it held {idle:.6g} beyond it",
                )
            )
        sums["completed" if held.completed else "in progress"] += held.useful_gpu_s
        sums["lost"] += held.lost_gpu_s
        sums["gang wait"] += held.gang_wait_gpu_s
        sums["idle held"] += held.idle_gpu_s
    reported = {
        "completed": metrics.gpu_hours_completed,
        "in progress": metrics.in_progress_gpu_hours,
        "lost": metrics.lost_gpu_hours,
        "gang wait": metrics.gang_wait_gpu_hours,
        "idle held": metrics.idle_held_gpu_hours,
    }
    for part, gpu_s in sums.items():
        if not _close(reported[part] * 3600, gpu_s, tol):
            out.append(
                Violation(
                    "goodput",
                    f"{part} GPU-hours reported {reported[part]:.6g}, the jobs' own "
                    f"accounts {_h(gpu_s)}",
                )
            )
    held_s = ledger.held_gpu_s
    if held_s > tol and metrics.goodput_ratio is not None:
        ratio = min(1.0, (sums["completed"] + sums["in progress"]) / held_s)
        if not _close(metrics.goodput_ratio * held_s, ratio * held_s, tol):
            out.append(
                Violation(
                    "goodput",
                    f"goodput ratio {metrics.goodput_ratio:.6%} reported; the jobs' useful "
                    f"work is {ratio:.6%} of the {_h(held_s)} GPU-hours held",
                )
            )
    return out


def _idle(held: JobHeld, whole_only: bool) -> float:
    """GPU-seconds `held` held beyond its request: a fraction holds its eighths, rounded up
    (`expected_share`), and under a whole-GPU-only profile a slice or a fraction holds a
    whole GPU; either is a single unit, holding only while it runs, so the part of what it
    held beyond its request is that share of everything it held. 0 for any other job
    (whole GPUs, a slice placed as a slice: its weight by position is its share), and for
    a request whose share is unknown (sized from an inference load)."""
    job = held.trace
    if job.gpus or held.placed_gpus <= 0 or (job.gpu_fraction is None and not whole_only):
        return 0.0
    asked = job.requested_gpus(held.flavor)
    if asked is None:
        return 0.0
    return held.held_gpu_s * max(0.0, held.placed_gpus - asked) / held.placed_gpus


def _change_log(ledger: Ledger, tol: float) -> list[Violation]:
    assert ledger.changes is not None
    level: dict[str, float] = {}
    area: dict[str, float] = {}
    total = 0.0
    last_s = ledger.start_s
    out: list[Violation] = []
    for t_s, team, _, gpus in ledger.changes:
        if t_s < last_s or t_s > ledger.end_s:
            out.append(
                Violation(
                    "change-log",
                    f"a change at {t_s:.6g} s is out of order or outside the run "
                    f"[{ledger.start_s:.6g}, {ledger.end_s:.6g}] s",
                )
            )
            break
        _advance(level, area, t_s - last_s)
        last_s = t_s
        now = level[team] = level.get(team, 0.0) + gpus
        total += gpus
        if now < -LEVEL_GPUS:
            out.append(Violation("capacity", f"team {team} held {now:.6g} GPUs at {t_s:.6g} s"))
            break
        if total > ledger.capacity_gpus + LEVEL_GPUS:
            out.append(
                Violation(
                    "capacity",
                    f"jobs held {total:.6g} GPUs of {ledger.capacity_gpus:g} at {t_s:.6g} s",
                )
            )
            break
    else:
        _advance(level, area, ledger.end_s - last_s)
        out += _per_team(
            area,
            ledger.team_held_gpu_s,
            tol,
            "change-log",
            lambda team, logged, counted: (
                f"team {team}'s changes integrate to "
                f"{_h(logged)} GPU-hours; the recorder counted {_h(counted)}"
            ),
        )
    return out


def _advance(level: Mapping[str, float], area: dict[str, float], dt_s: float) -> None:
    if dt_s > 0:
        for team, gpus in level.items():
            area[team] = area.get(team, 0.0) + gpus * dt_s


def _request(job: TraceJob) -> str:
    if job.gpus:
        return f"{job.workers} × {job.gpus} GPUs"
    if job.gpu_fraction is not None:
        return f"{job.gpu_fraction:g} of a GPU"
    return f"MIG {job.mig_profile}"


def _h(gpu_s: float) -> str:
    return f"{gpu_s / 3600:.6g}"
