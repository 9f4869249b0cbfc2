"""The event engine on small hand-checked scenarios, and its determinism."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufleet.cluster import Cluster, expand_group
from gpufleet.sim.engine import FailureModel, SimConfig, SpotModel, simulate
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.teams import TeamsSpec

H100 = "h100-sxm5-80gb"
HOUR = 3600.0


def cluster(nodes: int = 1, gpus: int = 8, **kw: Any) -> Cluster:
    paths = [("b1", "l1")] * nodes
    return Cluster(("block", "leaf", "node"), tuple(expand_group("h", H100, gpus, paths, **kw)))


def teams(*names: str, quota: int = 1000, **extra: Any) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": [
                {"name": "high", "value": 1000, "preemptible": False},
                {"name": "low", "value": 100, "preemptible": True},
            ],
            "teams": [
                {"name": n, "quota": {H100: quota}, "default_priority": "low", **extra}
                for n in names
            ],
        }
    )


def workload(*jobs: TraceJob) -> Workload:
    return Workload(jobs, CleaningReport("test", len(jobs), len(jobs)))


def job(name: str, submit_s: float, duration_s: float, **kw: Any) -> TraceJob:
    kw.setdefault("team", "a")
    kw.setdefault("gpus", 8)
    return TraceJob(name, submit_s=submit_s, duration_s=duration_s, **kw)


def test_one_job_on_an_empty_cluster_starts_at_once_and_holds_its_gpus_for_its_duration() -> None:
    r = simulate(cluster(2), teams("a"), workload(job("j", 0.0, HOUR)), SimConfig())
    m = r.metrics
    assert m.jobs_completed == 1
    assert m.wait_s["p50"] == 0.0
    assert m.jct_s["p50"] == HOUR
    assert m.gpu_allocation_ratio == pytest.approx(0.5)  # 8 of 16 GPUs for the whole run
    assert m.goodput_ratio == pytest.approx(1.0)
    assert m.gpu_hours_completed == pytest.approx(8.0)


def test_the_second_job_waits_for_the_first_to_finish() -> None:
    w = workload(job("first", 0.0, HOUR), job("second", 0.0, HOUR))
    m = simulate(cluster(1), teams("a"), w, SimConfig()).metrics
    assert sorted(m.waits) == [0.0, HOUR]
    assert sorted(m.jcts) == [HOUR, 2 * HOUR]
    assert m.gpu_allocation_ratio == pytest.approx(1.0)


def test_a_preempted_job_that_checkpoints_saves_its_work_and_pays_the_restart() -> None:
    """low starts at 0 (checkpoints every 20 min); high arrives at 50 min and evicts it. A
    victim gets a grace period to checkpoint (sched.preempt), so low keeps its 50 minutes
    and loses only the 300 s restart when it comes back."""
    w = workload(
        job("low", 0.0, 2 * HOUR, checkpoint_interval_s=1200.0),
        job("high", 3000.0, HOUR, priority_class="high"),
    )
    m = simulate(cluster(1), teams("a"), w, SimConfig(profile="priority")).metrics
    assert m.preemptions == 1
    assert m.lost_gpu_hours == pytest.approx(8 * 300 / HOUR)
    assert m.jobs_completed == 2
    # low: 3000 s saved; restarts at 3000 + 3600, runs 300 + 4200 s
    assert max(m.jcts) == pytest.approx(3000 + HOUR + 300 + 2 * HOUR - 3000)
    assert m.goodput_ratio is not None
    assert m.goodput_ratio < 1.0


def test_a_preempted_job_that_never_checkpoints_loses_its_attempt() -> None:
    w = workload(
        job("low", 0.0, 2 * HOUR),
        job("high", 3000.0, HOUR, priority_class="high"),
    )
    m = simulate(cluster(1), teams("a"), w, SimConfig(profile="priority")).metrics
    assert m.lost_gpu_hours == pytest.approx(8 * (3000 + 300) / HOUR)
    assert max(m.jcts) == pytest.approx(3000 + HOUR + 300 + 2 * HOUR)


def test_an_inference_replica_that_starts_late_serves_only_the_rest_of_its_window() -> None:
    w = workload(
        job("train", 0.0, HOUR),
        job("serve", 1.0, 4 * HOUR, kind="inference", team="b", gpus=8),
    )
    m = simulate(cluster(1), teams("a", "b"), w, SimConfig(profile="fifo")).metrics
    assert m.slo_attainment == pytest.approx(0.75, abs=1e-3)  # waited the first hour of four
    assert m.jobs_completed == 2


def test_a_job_too_big_for_the_cluster_ends_the_run_unfinished() -> None:
    w = workload(job("small", 0.0, HOUR), job("huge", 0.0, HOUR, workers=4))
    m = simulate(cluster(2), teams("a"), w, SimConfig()).metrics
    assert m.jobs_completed == 1
    assert m.jobs_unfinished == 1
    assert m.duration_s == pytest.approx(HOUR)


def test_failures_kill_jobs_which_restart_and_still_finish() -> None:
    jobs = [job(f"j{i}", i * 600.0, HOUR, checkpoint_interval_s=600.0) for i in range(20)]
    config = SimConfig(seed=3, failures=FailureModel(gpu_mtbf_h=20.0, repair_mean_h=0.5))
    m = simulate(cluster(4), teams("a"), workload(*jobs), config).metrics
    assert m.failures > 0
    assert m.jobs_completed == 20
    assert m.lost_gpu_hours > 0


def test_a_spot_reclaim_with_notice_lets_a_checkpointing_job_keep_its_work() -> None:
    c = cluster(1, capacity="spot")
    w = workload(job("ckpt", 0.0, 10 * HOUR, checkpoint_interval_s=HOUR, kind="training"))
    config = SimConfig(seed=1, spot=SpotModel(reclaim_per_node_per_day=4.0, return_mean_h=0.2))
    m = simulate(c, teams("a"), w, config).metrics
    assert m.spot_reclaims > 0
    # only restart overheads are lost: the notice saved the work each time
    assert 0 < m.lost_gpu_hours <= 8 * 300 * m.spot_reclaims / HOUR + 1e-9


def test_fairness_is_one_when_two_equal_teams_use_equal_gpu_hours() -> None:
    w = workload(job("a1", 0.0, HOUR, team="a"), job("b1", 0.0, HOUR, team="b"))
    m = simulate(cluster(2), teams("a", "b"), w, SimConfig()).metrics
    assert m.jain_fairness == pytest.approx(1.0)
    # a team that asked for little and got it all is treated fairly too
    w2 = workload(job("a1", 0.0, HOUR, team="a"), job("b1", 0.0, 0.01 * HOUR, team="b"))
    assert simulate(cluster(2), teams("a", "b"), w2, SimConfig()).metrics.jain_fairness == 1.0
    # FIFO on one node for three hours: a's three jobs run, b's three never do
    starve = workload(
        *(job(f"a{i}", 0.0, HOUR, team="a") for i in range(3)),
        *(job(f"b{i}", 1.0, HOUR, team="b") for i in range(3)),
    )
    config = SimConfig(profile="fifo", horizon_s=3 * HOUR)
    m = simulate(cluster(1), teams("a", "b"), starve, config).metrics
    assert m.jain_fairness == pytest.approx(0.5)


def test_fragmented_gpus_are_free_gpus_no_pending_job_can_use() -> None:
    """Two nodes, each with 4 GPUs held for hours; an 8-GPU job waits: 8 free, none usable."""
    w = workload(
        job("x", 0.0, 10 * HOUR, gpus=4),
        job("y", 0.0, 10 * HOUR, gpus=4),
        job("big", 1.0, HOUR),
    )
    config = SimConfig(profile="spread", sample_interval_s=HOUR)
    m = simulate(cluster(2), teams("a"), w, config).metrics
    assert max(s.fragmented_gpus for s in m.samples) == 8


def test_the_same_seed_gives_byte_identical_results() -> None:
    jobs = [
        job(f"j{i}", i * 300.0, (1 + i % 5) * 1200.0, gpus=1 + i % 8, team="ab"[i % 2])
        for i in range(60)
    ]
    config = SimConfig(seed=7, failures=FailureModel(gpu_mtbf_h=20.0))
    runs = [
        json.dumps(
            simulate(cluster(3), teams("a", "b"), workload(*jobs), config).metrics.to_json(
                series=True
            ),
            sort_keys=True,
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    other = SimConfig(seed=8, failures=FailureModel(gpu_mtbf_h=20.0))
    third = simulate(cluster(3), teams("a", "b"), workload(*jobs), other).metrics
    assert json.dumps(third.to_json(series=True), sort_keys=True) != runs[0]


def test_pods_bound_one_by_one_let_a_partial_gang_block_the_cluster_for_ever() -> None:
    """kube-scheduler without gang scheduling: a 3-pod job on 2 nodes binds 2 pods, which
    hold both nodes idle for ever; the 1-node job behind it never runs. With gangs, the
    impossible job holds nothing and the other runs."""
    w = workload(job("wide", 0.0, HOUR, workers=3), job("small", 1.0, HOUR, team="b"))
    m = simulate(cluster(2), teams("a", "b"), w, SimConfig(profile="k8s-default")).metrics
    assert m.jobs_completed == 0
    assert m.jobs_unfinished == 2
    gang = simulate(cluster(2), teams("a", "b"), w, SimConfig(profile="default")).metrics
    assert gang.jobs_completed == 1


def test_a_partial_gang_holds_gpus_that_count_as_allocated_but_do_no_work() -> None:
    w = workload(job("blocker", 0.0, 2 * HOUR), job("pair", 1.0, HOUR, workers=2, team="b"))
    m = simulate(cluster(2), teams("a", "b"), w, SimConfig(profile="k8s-default")).metrics
    assert m.jobs_completed == 2
    # pair's first pod holds the second node's 8 GPUs for two hours before its twin binds
    assert m.goodput_ratio is not None
    assert m.goodput_ratio < 0.9


def test_an_idle_gpu_is_re_cut_for_a_slice_the_layout_lacks_and_the_job_then_runs() -> None:
    from gpufleet.cluster import Node

    a100 = "a100-sxm4-80gb"
    layout = (("1g.10gb", 7),)
    c = Cluster(("block", "leaf", "node"), (Node("m-0", a100, 2, ("b1", "l1"), mig=(layout,) * 2),))
    t = TeamsSpec.model_validate({"kind": "teams", "teams": [{"name": "a", "quota": {a100: 2}}]})
    w = workload(job("chat", 0.0, HOUR, gpus=None, mig_profile="3g.40gb", kind="inference"))
    m = simulate(c, t, w, SimConfig(relayout_s=120.0)).metrics
    assert m.relayouts_applied == 1
    assert m.jobs_completed == 1
    # an inference replica: its wait is apart from the headline's (training, batch, ...)
    assert m.inference_wait_s["p50"] == pytest.approx(120.0, abs=11.0)  # the re-cut, a cycle
    frozen = simulate(c, t, w, SimConfig(relayout_s=None)).metrics
    assert frozen.jobs_completed == 0
    assert frozen.relayout_proposals > 0


def test_a_busy_gpu_drains_then_is_re_cut_and_nothing_new_lands_on_it_meanwhile() -> None:
    from gpufleet.cluster import Node

    a100 = "a100-sxm4-80gb"
    layout = (("1g.10gb", 7),)
    c = Cluster(("block", "leaf", "node"), (Node("m-0", a100, 1, ("b1", "l1"), mig=(layout,)),))
    t = TeamsSpec.model_validate({"kind": "teams", "teams": [{"name": "a", "quota": {a100: 2}}]})
    w = workload(
        job("small", 0.0, HOUR, gpus=None, mig_profile="1g.10gb"),
        job("chat", 10.0, HOUR, gpus=None, mig_profile="3g.40gb", kind="inference"),
        job("late-small", 600.0, HOUR, gpus=None, mig_profile="1g.10gb"),
    )
    m = simulate(c, t, w, SimConfig(relayout_s=120.0, profile="fifo")).metrics
    assert m.relayouts_applied == 1
    assert m.jobs_completed == 3
    # chat waited for small to end (1 h) and the re-cut (120 s); late-small arrived while
    # the GPU drained and was not let onto its free 1g slices: it waited for the re-cut too
    waits = sorted(j.wait_s for j in m.jobs)  # every job's (`m.waits`: not the replica's)
    assert waits[0] == 0.0
    assert waits[1] >= HOUR + 120 - 600 - 1  # late-small (arrived at 600 s)
    assert waits[2] >= HOUR + 120 - 10 - 1  # chat (arrived at 10 s)


# Pending specs are validated once per job shape and copied for the other jobs of it
# (`engine._Specs`); each copy must equal what validating that job gives, field by field
# and in the fields marked as set. The first job of each pair primes the shape.
SPEC_PAIRS = [
    pytest.param(job("a", 1.0, HOUR), job("b", 2.5, HOUR), id="same-shape"),
    pytest.param(
        job("a", 1.0, HOUR, runtime_estimate_s=90.0),
        job("b", 7.0, HOUR, runtime_estimate_s=5400.0),
        id="own-estimate",
    ),
    pytest.param(
        job("a", 1.0, HOUR), job("b", 2.0, HOUR, runtime_estimate_s=60.0), id="estimate-only-b"
    ),
    pytest.param(
        job("a", 1.0, HOUR, accelerators=(H100,), checkpoint_interval_s=600.0, kind="training"),
        job("b", 3.0, HOUR, accelerators=(H100,), checkpoint_interval_s=600.0, kind="training"),
        id="accelerators-and-checkpoints",
    ),
    pytest.param(job("a", 1.0, HOUR), job(" b ", 2.0, HOUR), id="name-to-strip-validated"),
    pytest.param(job("a", 1.0, HOUR), job("b", 2, HOUR), id="int-arrival-validated"),
    pytest.param(
        job("a", 1.0, HOUR, gpu_fraction=0.5, gpus=None),
        job("b", 2.0, HOUR, gpu_fraction=0.5, gpus=None),
        id="fraction",
    ),
]


@pytest.mark.parametrize(("first", "second"), SPEC_PAIRS)
def test_specs_copied_per_shape_equal_validated_ones(first: TraceJob, second: TraceJob) -> None:
    from gpufleet.sim.engine import _Specs

    specs = _Specs()
    for t in (first, second):
        got, want = specs(t), t.to_job_spec()
        assert got == want
        assert got.model_fields_set == want.model_fields_set
        assert [type(getattr(got, f)) for f in type(got).model_fields] == [
            type(getattr(want, f)) for f in type(want).model_fields
        ]


def test_specs_of_an_invalid_job_raise_as_validation_does() -> None:
    from pydantic import ValidationError

    from gpufleet.sim.engine import _Specs

    specs = _Specs()
    specs(job("a", 1.0, HOUR))
    with pytest.raises(ValidationError):
        specs(job("b", -1.0, HOUR))  # a negative arrival: validated, and refused


def test_running_views_are_built_when_read_in_start_order() -> None:
    from gpufleet.sim.engine import _RunningViews

    views = _RunningViews()
    specs = {n: job(n, 1.0, HOUR).to_job_spec() for n in ("x", "y", "z")}
    for i, n in enumerate(("y", "x", "z")):
        views.add(n, specs[n], 10.0 + i, 1_000)
    views.remove("x")
    got = list(views)
    assert [v.name for v in got] == ["y", "z"]
    assert len(views) == 2
    assert got[0] == specs["y"].model_copy(
        update={"state": "running", "started_s": 10.0, "attained_gpu_s": 0.0}
    )
    assert next(iter(views)) is got[0]  # built once, kept while it runs
    assert views.has("z")
    assert not views.has("x")
    assert got[1] in views


def _busy_run_inputs() -> tuple[Cluster, TeamsSpec, Workload]:
    """Eight nodes, two teams, jobs that queue, gangs, and a low-priority job to preempt."""
    jobs = [job(f"j{i}", 60.0 * i, HOUR * (1 + i % 3), gpus=4 + 4 * (i % 2)) for i in range(24)]
    jobs += [job(f"g{i}", 30.0 + 90.0 * i, HOUR, workers=2, team="b") for i in range(4)]
    jobs.append(job("vip", 500.0, HOUR, team="b", priority_class="high"))
    return cluster(8), teams("a", "b", quota=32), workload(*jobs)


@pytest.mark.parametrize("profile", ["fifo", "default", "k8s-default", "slurm-like"])
def test_the_event_loop_makes_no_cyclic_garbage(profile: str) -> None:
    """The loop runs with the cyclic collector off (`engine._collector_paused`): that is
    only free if it makes no reference cycles, which a collection afterwards would find."""
    import gc

    from gpufleet.sim.engine import Simulation

    c, t, w = _busy_run_inputs()
    config = SimConfig(profile=profile, failures=FailureModel(gpu_mtbf_h=20.0))
    Simulation(c, t, w, config).run()  # first run: lazy imports and caches settle
    sim = Simulation(c, t, w, config)
    gc.collect()
    result = sim.run()
    assert result.metrics.jobs_completed > 0
    assert result.metrics.failures > 0
    assert gc.isenabled()
    assert gc.collect() == 0


def test_the_collector_is_back_on_after_a_run_that_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from gpufleet.sim import engine

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "decide", broken)
    c, t, w = _busy_run_inputs()
    with pytest.raises(RuntimeError, match="boom"):
        simulate(c, t, w, SimConfig())
    assert gc.isenabled()
    gc.disable()  # a caller that keeps it off finds it off afterwards
    try:
        with pytest.raises(RuntimeError, match="boom"):
            simulate(c, t, w, SimConfig())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_arrival_at_the_instant_of_a_cycle_is_in_that_cycle() -> None:
    """Arrivals are a stream merged with the event heap; at one instant an arrival still
    comes before the scheduling cycle (and after finishes), as if it were on the heap."""
    w = workload(
        job("first", 0.0, HOUR, gpus=2),  # a cycle at 0 s
        job("second", 50.0, HOUR, gpus=2),  # wants a cycle: the next is due at 100 s
        job("third", 100.0, HOUR, gpus=2),  # arrives at 100 s, just before that cycle
    )
    r = simulate(cluster(1), teams("a"), w, SimConfig(cycle_interval_s=100.0))
    assert r.first_start_s == {"first": 0.0, "second": 100.0, "third": 100.0}


def test_allocation_while_jobs_arrive_and_the_size_breakdown_by_hand() -> None:
    """Issue 29: a: 8 GPUs from 0 for 2 h; b: 8 GPUs from 1 h for 1 h, on 16 GPUs. While jobs
    arrive (0 to 1 h) 8 of 16 GPUs are held: 50 %; over the run 24 of 32 GPU-hours: 75 %."""
    w = workload(job("a", 0.0, 2 * HOUR), job("b", HOUR, HOUR))
    m = simulate(cluster(2), teams("a"), w, SimConfig()).metrics
    assert m.gpu_allocation_while_arriving == pytest.approx(0.5)
    assert m.gpu_allocation_ratio == pytest.approx(0.75)
    assert m.makespan_s == pytest.approx(2 * HOUR)
    assert list(m.per_size) == ["2-8 GPUs"]
    assert m.per_size["2-8 GPUs"]["jobs_completed"] == 2
    assert m.per_size["2-8 GPUs"]["slowdown"]["mean"] == pytest.approx(1.0)


def test_a_share_that_a_whole_gpu_profile_rounds_up_keeps_its_size_class() -> None:
    """k8s-default runs a 0.25-GPU job on a whole GPU: it holds 1 GPU (what it costs), but
    it asked for 0.25, and its size class is the same under every profile (it moved from
    "under 1 GPU" to "1 GPU" under k8s-default)."""
    w = workload(job("s", 0.0, HOUR, gpus=None, gpu_fraction=0.25))
    for profile, held in (("default", 0.25), ("k8s-default", 1.0)):
        m = simulate(cluster(1, fractions=True), teams("a"), w, SimConfig(profile=profile)).metrics
        (record,) = m.jobs
        assert (record.gpus, record.requested_gpus) == (held, 0.25), profile
        assert list(m.per_size) == ["under 1 GPU"], profile


def test_pods_of_one_job_waiting_count_as_one_job_waiting() -> None:
    """k8s-default binds pods one by one: a 4-pod job with 2 pods bound beside a 2-hour
    blocker has 2 pods waiting but is 1 job waiting (the samples said 2: `pending` counts
    jobs, as the guide says)."""
    w = workload(job("blocker", 0.0, 2 * HOUR), job("quad", 1.0, HOUR, workers=4, team="b"))
    config = SimConfig(profile="k8s-default", sample_interval_s=600.0)
    m = simulate(cluster(3), teams("a", "b"), w, config).metrics
    assert {s.pending for s in m.samples if s.t_s >= 600.0} == {1}
