"""End to end through the API, the reconciler and the emulated executor, on both stores."""

from __future__ import annotations

from typing import Any

from .conftest import Plane


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
    assert "stopping" in kinds
    assert "pending" in kinds


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
        ({"name": "x", "gpus": 1, "env": {"CUDA_VISIBLE_DEVICES": "0"}}, "set by gpufleet"),
        ({"name": "x", "gpus": 1, "priority_class": "vip"}, "priority class"),
        ({"name": "x", "gpus": 1, "project": "nope"}, "project"),
    ]
    for body, needle in cases:
        r = plane.client.post("/api/v1/jobs", json=body, headers=h)
        assert r.status_code == 422, (body, r.text)
        assert needle in r.text, (body, r.text)
    listed = plane.client.get("/api/v1/jobs", headers=h).json()["jobs"]
    assert listed == []  # nothing was stored


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
