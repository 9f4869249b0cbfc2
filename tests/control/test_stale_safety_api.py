"""The safety net under `jobs.checked_writes`: a write over a job changed since the request
read it (StaleDataError, `Job.version`) that escapes a route nobody wrapped is a 409 that
tells the caller to reload and retry, in the API's error shape ({"detail": sentence}) and
as a readable portal page; never a 500 with a traceback. The wrapped path
(JobChangedError) answers in the same shape as every other API error.

Each test makes the race real: the mutator reads the job, another session commits a change
to it, and the mutator's write (made at the version it read) matches no row."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufleet.control import admin, jobs, lifecycle
from gpufleet.control.auth import Principal
from gpufleet.control.models import Job, JobEvent

from .conftest import Plane

H100 = "h100-sxm5-80gb"
UNWRAPPED = "a job changed while the request ran; reload and retry"
CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def submit(plane: Plane) -> int:
    body = {"name": "j", "gpus": 4, "accelerator": H100}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth("vision-member"))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def reprioritise(plane: Plane, job_id: int) -> None:
    """Another writer (an admin's priority change), committed."""
    with plane.sessions.begin() as s:
        jobs.set_priority(s, admin.cli_principal(), job_id, "production", plane.clock())


def unwrapped_cancel(plane: Plane) -> Any:
    """A cancel that neither locks the row nor checks its writes (the path nobody wrapped):
    the job changes between its read and its write, which the route's commit makes."""

    def cancel(session: Session, who: Principal, job_id: int, now_s: float) -> Job:
        job = jobs.visible_job(session, who, job_id)
        reprioritise(plane, job_id)
        job.stop_for = "cancel"
        lifecycle.move(session, job, "cancelled", now_s, f"cancelled by {who.user}")
        return job

    return cancel


def unlocked_once(plane: Plane) -> Any:
    """`lifecycle.locked` for the first call of a request (the cancel's): no lock, and a
    priority change committed after the read; the change's own lock is the real one."""
    real = lifecycle.locked
    done: list[bool] = []

    def unlocked(session: Session, job: Job) -> Job:
        if done:
            return real(session, job)
        done.append(True)
        reprioritise(plane, job.id)
        return job

    return unlocked


def unchanged_but_reprioritised(plane: Plane, job_id: int) -> None:
    """The other writer's change stands and nothing of the refused cancel was written."""
    with plane.sessions() as s:
        row = s.get(Job, job_id)
        assert row is not None
        assert (row.state, row.priority_class, row.stop_for) == ("pending", "production", None)
        kinds = s.scalars(select(JobEvent.kind).where(JobEvent.job_id == job_id)).all()
        assert "cancelled" not in kinds


def test_a_stale_write_no_route_wrapped_is_a_409_in_the_api_error_shape(
    plane: Plane, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = submit(plane)
    monkeypatch.setattr(jobs, "cancel", unwrapped_cancel(plane))
    r = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=plane.auth("vision-member"))
    assert r.status_code == 409, r.text
    assert r.json() == {"detail": UNWRAPPED}
    assert r.headers["content-type"] == "application/json"
    assert f"/api/v1/jobs/{job_id}/cancel" in caplog.text  # the log names the unwrapped path
    unchanged_but_reprioritised(plane, job_id)
    # the store is usable after it: the cancel, done again, goes through
    r = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=plane.auth("vision-member"))
    assert r.status_code == 200, r.text


def test_a_changed_job_is_a_409_shaped_as_every_other_api_error(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wrapped path: the cancel read the job without its lock (patched away), a priority
    change committed, `checked_writes` turned the stale write into JobChangedError."""
    job_id = submit(plane)

    monkeypatch.setattr(jobs, "locked", unlocked_once(plane))
    who = plane.auth("vision-member")
    r = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=who)
    assert r.status_code == 409, r.text
    assert r.json() == {"detail": f"job {job_id} changed while you acted; reload and retry"}
    unchanged_but_reprioritised(plane, job_id)
    others = [
        plane.client.post("/api/v1/jobs/999999/cancel", headers=who),  # 404
        plane.client.patch(
            f"/api/v1/jobs/{job_id}", json={"priority_class": "production"}, headers=who
        ),  # 403
        plane.client.get("/api/v1/jobs/1", headers={"Authorization": "Bearer nope"}),  # 401
    ]
    assert [o.status_code for o in others] == [404, 403, 401]
    for other in others:
        assert set(other.json()) == set(r.json()) == {"detail"}
        assert isinstance(other.json()["detail"], str)
        assert other.headers["content-type"] == r.headers["content-type"]


def portal_browser(plane: Plane, who: str) -> tuple[TestClient, str]:
    """A browser logged in to the portal as `who`, and its session's CSRF token."""
    client = TestClient(plane.client.app)
    form = client.get("/portal/login")
    token = CSRF_RE.search(form.text)
    assert token is not None
    r = client.post(
        "/portal/login",
        data={"token": plane.tokens[who], "csrf_token": token.group(1), "next": "/portal/"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    # any page's nav bar has the logout form and its token: a 404 page needs least
    csrf = CSRF_RE.search(client.get("/portal/no-such-page").text)
    assert csrf is not None
    return client, csrf.group(1)


def portal_cancel(plane: Plane, job_id: int) -> httpx.Response:
    client, csrf = portal_browser(plane, "vision-member")
    r: httpx.Response = client.post(
        f"/portal/jobs/{job_id}/cancel", data={"csrf_token": csrf}, follow_redirects=False
    )
    return r


def readable_409(r: httpx.Response, message: str) -> None:
    assert r.status_code == 409, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert "<h1>The job changed</h1>" in r.text
    assert f'<p role="alert" id="error-message">{message}</p>' in r.text
    assert 'aria-label="Portal"' in r.text  # the nav bar, and a way back
    assert 'href="/portal/"' in r.text
    assert "Traceback" not in r.text
    assert "StaleDataError" not in r.text
    assert "UPDATE" not in r.text


def test_a_stale_write_no_portal_route_wrapped_is_a_readable_409_page(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit(plane)
    monkeypatch.setattr(jobs, "cancel", unwrapped_cancel(plane))
    r = portal_cancel(plane, job_id)
    readable_409(r, "A job changed while the request ran; reload and retry.")
    unchanged_but_reprioritised(plane, job_id)


def test_a_changed_job_is_the_same_409_page_in_the_portal(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JobChangedError was a 422 "That did not work" page in the portal, a 409 in the API."""
    job_id = submit(plane)

    monkeypatch.setattr(jobs, "locked", unlocked_once(plane))
    r = portal_cancel(plane, job_id)
    readable_409(r, f"job {job_id} changed while you acted; reload and retry")
    unchanged_but_reprioritised(plane, job_id)
    with plane.sessions() as s:  # the refused write left no audit entry or event behind
        assert s.scalar(select(func.count()).select_from(JobEvent)) == 2  # submitted, priority
