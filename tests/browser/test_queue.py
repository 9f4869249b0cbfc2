"""The queue in a real browser: a member submits through the form and sees where the job
waits and why; a lead raises it and it moves up, then moves a job within its class;
another team cannot see it at all."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from .conftest import H100, Live, Shots, log_in


def test_a_member_submits_a_job_through_the_form_and_sees_its_place_and_why_it_waits(
    page: Page, live: Live, shot: Shots, queued: list[int]
) -> None:
    log_in(page, live, "vision-member")
    page.get_by_role("link", name="Submit", exact=True).click()
    expect(page.get_by_role("heading", name="Submit a job")).to_be_visible()

    page.get_by_label("Name", exact=True).fill("c")
    page.get_by_label("Accelerator").select_option(H100)
    page.get_by_label("GPUs per worker").fill("0")
    page.get_by_label("Runtime estimate").fill("a while")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#form-error")).to_contain_text("Some fields need attention")
    expect(page.locator("#gpus-error")).to_be_visible()
    expect(page.locator("#runtime-estimate-error")).to_be_visible()
    expect(page.get_by_label("GPUs per worker")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Name", exact=True)).to_have_value("c")  # kept, not retyped
    shot("submit-validation-error")

    page.get_by_label("GPUs per worker").fill("8")
    page.get_by_label("Runtime estimate").fill("1h")
    page.get_by_label("Command").fill("python train.py --epochs 3")
    page.clock.run_for(1_000)  # past the preview's 400 ms debounce
    preview = page.locator("#spec-preview")  # htmx previews the request as it is typed
    expect(preview).to_contain_text('"runtime_estimate_s": 3600')
    expect(preview).to_contain_text('"gpus": 8')
    expect(page.locator("#gpus-error")).to_be_visible()  # the preview leaves the form alone
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(r"/portal/jobs/\d+$"))
    job_id = int(page.url.rsplit("/", 1)[1])
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Job #{job_id} c pending")
    expect(page.locator("#job-position")).to_have_text("not considered yet (next cycle)")

    live.cycle(60)  # the scheduler's next cycle places it in the queue
    live.plane.reconciler.estimate_etas()
    page.get_by_role("link", name="My jobs").click()
    row = page.locator(f"#job-{job_id}")
    expect(row.locator(".pos-team")).to_have_text("3")
    expect(row.locator(".pos-cluster")).to_have_text("3")
    expect(row.locator(".reason")).to_contain_text("quota")
    expect(row).to_contain_text("estimate")
    expect(row.get_by_text("2 jobs ahead")).to_be_visible()
    row.get_by_text("2 jobs ahead").click()  # the jobs ahead, named within the team
    expect(row.get_by_role("link", name=f"#{queued[0]} a")).to_be_visible()
    shot("my-jobs")

    row.get_by_role("link", name=f"#{job_id} c").click()
    expect(page.locator("#job-position")).to_have_text("3 in team, 3 in cluster")
    expect(page.locator("#job-reason")).to_contain_text("quota")
    expect(page.locator("#ahead-list li")).to_have_count(2)
    shot("job-detail-pending")


def test_a_lead_raises_a_waiting_job_and_moves_one_within_its_class(
    page: Page, live: Live, shot: Shots, queued: list[int]
) -> None:
    a, b = queued
    c = live.submit("vision-member", name="c", gpus=8, accelerator=H100, runtime_estimate_s=3600)
    live.cycle(10)
    log_in(page, live, "vision-lead")
    page.get_by_role("link", name="Team").click()
    expect(page.get_by_role("heading", name="Team vision")).to_be_visible()
    expect(page.locator(f"#team-job-{c} .pos-team")).to_have_text("3")

    page.get_by_role("button", name=f"Raise job {c} to production").click()
    expect(page).to_have_url(f"{live.url}/portal/team?team=vision")
    expect(page.locator(f"#team-job-{c}")).to_contain_text("production")
    expect(page.locator(f"#team-job-{c} .pos-team")).to_have_text("3")  # until the next cycle

    live.cycle(10)
    page.reload()
    for job, position in ((c, "1"), (a, "2"), (b, "3")):
        expect(page.locator(f"#team-job-{job} .pos-team")).to_have_text(position)
        expect(page.locator(f"#team-job-{job} .pos-cluster")).to_have_text(position)
    first = page.locator("#team-queue-table tbody tr").first
    expect(first).to_have_id(f"team-job-{c}")  # the table is in the new order too
    shot("team")

    # within the class: b goes ahead of a, both standard, and c stays first
    expect(page.locator(f"#team-job-{a} button", has_text="Top")).to_have_count(0)  # first
    page.get_by_role("button", name=f"Move job {b} to the top of its class").click()
    notice = page.locator("#move-notice")  # htmx swapped the queue in place
    expect(notice).to_contain_text(
        f"Moved #{b} b: now 1 of the team's 2 waiting standard jobs. The In team and In "
        "cluster positions change at the scheduler's next cycle"
    )
    expect(notice).to_be_focused()  # the keyboard is not lost with the button it pressed
    expect(page).to_have_url(f"{live.url}/portal/team?team=vision")  # no page load
    # the positions are the scheduler's (the API's) until its next cycle uses the new order:
    # a page that guessed them could contradict the API (guarantee-first reorders a team)
    expect(page.locator(f"#team-job-{a} .pos-team")).to_have_text("2")
    expect(page.locator(f"#team-job-{b} .pos-team")).to_have_text("3")
    expect(page.locator("#team-queue-table tbody tr").nth(1)).to_have_id(f"team-job-{a}")
    shot("team-moved")

    live.cycle(10)
    page.reload()
    for job, position in ((c, "1"), (b, "2"), (a, "3")):
        expect(page.locator(f"#team-job-{job} .pos-team")).to_have_text(position)
    expect(page.locator("#move-notice")).to_have_count(0)  # said once, not on every visit

    page.get_by_role("link", name=f"#{c} c").click()
    expect(page.locator("#job-position")).to_have_text("1 in team, 1 in cluster")
    expect(page.locator("#job-priority")).to_contain_text("production")
    expect(page.locator("#timeline")).to_contain_text("standard -> production by vision-lead")
    page.go_back()
    page.get_by_role("link", name=f"#{b} b").click()
    expect(page.locator("#timeline")).to_contain_text(
        "to the top among vision's standard jobs (2 -> 1 of 2) by vision-lead"
    )


def test_a_member_of_another_team_gets_a_404_for_the_job(
    page: Page, live: Live, shot: Shots, queued: list[int]
) -> None:
    a, _ = queued
    log_in(page, live, "nlp-member")
    response = page.goto(f"/portal/jobs/{a}")
    assert response is not None
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.locator("#error-message")).not_to_contain_text("vision")
    expect(page.locator("#error-message")).to_have_text(f"no job {a}")  # as for no such job
    shot("not-found")

    page.get_by_role("link", name="Back to the overview").click()
    page.get_by_role("link", name="My jobs").click()
    expect(page.get_by_role("heading", name="Jobs of nlp")).to_be_visible()
    expect(page.locator(f"#job-{a}")).to_have_count(0)
    expect(page.locator("#h-pending")).to_have_text("Waiting (0)")


def test_the_queue_does_not_refresh_under_a_reader_and_does_once_they_leave(
    page: Page, live: Live, queued: list[int]
) -> None:
    """The page refreshes its queue every 10 s, but not while focus is in it or a
    "jobs ahead" list is open: that would close the list and lose the keyboard focus."""
    _, b = queued
    log_in(page, live, "vision-member", "/portal/jobs")
    row = page.locator(f"#job-{b}")
    row.get_by_text("1 job ahead").click()  # opens the details (and focuses its summary)
    late = live.submit("vision-member", name="late", gpus=8, accelerator=H100)
    live.cycle(10)

    page.clock.run_for(25_000)  # two refreshes due
    page.wait_for_timeout(1_500)  # real time, for a refresh that was not held back to land
    expect(row.locator("details")).to_have_attribute("open", "")
    expect(page.locator(f"#job-{late}")).to_have_count(0)  # not refreshed

    row.get_by_text("1 job ahead").click()  # closed again
    page.locator("#h-pending").click()  # focus leaves the table (a heading is not focusable)
    page.evaluate("() => document.activeElement.blur()")
    page.clock.run_for(11_000)
    expect(page.locator(f"#job-{late}")).to_be_visible()  # the next refresh came
