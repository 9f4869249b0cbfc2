"""The other pages in a real browser: the overview's chart, a running job, and admin."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from .conftest import H100, Live, Shots, log_in

NAV = ("Overview", "My jobs", "Submit", "Team", "Chargeback", "Planner", "What-if", "Admin")


def _running(live: Live) -> tuple[int, int]:
    """A 2-worker job of vision on all 16 H100s (not preemptible, so nlp cannot reclaim its
    guarantee), a MIG slice of nlp, both running for 30 minutes, and a job of nlp waiting."""
    gang = live.submit(
        "vision-member",
        name="pretrain",
        gpus=8,
        workers=2,
        accelerator=H100,
        runtime_estimate_s=7200,
        preemptible=False,
        command=["python", "train.py", "--epochs", "3"],
    )
    live.submit("nlp-member", name="notebook", mig_profile="3g.40gb", runtime_estimate_s=7200)
    live.cycle()
    live.cycle(1)
    waiting = live.submit("nlp-member", name="eval", gpus=4, accelerator=H100)
    live.cycle(1800)
    return gang, waiting


def test_the_overview_shows_allocation_queues_and_draws_the_chart(
    page: Page, live: Live, shot: Shots
) -> None:
    _running(live)
    log_in(page, live, "admin")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    nav = page.get_by_role("navigation", name="Portal")
    for label in NAV:  # every page's link stays in the portal (not the API's routes)
        expect(nav.get_by_role("link", name=label, exact=True)).to_have_attribute(
            "href", re.compile(r"^/portal/")
        )
    h100 = page.locator("#cluster-table tbody tr", has_text=H100)
    expect(h100.locator("td").nth(0)).to_have_text("16")  # allocated
    expect(h100.locator("td").nth(1)).to_have_text("16")  # in the cluster
    queues = page.locator("#queue-table tbody tr", has_text="nlp")
    expect(queues.locator("td").nth(0)).to_have_text("1")  # pending
    expect(page.locator("#allocation-chart")).to_have_attribute("data-drawn", "1")  # Chart.js
    shot("overview")


def test_a_running_jobs_page_shows_its_placement_timeline_and_gpu_hours(
    page: Page, live: Live, shot: Shots
) -> None:
    gang, _ = _running(live)
    log_in(page, live, "vision-member")
    page.get_by_role("link", name="My jobs").click()
    row = page.locator(f"#job-{gang}")
    expect(row).to_contain_text("running")
    row.get_by_role("link", name=f"#{gang} pretrain").click()

    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Job #{gang} pretrain running")
    expect(page.locator("#job-gpu-hours")).to_have_text("8.00")  # 16 GPUs for 30 minutes
    placement = page.locator("#placement-table tbody tr")
    expect(placement).to_have_count(2)  # one row per node of the gang
    expect(placement.first).to_contain_text("GPU 0, GPU 1")
    expect(page.locator("#timeline")).to_contain_text("queued")
    expect(page.locator("#timeline")).to_contain_text("started")
    expect(page.get_by_role("button", name="Cancel job")).to_be_visible()
    expect(page.get_by_role("button", name="Change priority")).to_have_count(0)  # a member
    shot("job-detail-running")


def test_an_admin_issues_a_token_that_then_logs_in(page: Page, live: Live, shot: Shots) -> None:
    log_in(page, live, "admin")
    page.get_by_role("link", name="Admin").click()
    expect(page.get_by_role("heading", name="Admin", exact=True)).to_be_visible()
    expect(page.locator("#admin-teams tbody tr")).to_have_count(2)
    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name="Tokens").click()
    expect(page.locator("#admin-sections a[aria-current=page]")).to_have_text("Tokens")

    form = page.locator("#token-form")
    form.get_by_label("User").fill("ada")
    form.get_by_label("Role").select_option("member")
    form.get_by_label("Team (not for admins)").select_option("nlp")
    form.get_by_label("Expires in (optional)").fill("30d")
    form.get_by_role("button", name="Create token").click()
    expect(page.locator("#admin-notice")).to_contain_text("created")
    expect(page.get_by_role("heading", name="New token for ada (member, nlp)")).to_be_visible()
    token = page.get_by_label("Token", exact=True).input_value()
    assert token.startswith("gpf_")
    expect(page.locator("#admin-tokens tbody tr", has_text="ada")).to_contain_text("member")
    shot("admin")
    page.get_by_role("link", name="Audit log").click()
    expect(page).to_have_url(f"{live.url}/portal/admin/audit")
    expect(page.locator("#admin-audit")).to_contain_text("ada")

    page.get_by_role("button", name="Log out").click()
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#whoami")).to_have_text("ada · member · nlp")
    expect(page.get_by_role("link", name="Admin")).to_have_count(0)


def test_revoking_a_token_asks_first(page: Page, live: Live) -> None:
    log_in(page, live, "admin", "/portal/admin/tokens")
    row = page.locator("#admin-tokens tbody tr", has_text="nlp-viewer")
    asked: list[str] = []

    def dismiss(dialog: object) -> None:
        asked.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()  # type: ignore[attr-defined]

    page.once("dialog", dismiss)
    row.get_by_role("button", name=re.compile("^Revoke")).click()
    expect(row).not_to_contain_text("revoked")
    assert asked
    assert "cannot be undone" in asked[0]
    page.once("dialog", lambda d: d.accept())
    row.get_by_role("button", name=re.compile("^Revoke")).click()
    expect(page.locator("#admin-notice")).to_contain_text("revoked")
    expect(page.locator("#admin-tokens tbody tr", has_text="nlp-viewer")).to_have_count(0)
