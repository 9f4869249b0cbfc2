"""The overview's allocation chart and its idle-but-allocated figure, at fixed clocks.

A review saw the row labelled "12-05 12:38" read 0.975 H100s allocated though the server
started at 12:39:05: the 1 h window's buckets began at now − 3600 s (12:38:41–12:39:41) and
their labels were cut to the minute. And a team lead read the whole cluster's
"166.41 of 354.64 GPU-hours ... were idle" as their team's (which held 234.57).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sqlalchemy import func, select

from gpufleet.control import telemetry_store as ts
from gpufleet.control.chargeback_report import UsageRecord
from gpufleet.control.ledger import usage_records
from gpufleet.control.models import Allocation
from gpufleet.control.telemetry_sources import (
    BUSY_PROFILE_ENV,
    TelemetryLoop,
    TelemetryOptions,
    make_collector,
)
from gpufleet.portal import fmt
from gpufleet.portal.usage import WINDOWS, allocation_series, grid_for, use_summary

from .conftest import Portal

DAY = 1_780_012_800.0  # 2026-05-29 00:00:00 UTC


def _rec(team: str, start: float, end: float, milli: int) -> UsageRecord:
    return UsageRecord(1, 1, team, None, "u", "h100", "standard", start, end, milli, None)


@pytest.mark.parametrize("window", list(WINDOWS))
def test_buckets_start_on_clock_boundaries_and_cover_the_window(window: str) -> None:
    span_s, buckets = WINDOWS[window]
    now = DAY + 12 * 3600 + 39 * 60 + 41  # 12:39:41
    grid = grid_for(window, now)
    assert grid.step_s == span_s / buckets
    assert grid.start_s % grid.step_s == 0  # a minute, half hour, 3 h, 12 h or day boundary
    assert grid.start_s <= now - span_s < grid.start_s + grid.step_s  # the whole window
    assert grid.end_s - grid.step_s <= now < grid.end_s  # the last bucket holds now
    assert grid.bounds(grid.count - 1) == (grid.end_s - grid.step_s, now)  # ends now
    aligned = grid_for(window, grid.end_s)  # now on a boundary: no empty bucket after it
    assert aligned.end_s == grid.end_s


def test_a_bucket_before_the_data_reads_nothing() -> None:
    """The review's case: the server started at 12:39:05, seen at 13:38:41 (1 h window)."""
    now = DAY + 13 * 3600 + 38 * 60 + 41
    grid = grid_for("1h", now)
    start = DAY + 12 * 3600 + 39 * 60 + 5
    series = allocation_series(
        [_rec("a", start, now, 1000)],
        start_s=grid.start_s,
        end_s=grid.end_s,
        buckets=grid.count,
        until_s=now,
    )
    labels = [fmt.when(t).removesuffix(" UTC")[5:] for t in series.starts_s]
    values = dict(zip(labels, series.values["h100"], strict=True))
    assert values["05-29 12:38"] == 0  # 12:38:00–12:39:00: before the server started
    assert values["05-29 12:39"] == pytest.approx(55 / 60)  # held 12:39:05 on
    assert values["05-29 12:40"] == 1
    # the last interval, 13:38:00–13:38:41, is averaged over the 41 s it has had so far
    assert labels[-1] == "05-29 13:38"
    assert series.values["h100"][-1] == 1


def _allocation(page: str) -> tuple[list[str], dict[str, list[float]], list[str]]:
    found = re.search(r'id="allocation-data">(.*?)</script>', page, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    table = re.search(r'id="allocation-table">(.*?)</table>', page, re.S)
    assert table is not None
    rows = re.findall(r'<th scope="row">([^<]+)</th>', table.group(1))
    return data["labels"], {d["label"]: d["data"] for d in data["datasets"]}, rows


def test_the_overview_labels_each_interval_by_its_true_start(portal: Portal) -> None:
    plane = portal.plane
    portal.submit_api("vision-member", name="a", gpus=4, runtime_estimate_s=10**5)
    plane.cycle()
    plane.cycle(1)
    with plane.sessions() as s:
        first = s.scalar(select(func.min(Allocation.allocated_s)))
    assert first is not None
    # look when the old buckets (from now − 3600 s) began later in the minute than the
    # allocation: the bucket holding it began in the minute before, and was labelled so
    second = first % 60
    assert second < 59
    plane.clock.now_s = first + 600 + (60 - second) / 2  # ten minutes on, later in the minute
    page = portal.as_("admin").get("/portal/?window=1h").text
    labels, data, rows = _allocation(page)
    h100 = data["h100-sxm5-80gb allocated"]
    before = fmt.when(first - 60).removesuffix(" UTC")[5:]
    at = fmt.when(first).removesuffix(" UTC")[5:]
    assert h100[labels.index(before)] == 0, (before, h100)
    assert 0 < h100[labels.index(at)] <= 4
    assert max(h100) == 4
    # the table names each interval's start and end; the last runs to now
    nxt = fmt.when(first - second + 60)[11:16]  # HH:MM of the next minute
    assert f"{at}–{nxt}" in rows
    assert rows[-1].endswith("–now")
    assert len(rows) == len(labels)


def _read(portal: Portal, rounds: int) -> None:
    """Telemetry rounds of the emulated collector, 15 s apart (as `make demo`)."""
    plane = portal.plane
    config = ts.TelemetryConfig(interval_s=15, idle_after_s=300, max_gap_s=60)
    collector = make_collector(
        TelemetryOptions(), "emulated", plane.sessions, plane.reconciler.cluster
    )
    assert collector is not None
    loop = TelemetryLoop(plane.sessions, collector, config, lambda: True, clock=plane.clock)
    for _ in range(rounds):
        plane.clock.advance(15)
        assert loop.tick() is not None


def _idle(page: str, which: str) -> tuple[str, str]:
    found = re.search(
        rf'id="idle-{which}">[^<]*<strong>[^<]*</strong>:? ([\d,.]+) of ([\d,.]+) GPU-hours', page
    )
    assert found is not None, f"no idle-{which} figure"
    return found.group(1), found.group(2)


def test_idle_but_allocated_is_the_teams_for_a_member_and_the_clusters_for_an_admin(
    portal: Portal,
) -> None:
    plane = portal.plane
    portal.submit_api("vision-member", name="a", gpus=4, runtime_estimate_s=10**5)
    portal.submit_api(
        "nlp-member", name="b", gpus=2, runtime_estimate_s=10**5, env={BUSY_PROFILE_ENV: "idle"}
    )
    plane.cycle()
    plane.cycle(1)
    _read(portal, 40)
    now = plane.clock()
    start = now - WINDOWS["1h"][0]
    with plane.sessions() as s:
        records = usage_records(s, start, now, now)
    whole = use_summary(records, start_s=start, end_s=now)
    vision = use_summary([r for r in records if r.team == "vision"], start_s=start, end_s=now)
    assert whole.collected
    assert vision.collected
    assert vision.reported_allocated_gpu_h < whole.reported_allocated_gpu_h

    def figure(u: Any) -> tuple[str, str]:
        return fmt.hours(u.idle_allocated_gpu_h), fmt.hours(u.reported_allocated_gpu_h)

    lead = portal.as_("vision-lead").get("/portal/?window=1h").text
    assert _idle(lead, "team") == figure(vision)
    assert re.search(r'id="idle-team">[^<]*<strong>Your team \(vision\)</strong>', lead)
    assert _idle(lead, "cluster") == figure(whole)  # beside it, labelled as the cluster's
    assert re.search(r'id="idle-cluster">[^<]*<strong>Whole cluster</strong>', lead)
    admin = portal.as_("admin").get("/portal/?window=1h").text
    assert _idle(admin, "cluster") == figure(whole)
    assert 'id="idle-team"' not in admin
