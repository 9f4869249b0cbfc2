"""End to end through the API, the reconciler and the emulated executor, on both stores."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from gpufleet.cluster import Cluster

from .conftest import Plane, build_plane


def submit(plane: Plane, who: str, **body: Any) -> dict[str, Any]:
    body.setdefault("command", ["train.py"])
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(who))
    assert r.status_code == 201, r.text
    return r.json()


def job(plane: Plane, who: str, job_id: int) -> dict[str, Any]:
    r = plane.client.get(f"/api/v1/jobs/{job_id}", headers=plane.auth(who))
    assert r.status_code == 200, r.text
    return r.json()


def test_a_job_is_queued_placed_started_and_finished(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="resnet", gpus=8, runtime_estimate_s=600)
    assert j["state"] == "pending"
    plane.cycle()
    assert job(plane, "vision-member", j["id"])["state"] == "starting"
    plane.cycle(1)
    got = job(plane, "vision-member", j["id"])
    assert got["state"] == "running"
    assert got["placement"][0]["node"].startswith("h100-")
    assert len(got["placement"][0]["gpus"]) == 8
    plane.cycle(600)
    got = job(plane, "vision-member", j["id"])
    assert got["state"] == "succeeded"
    assert [e["kind"] for e in got["events"]] == ["submitted", "starting", "running", "succeeded"]
    assert abs(got["gpu_hours"] - 8 * 600 / 3600) < 8 * 2 / 3600


def test_queue_position_and_reason_for_waiting_jobs(plane: Plane) -> None:
    ids = [
        submit(plane, "vision-member", name=f"big{i}", gpus=8, workers=2, runtime_estimate_s=3600)[
            "id"
        ]
        for i in range(3)
    ]
    plane.cycle()
    first, second, third = (job(plane, "vision-member", i) for i in ids)
    assert first["state"] == "starting"
    assert second["state"] == "pending"
    assert third["state"] == "pending"
    assert second["queue_position"] == {"team": 1, "cluster": 1}
    assert third["queue_position"] == {"team": 2, "cluster": 2}
    assert second["reason"]


def test_another_team_cannot_see_or_touch_a_job(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="secret", gpus=1)
    for path in (f"/api/v1/jobs/{j['id']}", f"/api/v1/jobs/{j['id']}/logs"):
        assert plane.client.get(path, headers=plane.auth("nlp-member")).status_code == 404
    r = plane.client.post(f"/api/v1/jobs/{j['id']}/cancel", headers=plane.auth("nlp-lead"))
    assert r.status_code == 404
    r = plane.client.patch(
        f"/api/v1/jobs/{j['id']}",
        json={"priority_class": "production"},
        headers=plane.auth("nlp-lead"),
    )
    assert r.status_code == 404
    listed = plane.client.get("/api/v1/jobs", headers=plane.auth("nlp-member")).json()["jobs"]
    assert listed == []


def test_roles(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="a", gpus=1)
    r = plane.client.post(
        "/api/v1/jobs", json={"name": "v", "gpus": 1}, headers=plane.auth("vision-viewer")
    )
    assert r.status_code == 403
    r = plane.client.patch(
        f"/api/v1/jobs/{j['id']}",
        json={"priority_class": "production"},
        headers=plane.auth("vision-member"),
    )
    assert r.status_code == 403
    r = plane.client.patch(
        f"/api/v1/jobs/{j['id']}",
        json={"priority_class": "production"},
        headers=plane.auth("vision-lead"),
    )
    assert r.status_code == 200
    assert r.json()["priority_class"] == "production"
    r = plane.client.put(
        "/api/v1/admin/teams/vision/quotas/h100-sxm5-80gb",
        json={"guaranteed_gpus": 16},
        headers=plane.auth("vision-lead"),
    )
    assert r.status_code == 403
    audit = plane.client.get("/api/v1/admin/audit", headers=plane.auth("admin")).json()
    assert any(a["action"] == "job.priority" and a["actor"] == "vision-lead" for a in audit)


def test_no_token_bad_token_revoked_token(plane: Plane) -> None:
    assert plane.client.get("/api/v1/jobs").status_code == 401
    bad = {"Authorization": "Bearer gpf_nope"}
    assert plane.client.get("/api/v1/jobs", headers=bad).status_code == 401
    tokens = plane.client.get("/api/v1/admin/tokens", headers=plane.auth("admin")).json()
    member = next(t for t in tokens if t["user"] == "vision-member")
    assert "token" not in member
    r = plane.client.delete(f"/api/v1/admin/tokens/{member['id']}", headers=plane.auth("admin"))
    assert r.status_code == 204
    assert plane.client.get("/api/v1/jobs", headers=plane.auth("vision-member")).status_code == 401
    assert plane.client.get("/healthz").status_code == 200


def test_preemption_signals_waits_grace_and_requeues(plane: Plane) -> None:
    low = [
        submit(
            plane,
            "nlp-member",
            name=f"low{i}",
            gpus=8,
            priority_class="opportunistic",
            checkpoint_interval_s=60,
            runtime_estimate_s=7200,
        )["id"]
        for i in range(2)
    ]
    plane.cycle()
    plane.cycle(1)
    assert all(job(plane, "nlp-member", i)["state"] == "running" for i in low)
    plane.clock.advance(1800)
    high = submit(
        plane,
        "vision-member",
        name="urgent",
        gpus=8,
        priority_class="production",
        runtime_estimate_s=600,
    )["id"]
    plane.cycle()
    states = sorted(job(plane, "nlp-member", i)["state"] for i in low)
    assert states == ["running", "stopping"]
    assert job(plane, "vision-member", high)["state"] == "admitted"
    plane.cycle(31)  # grace over: killed
    plane.cycle(1)  # exit observed: requeued, GPUs free, preemptor allocated
    victim = next(i for i in low if job(plane, "nlp-member", i)["state"] != "running")
    v = job(plane, "nlp-member", victim)
    assert v["state"] in ("pending", "starting"), v
    assert v["attempt"] == 1 or v["state"] == "starting"
    assert job(plane, "vision-member", high)["state"] in ("starting", "running")
    kinds = [e["kind"] for e in v["events"]]
    stop = kinds.index("stopping")
    assert "checkpointed" in kinds[stop:]  # the checkpoint signal came before the stop
    assert "pending" in kinds[stop:]
    requeued = next(e for e in v["events"] if e["kind"] == "pending")
    assert "since its last checkpoint lost" in requeued["message"]


def test_cancel_running_job(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="c", gpus=2, runtime_estimate_s=3600)["id"]
    plane.cycle()
    plane.cycle(1)
    r = plane.client.post(f"/api/v1/jobs/{j}/cancel", headers=plane.auth("vision-member"))
    assert r.json()["state"] == "stopping"
    plane.cycle(31)
    plane.cycle(1)
    assert job(plane, "vision-member", j)["state"] == "cancelled"


def test_validation_errors_are_clear(plane: Plane) -> None:
    h = plane.auth("vision-member")
    cases = [
        ({"name": "x", "gpus": 8, "workers": 3}, "24 GPUs"),
        ({"name": "x", "gpus": 9}, "largest node has 8"),
        ({"name": "x"}, "exactly one of"),
        ({"name": "x", "gpus": 1, "accelerator": "b200"}, "accelerator"),
        ({"name": "x", "mig_profile": "9g.99gb"}, "MIG profile"),
        ({"name": "bad name!", "gpus": 1}, "letters"),
        # the variable's name as written, not "cUDA_VISIBLE_DEVICES"
        ({"name": "x", "gpus": 1, "env": {"CUDA_VISIBLE_DEVICES": "0"}}, "CUDA_VISIBLE_DEVICES is"),
        # every a100 GPU is cut into MIG slices: whole ones never free up (it waited for ever)
        ({"name": "x", "gpus": 1, "accelerator": "a100-sxm4-80gb"}, "cut into MIG slices"),
        ({"name": "x", "gpus": 1, "priority_class": "vip"}, "priority class"),
        ({"name": "x", "gpus": 1, "project": "nope"}, "project"),
    ]
    for body, needle in cases:
        r = plane.client.post("/api/v1/jobs", json=body, headers=h)
        assert r.status_code == 422, (body, r.text)
        assert needle in r.text, (body, r.text)
    # not a number at all: it was refused as "less than or equal to 31536000"
    raw = '{"name": "x", "gpus": 1, "runtime_estimate_s": NaN}'
    r = plane.client.post(
        "/api/v1/jobs", content=raw, headers={**h, "Content-Type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["detail"] == "field runtime_estimate_s: input should be a finite number"
    listed = plane.client.get("/api/v1/jobs", headers=h).json()["jobs"]
    assert listed == []  # nothing was stored


def test_a_quota_below_its_guarantee_is_one_sentence(plane: Plane) -> None:
    r = plane.client.put(
        "/api/v1/admin/teams/vision/quotas/h100-sxm5-80gb",
        json={"guaranteed_gpus": 4, "limit_gpus": 2},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 422
    assert r.json()["detail"] == "limit_gpus (2) is below guaranteed_gpus (4)"  # no "invalid spec"


def test_mig_job_gets_a_slice(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="serve", mig_profile="3g.40gb", kind="inference")["id"]
    plane.cycle()
    got = job(plane, "vision-member", j)
    assert got["state"] == "starting", got
    assert "mig:3g.40gb" in got["placement"][0]["mig_slices"][0]


def test_chargeback_matches_ledger(plane: Plane) -> None:
    submit(plane, "vision-member", name="a", gpus=4, runtime_estimate_s=3600, project="p1")
    submit(plane, "nlp-member", name="b", gpus=2, runtime_estimate_s=1800, project="p2")
    plane.cycle()
    plane.cycle(1)
    plane.cycle(3600)
    plane.cycle(1)
    r = plane.client.get(
        "/api/v1/reports/chargeback",
        params={"group_by": "team", "format": "csv"},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 200
    assert "basis" in r.text.lower()
    js = plane.client.get("/api/v1/reports/chargeback", headers=plane.auth("admin")).json()
    hours = {row["team"]: row["gpu_hours_allocated"] for row in js["rows"]}
    assert abs(float(hours["vision"]) - 4.0) < 0.01
    assert abs(float(hours["nlp"]) - 1.0) < 0.01
    mine = plane.client.get("/api/v1/reports/chargeback", headers=plane.auth("nlp-member")).json()
    assert {row["team"] for row in mine["rows"]} == {"nlp"}


def test_metrics_and_readiness(plane: Plane) -> None:
    submit(plane, "vision-member", name="m", gpus=1)
    plane.cycle()
    text = plane.client.get("/metrics").text
    assert 'gpufleet_jobs{state="starting",team="vision"} 1.0' in text
    assert "gpufleet_allocated_gpus" in text
    r = plane.client.get("/readyz")
    assert r.status_code == 200
    assert r.json()["leader"] is True


def test_node_down_requeues_its_jobs_elsewhere(plane: Plane) -> None:
    j = submit(plane, "vision-member", name="n", gpus=8, runtime_estimate_s=7200)["id"]
    plane.cycle()
    plane.cycle(1)
    first = job(plane, "vision-member", j)["placement"][0]["node"]
    r = plane.client.put(
        f"/api/v1/admin/nodes/{first}",
        json={"state": "down", "reason": "XID 79"},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 200
    plane.cycle(1)  # stopped at once (no grace: the node is gone)
    plane.cycle(1)  # the kill is observed: requeued and placed on the other node
    got = job(plane, "vision-member", j)
    assert got["state"] in ("starting", "running")
    assert got["attempt"] == 2
    assert got["placement"][0]["node"] != first
    cluster = plane.client.get("/api/v1/cluster", headers=plane.auth("vision-member")).json()
    assert next(n for n in cluster["nodes"] if n["name"] == first)["state"] == "down"


def test_teams_queues_and_cluster_views(plane: Plane) -> None:
    for i in range(3):
        submit(plane, "vision-member", name=f"q{i}", gpus=8, workers=2, runtime_estimate_s=600)
    plane.cycle()
    submit(plane, "nlp-member", name="small", gpus=4, runtime_estimate_s=600)
    plane.cycle()
    teams = plane.client.get("/api/v1/teams", headers=plane.auth("admin")).json()
    vision = next(t for t in teams if t["name"] == "vision")
    h100 = next(q for q in vision["quotas"] if q["flavor"] == "h100-sxm5-80gb")
    assert h100["used_gpus"] == 16
    assert h100["borrowed_gpus"] == 8
    nlp_h100 = next(
        q
        for t in teams
        if t["name"] == "nlp"
        for q in t["quotas"]
        if q["flavor"] == "h100-sxm5-80gb"
    )
    assert nlp_h100["used_gpus"] == 0  # the cluster is full: its job waits
    assert nlp_h100["lent_gpus"] == 8  # its idle guarantee is what vision borrows
    mine = plane.client.get("/api/v1/teams", headers=plane.auth("nlp-member")).json()
    assert [t["name"] for t in mine] == ["nlp"]
    queues = plane.client.get("/api/v1/queues", headers=plane.auth("vision-member")).json()
    assert queues[0]["team"] == "vision"
    assert queues[0]["pending"] == 2
    assert len(queues[0]["first"]) == 2
    cluster = plane.client.get("/api/v1/cluster", headers=plane.auth("admin")).json()
    assert cluster["gpus"]["h100-sxm5-80gb"] == 16
    assert 0 < cluster["allocation_ratio"] <= 1
    h100 = [n for n in cluster["nodes"] if n["accelerator"] == "h100-sxm5-80gb"]
    assert all(d["allocated_milli"] == 1000 for n in h100 for d in n["devices"])
    assert h100[0]["devices"][0]["uuid"] == f"{h100[0]['name']}/gpu0"


def test_rate_limit_and_input_limits(lite: Plane) -> None:
    from gpufleet.api.context import RateLimiter

    lite.client.app.state.ctx.limiter = RateLimiter(rate_per_s=0.001, burst=3)
    h = lite.auth("vision-member")
    codes = [lite.client.get("/api/v1/jobs", headers=h).status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200]
    assert codes[3:] == [429, 429]
    lite.client.app.state.ctx.limiter = RateLimiter(rate_per_s=1e6, burst=1e6)
    huge = {"name": "h", "gpus": 1, "command": ["x" * 70_000]}
    assert lite.client.post("/api/v1/jobs", json=huge, headers=h).status_code == 422
    many = {"name": "h", "gpus": 1, "env": {f"V{i}": "1" for i in range(300)}}
    assert lite.client.post("/api/v1/jobs", json=many, headers=h).status_code == 422


def test_eta_is_an_estimate_from_a_forward_simulation(plane: Plane) -> None:
    ids = [
        submit(plane, "vision-member", name=f"e{i}", gpus=8, workers=2, runtime_estimate_s=3600)[
            "id"
        ]
        for i in range(3)
    ]
    plane.cycle()
    assert plane.reconciler.estimate_etas() == 2
    now = plane.clock()
    second = job(plane, "vision-member", ids[1])
    third = job(plane, "vision-member", ids[2])
    assert second["eta_is_estimate"] is True
    # the first runs an hour on all 16 H100s: the second starts then, the third an hour later
    assert abs(second["eta_s"] - (now + 3600)) <= 60
    assert abs(third["eta_s"] - (now + 7200)) <= 120


def test_budget_alerts_and_admission_gate(lite: Plane) -> None:
    h = lite.auth("admin")
    r = lite.client.post(
        "/api/v1/admin/teams",
        json={"name": "ops", "monthly_budget_gpu_h": 1.0, "budget_gate": True},
        headers=h,
    )
    assert r.status_code == 201
    lite.client.put(
        "/api/v1/admin/teams/ops/quotas/h100-sxm5-80gb", json={"guaranteed_gpus": 8}, headers=h
    )
    body = {"name": "b", "team": "ops", "gpus": 1, "runtime_estimate_s": 3 * 3600}
    assert lite.client.post("/api/v1/jobs", json=body, headers=h).status_code == 201
    lite.cycle()
    lite.cycle(1)
    lite.cycle(3000)  # 0.83 GPU-hours held: past 80%
    ops = next(t for t in lite.client.get("/api/v1/teams", headers=h).json() if t["name"] == "ops")
    assert len(ops["budget_alerts"]) == 1
    assert "80%" in ops["budget_alerts"][0]
    lite.cycle(1000)  # past 100%: the gate refuses new jobs
    r = lite.client.post("/api/v1/jobs", json={**body, "name": "c"}, headers=h)
    assert r.status_code == 403
    assert "budget" in r.json()["detail"]


def test_crashed_job_restarts_with_backoff_then_fails(lite: Plane) -> None:
    body = {
        "name": "flaky",
        "gpus": 1,
        "runtime_estimate_s": 100,
        "env": {"GPUFLEET_EMULATE_EXIT_CODE": "3"},
    }
    j = submit(lite, "vision-member", **body)["id"]
    waits = []
    for _ in range(4):
        lite.cycle(1)  # placed
        lite.cycle(1)  # running
        lite.cycle(100)  # exits 3
        got = job(lite, "vision-member", j)
        if got["state"] == "failed":
            break
        assert got["state"] == "pending"
        assert "restart backoff" in got["reason"]
        waits.append(got["reason"])
        lite.cycle(600)  # the backoff passes
    got = job(lite, "vision-member", j)
    assert got["state"] == "failed"
    assert got["exit_code"] == 3
    assert len(waits) == 3  # three restarts, then it fails
    assert got["lost_gpu_hours"] > 0  # never checkpointed: every attempt was lost work


def test_local_executor_runs_the_command_on_its_gpus(
    sqlite_engine: Engine, cluster: Cluster, tmp_path: Path
) -> None:
    from gpufleet.control.executors.local import LocalExecutor

    plane = build_plane(sqlite_engine, cluster, executor=LocalExecutor(tmp_path / "runs"))
    code = (
        "import os, pathlib; d = pathlib.Path(os.environ['GPUFLEET_RUN_DIR']); "
        "(d / ('env-' + os.environ['RANK'])).write_text(os.environ['CUDA_VISIBLE_DEVICES'] "
        "+ ' ' + os.environ['WORLD_SIZE'] + ' ' + os.environ['GPUFLEET_CHECKPOINT_DIR'])"
    )
    j = submit(
        plane, "vision-member", name="real", gpus=2, workers=2, command=["python3", "-c", code]
    )
    plane.cycle()
    deadline = time.monotonic() + 20
    while job(plane, "vision-member", j["id"])["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
        plane.cycle(0.1)
    got = job(plane, "vision-member", j["id"])
    assert got["state"] == "succeeded", got
    run = tmp_path / "runs" / f"job-{j['id']}" / "attempt-1"
    for rank, p in enumerate(got["placement"]):
        devices, world, ckpt = (run / f"env-{rank}").read_text().split()
        assert devices == ",".join(map(str, p["gpus"]))
        assert world == "2"
        assert ckpt.endswith(f"job-{j['id']}/checkpoints")
    logs = plane.client.get(f"/api/v1/jobs/{j['id']}/logs", headers=plane.auth("vision-member"))
    assert logs.status_code == 200


def test_local_executor_stages_data_before_start(
    sqlite_engine: Engine, cluster: Cluster, tmp_path: Path
) -> None:
    from gpufleet.control.executors.local import LocalExecutor

    source = tmp_path / "dataset.txt"
    source.write_text("tokens")
    plane = build_plane(sqlite_engine, cluster, executor=LocalExecutor(tmp_path / "runs"))
    code = "import pathlib; assert pathlib.Path('in/data.txt').read_text() == 'tokens'"
    j = submit(
        plane,
        "vision-member",
        name="staged",
        gpus=1,
        command=["python3", "-c", f"import os; os.chdir(os.environ['GPUFLEET_RUN_DIR']); {code}"],
        data=[{"source": str(source), "target": "in/data.txt"}],
    )
    plane.cycle()
    deadline = time.monotonic() + 20
    while job(plane, "vision-member", j["id"])["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
        plane.cycle(0.1)
    got = job(plane, "vision-member", j["id"])
    assert got["state"] == "succeeded", got
    staged = [e for e in got["events"] if e["kind"] == "staged"]
    assert len(staged) == 1
    assert "data staged in" in staged[0]["message"]


def test_an_acknowledged_checkpoint_steers_victim_choice(plane: Plane) -> None:
    a, b = (
        submit(
            plane,
            "nlp-member",
            name=n,
            gpus=8,
            priority_class="opportunistic",
            runtime_estimate_s=7 * 3600,
        )["id"]
        for n in ("a", "b")
    )
    plane.cycle()
    plane.cycle(1)
    plane.clock.advance(2 * 3600)
    r = plane.client.post(
        f"/api/v1/jobs/{b}/checkpoints", json={}, headers=plane.auth("nlp-member")
    )
    assert r.status_code == 200
    submit(plane, "vision-member", name="urgent", gpus=8, priority_class="production")
    plane.cycle(10)
    states = {i: job(plane, "nlp-member", i)["state"] for i in (a, b)}
    assert states == {a: "running", b: "stopping"}  # b loses 10 s of work, a two hours
    reason = next(e for e in job(plane, "nlp-member", b)["events"] if e["kind"] == "stopping")
    assert "grace period 30 s" in reason["message"]  # the service's grace, not the core's


def test_a_new_leader_adopts_emulated_jobs(plane: Plane) -> None:
    from gpufleet.control.executors.emulated import EmulatedExecutor
    from gpufleet.control.reconciler import Reconciler, ReconcilerConfig

    j = submit(plane, "vision-member", name="long", gpus=8, runtime_estimate_s=600)["id"]
    plane.cycle()
    plane.cycle(1)
    assert job(plane, "vision-member", j)["state"] == "running"
    # the leader dies; a fresh server (fresh executor, no memory) takes over after its lease
    plane.executor = EmulatedExecutor(clock=plane.clock)
    plane.reconciler = Reconciler(
        plane.sessions,
        plane.reconciler.cluster,
        plane.executor,
        ReconcilerConfig(holder="other", grace_s=30),
        clock=plane.clock,
    )
    plane.cycle(10)
    got = job(plane, "vision-member", j)
    assert got["state"] == "running"
    assert got["attempt"] == 1  # adopted, not restarted
    plane.cycle(600)
    assert job(plane, "vision-member", j)["state"] == "succeeded"


def test_team_update_raises_a_budget(lite: Plane) -> None:
    h = lite.auth("admin")
    r = lite.client.patch(
        "/api/v1/admin/teams/vision",
        json={"monthly_budget_gpu_h": 0, "budget_gate": True},
        headers=h,
    )
    assert r.status_code == 200
    body = {"name": "x", "gpus": 1}
    assert (
        lite.client.post("/api/v1/jobs", json=body, headers=lite.auth("vision-member")).status_code
        == 403
    )
    r = lite.client.patch("/api/v1/admin/teams/vision", json={"clear_budget": True}, headers=h)
    assert r.json()["monthly_budget_gpu_h"] is None
    assert (
        lite.client.post("/api/v1/jobs", json=body, headers=lite.auth("vision-member")).status_code
        == 201
    )
    r = lite.client.put("/api/v1/admin/rates/H100", params={"usd_per_gpu_h": 2.5}, headers=h)
    assert r.status_code == 200
    assert lite.client.get("/api/v1/admin/rates", headers=h).json()["current"] == {
        "h100-sxm5-80gb": 2.5
    }
    audit = {a["action"] for a in lite.client.get("/api/v1/admin/audit", headers=h).json()}
    assert {"team.update", "rate.set"} <= audit


def test_members_reports_carry_no_cluster_idle(lite: Plane) -> None:
    # the rate first: a rate prices the GPU time used while it is in force, not before
    lite.client.put(
        "/api/v1/admin/rates/h100-sxm5-80gb",
        params={"usd_per_gpu_h": 2.0},
        headers=lite.auth("admin"),
    )
    submit(lite, "vision-member", name="a", gpus=1, runtime_estimate_s=3600)
    lite.cycle()
    lite.cycle(1)
    lite.cycle(3600)
    mine = lite.client.get(
        "/api/v1/reports/chargeback", params={"idle": "uniform"}, headers=lite.auth("vision-member")
    ).json()
    assert mine["idle"] is None
    assert float(mine["totals"]["total_cost_usd"]) == 2.0


def test_readiness_says_what_is_wrong_without_the_store_s_address(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/readyz answers anyone: the store's address, user and driver text stay in the log."""
    import gpufleet.api.app as app_module
    from gpufleet.control.db import SchemaMismatchError

    def unreachable(_: object) -> None:
        raise OperationalError("SELECT 1", {}, Exception('host "db.internal" user "gpufleet"'))

    monkeypatch.setattr(app_module, "require_current", unreachable)
    r = plane.client.get("/readyz")
    assert r.status_code == 503
    assert r.json() == {
        "status": "unavailable",
        "detail": "the store does not answer (the server's log says why)",
    }

    def behind(_: object) -> None:
        raise SchemaMismatchError("postgresql://db.internal/x is at 0004", "0004", "0005")

    monkeypatch.setattr(app_module, "require_current", behind)
    r = plane.client.get("/readyz")
    assert r.status_code == 503
    assert "db.internal" not in r.text
    assert r.json()["detail"] == (
        "the store is at schema 0004, this version needs 0005: run `gpufleet db upgrade`"
    )


def test_readiness_checks_the_schema_once_a_minute(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe every few seconds must not re-read Alembic's scripts each time (~0.7 s)."""
    import gpufleet.api.app as app_module

    calls: list[object] = []
    real = app_module.require_current
    monkeypatch.setattr(app_module, "require_current", lambda e: (calls.append(e), real(e)))
    assert [plane.client.get("/readyz").status_code for _ in range(3)] == [200] * 3
    assert len(calls) == 1  # the first probe checks; the next two within the minute do not


def test_a_job_submitted_while_a_cycle_runs_has_its_events_in_order(plane: Plane) -> None:
    """The cycle reads its clock when it begins; a job submitted after that and seen by the
    same cycle is admitted no earlier than it was submitted (issue 24)."""
    plane.clock.advance(5)
    j = submit(plane, "vision-member", name="late", gpus=1)["id"]
    plane.clock.advance(-5)  # the cycle began 5 s before the submit
    plane.reconciler.cycle()
    plane.cycle(1)
    events = job(plane, "vision-member", j)["events"]
    times = [e["at_s"] for e in events]
    assert [e["kind"] for e in events][:2] == ["submitted", "starting"]
    assert times == sorted(times), events


def test_idle_capacity_counts_from_when_the_nodes_joined(lite: Plane) -> None:
    """Issue 30: a cluster and store 7 minutes old were charged idle from the 1st of the
    month ($26,470 idle against $31 billed). Idle is capacity since each node joined, minus
    what was billed, and never capacity that did not exist yet."""
    h = lite.auth("admin")
    lite.client.put("/api/v1/admin/rates/h100-sxm5-80gb", params={"usd_per_gpu_h": 2.0}, headers=h)
    lite.cycle(420)  # seven minutes after the nodes were recorded
    report = lite.client.get("/api/v1/reports/chargeback", headers=h).json()
    # 24 GPUs (16 H100, 8 A100) have existed for 420 s of this month, and nothing ran
    assert report["capacity_gpu_hours"] == pytest.approx(24 * 420 / 3600, abs=0.01)
    assert report["idle_gpu_hours"] == pytest.approx(24 * 420 / 3600, abs=0.01)
    # only the H100 has a rate: 16 GPUs × 420 s × $2/GPU-h
    assert float(report["idle"]["idle_cost_usd"]) == pytest.approx(2.0 * 16 * 420 / 3600, abs=0.01)
