"""Priority preemption: which running jobs to evict so a higher-priority pending job fits.

Called by `decide()` (design 0009, phase 6) when a pending job passed its quota
check but no placement was found. Rules:

- **Candidates** are jobs *running at the start of the cycle* (never jobs admitted
  earlier in the same cycle) that hold GPUs of the requested accelerator and
  - have a priority value strictly lower than the preemptor's;
  - belong to a known, preemptible priority class, and are themselves `preemptible`;
  - have run at least `MIN_RUNTIME_S` (`now_s - started_s >= MIN_RUNTIME_S`), so a
    job is never evicted right after it started (anti-thrashing); a running job
    with no `started_s` is never a candidate (its runtime is unknown).
- **Lost work** of a victim is its GPUs × the time since its last checkpoint
  (`last_checkpoint_s`, else `started_s`), in GPU-seconds.
- **Choice**: greedy over the candidates sorted by lost work, then by GPUs held
  *descending* (at equal lost work a bigger victim frees more, so fewer victims),
  then by name. On a what-if branch the candidates are released one by one until
  the pending job's placement succeeds; then each chosen victim, most lost work
  first, is tried back in: if the job still fits without it, it is spared.
- If releasing every candidate would still not place the job, nobody is evicted.

All of it runs on nested branches that roll back; the caller applies the result
(releases the victims and allocates the preemptor) on its own cycle branch, and
hands the eviction out as data: `Decisions.preempted[victim] = reason`. The
preemptor is admitted with its placement but only *starts after the victims'
grace period* (`GRACE_PERIOD_S`, or the victim's `checkpoint_time_s` if longer),
during which the victims checkpoint and exit.

Not here: quota reclaim (a team under its guarantee taking back lent GPUs by
evicting borrowers of equal or higher priority).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.cluster import MILLI, Branch
from gpufleet.sched.framework import Placed, PlacementPlugin
from gpufleet.sched.requests import Request
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import PriorityClass, TeamsSpec

MIN_RUNTIME_S = 600.0  # a job runs at least this long before it may be preempted
GRACE_PERIOD_S = 120.0  # time a victim gets to checkpoint and exit before the preemptor starts

WOULD_NOT_HELP = "preempting lower-priority jobs would not free enough"


def priority_class(job: JobSpec, teams: TeamsSpec) -> PriorityClass | None:
    """The job's priority class (its own, else its team's default); None if neither is known."""
    name = job.priority_class
    if name is None:
        team = next((t for t in teams.teams if t.name == job.team), None)
        name = team.default_priority if team else None
    return next((p for p in teams.priority_classes if p.name == name), None)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running job that may be evicted, with what evicting it costs and frees."""

    job: JobSpec
    priority: int
    milli: int  # thousandths of a GPU of the requested accelerator it holds
    lost_gpu_s: float  # GPU-seconds of work since its last checkpoint (or start)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def sort_key(self) -> tuple[float, int, str]:
        return (self.lost_gpu_s, -self.milli, self.job.name)


def lost_work_gpu_s(job: JobSpec, milli_held: int, now_s: float) -> float:
    """GPUs held × seconds since the last checkpoint (or the start); 0 if neither is known."""
    since = job.last_checkpoint_s if job.last_checkpoint_s is not None else job.started_s
    if since is None:
        return 0.0
    return milli_held / MILLI * max(0.0, now_s - since)


def candidates(
    preemptor_priority: int,
    accelerator: str,
    running: Sequence[JobSpec],
    *,
    classes: Mapping[str, PriorityClass | None],
    held_milli: Callable[[str], Mapping[str, int]],
    now_s: float,
) -> list[Candidate]:
    """The running jobs this preemptor may evict for `accelerator`, cheapest first."""
    out: list[Candidate] = []
    for job in running:
        cls = classes.get(job.name)
        if cls is None or not cls.preemptible or not job.preemptible:
            continue  # an unknown class (team not in the teams file) is never evicted
        priority = cls.value
        if priority >= preemptor_priority:
            continue
        if job.started_s is None or now_s - job.started_s < MIN_RUNTIME_S:
            continue
        held = held_milli(job.name)
        milli = held.get(accelerator, 0)
        if milli <= 0:
            continue  # holds nothing this request could use (or was already evicted)
        total = sum(held.values())
        out.append(Candidate(job, priority, milli, lost_work_gpu_s(job, total, now_s)))
    out.sort(key=lambda c: c.sort_key)
    return out


def _try(
    b: Branch, plugin: PlacementPlugin, job: JobSpec, request: Request, victims: Sequence[str]
) -> Placed:
    with b.branch() as w:  # rolls back
        for v in victims:
            w.release_job(v)
        return plugin.place(w, job, request)


def choose_victims(
    b: Branch,
    plugin: PlacementPlugin,
    job: JobSpec,
    request: Request,
    cands: Sequence[Candidate],
) -> list[Candidate] | None:
    """The victims to evict so `job` fits `request`, or None if evicting all would not do.

    Greedy: release candidates in order until the placement succeeds, then spare
    each chosen victim (most lost work first) that the job does not need. `b` is
    left exactly as it was.
    """
    chosen: list[Candidate] = []
    with b.branch() as w:  # rolls back
        for cand in cands:
            w.release_job(cand.name)
            chosen.append(cand)
            if plugin.place(w, job, request).status.ok:
                break
        else:
            return None
    for cand in sorted(chosen, key=lambda c: c.sort_key, reverse=True):
        rest = [c.name for c in chosen if c is not cand]
        if rest and _try(b, plugin, job, request, rest).status.ok:
            chosen = [c for c in chosen if c is not cand]
    return chosen


def reason(preemptor: JobSpec, preemptor_priority: int, victim: Candidate, accelerator: str) -> str:
    """One sentence for `Decisions.preempted[victim]`."""
    freed = victim.milli / MILLI
    freed_text = str(int(freed)) if victim.milli % MILLI == 0 else f"{freed:.3g}"
    since = "since last checkpoint" if victim.job.last_checkpoint_s is not None else "since start"
    grace = max(GRACE_PERIOD_S, victim.job.checkpoint_time_s or 0.0)
    return (
        f"preempted by '{preemptor.name}' (priority {preemptor_priority} > "
        f"{victim.priority}): frees {freed_text} {accelerator} GPUs; lost work "
        f"{victim.lost_gpu_s / 3600:.3g} GPU-h {since}; grace period {grace:g} s"
    )
