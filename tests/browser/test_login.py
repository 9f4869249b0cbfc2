"""Logging in with an API token and out again, in a real browser."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from .conftest import Live, Shots, log_in


def test_a_wrong_token_is_refused_and_the_right_one_opens_the_page_asked_for(
    page: Page, live: Live, shot: Shots
) -> None:
    page.goto("/portal/jobs")  # not logged in: the login page, remembering where to go
    expect(page).to_have_url(re.compile(r"/portal/login\?next=%2Fportal%2Fjobs$"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    shot("login")

    page.get_by_label("API token").fill("gpf_this-is-not-a-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("Login failed")
    expect(page.get_by_label("API token")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#whoami")).to_have_count(0)
    shot("login-wrong-token")

    page.get_by_label("API token").fill(live.token("vision-member"))
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{live.url}/portal/jobs")
    expect(page.locator("#whoami")).to_have_text("vision-member · member · vision")
    session = next(c for c in page.context.cookies() if c["name"] == "gpufleet_session")
    assert session["httpOnly"]
    assert session["sameSite"] == "Strict"
    assert session["value"] != live.token("vision-member")  # a session id, not the token


def test_logging_out_ends_the_session_on_the_server_too(page: Page, live: Live) -> None:
    log_in(page, live, "nlp-lead")
    cookie = next(c for c in page.context.cookies() if c["name"] == "gpufleet_session")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{live.url}/portal/login")
    assert not [c for c in page.context.cookies() if c["name"] == "gpufleet_session"]

    # the old cookie, replayed: the session has ended on the server
    page.context.add_cookies([{"name": cookie["name"], "value": cookie["value"], "url": live.url}])
    page.goto("/portal/team")
    expect(page).to_have_url(re.compile(r"/portal/login\?next=%2Fportal%2Fteam$"))
    expect(page.locator("#whoami")).to_have_count(0)
