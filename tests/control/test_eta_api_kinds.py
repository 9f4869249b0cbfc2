"""A waiting job's expected start as a script reads it through the API: `eta_s` is None
alike for a job that can never start as things are, one behind more than the simulation's
horizon and one not estimated yet, so `eta_kind` tells them apart (as the portal's words
do) and `eta_estimated_at_s` says how old the estimate is."""

from __future__ import annotations

from typing import Any

from .conftest import Plane

H100 = "h100-sxm5-80gb"
WHO = "vision-member"


def submit(plane: Plane, name: str, **kw: Any) -> int:
    body = {"name": name, "gpus": 8, "accelerator": H100, "runtime_estimate_s": 600, **kw}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(WHO))
    assert r.status_code == 201, r.text
    assert r.json()["eta_kind"] == "unknown"  # submitted since the last estimate
    assert r.json()["eta_estimated_at_s"] is None
    return int(r.json()["id"])


def job(plane: Plane, job_id: int) -> dict[str, Any]:
    r = plane.client.get(f"/api/v1/jobs/{job_id}", headers=plane.auth(WHO))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def listed(plane: Plane, job_id: int) -> dict[str, Any]:
    """The job as `GET /jobs` lists it (the list builds bodies its own way: one index)."""
    r = plane.client.get("/api/v1/jobs", params={"state": "pending"}, headers=plane.auth(WHO))
    assert r.status_code == 200, r.text
    (body,) = [j for j in r.json()["jobs"] if j["id"] == job_id]
    return dict(body)


def test_a_gang_no_available_node_can_hold_is_never_not_unknown(lite: Plane) -> None:
    """h100-1 is down: a 2x8 gang cannot start until it is back. The API said `eta_s`
    None, as for a job not estimated yet."""
    r = lite.client.put(
        "/api/v1/admin/nodes/h100-1",
        json={"state": "down", "reason": "maint"},
        headers=lite.auth("admin"),
    )
    assert r.status_code == 200, r.text
    gang = submit(lite, "gang", workers=2)
    lite.cycle()
    assert job(lite, gang)["eta_kind"] == "unknown"  # positioned, not yet estimated
    lite.reconciler.estimate_etas()
    estimated = lite.clock()
    for body in (job(lite, gang), listed(lite, gang)):
        assert body["eta_kind"] == "never"
        assert body["eta_s"] is None  # as before: backward compatible
        assert body["eta_estimated_at_s"] == estimated


def test_a_job_behind_more_than_the_horizon_is_beyond_not_never(lite: Plane) -> None:
    submit(lite, "long", workers=2, runtime_estimate_s=40 * 86_400)
    lite.cycle()
    wait = submit(lite, "wait")
    lite.cycle(10)
    lite.reconciler.estimate_etas()
    for body in (job(lite, wait), listed(lite, wait)):
        assert body["eta_kind"] == "beyond"
        assert body["eta_s"] is None
        assert body["eta_estimated_at_s"] == lite.clock()


def test_an_estimate_says_when_it_was_made(lite: Plane) -> None:
    """Estimated, then 45 s and a cycle pass: the time is the estimate's, not the request's
    nor the cycle's (positions move every cycle, estimates only at a refresh)."""
    busy = submit(lite, "busy", workers=2, runtime_estimate_s=3600)
    lite.cycle()
    wait = submit(lite, "wait")
    lite.cycle(10)
    lite.reconciler.estimate_etas()
    estimated = lite.clock()
    lite.cycle(45)
    body = job(lite, wait)
    assert body["eta_kind"] == "at"
    assert body["eta_s"] is not None
    assert body["eta_s"] > lite.clock()
    assert body["eta_estimated_at_s"] == estimated == lite.clock() - 45
    running = job(lite, busy)  # not waiting: no ETA of any kind
    assert running["state"] in ("starting", "running")
    assert running["eta_kind"] is None
    assert running["eta_estimated_at_s"] is None


def test_the_schema_documents_the_kinds(lite: Plane) -> None:
    spec = lite.client.get("/openapi.json").json()["components"]["schemas"]["JobOut"]
    kind = spec["properties"]["eta_kind"]
    (enum,) = [k["enum"] for k in kind["anyOf"] if "enum" in k]
    assert sorted(enum) == ["at", "beyond", "never", "unknown"]
    for word in ("never", "beyond", "unknown", "30 days"):
        assert word in kind["description"]
    assert "eta_estimated_at_s" in spec["properties"]
    assert "eta_kind" in spec["properties"]["eta_s"]["description"]
