"""Speed per accelerator (sim.speed): a job's duration scales by the GPU it lands on,
checked by hand; work is conserved when a preempted job restarts on another type; bad
`--speeds` exits 2 and runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.cluster import Cluster, expand_group
from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.speed import parse_speeds, speed_table
from gpufleet.specs.teams import TeamsSpec

from .test_engine import job, workload

H100, A100, H200 = "h100-sxm5-80gb", "a100-sxm4-80gb", "h200-sxm-141gb"
HOUR = 3600.0


def cluster(*groups: tuple[str, str, int]) -> Cluster:
    """One block, one leaf; each group (name, accelerator, nodes) of 8-GPU nodes."""
    nodes = [n for g, acc, k in groups for n in expand_group(g, acc, 8, [("b1", "l1")] * k)]
    return Cluster(("block", "leaf", "node"), tuple(nodes))


def teams(*accelerators: str) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": [
                {"name": "high", "value": 1000, "preemptible": False},
                {"name": "low", "value": 100, "preemptible": True},
            ],
            "teams": [
                {"name": "a", "quota": dict.fromkeys(accelerators, 1000), "default_priority": "low"}
            ],
        }
    )


def test_a_one_hour_job_takes_its_time_over_the_speed_of_each_accelerator() -> None:
    """H100 is the reference (speed 1), the A100 is given speed 0.5: one hour of H100 work
    takes 1 h on the H100 node and 2 h on the A100 node."""
    c = cluster(("fast", H100, 1), ("slow", A100, 1))
    speeds = speed_table([H100, A100], H100, parse_speeds(f"{H100}=1,{A100}=0.5"))
    w = workload(
        job("on-h100", 0.0, HOUR, accelerators=(H100,)),
        job("on-a100", 0.0, HOUR, accelerators=(A100,)),
    )
    m = simulate(c, teams(H100, A100), w, SimConfig(speeds=speeds)).metrics
    jct = {r.name: r.jct_s for r in m.jobs}
    assert jct == {"on-h100": HOUR, "on-a100": 2 * HOUR}
    # slowdown is JCT over the run time on the accelerator it ran on: both ran at once
    assert {r.name: r.duration_s for r in m.jobs} == {"on-h100": HOUR, "on-a100": 2 * HOUR}
    assert [r.slowdown for r in m.jobs] == [1.0, 1.0]
    assert m.gpu_hours_completed == pytest.approx(8 + 16)  # wall GPU-hours of useful work
    assert m.goodput_ratio == pytest.approx(1.0)


def test_default_speeds_are_the_catalog_bf16_peaks() -> None:
    """Durations measured on an A100 (312 TFLOPS BF16), run on an H100 (989.4): × 312/989.4."""
    c = cluster(("fast", H100, 1))
    speeds = speed_table([H100], A100, {})
    assert speeds is not None
    assert speeds.factors == {H100: pytest.approx(312 / 989.4)}
    m = simulate(c, teams(H100), workload(job("j", 0.0, HOUR)), SimConfig(speeds=speeds)).metrics
    assert m.jobs[0].jct_s == pytest.approx(HOUR * 312 / 989.4)


def test_speeds_given_are_relative_to_the_reference_and_the_rest_come_from_the_catalog() -> None:
    """The reference is 1 unless given; an accelerator not given keeps its catalog ratio to
    the reference; a catalog accelerator the cluster lacks may be named (one command for
    several what-if clusters)."""
    speeds = speed_table([H100, A100, H200], H100, parse_speeds(f"{H200}=1.25"))
    assert speeds is not None
    assert dict(speeds.factors) == {
        A100: pytest.approx(989.4 / 312),
        H100: 1.0,
        H200: pytest.approx(0.8),
    }
    assert speed_table([H100], H100, parse_speeds(f"{H200}=1.25")) is None


def test_work_is_conserved_when_a_preempted_job_restarts_on_another_accelerator() -> None:
    """Reference H100 (speed 1), A100 speed 0.5, 300 s restart overhead.

    t=0: `filler` (high, A100 only, 0.5 h of H100 work: 1 h on the A100) takes the A100
    node; `low` (any GPU, 2 h of H100 work, checkpoints) takes the H100 node.
    t=3000: `high` (H100 only) evicts `low`, which saves its 3000 s (= 3000 reference s).
    t=3600: the A100 frees; `low` restarts there with 7200 - 3000 = 4200 reference s left:
    300 s overhead + 4200 / 0.5 = 8400 s, so it ends at 3600 + 300 + 8400 = 12,300 s.
    """
    c = cluster(("fast", H100, 1), ("slow", A100, 1))
    speeds = speed_table([H100, A100], H100, {H100: 1.0, A100: 0.5})
    w = workload(
        job("filler", 0.0, HOUR / 2, accelerators=(A100,), priority_class="high"),
        job("low", 0.0, 2 * HOUR, checkpoint_interval_s=600.0),
        job("high", 3000.0, HOUR, accelerators=(H100,), priority_class="high"),
    )
    config = SimConfig(profile="priority", speeds=speeds, restart_overhead_s=300.0)
    m = simulate(c, teams(H100, A100), w, config).metrics
    rec = {r.name: r for r in m.jobs}
    assert m.preemptions == 1
    assert rec["filler"].end_s == pytest.approx(HOUR)
    assert rec["high"].end_s == pytest.approx(3000 + HOUR)
    assert rec["low"].end_s == pytest.approx(3600 + 300 + 8400)
    assert rec["low"].attempts == 2
    assert rec["low"].duration_s == pytest.approx(2 * HOUR / 0.5)  # on the A100 it ended on
    # useful wall GPU-seconds: 8 × (3000 on the H100 + 8400 on the A100); lost: the restart
    assert m.lost_gpu_hours == pytest.approx(8 * 300 / HOUR)
    useful_h = 8 * (HOUR / 2 * 2 + 3000 + 8400 + HOUR) / HOUR
    assert m.gpu_hours_completed == pytest.approx(useful_h)


def test_half_the_fleet_as_h200_at_speed_1_25_finishes_a_congested_queue_sooner() -> None:
    """Twenty 8-GPU one-hour jobs every 5 minutes on two nodes: the queue builds. With one
    node an H200 at 1.25 × the H100, the last job ends sooner and mean JCT is lower."""
    jobs = [job(f"j{i:02d}", i * 300.0, HOUR) for i in range(20)]
    h100s = cluster(("h", H100, 2))
    mixed = cluster(("h", H100, 1), ("x", H200, 1))
    assert speed_table([H100], H100, {}) is None  # every node is the reference: unchanged
    speeds = speed_table([H100, H200], H100, parse_speeds(f"{H200}=1.25,{H100}=1"))
    base = simulate(h100s, teams(H100), workload(*jobs), SimConfig()).metrics
    what_if = simulate(mixed, teams(H100, H200), workload(*jobs), SimConfig(speeds=speeds))
    m = what_if.metrics
    assert m.jobs_completed == base.jobs_completed == 20
    assert m.makespan_s is not None
    assert base.makespan_s is not None
    assert m.makespan_s < base.makespan_s
    assert m.jct_s["mean"] < base.jct_s["mean"]
    h200_runs = [r for r in m.jobs if r.duration_s == pytest.approx(HOUR / 1.25)]
    assert h200_runs  # some jobs ran on the H200, in 48 minutes


def test_an_accelerator_without_a_speed_runs_as_the_reference_and_is_named() -> None:
    speeds = speed_table(["pollux-T4", H100], "pollux-T4", {})
    assert speeds is not None
    assert speeds.factors == {"pollux-T4": 1.0, H100: 1.0}
    (warning,) = speeds.warnings()
    assert "pollux-T4" in warning
    assert "--speeds" in warning
    given = speed_table(["pollux-T4", H100], "pollux-T4", {"pollux-T4": 1.0, H100: 8.0})
    assert given is not None
    assert given.factors[H100] == 1 / 8
    assert not given.warnings()


# -- the CLI ---------------------------------------------------------------------------------

CLUSTER = {
    "kind": "cluster",
    "name": "s",
    "nodes": [{"name": "n", "count": 1, "accelerator": A100, "gpus_per_node": 8}],
}
JOBS = "name,team,submit_s,duration_s,gpus,workers,kind\na,t,0,3600,8,1,training\n"


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit code, and stdout (the JSON) where it ran, else stderr (the message)."""
    (tmp_path / "c.yaml").write_text(json.dumps(CLUSTER))
    (tmp_path / "jobs.csv").write_text(JOBS)
    argv = ["simulate", "run", str(tmp_path / "c.yaml"), str(tmp_path / "jobs.csv")]
    argv += ["--trace-format", "gpufleet", "--format", "json", "--out", str(tmp_path / "out")]
    code = main([*argv, *args])
    captured = capsys.readouterr()
    return code, captured.out if code == 0 else captured.err


def test_speeds_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One hour of H100 work on an A100 given half the H100's speed: 2 h."""
    code, out = _run(tmp_path, capsys, "--speeds", f"H100=2,{A100}=1", "--reference", "H100")
    assert code == 0, out
    assert json.loads(out)["metrics"]["makespan_s"] == 2 * HOUR
    code, out = _run(tmp_path, capsys)  # no reference: the trace's duration
    assert json.loads(out)["metrics"]["makespan_s"] == HOUR


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--speeds", "h100=fast", "--reference", "h100"], "not a number"),
        (["--speeds", "h100", "--reference", "h100"], "ACCELERATOR=SPEED"),
        (["--speeds", "h100=0", "--reference", "h100"], "> 0"),
        (["--speeds", "h100=1,H100=2", "--reference", "h100"], "twice"),
        (["--speeds", "v100=1", "--reference", "h100"], "neither an accelerator of the cluster"),
        (["--speeds", "h100=1"], "need a reference (--reference)"),
    ],
)
def test_bad_speeds_exit_2_and_run_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    code, err = _run(tmp_path, capsys, *args)
    assert code == 2, err
    assert "--speeds" in err
    assert says in err
    assert not (tmp_path / "out").exists()


def test_a_reference_with_no_speed_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(tmp_path, capsys, "--reference", "h10")
    assert code == 2
    assert "--reference h10" in err
    assert not (tmp_path / "out").exists()
    code, out = _run(tmp_path, capsys, "--reference", "t4", "--speeds", f"t4=1,{A100}=2")
    assert code == 0, out  # a trace's own type, given its speed
    assert json.loads(out)["metrics"]["makespan_s"] == HOUR / 2
