"""Accessibility and layout of every page, in a real browser.

- axe-core (vendored in `vendor/`, see its PROVENANCE.md) runs on every page: a serious or
  critical violation of a WCAG 2.1 A/AA rule or of axe's best practices fails the test.
- The keyboard: the first Tab lands on the skip link, which moves focus to the content;
  Tab then reaches every control of the page, each with a visible focus outline.
- Layout at a 1280 × 800 laptop, at 1024 wide and on a 390 px phone: nothing is wider than
  the window (no sideways scrolling), and a full-page screenshot of each page goes to
  `artifacts/`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import ARTIFACTS, H100, PLAN_TIMEOUT_MS, Live, log_in, read_gpus

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text()
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
FAILING_IMPACTS = ("serious", "critical")
BACKGROUNDS = ("rgb(255, 255, 255)", "rgb(244, 246, 249)")
VIEWPORTS = {
    "1280": {"width": 1280, "height": 800},
    "1024": {"width": 1024, "height": 768},
    "390": {"width": 390, "height": 844},  # a phone (issue 30: the portal was 625 px wide)
}


@dataclass(frozen=True)
class Seeded:
    running: int  # vision's 16-GPU gang, running
    waiting: int  # vision's job waiting behind it
    nlp_waiting: int


def _seed(live: Live) -> Seeded:
    """Both teams busy: a running gang, a MIG slice, waiting jobs, rates for chargeback."""
    r = live.api("PUT", f"/api/v1/admin/rates/{H100}", "admin", params={"usd_per_gpu_h": 2.5})
    assert r.status_code == 200, r.text
    running = live.submit(
        "vision-member",
        name="pretrain",
        gpus=8,
        workers=2,
        accelerator=H100,
        runtime_estimate_s=7200,
        preemptible=False,
        checkpoint_interval_s=600,
        command=["python", "train.py"],
    )
    live.submit("nlp-member", name="notebook", mig_profile="3g.40gb", runtime_estimate_s=7200)
    live.cycle()
    live.cycle(1)
    waiting = live.submit("vision-member", name="eval", gpus=8, accelerator=H100)
    live.submit("vision-member", name="eval-2", gpus=8, accelerator=H100)  # a class to reorder
    nlp_waiting = live.submit("nlp-member", name="sweep", gpus=4, accelerator=H100)
    read_gpus(live, 1650)  # the heat map, the utilisation chart and the idle list have data
    live.plane.reconciler.estimate_etas()
    return Seeded(running, waiting, nlp_waiting)


@dataclass(frozen=True)
class Visit:
    """A page to check: who looks at it, how to get there, and what it must show."""

    name: str
    who: str | None
    path: Callable[[Seeded], str]
    ready: str  # a selector that is visible once the page is there
    act: Callable[[Page], None] | None = None  # e.g. send a form, to check the result page


def _bad_submit(page: Page) -> None:
    page.get_by_label("GPUs per worker").fill("0")
    page.get_by_label("Input 1: copy from").fill("/datasets/a")
    page.get_by_role("button", name="Submit job").click()


def _move_to_top(page: Page) -> None:
    page.locator("#team-queue-table button", has_text="Top").first.click()


def _issue_token(page: Page) -> None:
    form = page.locator("#token-form")
    form.get_by_label("User").fill("ada")
    form.get_by_label("Team (not for admins)").select_option("nlp")
    form.get_by_role("button", name="Create token").click()


VISITS = [
    Visit("login", None, lambda s: "/portal/login", "#login-form"),
    Visit("overview-admin", "admin", lambda s: "/portal/", "#cluster-table"),
    Visit("overview-member", "vision-member", lambda s: "/portal/", "#quota-table"),
    Visit("my-jobs", "vision-member", lambda s: "/portal/jobs", "#pending-table"),
    Visit("submit", "vision-member", lambda s: "/portal/submit", "#submit-form"),
    Visit("submit-errors", "vision-member", lambda s: "/portal/submit", "#form-error", _bad_submit),
    Visit("job-pending", "vision-lead", lambda s: f"/portal/jobs/{s.waiting}", "#wait-table"),
    Visit(
        "job-running", "vision-member", lambda s: f"/portal/jobs/{s.running}", "#placement-table"
    ),
    Visit("team", "vision-lead", lambda s: "/portal/team", "#team-queue-table"),
    Visit("team-moved", "vision-lead", lambda s: "/portal/team", "#move-notice", _move_to_top),
    Visit("chargeback", "admin", lambda s: "/portal/chargeback", "#chargeback-table"),
    Visit("planner", "vision-member", lambda s: "/portal/planner", "#planner-form"),
    Visit(
        "whatif",
        "vision-lead",
        lambda s: f"/portal/whatif?run=1&add_gpus=16&accelerator={H100}&to_team=vision",
        "#whatif-jobs",
    ),
    Visit("admin", "admin", lambda s: "/portal/admin", "#admin-teams"),
    Visit("admin-nodes", "admin", lambda s: "/portal/admin/nodes", "#admin-nodes"),
    Visit("admin-rates", "admin", lambda s: "/portal/admin/rates", "#admin-rates"),
    Visit("admin-tokens", "admin", lambda s: "/portal/admin/tokens", "#new-token", _issue_token),
    Visit("admin-audit", "admin", lambda s: "/portal/admin/audit", "#admin-audit"),
    Visit("not-found", "nlp-member", lambda s: f"/portal/jobs/{s.running}", "#error-message"),
]


def _as(page: Page, live: Live, who: str | None, current: list[str | None]) -> None:
    """Log in as `who` (or out), unless already."""
    if current[0] == who:
        return
    page.context.clear_cookies()
    if who is not None:
        log_in(page, live, who)
    current[0] = who


def _axe(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now (scripts run by the test's driver, which
    the page's Content-Security-Policy does not restrict)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE)
    result = page.evaluate(
        """async (tags) => {
            const r = await axe.run(document, {runOnly: {type: "tag", values: tags},
                                               iframes: false, resultTypes: ["violations"]});
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => ({target: n.target.join(" "),
                                          summary: n.failureSummary}))}));
        }""",
        AXE_TAGS,
    )
    assert isinstance(result, list)
    return result


def _describe(found: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    for page_name, violations in found.items():
        for v in violations:
            lines.append(f"{page_name}: {v['impact']} {v['id']}: {v['help']}")
            lines.extend(f"    {n['target']}: {n['summary']}" for n in v["nodes"][:5])
    return "\n".join(lines)


def _visit(page: Page, live: Live, seeded: Seeded, visit: Visit, who: list[str | None]) -> None:
    _as(page, live, visit.who, who)
    page.goto(visit.path(seeded))
    if visit.act is not None:
        visit.act(page)
    expect(page.locator(visit.ready)).to_be_visible()


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_every_page_passes_axe_and_fits_the_window(page: Page, live: Live, viewport: str) -> None:
    page.set_viewport_size(VIEWPORTS[viewport])
    seeded = _seed(live)
    who: list[str | None] = ["?"]
    failing: dict[str, list[dict[str, Any]]] = {}
    minor: dict[str, list[dict[str, Any]]] = {}
    too_wide: dict[str, int] = {}
    ARTIFACTS.mkdir(exist_ok=True)
    for visit in VISITS:
        _visit(page, live, seeded, visit, who)
        violations = _axe(page)
        failing[visit.name] = [v for v in violations if v["impact"] in FAILING_IMPACTS]
        minor[visit.name] = [v for v in violations if v["impact"] not in FAILING_IMPACTS]
        width = int(page.evaluate("() => document.documentElement.scrollWidth"))
        if width > VIEWPORTS[viewport]["width"]:
            too_wide[visit.name] = width
        page.screenshot(
            path=ARTIFACTS / f"{viewport}-{visit.name}.png", full_page=True, animations="disabled"
        )
    report = {k: v for k, v in {**minor}.items() if v}
    (ARTIFACTS / f"axe-{viewport}.json").write_text(
        json.dumps({"failing": failing, "minor": report}, indent=1)
    )
    assert not any(failing.values()), "axe:\n" + _describe(failing)
    assert not too_wide, f"wider than the {viewport} px window (scroll width): {too_wide}"


@pytest.mark.real_timers  # the plan report's sandboxed frame refuses the test clock's script
def test_the_planner_result_passes_axe(page: Page, live: Live) -> None:
    log_in(page, live, "vision-member", "/portal/planner")
    page.get_by_label("Name", exact=True).fill("a11y-plan")
    page.get_by_label("Tokens to train on").fill("20B")
    page.get_by_label("Deadline").fill("7d")
    page.get_by_role("button", name="Plan it").click(timeout=PLAN_TIMEOUT_MS)
    expect(page.locator("#plan-summary")).to_be_visible()
    failing = [v for v in _axe(page) if v["impact"] in FAILING_IMPACTS]
    assert not failing, "axe:\n" + _describe({"planner-result": failing})
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "1280-planner-result.png", full_page=True)


# what Tab may stop on: every enabled, rendered control
# a control's name in the report; the radios of a group are one stop for Tab (arrow keys
# move between them), so the group's name stands for each of them
KEY = """(e => e.type === 'radio' ? 'radio:' + e.name
      : e.id || e.getAttribute('name') || e.getAttribute('href') || e.textContent.trim())"""
FOCUSABLE = (
    """() => { const KEY = """
    + KEY
    + """; return Array.from(document.querySelectorAll(
    'a[href], button, input:not([type="hidden"]), select, textarea, summary, [tabindex]'))
  .filter(e => !e.disabled && e.tabIndex >= 0 && e.getClientRects().length > 0
               && getComputedStyle(e).visibility !== 'hidden'
               && !(e.closest('details:not([open])') && e.tagName !== 'SUMMARY'))
  .map(e => KEY(e)); }"""
)
FOCUSED = (
    """() => { const KEY = """
    + KEY
    + """; const e = document.activeElement;
  if (!e || e === document.body) return null;
  const s = getComputedStyle(e);
  return {key: KEY(e), outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
          colour: s.outlineColor}; }"""
)


def _luminance(rgb: str) -> float:
    """Relative luminance (WCAG) of a computed colour 'rgb(r, g, b)'."""
    parts = [int(x) / 255 for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in parts]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_the_keyboard_reaches_every_control_with_a_visible_focus(page: Page, live: Live) -> None:
    seeded = _seed(live)
    who: list[str | None] = ["?"]
    unreached: dict[str, list[str]] = {}
    no_outline: dict[str, list[str]] = {}
    for visit in VISITS:
        _visit(page, live, seeded, visit, who)
        # the browser runs `autofocus` (the team page's move notice) at a rendering update
        # after the load: two animation frames, so it cannot take the focus back below
        page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        # from the top of the page, even where the page put the focus further down (the
        # team page's move notice): a blur alone leaves Tab starting from there
        page.evaluate("() => { document.body.tabIndex = -1; document.body.focus(); }")
        page.keyboard.press("Tab")
        page.evaluate("() => document.body.removeAttribute('tabindex')")
        first = page.evaluate("() => document.activeElement.textContent.trim()")
        assert first == "Skip to content", (visit.name, first)
        expect(page.locator(":focus")).to_be_visible()  # the skip link shows when focused
        page.keyboard.press("Enter")
        assert page.evaluate("() => document.activeElement.id") == "main", visit.name

        wanted = page.evaluate(FOCUSABLE)
        page.evaluate("() => { document.activeElement.blur(); }")
        seen: list[str] = []
        plain: list[str] = []
        # Tab goes on from the content (where the skip link left it), past the end, and
        # round from the top: twice the controls is enough to come by each of them
        for _ in range(2 * len(wanted) + 4):
            page.keyboard.press("Tab")
            got = page.evaluate(FOCUSED)
            if got is None:  # past the last control: the page itself
                continue
            seen.append(got["key"])
            # a focus indicator needs 3:1 against what is around it (white or the header's
            # panel, #f4f6f9): WCAG 2.1 1.4.11
            faint = min(_contrast(got["colour"], bg) for bg in BACKGROUNDS) < 3
            if not got["outline"] or faint:
                plain.append(got["key"])
            if set(wanted) <= set(seen):
                break
        missing = [w for w in wanted if w not in seen]
        if missing:
            unreached[visit.name] = missing
        if plain:
            no_outline[visit.name] = plain
    assert not unreached, f"Tab never reached: {unreached}"
    assert not no_outline, f"focused without a visible outline: {no_outline}"
