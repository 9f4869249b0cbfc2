"""Chargeback in the portal: the API's report (to the cent), a period picker, CSV and PDF."""

from __future__ import annotations

import csv
import io
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest

from gpufleet.report.render import pdf_available

from .conftest import Portal


@pytest.fixture
def billed(portal: Portal) -> Portal:
    """Two teams' jobs ran for an hour; H100 hours cost 2.50 USD, A100 hours 1.25 USD."""
    plane = portal.plane
    for flavor, usd in (("h100-sxm5-80gb", 2.5), ("a100-sxm4-80gb", 1.25)):
        r = plane.client.put(
            f"/api/v1/admin/rates/{flavor}",
            params={"usd_per_gpu_h": usd},
            headers=plane.auth("admin"),
        )
        assert r.status_code == 200
    portal.submit_api("vision-member", name="a", gpus=4, runtime_estimate_s=3600, project="p1")
    portal.submit_api("vision-lead", name="b", gpus=1, runtime_estimate_s=3600, project="p2")
    portal.submit_api("nlp-member", name="c", gpus=2, runtime_estimate_s=1800, project="p2")
    portal.submit_api("nlp-member", name="d", mig_profile="3g.40gb", runtime_estimate_s=3600)
    plane.cycle()
    plane.cycle(1)
    plane.cycle(3600)
    plane.cycle(1)
    return portal


def _rows(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def test_the_csv_download_adds_up_and_is_the_apis(billed: Portal) -> None:
    admin = billed.as_("admin")
    query = "?period=this-month&group_by=team&group_by=accelerator"
    r = admin.get("/portal/chargeback.csv" + query)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"].startswith('attachment; filename="chargeback-')
    rows = _rows(r.text)
    total = rows[-1]
    assert total["team"] == "TOTAL"
    body = [row for row in rows[:-1] if row["team"] != "__idle__"]
    assert {(row["team"], row["accelerator"]) for row in body} == {
        ("nlp", "a100-sxm4-80gb"),
        ("nlp", "h100-sxm5-80gb"),
        ("vision", "h100-sxm5-80gb"),
    }
    hours = sum(Decimal(row["gpu_hours_allocated"]) for row in body)
    assert abs(hours - Decimal(total["gpu_hours_allocated"])) < Decimal("0.000002")
    assert sum(Decimal(row["cost_usd"]) for row in body) == Decimal(total["cost_usd"])
    vision = next(row for row in body if row["team"] == "vision")
    assert abs(float(vision["gpu_hours_allocated"]) - 5.0) < 0.01  # 4 + 1 GPUs for an hour
    assert abs(Decimal(vision["cost_usd"]) - Decimal("12.50")) <= Decimal("0.02")  # at 2.50
    now = billed.plane.clock()
    api = billed.plane.client.get(  # the same report through the API, to the cent
        "/api/v1/reports/chargeback",
        params={"group_by": "team,accelerator", "format": "csv", "to": repr(now)},
        headers=billed.plane.auth("admin"),
    )
    assert _rows(api.text)[-1]["total_cost_usd"] == total["total_cost_usd"]
    page = admin.get("/portal/chargeback" + query).text
    shown = re.search(r'id="total-cost">([^<]+)<', page).group(1)  # type: ignore[union-attr]
    assert shown == total["total_cost_usd"]


def test_every_rate_reads_the_same_way_and_the_exports_keep_it_exact(billed: Portal) -> None:
    """A list rate and a blended rate side by side read "2.50" and "2.124738" (nlp ran H100s
    at 2.50 and a 3g.40gb slice at 1.25); the admin's table read "2.5". Every rate a person
    reads now has four decimals; the JSON and CSV keep the exact micro-dollar rate."""
    admin = billed.as_("admin")
    page = admin.get("/portal/chargeback?period=this-month&group_by=team").text
    table = page.split('id="chargeback-table"', 1)[1].split("</table>", 1)[0]
    header = re.findall(r"<th scope=\"col\"[^>]*>([^<]+)</th>", table)
    column = header.index("Rate (USD/GPU-h)")
    shown = {}
    for row in re.findall(r"<tr>\s*<th scope=\"row\">(\w+)</th>(.*?)</tr>", table, re.S):
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row[1])
        shown[row[0]] = cells[column - 1]
    api = billed.plane.client.get(
        "/api/v1/reports/chargeback", headers=billed.plane.auth("admin")
    ).json()
    exact = {r["team"]: Decimal(r["rate_usd_per_gpu_h"]) for r in api["rows"]}
    assert exact["vision"] == Decimal("2.5")
    assert exact["nlp"] != exact["nlp"].quantize(Decimal("0.0001"))  # blended: 6 decimals
    assert shown == {
        team: str(rate.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))
        for team, rate in exact.items()
    }
    rows = _rows(admin.get("/portal/chargeback.csv?group_by=team").text)
    assert {r["team"]: Decimal(r["rate_usd_per_gpu_hour"]) for r in rows if r["team"] in exact} == (
        exact
    )
    rates = admin.get("/portal/admin/rates").text
    assert re.search(r"h100-sxm5-80gb</th><td class=\"num\">2.5000<", rates)
    assert re.search(r"a100-sxm4-80gb</th><td class=\"num\">1.2500<", rates)


def test_members_see_their_team_only_and_no_idle(billed: Portal) -> None:
    member = billed.as_("nlp-member")
    rows = _rows(member.get("/portal/chargeback.csv?group_by=team&group_by=project").text)
    assert {row["team"] for row in rows[:-1]} == {"nlp"}
    page = member.get("/portal/chargeback").text
    assert 'id="idle"' not in page
    assert "Idle capacity" not in page


def test_a_teams_report_does_not_show_the_clusters_capacity_as_zero(billed: Portal) -> None:
    """Capacity and idle are the cluster's, shown to admins: a team's report leaves them out
    (null in JSON, said so in the CSV) instead of reading 'capacity GPU-hours: 0'."""
    api = billed.plane.client
    team = api.get("/api/v1/reports/chargeback", headers=billed.plane.auth("nlp-member")).json()
    assert team["capacity_gpu_hours"] is None
    assert team["idle_gpu_hours"] is None
    admin = api.get("/api/v1/reports/chargeback", headers=billed.plane.auth("admin")).json()
    assert admin["capacity_gpu_hours"] > 0
    text = billed.as_("nlp-member").get("/portal/chargeback.csv").text
    assert "capacity and idle GPU-hours: not in this report" in text
    assert "__idle__ line" not in text
    assert "capacity GPU-hours: 0" not in text


def test_the_period_picker(billed: Portal) -> None:
    admin = billed.as_("admin")
    r = admin.get("/portal/chargeback?period=last-month")
    assert r.status_code == 200
    assert "No GPU time in this period." in r.text
    r = admin.get("/portal/chargeback?period=custom&from=2026-05-30&to=2026-05-01")
    assert r.status_code == 422
    assert "before the" in r.text
    r = admin.get("/portal/chargeback?period=custom&from=yesterday&to=2026-05-01")
    assert r.status_code == 422
    assert "use a date such as" in r.text
    r = admin.get("/portal/chargeback?period=custom&from=2026-05-01&to=2026-05-31")
    assert r.status_code == 200
    assert "incomplete" in r.text


@pytest.mark.skipif(pdf_available() is not None, reason=str(pdf_available()))
def test_the_pdf_download(billed: Portal) -> None:
    r = billed.as_("vision-lead").get("/portal/chargeback.pdf?group_by=user")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/pdf"
    assert r.content.startswith(b"%PDF")


@pytest.fixture
def measured(portal: Portal) -> Portal:
    """One job ran an hour on 4 GPUs read at 25 % busy: 4 GPU-hours allocated, 1 used."""
    from gpufleet.control import telemetry_store as ts
    from gpufleet.telemetry.samples import GpuSample

    plane = portal.plane
    config = ts.TelemetryConfig(interval_s=60, max_gap_s=120)
    portal.submit_api("vision-member", name="m", gpus=4, runtime_estimate_s=3600, project="p1")
    plane.cycle()
    plane.cycle(1)
    for _ in range(60):
        plane.cycle(60)
        readings = [
            GpuSample(time_s=0, node=f"h100-{n}", gpu_index=g, source="t", sm_util_pct=25.0)
            for n in range(2)
            for g in range(8)
        ]
        with plane.sessions.begin() as s:
            ts.ingest(s, readings, plane.clock(), config)
    plane.cycle(1)
    return portal


def test_used_and_allocated_gpu_hours_in_every_format(measured: Portal) -> None:
    admin = measured.as_("admin")
    rows = _rows(admin.get("/portal/chargeback.csv?group_by=team").text)
    vision = next(row for row in rows if row["team"] == "vision")
    allocated, used = float(vision["gpu_hours_allocated"]), float(vision["gpu_hours_used"])
    assert abs(allocated - 4.0) < 0.01
    assert abs(used - allocated / 4) < 1e-6
    assert abs(float(vision["gpu_efficiency"]) - 0.25) < 1e-6
    focus = measured.plane.client.get(
        "/api/v1/reports/chargeback",
        params={"group_by": "team", "format": "focus"},
        headers=measured.plane.auth("admin"),
    )
    row = next(
        r for r in csv.DictReader(io.StringIO(focus.text)) if r["SubAccountName"] == "vision"
    )
    assert abs(float(row["x_GpuHoursUsed"]) - used) < 1e-6
    assert row["x_GpuEfficiency"] == "0.2500"
    page = admin.get("/portal/chargeback?group_by=team").text
    assert "used-not-collected" not in page
    assert "25.0%" in page or "25%" in page


@pytest.mark.skipif(pdf_available() is not None, reason=str(pdf_available()))
def test_the_pdf_shows_both_meters(measured: Portal, tmp_path: object) -> None:
    import subprocess
    from pathlib import Path

    r = measured.as_("admin").get("/portal/chargeback.pdf?group_by=team")
    assert r.status_code == 200
    pdf = Path(str(tmp_path)) / "c.pdf"
    pdf.write_bytes(r.content)
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "GPU-hours used" in text
    line = next(line for line in text.splitlines() if line.strip().startswith("vision"))
    assert "1.00" in line, line
    assert "4.00" in line, line
