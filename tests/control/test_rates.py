"""Chargeback rates as history through the API: a rate set now never re-prices a closed
period, a past time needs an explicit re-price that the report then states, the listing
shows the history, and a rate is echoed as stored (a tiny one is refused, not zeroed)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from .conftest import Plane

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"


def _set(plane: Plane, usd: float | str, flavor: str = H100, **params: Any) -> Any:
    return plane.client.put(
        f"/api/v1/admin/rates/{flavor}",
        params={"usd_per_gpu_h": usd, **params},
        headers=plane.auth("admin"),
    )


def _report(plane: Plane, **params: Any) -> dict[str, Any]:
    r = plane.client.get(
        "/api/v1/reports/chargeback",
        params={"group_by": "accelerator", **params},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _run_an_hour(plane: Plane) -> float:
    """One H100 held for an hour; returns the time it ended."""
    body = {"name": "a", "gpus": 1, "accelerator": H100, "runtime_estimate_s": 3600}
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth("vision-member"))
    assert r.status_code == 201, r.text
    plane.cycle()
    plane.cycle(1)
    plane.cycle(3600)
    plane.cycle(1)
    return plane.clock()


def _h100(report: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in report["rows"] if r["accelerator"] == H100)


def test_a_rate_set_now_leaves_a_closed_period_as_it_was(plane: Plane) -> None:
    """Issue: the h100 rate was 0 and a past period cost 0.00; after `PUT .../rates/h100?
    usd_per_gpu_h=2.124738` the same past period cost 0.72. Rates are history now."""
    assert _set(plane, 0).status_code == 200
    ended = _run_an_hour(plane)
    plane.cycle(600)
    past = {"to": repr(ended)}
    before = _report(plane, **past)
    assert _h100(before)["cost_usd"] == "0.00"
    changed = plane.clock()
    assert _set(plane, 2.124738).status_code == 200
    plane.cycle(60)
    after = _report(plane, **past)
    assert _h100(after)["cost_usd"] == "0.00"
    assert _h100(after)["rate_usd_per_gpu_h"] == "0.000000"
    assert [r["rate_usd_per_gpu_h"] for r in after["rates"] if r["flavor"] == H100] == ["0.000000"]
    assert after["repriced"] is False
    # a period running past the change states both rates, each from when it applied
    now = _report(plane)
    changes = [(r["rate_usd_per_gpu_h"], r["to_s"]) for r in now["rates"] if r["flavor"] == H100]
    assert [rate for rate, _ in changes] == ["0.000000", "2.124738"]
    assert changes[0][1] == pytest.approx(changed)


def test_re_pricing_the_past_needs_the_flag_and_the_report_says_so(plane: Plane) -> None:
    assert _set(plane, 1.0).status_code == 200
    started = plane.clock()
    ended = _run_an_hour(plane)
    r = _set(plane, 3.0, effective=repr(started))
    assert r.status_code == 422
    assert "reprice=true" in r.json()["detail"]
    assert _h100(_report(plane, to=repr(ended)))["cost_usd"] == "1.00"
    r = _set(plane, 3.0, effective=repr(started), reprice="true")
    assert r.status_code == 200, r.text
    assert r.json()["repriced"] is True
    report = _report(plane, to=repr(ended))
    assert _h100(report)["cost_usd"] == "3.00"
    assert report["repriced"] is True
    assert [x["repriced"] for x in report["rates"] if x["flavor"] == H100] == [True]
    csv = plane.client.get(
        "/api/v1/reports/chargeback",
        params={"to": repr(ended), "format": "csv"},
        headers=plane.auth("admin"),
    ).text
    assert "# re-priced:" in csv
    history = plane.client.get("/api/v1/admin/rates", headers=plane.auth("admin")).json()
    assert [(h["usd_per_gpu_h"], h["repriced"]) for h in history["history"]] == [
        (1.0, False),
        (3.0, True),
    ]
    audit = plane.client.get("/api/v1/admin/audit", headers=plane.auth("admin")).json()
    assert audit[0]["action"] == "rate.set"
    assert audit[0]["detail"]["repriced"] is True


def test_a_future_rate_takes_effect_then_and_the_listing_shows_the_history(
    plane: Plane,
) -> None:
    now = plane.clock()
    assert _set(plane, 2.5).status_code == 200
    r = _set(plane, 4.0, effective="2100-01-01T00:00:00Z")
    assert r.status_code == 200, r.text
    assert r.json()["effective_s"] == 4_102_444_800.0
    got = plane.client.get("/api/v1/admin/rates", headers=plane.auth("admin")).json()
    assert got["current"] == {H100: 2.5}
    assert [(h["usd_per_gpu_h"], h["in_force"], h["set_by"]) for h in got["history"]] == [
        (2.5, True, "admin"),
        (4.0, False, "admin"),
    ]
    assert got["history"][0]["effective_s"] == now
    assert _set(plane, 1, effective="not a time").status_code == 422


def test_a_rate_is_echoed_as_stored_and_a_tiny_one_is_refused(plane: Plane) -> None:
    """Issue: 0.0000001 was answered 200 with 1e-07, stored as 0.0, and billed 0 without
    the flavor listed as unpriced."""
    r = _set(plane, "0.0000001")
    assert r.status_code == 422
    assert "0.000001" in r.json()["detail"]
    got = plane.client.get("/api/v1/admin/rates", headers=plane.auth("admin")).json()
    assert got == {"current": {}, "history": []}
    assert H100 in _report(plane)["unpriced_flavors"]
    r = _set(plane, "2.1234567")
    assert r.status_code == 200
    assert r.json()["usd_per_gpu_h"] == 2.123457  # what was stored, not what was sent
    got = plane.client.get("/api/v1/admin/rates", headers=plane.auth("admin")).json()
    assert got["current"] == {H100: 2.123457}
    assert _set(plane, 0).json()["usd_per_gpu_h"] == 0.0  # a real 0 is a rate


def test_every_row_of_the_report_reads_as_hours_times_rate(lite: Plane) -> None:
    """The JSON keeps exact figures: billed hours × the rate give the cost to the cent,
    the idle line's idle hours × its rate its idle cost, and lines + rounding = totals."""
    assert _set(lite, 2.124738).status_code == 200
    assert _set(lite, 1.971139, flavor=A100).status_code == 200
    _run_an_hour(lite)
    report = _report(lite, group_by="team,accelerator")
    lines = [*report["rows"], report["idle"]]
    for line, hours, money in [
        *((r, "gpu_hours_billed", "cost_usd") for r in report["rows"]),
        (report["idle"], "gpu_hours_idle", "idle_cost_usd"),
        (report["totals"], "gpu_hours_billed", "cost_usd"),
    ]:
        product = Decimal(repr(line[hours])) * Decimal(line["rate_usd_per_gpu_h"])
        assert abs(product - Decimal(line[money])) <= Decimal("0.005"), line
    for column in ("cost_usd", "idle_cost_usd", "total_cost_usd"):
        added = sum(Decimal(x[column]) for x in lines) + Decimal(report["rounding"][column])
        assert added == Decimal(report["totals"][column])


def test_the_budget_gate_and_alerts_never_show_a_budget_as_zero(lite: Plane) -> None:
    """Issue: budget 0.04 GPU-h -> 403 'used 0.4 of its 0 GPU-hour monthly budget', and
    /teams said 'used 1123% of its 0.0 GPU-hour monthly budget' twice (at 80% and 100%)."""
    h = lite.auth("admin")
    r = lite.client.patch(
        "/api/v1/admin/teams/vision",
        json={"monthly_budget_gpu_h": 0.04, "budget_gate": True},
        headers=h,
    )
    assert r.status_code == 200, r.text
    body = {"name": "a", "gpus": 1, "runtime_estimate_s": 3600}
    assert lite.client.post("/api/v1/jobs", json=body, headers=lite.auth("vision-member"))
    lite.cycle()
    lite.cycle(1)
    lite.cycle(1617)  # 0.449 GPU-hours
    r = lite.client.post("/api/v1/jobs", json=body, headers=lite.auth("vision-member"))
    assert r.status_code == 403
    assert "has used 0.449 of its 0.04 GPU-hour monthly budget" in r.json()["detail"]
    teams = lite.client.get("/api/v1/teams", headers=h).json()
    (alert,) = next(t for t in teams if t["name"] == "vision")["budget_alerts"]
    assert "of its 0.04 GPU-hour monthly budget (alert at 100%, past 80% too)" in alert
