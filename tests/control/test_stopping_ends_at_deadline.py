"""A stopping job's GPUs free by its stop deadline (the grace period), not at the end its
runtime estimate gives: the scheduler's reservation for the job waiting on them, and the
reason the job's page shows, said "on h100-1 from ~50 min" (another job's end) during a
cancel's 30 s grace period on h100-0."""

from __future__ import annotations

from .conftest import Plane
from .test_eta_review_live import CYCLE_S, submit


def test_a_reservation_behind_a_cancelled_job_starts_at_its_stop_deadline(lite: Plane) -> None:
    a = submit(lite, "vision-member", "a", 8, 5000, checkpoint_interval_s=600)
    submit(lite, "nlp-member", "b", 8, 3000)
    lite.cycle()
    lite.cycle(CYCLE_S)
    c = submit(lite, "nlp-member", "c", 8, 600)
    lite.cycle(CYCLE_S)
    r = lite.client.post(f"/api/v1/jobs/{a}/cancel", headers=lite.auth("vision-member"))
    assert r.status_code == 200, r.text
    lite.cycle(CYCLE_S)  # a is stopping, its grace period running
    job = lite.client.get(f"/api/v1/jobs/{c}", headers=lite.auth("admin")).json()
    assert job["state"] == "pending"
    assert "from ~50 min" not in job["reason"], job["reason"]
    assert "on h100-0 from" in job["reason"], job["reason"]  # the cancelled job's node
