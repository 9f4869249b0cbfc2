"""Preemptive least attained service (Tiresias, issue 29): the queues by hand, who evicts
whom, and that a `tiresias` cycle differs from `fifo` where the paper says it should."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.sched.decide import decide
from gpufleet.sched.las import LasQueues
from gpufleet.specs.jobs import JobSpec

from .scenarios import H100, cluster, job, leaves, running, team, teams

NOW = 100_000.0
QUEUES = LasQueues()
ONE_TEAM = teams(team("research", {H100: 8}))  # the whole node: a full cluster is a full quota
SAVES = {"checkpoint_interval_s": 600.0}  # LAS evicts only jobs that checkpoint


def served(name: str, gpu_h: float, **kw: Any) -> JobSpec:
    """A job that has had `gpu_h` GPU-hours before this run."""
    return job(name, gpus=8, attained_gpu_s=gpu_h * 3600, **kw)


def test_queues_by_hand() -> None:
    assert QUEUES.thresholds_gpu_s == (57_600.0,)  # two queues, split at 16 GPU-hours
    assert QUEUES.by_service(0.0) == 0
    assert QUEUES.by_service(57_599.0) == 0
    assert QUEUES.by_service(57_600.0) == 1
    # a running 8-GPU job: its queue counts this run only (10 GPU-hours before do not):
    # 1 hour now is 8 GPU-hours -> queue 0; 2 hours, 16 GPU-hours -> queue 1
    r = running("r", "h-0", list(range(8)), attained_gpu_s=36_000.0, started_s=NOW - 3600)
    assert QUEUES.run_service_gpu_s(r, 8_000, NOW) == pytest.approx(8 * 3600)
    assert QUEUES.running(r, 8_000, NOW) == 0
    assert QUEUES.running(r, 8_000, NOW + 3600) == 1
    # waiting, the same job sits in queue 1 by all it has had (10 + 8 GPU-hours)
    assert QUEUES.served(r.replaced({"attained_gpu_s": 36_000.0 + 8 * 3600})) == 1


def test_a_starving_job_is_promoted_by_its_waiting_not_its_age() -> None:
    """32 GPU-hours on 8 GPUs is 4 hours of running. Waiting is the time since it was last
    queued (`submitted_s`: requeued when its run stopped), not since it first arrived: it is
    promoted to queue 0 once it has waited 2 × 4 = 8 hours."""
    requeued = NOW - 7 * 3600  # stopped and requeued 7 h ago
    waiting = served("w", 32.0, submitted_s=requeued)
    assert QUEUES.pending(waiting, NOW) == 1
    assert QUEUES.pending(waiting, NOW + 3600) == 0  # 8 h waited
    assert QUEUES.promoted_at_s(waiting) == pytest.approx(NOW + 3600)


def test_a_less_served_job_evicts_a_more_served_one_of_its_own_team() -> None:
    c, state = cluster(*leaves(1))
    long_run = running(
        "long", "h-0", list(range(8)), attained_gpu_s=50_000.0, started_s=NOW - 9000, **SAVES
    )
    new = job("new", gpus=8, submitted_s=NOW - 60)
    d = decide(c, state, [long_run], [new], ONE_TEAM, profile="tiresias", now_s=NOW)
    assert set(d.preempted) == {"long"}
    assert "new" in d.admitted
    e = d.preempted["long"]
    assert e.kind == "las"
    assert e.text().startswith(
        "preempted by job 'new' (least attained service: 20 GPU-h in this run put it in queue 1, "
        "behind queue 0)"
    )
    assert "new" not in e.public_text()
    # FIFO never evicts for it
    f = decide(c, state, [long_run], [new], ONE_TEAM, profile="fifo", now_s=NOW)
    assert not f.preempted
    # nor does LAS when the running job keeps nothing: its 20 GPU-h would be lost
    keeps_nothing = long_run.model_copy(update={"checkpoint_interval_s": None})
    d = decide(c, state, [keeps_nothing], [new], ONE_TEAM, profile="tiresias", now_s=NOW)
    assert not d.preempted


def test_no_eviction_within_a_queue_or_of_a_protected_job() -> None:
    c, state = cluster(*leaves(1))
    new = job("new", gpus=8, submitted_s=NOW - 60)
    young = running("young", "h-0", list(range(8)), started_s=NOW - 600, **SAVES)  # queue 0
    d = decide(c, state, [young], [new], ONE_TEAM, profile="tiresias", now_s=NOW)
    assert not d.preempted
    fixed = running(
        "fixed",
        "h-0",
        list(range(8)),
        started_s=NOW - 9000,  # 20 GPU-hours in this run: queue 1
        preemptible=False,
        **SAVES,
    )
    d = decide(c, state, [fixed], [new], ONE_TEAM, profile="tiresias", now_s=NOW)
    assert not d.preempted


def test_the_most_served_is_evicted_first() -> None:
    c, state = cluster(*leaves(1))
    a = running("a", "h-0", [0, 1, 2, 3], started_s=NOW - 15 * 3600, **SAVES)  # 60 GPU-h
    b = running("b", "h-0", [4, 5, 6, 7], attained_gpu_s=0.0, started_s=NOW - 60, **SAVES)
    new = job("new", gpus=4, submitted_s=NOW - 60)
    d = decide(c, state, [a, b], [new], ONE_TEAM, profile="tiresias", now_s=NOW)
    assert set(d.preempted) == {"a"}  # b is in queue 0, as is new
