"""GPU utilisation in a real browser: what `make demo` shows within its first minutes.

The emulated source reads every GPU each 15 s (the demo reads every 5 s): a training gang
reads busy, a dev box holding one GPU reads idle and is flagged after 5 minutes (the
demo: after one), and chargeback then bills used next to allocated GPU-hours.
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from gpufleet.control.telemetry_sources import BUSY_PROFILE_ENV

from .conftest import H100, Live, Shots, log_in, read_gpus


def _busy_and_idle(live: Live) -> tuple[int, int]:
    train = live.submit(
        "vision-member", name="pretrain", gpus=8, accelerator=H100, runtime_estimate_s=7200
    )
    idle = live.submit(
        "nlp-member",
        name="devbox",
        gpus=1,
        accelerator=H100,
        runtime_estimate_s=7200,
        env={BUSY_PROFILE_ENV: "idle"},
    )
    live.cycle()
    live.cycle(1)
    read_gpus(live, 600)
    return train, idle


def test_the_overview_shows_each_gpu_each_team_and_the_idle_job(
    page: Page, live: Live, shot: Shots
) -> None:
    train, idle = _busy_and_idle(live)
    log_in(page, live, "admin")
    cells = page.locator("#heat-map .heat-cell")
    expect(cells).to_have_count(24)
    held = page.locator("#heat-map .heat-cell.held")
    expect(held).to_have_count(9)
    # the training gang's GPUs read busy (past its 2-minute warm-up), the dev box's idle
    titles = [held.nth(i).get_attribute("title") or "" for i in range(9)]
    busy = [int(m) for t in titles for m in re.findall(r"held by vision, (\d+) % busy", t)]
    assert len(busy) == 8
    assert min(busy) >= 80
    assert any(re.search(r"held by nlp, [0-4] % busy", t) for t in titles)
    flagged = page.locator("#idle-table tr.flagged")
    expect(flagged).to_have_count(1)
    expect(flagged).to_contain_text(f"#{idle} devbox")
    expect(page.locator("#busy-chart")).to_have_attribute("data-drawn", "1")  # Chart.js
    shot("overview-utilisation")

    page.locator("#heat-map a", has_text="vision").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Job #{train} pretrain")
    expect(page.locator("#job-busy-chart")).to_have_attribute("data-drawn", "1")
    expect(page.locator("#job-busy-share")).to_have_text(re.compile(r"^\d+\.\d %$"))
    shot("job-utilisation")


def test_chargeback_shows_used_next_to_allocated(page: Page, live: Live, shot: Shots) -> None:
    _busy_and_idle(live)
    log_in(page, live, "admin", "/portal/chargeback?group_by=team")
    table = page.locator("#chargeback-table")
    expect(table).to_be_visible()
    nlp = table.locator("tbody tr", has_text="nlp")
    vision = table.locator("tbody tr", has_text="vision")
    cells = [nlp.locator("td"), vision.locator("td")]
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    used_at = headers.index("GPU-hours used") - 1  # the group's own cell is a <th>
    alloc_at = headers.index("GPU-hours allocated") - 1
    for row in cells:
        assert row.nth(used_at).inner_text() != "—"
    nlp_used = float(cells[0].nth(used_at).inner_text())
    nlp_alloc = float(cells[0].nth(alloc_at).inner_text())
    vision_used = float(cells[1].nth(used_at).inner_text())
    vision_alloc = float(cells[1].nth(alloc_at).inner_text())
    assert nlp_used < 0.05 * nlp_alloc  # the dev box: idle
    assert 0.6 * vision_alloc < vision_used < vision_alloc  # training: busy after warm-up
    expect(page.locator("#used-not-collected")).to_have_count(0)
    shot("chargeback-used")
