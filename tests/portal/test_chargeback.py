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
    """A list rate reads as stored, to the micro-dollar but at least cents ("2.50"), on the
    table and the admin's rates alike; a rate averaged over flavors (nlp ran H100s at 2.50
    and a 3g.40gb slice at 1.25) has the decimals its row needs to check, at least four.
    The JSON and CSV keep the exact rates."""
    admin = billed.as_("admin")
    page = admin.get("/portal/chargeback?period=this-month&group_by=team").text
    shown = {team: cells["Rate (USD/GPU-h)"] for team, cells in _table(page).items()}
    api = billed.plane.client.get(
        "/api/v1/reports/chargeback", headers=billed.plane.auth("admin")
    ).json()
    exact = {r["team"]: Decimal(r["rate_usd_per_gpu_h"]) for r in api["rows"]}
    assert exact["vision"] == Decimal("2.5")
    assert shown["vision"] == "2.50"
    assert exact["nlp"] != exact["nlp"].quantize(Decimal("0.0001"))  # averaged
    nlp = Decimal(shown["nlp"])
    assert -nlp.as_tuple().exponent >= 4  # type: ignore[operator]
    assert abs(nlp - exact["nlp"]) < Decimal(1).scaleb(nlp.as_tuple().exponent)  # type: ignore[arg-type]
    rows = _rows(admin.get("/portal/chargeback.csv?group_by=team").text)
    assert {r["team"]: Decimal(r["rate_usd_per_gpu_hour"]) for r in rows if r["team"] in exact} == (
        exact
    )
    rates = admin.get("/portal/admin/rates").text
    assert re.search(r"h100-sxm5-80gb</th><td class=\"num\">2.50<", rates)
    assert re.search(r"a100-sxm4-80gb</th><td class=\"num\">1.25<", rates)


def _table(page: str) -> dict[str, dict[str, str]]:
    """The chargeback table as {its group cells joined by " / ": {column header: cell}}
    ("Idle capacity", "Rounding" and "Total" for those lines)."""
    table = page.split('id="chargeback-table"', 1)[1].split("</table>", 1)[0]
    header = re.findall(r"<th scope=\"col\"[^>]*>([^<]+)</th>", table)
    figures = len(re.findall(r"<th scope=\"col\" class=\"num\">", table))
    out = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S):
        first = re.search(r"<th scope=\"row\"[^>]*>([^<]+)</th>", row)
        if first is None:
            continue
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
        key = " / ".join([first.group(1), *cells[: len(cells) - figures]])
        out[key] = dict(zip(header[-figures:], cells[-figures:], strict=True))
    return out


def _num(text: str) -> Decimal:
    return Decimal(text.replace(",", "").replace("+", ""))


@pytest.fixture
def odd(portal: Portal) -> Portal:
    """Awkward figures: H100 hours at 2.124738, A100 at 1.971139, jobs of odd lengths."""
    plane = portal.plane
    for flavor, usd in (("h100-sxm5-80gb", 2.124738), ("a100-sxm4-80gb", 1.971139)):
        r = plane.client.put(
            f"/api/v1/admin/rates/{flavor}",
            params={"usd_per_gpu_h": usd},
            headers=plane.auth("admin"),
        )
        assert r.status_code == 200
    portal.submit_api("vision-member", name="a", gpus=3, runtime_estimate_s=4000, project="p1")
    portal.submit_api("vision-lead", name="b", gpus=1, runtime_estimate_s=1337, project="p2")
    portal.submit_api("nlp-member", name="c", gpus=2, runtime_estimate_s=2222, project="p2")
    portal.submit_api("nlp-member", name="d", mig_profile="1g.10gb", runtime_estimate_s=3001)
    portal.submit_api("nlp-lead", name="e", gpus=1, runtime_estimate_s=999)
    plane.cycle()
    plane.cycle(1)
    for step in (999, 338, 885, 779, 999):  # to each job's end in turn: 999 s ... 4,000 s
        plane.cycle(step)
    plane.cycle(777)
    return portal


@pytest.mark.parametrize(
    "query",
    [
        "group_by=team",
        "group_by=team&group_by=project",
        "group_by=accelerator",
        "group_by=user&idle=proportional",
        "group_by=team&basis=usage",
    ],
)
def test_every_line_of_the_page_checks_as_hours_times_rate(odd: Portal, query: str) -> None:
    """Issue: a row read 200.01 | 2.1247 | 424.98 (200.01 × 2.1247 = 424.96), 'h100 0.63 |
    2.1247 | 1.35' (1.34), rows by project added to 0.61 against a total 0.62, the Total
    showed no rate and the Idle line no GPU-hours. Now every line, the Total and the idle
    line check as hours × rate to the cent, and rows + Rounding = Total, column by column."""
    page = odd.as_("admin").get("/portal/chargeback?period=this-month&" + query).text
    table = _table(page)
    usage = "basis=usage" in query
    hours_column = "GPU-hours billed" if usage else "GPU-hours allocated"
    lines = {k: v for k, v in table.items() if k not in ("Total", "Rounding")}
    assert "Idle capacity" in lines or "idle=proportional" in query
    for name, cells in [*lines.items(), ("Total", table["Total"])]:
        if name == "Idle capacity":
            hours, money = cells["Idle GPU-hours"], cells["Idle share (USD)"]
        else:
            hours, money = cells[hours_column], cells["Cost (USD)"]
        assert cells["Rate (USD/GPU-h)"] != "—", (name, cells)
        product = _num(hours) * _num(cells["Rate (USD/GPU-h)"])
        assert product.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) == _num(money), (
            name,
            cells,
        )
    rounding = table.get("Rounding", {})
    columns = ["Cost (USD)", "Idle share (USD)", "Total (USD)", "GPU-hours allocated"]
    columns += ["Idle GPU-hours", *(["GPU-hours billed"] if usage else [])]
    for column in columns:
        added = sum(_num(c[column]) for c in lines.values() if c[column] != "—")
        added += _num(rounding[column]) if rounding else 0
        assert added == _num(table["Total"][column]), (column, table)


def test_the_rates_used_are_listed_under_the_table(odd: Portal) -> None:
    page = odd.as_("admin").get("/portal/chargeback?period=this-month&group_by=team").text
    listed = page.split('id="chargeback-rates"', 1)[1].split("</div>", 1)[0]
    assert "h100-sxm5-80gb: 2.124738 USD per GPU-hour from" in listed
    assert "a100-sxm4-80gb: 1.971139 USD per GPU-hour from" in listed
    assert "re-priced" not in listed


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


@pytest.mark.skipif(pdf_available() is not None, reason=str(pdf_available()))
def test_the_pdf_prints_the_checkable_table(odd: Portal, tmp_path: object) -> None:
    """The PDF is the page's table: the idle line has its GPU-hours, the Total its rate,
    and the rates used are listed."""
    import subprocess
    from pathlib import Path

    r = odd.as_("admin").get("/portal/chargeback.pdf?group_by=team")
    assert r.status_code == 200
    pdf = Path(str(tmp_path)) / "c.pdf"
    pdf.write_bytes(r.content)
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    page = _table(odd.as_("admin").get("/portal/chargeback?group_by=team").text)
    idle = next(line for line in text.splitlines() if line.strip().startswith("Idle capacity"))
    assert page["Idle capacity"]["Idle GPU-hours"] in idle
    total = next(line for line in text.splitlines() if line.strip().startswith("Total"))
    assert page["Total"]["Rate (USD/GPU-h)"] in total
    assert "h100-sxm5-80gb: 2.124738 USD per GPU-hour" in text
