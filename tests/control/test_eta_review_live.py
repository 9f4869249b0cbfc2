"""Queue ETAs checked against what the live control plane then does (the researcher's
review): a queue is submitted, its ETAs read once, the clock run cycle by cycle until
every job has started, and each ETA compared with the job's first start. Runtime
estimates are exact and nothing random happens (the emulated executor runs a job for
its estimate), so an ETA must be right within a cycle, or within the grace period where
a stop is waited for."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from gpufleet.control.models import Job

from .conftest import Plane

CYCLE_S = 10.0
GRACE_S = 30.0  # `build_plane`'s grace period
H100 = "h100-sxm5-80gb"


def submit(plane: Plane, who: str, name: str, gpus: int, runtime_s: float, **kw: Any) -> int:
    body = {"name": name, "gpus": gpus, "accelerator": H100, "runtime_estimate_s": runtime_s}
    r = plane.client.post("/api/v1/jobs", json={**body, **kw}, headers=plane.auth(who))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def etas(plane: Plane, jobs: dict[str, int]) -> dict[str, float | None]:
    """Refresh the ETAs (as the server's ETA child does) and read them through the API."""
    plane.reconciler.estimate_etas()
    out = {}
    for name, job in jobs.items():
        r = plane.client.get(f"/api/v1/jobs/{job}", headers=plane.auth("admin"))
        out[name] = r.json()["eta_s"]
    return out


def run_until_started(plane: Plane, jobs: dict[str, int], cycles: int = 400) -> dict[str, float]:
    """Cycle the plane until every job has started; each job's first start."""
    first: dict[str, float] = {}
    for _ in range(cycles):
        plane.cycle(CYCLE_S)
        with plane.sessions() as s:
            started = dict(s.execute(select(Job.id, Job.started_s)).all())
        for name, job in jobs.items():
            if name not in first and started.get(job) is not None:
                first[name] = started[job]
        if len(first) == len(jobs):
            return first
    raise AssertionError(f"not all started: {sorted(set(jobs) - set(first))}")


def test_etas_at_submission_match_the_starts_through_a_predicted_preemption(lite: Plane) -> None:
    """vision borrows nlp's share, nlp reclaims it (preempting vision's 4-GPU job, which
    restarts later) and vision's 2x8 gang waits for the whole pool. The replay predicts
    the preemption; it added the simulator's 300 s restart overhead to the restarted job,
    so the gang's ETA was 300 s late (2207 s after submission, against a start at 1907 s)."""
    t0 = lite.clock()
    queue = [
        ("vision-member", "a", 8, 1000, 1),
        ("vision-member", "b", 8, 700, 1),
        ("vision-member", "c", 8, 600, 2),
        ("nlp-member", "d", 4, 300, 1),
        ("vision-member", "e", 4, 900, 1),
        ("nlp-member", "f", 8, 400, 1),
        ("nlp-member", "g", 2, 500, 1),
    ]
    jobs = {}
    for who, name, gpus, runtime_s, workers in queue:
        jobs[name] = submit(lite, who, name, gpus, runtime_s, workers=workers)
        lite.clock.advance(1)
    lite.cycle()  # positions; a, d and g start
    predicted = etas(lite, jobs)
    started = run_until_started(lite, jobs)
    errors = {n: started[n] - at for n, at in predicted.items() if at is not None}
    assert set(errors) == set(jobs), predicted
    assert all(abs(e) <= CYCLE_S for e in errors.values()), errors
    assert started["c"] - t0 > 1800  # the gang waited for the restarted job: a real test


def test_an_eta_is_exact_while_the_job_ahead_is_in_its_last_minute(lite: Plane) -> None:
    """A running job with under a minute left was assumed to run a minute more: with 10 s
    left, the ETA of the job waiting for it said 60 s from now, 50 s after its start."""
    busy = [submit(lite, "vision-member", f"busy{i}", 8, 300) for i in range(2)]
    lite.cycle()
    nxt = submit(lite, "vision-member", "next", 8, 300)
    lite.cycle(290)  # 10 s left on both running jobs
    assert {lite.client.get(f"/api/v1/jobs/{j}", headers=lite.auth("admin")).json()["state"]
            for j in busy} == {"running"}  # fmt: skip
    predicted = etas(lite, {"next": nxt})["next"]
    started = run_until_started(lite, {"next": nxt})["next"]
    assert predicted is not None
    assert abs(started - predicted) <= CYCLE_S, (predicted - lite.clock(), started - predicted)


def test_a_down_node_takes_no_job_in_the_replay(lite: Plane) -> None:
    """With h100-1 down and h100-0 busy for 1000 s, a waiting 8-GPU job starts when h100-0
    frees; its ETA said "any moment" (the replay put it on the down node)."""
    r = lite.client.put(
        "/api/v1/admin/nodes/h100-1", json={"state": "down", "reason": "maint"},
        headers=lite.auth("admin"),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    submit(lite, "vision-member", "busy", 8, 1000)
    lite.cycle()
    lite.cycle(CYCLE_S)
    wait = {"wait": submit(lite, "nlp-member", "wait", 8, 600)}
    lite.cycle(CYCLE_S)
    predicted = etas(lite, wait)["wait"]
    started = run_until_started(lite, wait)["wait"]
    assert predicted is not None
    assert abs(started - predicted) <= CYCLE_S, (predicted, started)


def test_a_drained_node_takes_no_job_in_the_replay_even_once_its_jobs_end(lite: Plane) -> None:
    """h100-1 is drained with a 300 s job on it; h100-0 is busy for 1000 s. The GPUs the
    drained node's job frees stay unused, so the waiting job starts at 1000 s, not 300 s."""
    submit(lite, "vision-member", "long", 8, 1000)
    submit(lite, "nlp-member", "short", 8, 300)
    lite.cycle()
    r = lite.client.put(
        "/api/v1/admin/nodes/h100-1", json={"state": "drain", "reason": "upgrade"},
        headers=lite.auth("admin"),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    wait = {"wait": submit(lite, "nlp-member", "wait", 8, 600)}
    lite.cycle(CYCLE_S)
    predicted = etas(lite, wait)["wait"]
    started = run_until_started(lite, wait)["wait"]
    assert predicted is not None
    assert abs(started - predicted) <= CYCLE_S, (predicted, started)


def test_a_cancelled_job_frees_its_gpus_at_its_stop_deadline_in_the_replay(lite: Plane) -> None:
    """A cancelled job that checkpoints stops within its grace period; the replay ran it to
    its 5000 s estimate, so the job waiting for its node read "in 50 min" for a start 10 s
    later."""
    a = submit(lite, "vision-member", "a", 8, 5000, checkpoint_interval_s=600)
    submit(lite, "nlp-member", "b", 8, 3000)
    lite.cycle()
    lite.cycle(CYCLE_S)
    wait = {"c": submit(lite, "nlp-member", "c", 8, 600)}
    lite.cycle(CYCLE_S)
    r = lite.client.post(f"/api/v1/jobs/{a}/cancel", headers=lite.auth("vision-member"))
    assert r.status_code == 200, r.text
    lite.cycle(CYCLE_S)  # a is stopping, its grace period running
    predicted = etas(lite, wait)["c"]
    started = run_until_started(lite, wait)["c"]
    assert predicted is not None
    assert abs(started - predicted) <= GRACE_S, (predicted, started)


def test_an_admitted_job_holds_its_gpus_in_the_replay(lite: Plane) -> None:
    """nlp reclaims its guarantee from vision: its job is admitted while the victim (which
    checkpoints) stops. The replay left the admitted job out and ran the victim to its
    estimate, so vision's next job read 1000 s for a start at 330 s."""
    t0 = lite.clock()
    submit(lite, "vision-member", "v1", 8, 1000, checkpoint_interval_s=300)
    submit(lite, "vision-member", "v2", 8, 2000, checkpoint_interval_s=300)
    lite.cycle()
    lite.cycle(CYCLE_S)
    v3 = submit(lite, "vision-member", "v3", 8, 500)
    submit(lite, "nlp-member", "n1", 8, 300)
    lite.cycle(CYCLE_S)
    with lite.sessions() as s:
        assert "admitted" in set(s.scalars(select(Job.state)))
    predicted = etas(lite, {"v3": v3})["v3"]
    started = run_until_started(lite, {"v3": v3})["v3"]
    assert started - t0 < 400  # it did start after n1, not after the victim's estimate
    assert predicted is not None
    assert abs(started - predicted) <= GRACE_S, (predicted, started)


def test_the_whatif_baseline_replays_the_queue_as_the_etas_do(lite: Plane) -> None:
    """The portal's what-if read the bare live queue: with h100-1 down its baseline put the
    waiting job on the down node (a wait of one cycle) while the job's page said ~1,000 s.
    It now reads the queue the ETAs replay (`replay_queue`), so the two agree."""
    from gpufleet.control.eta_refresh import replay_queue
    from gpufleet.portal.whatif import Scenario, run

    r = lite.client.put(
        "/api/v1/admin/nodes/h100-1", json={"state": "down", "reason": "maint"},
        headers=lite.auth("admin"),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    submit(lite, "vision-member", "busy", 8, 1000)
    lite.cycle()
    lite.cycle(CYCLE_S)
    wait = submit(lite, "nlp-member", "wait", 8, 600)
    lite.cycle(CYCLE_S)
    predicted = etas(lite, {"wait": wait})["wait"]
    assert predicted is not None
    now = lite.clock()
    cluster, profile = lite.reconciler.cluster, lite.reconciler.config.profile
    with lite.sessions() as s:
        replay = replay_queue(s, cluster, now)
    result = run(
        replay.queue,
        cluster,
        Scenario(profile=profile),
        now_s=now,
        baseline_profile=profile,
        visible=lambda team: True,
        unavailable=replay.unavailable,
    )
    row = next(r for r in result.rows if r.job_id == wait)
    assert row.baseline_wait_s is not None
    assert abs(row.queued_s + row.baseline_wait_s - predicted) <= CYCLE_S
    assert row.baseline_wait_s > 900  # it waits for h100-0, not for the down node
