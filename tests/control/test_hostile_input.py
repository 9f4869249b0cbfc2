"""Hostile but ordinary input: every value the store or the core cannot hold answers 4xx,
and no member request stops the scheduler for other teams (issue 23).

Each test runs on SQLite and PostgreSQL (the `engine` fixture): the store's own limits
(32-bit columns, NUL bytes in text) differ between them, and both must answer alike."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from sqlalchemy import update

from gpufleet.control.models import Job

from .conftest import Plane

BIG_IDS = (2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1)
BAD_TIMES = (-1, -1e-9, "NaN", "Infinity", "-Infinity", 1e308, -1e308)


def _submit(plane: Plane, who: str, gpus: int = 8, **extra: object) -> int:
    body = {"name": "j", "gpus": gpus, "accelerator": "h100-sxm5-80gb", **extra}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(who))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _raw_json(plane: Plane, method: str, url: str, body: str, who: str) -> int:
    headers = {**plane.auth(who), "Content-Type": "application/json"}
    return plane.client.request(method, url, content=body, headers=headers).status_code


@pytest.mark.parametrize("at", BAD_TIMES, ids=str)
def test_checkpoint_times_out_of_range_answer_422(plane: Plane, at: object) -> None:
    job = _submit(plane, "vision-member")
    plane.cycle()
    body = f'{{"at_s": {at}}}'
    status = _raw_json(plane, "POST", f"/api/v1/jobs/{job}/checkpoints", body, "vision-member")
    assert status == 422
    # the scheduler keeps admitting: nlp's job starts in the next cycle
    other = _submit(plane, "nlp-member")
    plane.cycle()
    got = plane.client.get(f"/api/v1/jobs/{other}", headers=plane.auth("nlp-member")).json()
    assert got["state"] in ("starting", "running"), got


def test_a_row_that_cannot_become_a_spec_is_quarantined_not_fatal(plane: Plane) -> None:
    bad = _submit(plane, "vision-member")
    plane.cycle()
    with plane.sessions.begin() as s:  # as an older server or a hand edit could leave it
        s.execute(
            update(Job).where(Job.id == bad).values(last_checkpoint_s=-1.0, version=Job.version + 1)
        )
    other = _submit(plane, "nlp-member")
    plane.cycle()
    plane.cycle()
    got = plane.client.get(f"/api/v1/jobs/{other}", headers=plane.auth("nlp-member")).json()
    assert got["state"] in ("starting", "running"), got
    seen = plane.client.get(f"/api/v1/jobs/{bad}", headers=plane.auth("vision-member")).json()
    kinds = [e["kind"] for e in seen["events"]]
    assert kinds.count("quarantined") == 1, kinds
    assert "last_checkpoint_s" in seen["reason"]


@pytest.mark.parametrize("job_id", BIG_IDS)
def test_ids_beyond_any_row_answer_404(plane: Plane, job_id: int) -> None:
    member, admin = plane.auth("vision-member"), plane.auth("admin")
    c = plane.client
    answers = {
        "get": c.get(f"/api/v1/jobs/{job_id}", headers=member).status_code,
        "cancel": c.post(f"/api/v1/jobs/{job_id}/cancel", headers=member).status_code,
        "patch": c.patch(
            f"/api/v1/jobs/{job_id}", json={"priority_class": "standard"}, headers=admin
        ).status_code,
        "logs": c.get(f"/api/v1/jobs/{job_id}/logs", headers=member).status_code,
        "checkpoint": c.post(
            f"/api/v1/jobs/{job_id}/checkpoints", json={}, headers=member
        ).status_code,
        "move": c.post(
            f"/api/v1/jobs/{job_id}/move", json={"to": "top"}, headers=admin
        ).status_code,
        "token": c.delete(f"/api/v1/admin/tokens/{job_id}", headers=admin).status_code,
    }
    assert set(answers.values()) == {404}, answers
    after = c.get("/api/v1/jobs", params={"after_id": job_id}, headers=member)
    assert after.status_code == 200, after.text
    # the connection is still good for the next request
    assert c.get("/api/v1/jobs", headers=member).status_code == 200


def test_move_before_a_huge_id_is_404(plane: Plane) -> None:
    job = _submit(plane, "vision-member")
    r = plane.client.post(
        f"/api/v1/jobs/{job}/move", json={"before": 2**40}, headers=plane.auth("vision-lead")
    )
    assert r.status_code == 404, r.text


@pytest.mark.parametrize("param", ["team", "project", "state"])
def test_nul_bytes_in_filters_answer_422(plane: Plane, param: str) -> None:
    r = plane.client.get("/api/v1/jobs", params={param: "vi\x00sion"}, headers=plane.auth("admin"))
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("expires", [1e308, "NaN", "Infinity", -1, 0], ids=str)
def test_token_expiries_out_of_range_answer_422(plane: Plane, expires: object) -> None:
    body = f'{{"user": "u", "role": "member", "team": "vision", "expires_s": {expires}}}'
    assert _raw_json(plane, "POST", "/api/v1/admin/tokens", body, "admin") == 422
    assert plane.client.get("/api/v1/admin/tokens", headers=plane.auth("admin")).status_code == 200


@pytest.mark.parametrize("rate", [2147.49, 1e6])
def test_rates_up_to_the_schema_bound_are_stored_exactly(plane: Plane, rate: float) -> None:
    admin = plane.auth("admin")
    r = plane.client.put(
        "/api/v1/admin/rates/h100-sxm5-80gb", params={"usd_per_gpu_h": rate}, headers=admin
    )
    assert r.status_code < 300, r.text
    rates = plane.client.get("/api/v1/admin/rates", headers=admin).json()["current"]
    assert math.isclose(rates["h100-sxm5-80gb"], rate)


@pytest.mark.parametrize("rate", ["NaN", "Infinity", "1e7", "-1"])
def test_rates_out_of_range_answer_422(plane: Plane, rate: str) -> None:
    r = plane.client.put(
        "/api/v1/admin/rates/h100-sxm5-80gb",
        params={"usd_per_gpu_h": rate},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 422, r.text


def test_bodies_over_the_cap_answer_413_before_the_token_is_read(lite: Plane) -> None:
    big = b'{"name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    for headers in ({"Authorization": "Bearer nonsense"}, lite.auth("vision-member")):
        r = lite.client.post(
            "/api/v1/jobs", content=big, headers={**headers, "Content-Type": "application/json"}
        )
        assert r.status_code == 413, r.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(40):
            yield b" " * 65536

    r = lite.client.post(
        "/api/v1/jobs",
        content=chunks(),
        headers={**lite.auth("vision-member"), "Content-Type": "application/json"},
    )
    assert r.status_code == 413, r.text
    assert lite.client.get("/api/v1/jobs", headers=lite.auth("vision-member")).status_code == 200


def test_failed_authentications_are_limited_per_address_without_store_lookups(
    lite: Plane,
) -> None:
    """30 bad tokens at once, then 429 before any lookup; a cached good token still works,
    and the portal's login page counts its failures in the same bucket."""
    limiter = lite.client.app.state.ctx.auth_failures
    limiter.clock = lite.clock
    bad = {"Authorization": "Bearer gpf_not-a-token"}
    answers = [lite.client.get("/api/v1/jobs", headers=bad).status_code for _ in range(30)]
    assert set(answers) == {401}
    refused = lite.client.get("/api/v1/jobs", headers=bad)
    assert refused.status_code == 429, refused.text
    assert "failed authentications" in refused.json()["detail"]
    member = lite.auth("vision-member")
    assert lite.client.get("/api/v1/jobs", headers=member).status_code == 429  # not looked up
    lite.clock.advance(1.0)  # one lookup's worth: a success spends nothing
    assert lite.client.get("/api/v1/jobs", headers=member).status_code == 200
    for _ in range(3):  # cached now: never stopped by the address's failures
        assert lite.client.get("/api/v1/jobs", headers=member).status_code == 200
    assert lite.client.get("/api/v1/jobs", headers=bad).status_code == 401
    assert lite.client.get("/api/v1/jobs", headers=bad).status_code == 429
