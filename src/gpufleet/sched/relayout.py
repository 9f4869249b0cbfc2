"""MIG re-layout proposals: which partitioned GPU to re-cut, to what, after draining whom.

A cluster's MIG layouts are fixed (`Node.mig`), so when the queue's demand moves
(many pending 3g.40gb jobs while the A100s are cut 7×1g.10gb) slice requests
wait forever although the silicon is there. The scheduler cannot change a
layout itself (design 0008: a re-layout builds a new `Cluster`), so it
*proposes*: `propose()` returns `Relayout`s that an operator (or the simulator)
may apply, each naming the GPU, the current and proposed layout, the running
jobs that must finish first, and the pending jobs it would serve.

Algorithm (greedy, deterministic, pure: it only reads the view):

1. Group the unplaced MIG requests by (accelerator, profile), in order of first
   appearance, which is the caller's queue order. Profile names are matched
   case-insensitively against the catalog; a profile the accelerator lacks, and
   requests that are not MIG requests, are ignored. A job listed more than once
   (several acceptable accelerators) is served at most once.
2. Candidates are the already MIG-partitioned GPUs of that accelerator, ranked:
   idle GPUs (no slice held) first, in cluster order; then busy GPUs by the
   latest expected end of the jobs holding their slices (soonest first, unknown
   ends last), fewer jobs to drain first, then cluster order.
3. A GPU is skipped when it has a free slice of any profile that still has
   unplaced demand on its accelerator: those jobs were blocked by something
   other than capacity (quota, selectors), and the slice is what they would run
   on next; taking it would trade one pending job for another.
4. For a GPU, the candidate layouts are the catalog's named layouts of the
   accelerator plus the homogeneous layout of the demanded profile, each kept
   only if `check_layout` passes. A layout is credited with its *net new*
   slices of the demanded profile (proposed count minus current count: a slice
   of that profile already there would serve the queue anyway once its holder
   ends). Pending jobs are assigned first-fit in queue order (a job needs one
   slice per worker, all on this GPU). The layout serving the most slices wins;
   ties go to the fewest slices changed (sum of per-profile count differences),
   so a re-cut keeps as much of the current layout as it can, then catalog order.
5. Proposals continue until each group's jobs are served, candidates run out, or
   `max_proposals` is reached.

Limits, on purpose:

- Only GPUs that are MIG-partitioned today are proposed. Turning MIG on for a
  free whole GPU would take it from whole-GPU jobs, a trade this module has no
  demand signal to weigh.
- A busy GPU is drained entirely: every job holding a slice on it is listed in
  `drain` and must end before the re-cut, even jobs whose slices the new layout
  could have kept. Re-cutting around live instances depends on NVIDIA's slice
  placement table, which the catalog does not have.
- Layouts are only the catalog's named ones and the homogeneous one. `check_layout`
  is necessary, not sufficient (catalog.mig), so a synthesised mix could pass
  and still fail on the hardware; named layouts are ones a source shows working.
- Each proposal is made for one profile; other demanded profiles a mixed layout
  happens to offer are not credited, so a later group may re-cut another GPU.
- Greedy per group in queue order, not a global optimum; `drain_s` is only as
  good as the running jobs' end estimates, and drained jobs are not re-queued.
- `view` should be the state after the cycle's admissions; read before them, a
  slice an admitted job just took looks free.

Cost: one pass over the slices of the demanded accelerators' partitioned GPUs
plus the holdings of jobs on busy nodes, then O(candidates × layouts) checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from gpufleet.catalog.mig import check_layout, layouts_for, mig_profiles_for
from gpufleet.cluster import Node, StateView, slice_id
from gpufleet.sched.framework import Relayout
from gpufleet.sched.requests import Request

Layout = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class _Gpu:
    """One partitioned GPU as a candidate: what it is cut into and who must drain first."""

    node: str
    gpu: int
    order: int  # position in cluster order, the final tie-break
    current: Layout
    free_profiles: frozenset[str]  # profiles with at least one free slice on this GPU
    drain: tuple[str, ...]  # jobs holding a slice here, sorted
    drain_s: float | None  # 0.0 when idle; None when some holder has no end estimate

    def rank(self) -> tuple[bool, bool, float, int, int]:
        """Idle first, then soonest-known drain, fewest jobs stopped, cluster order."""
        unknown = self.drain_s is None
        return (bool(self.drain), unknown, self.drain_s or 0.0, len(self.drain), self.order)


def propose(
    view: StateView,
    unplaced: Sequence[tuple[str, Request]],
    running_ends_s: Mapping[str, float | None],
    now_s: float,
    *,
    max_proposals: int = 16,
) -> tuple[Relayout, ...]:
    """Re-layout proposals that would let pending MIG requests run; see the module docstring.

    `unplaced` lists (pending job, its MIG request) that found no free slice this
    cycle, in queue order; `running_ends_s` maps running jobs to their expected
    end (absent or None: unknown). Nothing is changed: the view stays at its version.
    """
    if max_proposals < 0:
        raise ValueError(f"max_proposals must be >= 0, got {max_proposals}")
    groups = _group_demand(unplaced)
    if not groups or max_proposals == 0:
        return ()
    demanded: dict[str, set[str]] = {}
    for acc, profile in groups:
        demanded.setdefault(acc, set()).add(profile)

    ranked: dict[str, list[_Gpu]] = {}
    taken: set[tuple[str, int]] = set()
    served: set[str] = set()
    proposals: list[Relayout] = []
    for (acc, profile), jobs in groups.items():
        choices = _layout_choices(acc, profile)
        if not choices:
            continue
        if acc not in ranked:
            ranked[acc] = sorted(_partitioned_gpus(view, acc, running_ends_s, now_s), key=_Gpu.rank)
        remaining = [(job, need) for job, need in jobs if job not in served]
        for gpu in ranked[acc]:
            if not remaining or len(proposals) >= max_proposals:
                break
            if (gpu.node, gpu.gpu) in taken or gpu.free_profiles & demanded[acc]:
                continue
            best = _best_layout(gpu.current, choices, profile, remaining)
            if best is None:
                continue
            layout, assigned = best
            taken.add((gpu.node, gpu.gpu))
            served.update(assigned)
            remaining = [(job, need) for job, need in remaining if job not in served]
            proposals.append(
                Relayout(
                    node=gpu.node,
                    gpu=gpu.gpu,
                    accelerator=acc,
                    current=gpu.current,
                    proposed=layout,
                    drain=gpu.drain,
                    drain_s=gpu.drain_s,
                    serves=assigned,
                    reason=_reason(gpu, layout, profile, assigned),
                )
            )
        if len(proposals) >= max_proposals:
            break
    return tuple(proposals)


def _canonical_profile(accelerator: str, name: str) -> str | None:
    # Same matching as catalog.mig's lookup (profiles are lowercase in every source),
    # without raising: an unknown profile is simply demand no re-layout can serve.
    wanted = name.strip().lower()
    for row in mig_profiles_for(accelerator):
        if row.profile == wanted:
            return row.profile
    return None


def _group_demand(
    unplaced: Sequence[tuple[str, Request]],
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(accelerator, profile) -> [(job, slices it needs)], groups and jobs in first-seen order."""
    groups: dict[tuple[str, str], list[tuple[str, int]]] = {}
    seen: set[tuple[str, str, str]] = set()
    for job, request in unplaced:
        if request.kind != "mig" or request.mig_profile is None:
            continue
        profile = _canonical_profile(request.accelerator, request.mig_profile)
        if profile is None or (request.accelerator, profile, job) in seen:
            continue
        seen.add((request.accelerator, profile, job))
        groups.setdefault((request.accelerator, profile), []).append((job, max(1, request.workers)))
    return groups


@cache
def _layout_choices(accelerator: str, profile: str) -> tuple[Layout, ...]:
    """Valid layouts holding `profile`: named catalog layouts, then the homogeneous one.

    Identical layouts listed under two names are kept once (the first), so ties
    resolve the same way whatever the catalog's duplicates.
    """
    candidates: list[Layout] = [row.instances for row in layouts_for(accelerator)]
    for row in mig_profiles_for(accelerator):
        if row.profile == profile:
            candidates.append(((profile, row.max_instances),))
    out: list[Layout] = []
    seen: set[frozenset[tuple[str, int]]] = set()
    for layout in candidates:
        key = frozenset(layout)
        if key in seen or dict(layout).get(profile, 0) < 1:
            continue
        if check_layout(accelerator, dict(layout)):
            continue
        seen.add(key)
        out.append(layout)
    return tuple(out)


def _partitioned_gpus(
    view: StateView, accelerator: str, ends: Mapping[str, float | None], now_s: float
) -> list[_Gpu]:
    """Every MIG-partitioned GPU of `accelerator`, with its free profiles and drain list."""
    out: list[_Gpu] = []
    order = 0
    for node in view.cluster.nodes:
        if node.accelerator != accelerator or not node.mig:
            order += node.gpus
            continue
        free = set(view.free_slices_on(node.name))
        holder = _slice_holders(view, node) if _any_held(node, free) else {}
        for g in range(node.gpus):
            layout = node.layout(g)
            if layout:
                out.append(
                    _describe(
                        node, g, order, layout, free=free, holder=holder, ends=ends, now_s=now_s
                    )
                )
            order += 1
    return out


def _gpu_slices(node: str, gpu: int, layout: Layout) -> list[tuple[str, str]]:
    """(slice id, profile) of every instance in one GPU's layout."""
    return [
        (slice_id(node, gpu, profile, k), profile)
        for profile, count in layout
        for k in range(count)
    ]


def _any_held(node: Node, free: set[str]) -> bool:
    total = sum(count for g in range(node.gpus) for _, count in node.layout(g))
    return len(free) < total


def _slice_holders(view: StateView, node: Node) -> dict[str, str]:
    """slice id -> job, for the slices held on one node (from the jobs found there)."""
    prefix = f"{node.name}/gpu"
    holder: dict[str, str] = {}
    for job in view.jobs_on(node.name):
        for s in view.holdings(job).slices:
            if s.startswith(prefix):
                holder[s] = job
    return holder


def _describe(
    node: Node,
    g: int,
    order: int,
    layout: Layout,
    *,
    free: set[str],
    holder: Mapping[str, str],
    ends: Mapping[str, float | None],
    now_s: float,
) -> _Gpu:
    free_profiles: set[str] = set()
    jobs: set[str] = set()
    for sid, profile in _gpu_slices(node.name, g, layout):
        if sid in free:
            free_profiles.add(profile)
        elif sid in holder:
            jobs.add(holder[sid])
    drain = tuple(sorted(jobs))
    drain_s: float | None = 0.0
    for job in drain:
        end = ends.get(job)
        if end is None:
            drain_s = None
            break
        drain_s = max(drain_s or 0.0, end - now_s)
    return _Gpu(node.name, g, order, layout, frozenset(free_profiles), drain, drain_s)


def _best_layout(
    current: Layout,
    choices: tuple[Layout, ...],
    profile: str,
    jobs: Sequence[tuple[str, int]],
) -> tuple[Layout, tuple[str, ...]] | None:
    """The layout serving the most slices of pending demand (ties: fewest changes), or None."""
    now = dict(current)
    best: tuple[tuple[int, int], Layout, tuple[str, ...]] | None = None
    for layout in choices:
        new = dict(layout)
        gain = new.get(profile, 0) - now.get(profile, 0)
        if gain < 1:
            continue
        assigned, used = _first_fit(jobs, gain)
        if not assigned:
            continue
        changed = sum(abs(new.get(p, 0) - now.get(p, 0)) for p in now.keys() | new.keys())
        score = (used, -changed)
        if best is None or score > best[0]:
            best = (score, layout, assigned)
    return None if best is None else (best[1], best[2])


def _first_fit(jobs: Sequence[tuple[str, int]], capacity: int) -> tuple[tuple[str, ...], int]:
    """Jobs (in queue order) whose slices fit in `capacity`, and the slices they use."""
    assigned: list[str] = []
    used = 0
    for job, need in jobs:
        if used == capacity:
            break
        if used + need <= capacity:
            assigned.append(job)
            used += need
    return tuple(assigned), used


def _fmt_layout(layout: Layout) -> str:
    return " + ".join(f"{count}×{profile}" for profile, count in layout)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _reason(gpu: _Gpu, layout: Layout, profile: str, serves: tuple[str, ...]) -> str:
    """One sentence for the operator: what to re-cut, for whom, and what it costs."""
    head = (
        f"repartition {gpu.node} GPU {gpu.gpu} from {_fmt_layout(gpu.current)} to "
        f"{_fmt_layout(layout)} for {_plural(len(serves), f'pending {profile} job')} "
        f"({', '.join(serves)})"
    )
    if not gpu.drain:
        return f"{head}; idle, no drain"
    when = (
        "end of at least one unknown"
        if gpu.drain_s is None
        else f"free in about {gpu.drain_s:.0f} s"
    )
    return f"{head}; drain {_plural(len(gpu.drain), 'job')} first ({', '.join(gpu.drain)}), {when}"


__all__ = ["propose"]
