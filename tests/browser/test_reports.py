"""Reports in a real browser: the chargeback CSV download, the planner, the what-if."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from playwright.sync_api import Page, expect

from .conftest import H100, PLAN_TIMEOUT_MS, Live, Shots, log_in


def _csv_rows(text: str) -> list[dict[str, str]]:
    """The report's rows (its `#` lines say how it was computed)."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def test_the_chargeback_csv_download_bills_the_hours_the_jobs_held_their_gpus(
    page: Page, live: Live, shot: Shots
) -> None:
    r = live.api("PUT", f"/api/v1/admin/rates/{H100}", "admin", params={"usd_per_gpu_h": 2.5})
    assert r.status_code == 200, r.text
    # known jobs: 4 GPUs for 1 h, 1 GPU for 1 h, 2 GPUs for 30 min, all on H100s
    live.submit("vision-member", name="a", gpus=4, accelerator=H100, runtime_estimate_s=3600)
    live.submit("vision-lead", name="b", gpus=1, accelerator=H100, runtime_estimate_s=3600)
    live.submit("nlp-member", name="c", gpus=2, accelerator=H100, runtime_estimate_s=1800)
    live.cycle()
    live.cycle(1)
    live.cycle(3600)  # all three have finished and released their GPUs
    live.cycle(1)
    expected = {  # (team, user) -> (GPU-hours, USD at 2.50 per GPU-hour)
        ("nlp", "nlp-member"): ("1.000000", "2.50"),
        ("vision", "vision-lead"): ("1.000000", "2.50"),
        ("vision", "vision-member"): ("4.000000", "10.00"),
    }

    log_in(page, live, "admin")
    page.get_by_role("link", name="Chargeback").click()
    page.get_by_label("Period").select_option(label="this month (to date)")
    page.get_by_label("user", exact=True).check()
    page.get_by_role("button", name="Show report").click()
    expect(page.locator("#chargeback-table tbody tr")).to_have_count(4)  # 3 users + idle
    shot("chargeback")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download CSV").click()
    download = download_info.value
    assert download.suggested_filename.startswith("chargeback-2026-05-01-to-")
    assert download.suggested_filename.endswith(".csv")
    rows = _csv_rows(download.path().read_text())
    billed = {
        (row["team"], row["user"]): (row["gpu_hours_allocated"], row["cost_usd"])
        for row in rows
        if row["team"] not in ("TOTAL", "__idle__")
    }
    assert billed == expected
    total = rows[-1]
    assert total["team"] == "TOTAL"
    assert Decimal(total["gpu_hours_allocated"]) == Decimal(6)  # 4 + 1 + 2 x 0.5
    assert Decimal(total["cost_usd"]) == Decimal("15.00")
    expect(page.locator("#total-cost")).to_have_text(total["total_cost_usd"])  # the page agrees


@pytest.mark.real_timers  # no polling here; the report's sandboxed frame refuses scripts
def test_the_planner_form_renders_a_plan_with_its_recommendation(
    page: Page, live: Live, shot: Shots
) -> None:
    log_in(page, live, "vision-member")
    page.get_by_role("link", name="Planner").click()
    page.get_by_label("Name", exact=True).fill("browser-plan")
    page.get_by_label("Model").select_option("llama-3-8b")
    page.get_by_label("Tokens to train on").fill("20B")
    page.get_by_label("Deadline").fill("7d")
    page.get_by_role("button", name="Plan it").click(timeout=PLAN_TIMEOUT_MS)

    expect(page.get_by_role("heading", name="Recommendation")).to_be_visible()
    expect(page.locator("#plan-summary")).to_contain_text("×")
    report = page.frame_locator("#plan-report")
    expect(report.locator("body")).to_contain_text("browser-plan")
    expect(page.get_by_label("Tokens to train on")).to_have_value("20B")  # the form stays
    shot("planner-result")


def test_what_if_with_more_gpus_predicts_shorter_waits(
    page: Page, live: Live, shot: Shots, queued: list[int]
) -> None:
    log_in(page, live, "vision-lead")
    page.get_by_role("link", name="What-if").click()
    page.get_by_label("GPUs to add").fill("16")
    page.get_by_label("Of accelerator").select_option(H100)
    page.get_by_label("Guaranteed to").select_option(label="team vision")
    page.get_by_role("button", name="Simulate").click()

    expect(page.get_by_role("heading", name="Predicted waits of your team's jobs")).to_be_visible()
    jobs = page.locator("#whatif-jobs tbody tr")
    expect(jobs).to_have_count(2)
    for job_id, row in zip(queued, jobs.all(), strict=True):
        expect(row.get_by_role("rowheader")).to_have_text(f"#{job_id}")
        so_far, today, scenario = (row.locator("td").nth(i) for i in (1, 2, 3))
        expect(so_far).to_have_text("1 min")
        expect(today).to_contain_text(" h")  # hours, behind the 10 h job
        expect(scenario).to_have_text("1 min")  # 16 more H100s: they start at once
    shot("whatif-result")
