"""`gpufleet schedule`: one cycle over the example cluster, jobs and teams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main

EX = Path(__file__).parents[2] / "examples"
ARGS = [str(EX / "sched-cluster.yaml"), str(EX / "sched-jobs.yaml")]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_one_cycle_with_quotas(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["schedule", *ARGS, "--teams", str(EX / "sched-teams.yaml"), "--format", "json"], capsys
    )
    assert code == 0
    data = json.loads(out)
    jobs = {j["job"]: j for j in data["jobs"]}
    assert jobs["eval-sweep"]["state"] == "running"
    pretrain = jobs["pretrain"]
    assert pretrain["state"] == "admitted"
    assert pretrain["placement"].count("[0,1,2,3,4,5,6,7]") == 4  # 4 whole nodes, a full gang
    assert "h100-3" not in pretrain["placement"]  # the running job's node is not full
    assert jobs["chat-7b"]["placement"].endswith("mig:3g.40gb#0")
    # research has no A100 or L4 quota: its notebook waits with a reason
    assert jobs["notebook"]["state"] == "pending"
    assert "no quota" in jobs["notebook"]["reason"]
    assert set(data["timings_s"]) == {"snapshot", "order", "nominate", "place", "commit"}
    assert data["quotas_enforced"] is True


def test_without_teams_quotas_are_not_enforced(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["schedule", *ARGS, "--format", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["quotas_enforced"] is False
    assert all("no quota" not in j["reason"] for j in data["jobs"])


# Two nodes of 8 H100s; team x runs `a` on one, and two gangs of 8-GPU workers wait: `b`
# (16 GPUs) for room, `c` (24 GPUs) for more than the cluster has.
TWO_NODES = """\
kind: cluster
name: tiny
node_groups:
  - {name: h, accelerator: h100-sxm5-80gb, count: 2, gpus_per_node: 8}
"""
ONE_TEAM_JOBS = """\
kind: jobs
jobs:
  - {name: a, team: x, gpus: 8, state: running, started_s: 0, runtime_estimate_s: 3600,
     placement: [{node: h-0, gpus: [0, 1, 2, 3, 4, 5, 6, 7]}]}
  - {name: b, team: x, gpus: 8, workers: 2}
  - {name: c, team: x, gpus: 8, workers: 3}
"""


def _one_team(tmp_path: Path) -> list[str]:
    cluster, jobs = tmp_path / "cluster.yaml", tmp_path / "jobs.yaml"
    cluster.write_text(TWO_NODES)
    jobs.write_text(ONE_TEAM_JOBS)
    return [str(cluster), str(jobs)]


def _reasons(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    code, out, _ = run(["schedule", *argv, "--format", "json"], capsys)
    assert code == 0
    return {j["job"]: j["reason"] for j in json.loads(out)["jobs"]}


def test_without_teams_a_gang_waits_for_room_not_for_its_teams_own_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the open quota was the cluster's size, so team x's running 8 GPUs counted against it:
    # "team x quota 8/16 h100-sxm5-80gb in use, no cohort to borrow from (this job needs 16)"
    reasons = _reasons(_one_team(tmp_path), capsys)
    assert reasons["b"].startswith("waiting: room for 1 of 2 workers of 8 h100-sxm5-80gb GPUs")
    assert "reserved 16 h100-sxm5-80gb GPUs on h-0, h-1" in reasons["b"]  # EASY backfill
    assert all("quota" not in why for why in reasons.values())


def test_without_teams_a_gang_larger_than_the_cluster_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reasons = _reasons(_one_team(tmp_path), capsys)
    assert reasons["c"] == (
        "cannot run: 3 workers of 8 h100-sxm5-80gb GPUs, but this cluster's h100-sxm5-80gb "
        "nodes hold at most 2 such workers (each worker on one node)"
    )


def test_a_gang_larger_than_the_cluster_cannot_run_whatever_the_quota(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text("kind: teams\nteams:\n  - {name: x, quota: {h100-sxm5-80gb: 64}}\n")
    reasons = _reasons([*_one_team(tmp_path), "--teams", str(teams)], capsys)
    assert reasons["c"].startswith("cannot run: 3 workers of 8 h100-sxm5-80gb GPUs")
    assert reasons["b"].startswith("waiting: room for 1 of 2 workers")


def test_without_teams_the_table_names_no_quota_but_the_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["schedule", *_one_team(tmp_path)], capsys)
    assert code == 0
    assert out.count("quota") == 1  # "no --teams file: quotas not enforced"
    assert "no --teams file: quotas not enforced" in out
    assert "cannot run" in out


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["schedule", *ARGS, "--teams", str(EX / "sched-teams.yaml")], capsys)
    assert code == 0
    assert "admitted" in out
    assert "pending" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            [str(EX / "sched-cluster.yaml"), str(EX / "sched-teams.yaml")],
            "kind: this command reads jobs specs; this file is kind 'teams'",
            id="teams-file-as-jobs",
        ),
        pytest.param(
            [*ARGS, "--profile", "fifoo"],
            "unknown scheduling profile 'fifoo'; did you mean 'fifo'?",
            id="unknown-profile",
        ),
    ],
)
def test_bad_input_exits_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["schedule", *argv], capsys)
    assert code == 2
    assert message in err


def test_bench_scheduler_reports_rates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["bench", "scheduler", "--nodes", "64", "--pending", "300", "--format", "json"], capsys
    )
    assert code == 0
    data = json.loads(out)
    assert data["pending"] == 300
    assert 0 < data["admitted"] <= 300
    assert data["decisions_per_s"] == pytest.approx(300 / data["cycle_s"])
    assert set(data["timings_s"]) == {"snapshot", "order", "nominate", "place", "commit"}


def test_a_fraction_on_spot_only_nodes_names_the_spot_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["schedule", *ARGS, "--format", "json"], capsys)
    assert code == 0
    notebook = next(j for j in json.loads(out)["jobs"] if j["job"] == "notebook")
    # interactive work may not use spot; the only shareable GPUs (L4) are spot nodes
    assert "l4 GPUs with 250/1000 free to share are spot capacity" in notebook["reason"]


def test_busy_example_reclaims_a_guarantee_and_proposes_a_relayout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "schedule",
        str(EX / "sched-cluster.yaml"),
        str(EX / "sched-busy-jobs.yaml"),
        "--teams",
        str(EX / "sched-teams.yaml"),
        "--now",
        "7200",
        "--format",
        "json",
    ]
    code, out, _ = run(argv, capsys)
    assert code == 0
    data = json.loads(out)
    jobs = {j["job"]: j for j in data["jobs"]}
    assert list(data["preempted"]) == ["r-train-b"]  # least work since its checkpoint
    assert jobs["r-train-b"]["state"] == "preempted"
    assert "reclaims its guaranteed 64" in jobs["r-train-b"]["reason"]
    assert jobs["p-finetune"]["state"] == "admitted"
    (proposal,) = data["relayouts"]
    assert proposal["proposed"] == {"7g.80gb": 1}
    assert proposal["serves"] == ["p-big-model"]
    assert "would not free enough" not in jobs["p-big-model"]["reason"]


def test_backfill_example_reserves_for_the_gang_and_lets_only_short_jobs_jump(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "schedule",
        str(EX / "sched-cluster.yaml"),
        str(EX / "sched-backfill-jobs.yaml"),
        "--now",
        "3600",
        "--format",
        "json",
    ]
    code, out, _ = run(argv, capsys)
    assert code == 0
    data = json.loads(out)
    jobs = {j["job"]: j for j in data["jobs"]}
    assert data["reserved"]["gang"]["start_s"] == 7200
    assert "reserved 32 h100-sxm5-80gb GPUs" in jobs["gang"]["reason"]
    assert jobs["quick-eval"]["state"] == "admitted"
    for held_back in ("long-sweep", "notebook"):
        assert "reservation for job 'gang' starts in ~60 min" in jobs[held_back]["reason"]


def test_bench_scheduler_busy_and_empty_starts(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "scheduler", "--nodes", "32", "--pending", "200", "--format", "json"]
    code, out, _ = run([*base, "--start", "empty"], capsys)
    assert code == 0
    assert json.loads(out)["running"] == 0
    code, out, _ = run(base, capsys)
    assert code == 0
    busy = json.loads(out)
    assert busy["start"] == "busy"
    assert busy["running"] > 0
    code, _, err = run([*base, "--start", "full"], capsys)
    assert code == 2
    assert "--start must be busy or empty" in err


@pytest.mark.parametrize(
    ("job", "says"),
    [
        (
            "{name: r, team: research, kind: inference, mig_profile: 1g.10gb, state: running,"
            " started_s: 0,"
            " placement: [{node: a100-0, mig_slices: ['a100-0/gpu0/mig:3g.40gb#0']}]}",
            "running job r: the placement holds slice a100-0/gpu0/mig:3g.40gb#0, a 3g.40gb "
            "slice; the job asks a 1g.10gb slice",
        ),
        (
            "{name: r, team: research, kind: interactive, gpu_fraction: 0.3, state: running,"
            " started_s: 0, placement: [{node: l4-spot-0, gpus: [0], fraction: 0.3}]}",
            "running job r: the placement holds 0.3 of l4-spot-0/gpu0; the job asks 0.3 of a "
            "GPU, placed in eighths as 0.375",
        ),
    ],
)
def test_a_running_job_that_holds_other_than_it_asks_is_refused(
    job: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state only checks that a placement exists and is free: a 1g.10gb job on a
    3g.40gb slice, or a 0.3-GPU job on a 0.3 share the scheduler never gives (it places
    eighths), was taken as running and counted as such (`sched.held_as_asked`)."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(f"kind: jobs\njobs:\n  - {job}\n", encoding="utf-8")
    code, out, err = run(["schedule", ARGS[0], str(jobs)], capsys)
    assert code == 2
    assert says in " ".join(err.split())
    assert "Traceback" not in err
    assert not out


def test_whole_gpus_on_an_accelerator_cut_into_mig_slices_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every A100 of the example cluster is cut into MIG slices, and a re-layout never makes
    a cut GPU whole: a job asking 4 whole A100s waited for ever, with no reservation for
    want of estimates that no job holding an A100 lacked."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "kind: jobs\njobs:\n  - {name: w, team: prod, kind: batch, gpus: 4,"
        " accelerators: [a100-sxm4-80gb]}\n",
        encoding="utf-8",
    )
    teams = str(EX / "sched-teams.yaml")
    code, out, _ = run(["schedule", ARGS[0], str(jobs), "--teams", teams, "-f", "json"], capsys)
    assert code == 0
    (w,) = json.loads(out)["jobs"]
    assert w["state"] == "pending"
    assert w["reason"].startswith("cannot run: 1 workers of 4 a100-sxm4-80gb GPUs")
    assert "at most 0 such workers" in w["reason"]
    assert "cut into MIG slices take only slice requests" in w["reason"]
