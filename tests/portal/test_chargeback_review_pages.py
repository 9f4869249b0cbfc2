"""The portal as a team lead reads it: the month's GPU-hours against the budget, and the
names of the files a finance partner downloads.

Review findings: the team page wrote the month's use to two decimals beside a budget to
three significant figures, "0.04 GPU-hours of a 0.04 GPU-hour budget" above the alert
"used 87% (0.035 GPU-hours)"; May's CSV, picked as 2026-05-01 to 2026-05-31 (the "to"
date inclusive), downloaded as chargeback-2026-05-01-to-2026-06-01.csv.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from .conftest import Portal


def utc(*ymd: int) -> float:
    return datetime(*ymd, tzinfo=UTC).timestamp()


def test_the_months_use_reads_as_the_budget_alert_does(portal: Portal) -> None:
    plane = portal.plane
    r = plane.client.patch(
        "/api/v1/admin/teams/vision",
        json={"monthly_budget_gpu_h": 0.04},
        headers=plane.auth("admin"),
    )
    assert r.status_code == 200, r.text
    portal.submit_api("vision-member", gpus=1, runtime_estimate_s=126, command=["x"])
    plane.cycle()
    plane.cycle(126)  # one GPU for 126 s: 0.035 GPU-hours, 87.5 % of 0.04
    plane.cycle(1)
    page = portal.as_("vision-lead").get("/portal/team").text
    month = re.search(r'id="team-month">(.*?)</dd>', page)
    assert month is not None
    assert month.group(1) == "0.035 GPU-hours of a 0.04 GPU-hour budget"  # was "0.04 of 0.04"
    assert "has used 87% (0.035 GPU-hours) of its 0.04 GPU-hour monthly budget" in page


def test_without_a_budget_the_month_reads_to_two_decimals(portal: Portal) -> None:
    page = portal.as_("nlp-lead").get("/portal/team").text
    month = re.search(r'id="team-month">(.*?)</dd>', page)
    assert month is not None
    assert month.group(1) == "0.00 GPU-hours"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        pytest.param("period=last-month", "chargeback-2026-05-01-to-2026-05-31.csv", id="May"),
        pytest.param(
            "period=custom&from=2026-05-01&to=2026-05-31",
            "chargeback-2026-05-01-to-2026-05-31.csv",
            id="custom dates, 'to' inclusive",
        ),
        pytest.param(
            "period=custom&from=2026-06-03&to=2026-06-03",
            "chargeback-2026-06-03-to-2026-06-03.csv",
            id="one day",
        ),
        pytest.param("period=this-month", "chargeback-2026-06-01-to-2026-06-15.csv", id="to now"),
    ],
)
def test_a_download_is_named_by_the_days_it_covers(portal: Portal, query: str, name: str) -> None:
    portal.plane.clock.now_s = utc(2026, 6, 15, 9)  # 09:00 on June 15: this month covers it
    r = portal.as_("vision-lead").get("/portal/chargeback.csv?" + query)
    assert r.status_code == 200, r.text
    assert r.headers["content-disposition"] == f'attachment; filename="{name}"'
