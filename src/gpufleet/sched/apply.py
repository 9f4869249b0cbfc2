"""Apply one cycle's decisions to a state and to the job lists: evict, then admit.

`decide()` only proposes; whoever owns the state applies. The simulator and
tests use this one function so they agree with the control plane on what a
decision means:

- a victim is released at once (its grace period is the executor's business)
  and goes back to the queue as a pending job: `submitted_s` = now (it rejoins
  the queue), its placement cleared, `attained_gpu_s` grown by what it ran, and
  its last checkpoint kept, so lost work and Tiresias see its history;
- an admitted job is allocated with exactly its placement (all workers in one
  allocation: a gang lands whole or the call raises and nothing changes) and
  becomes running at `now_s`.

Reservations and re-layout proposals are not applied: a reservation is
recomputed every cycle, and a re-layout changes the cluster itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.cluster import MILLI, Branch, State
from gpufleet.sched.framework import Decisions
from gpufleet.sched.framework import Placement as Placed
from gpufleet.sched.quota import usage_milli
from gpufleet.specs.jobs import JobSpec, Placement


def placement_spec(p: Placed) -> Placement:
    """A decided placement in the jobs-file form (`JobSpec.placement`)."""
    if p.milli:
        assert p.gpu is not None
        return Placement(node=p.node, gpus=[p.gpu], fraction=p.milli / MILLI)
    return Placement(node=p.node, gpus=list(p.gpus), mig_slices=list(p.mig_slices))


def apply(
    state: State | Branch,
    decisions: Decisions,
    running: Mapping[str, JobSpec],
    pending: Mapping[str, JobSpec],
    now_s: float,
) -> tuple[dict[str, JobSpec], dict[str, JobSpec]]:
    """The running and pending jobs after applying `decisions` to `state` (mutated)."""
    run = dict(running)
    wait = dict(pending)
    for name in decisions.preempted:
        job = run.pop(name)
        held_gpus = sum(usage_milli(state.usage(name)).values()) / MILLI
        state.release_all(name)
        ran_s = max(0.0, now_s - (job.started_s if job.started_s is not None else now_s))
        wait[name] = job.model_copy(
            update={
                "state": "pending",
                "placement": [],
                "started_s": None,
                "submitted_s": now_s,
                "attained_gpu_s": job.attained_gpu_s + held_gpus * ran_s,
            }
        )
    for name, placements in decisions.admitted.items():
        job = wait.pop(name)
        state.allocate(name, *[c for p in placements for c in p.claims()])
        run[name] = job.model_copy(
            update={
                "state": "running",
                "placement": [placement_spec(p) for p in placements],
                "started_s": now_s,
            }
        )
    return run, wait
