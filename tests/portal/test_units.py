"""The portal's small pure helpers: form parsing, periods, usage series, formatting, the
fair-share sentence and the what-if cluster."""

from __future__ import annotations

import pytest

from gpufleet.api.schemas import QuotaOut, TeamOut
from gpufleet.cluster import Cluster
from gpufleet.control.chargeback_report import UsageRecord
from gpufleet.errors import UserError
from gpufleet.portal import fmt
from gpufleet.portal.explain import fair_share_why
from gpufleet.portal.forms import parse_submit
from gpufleet.portal.period import resolve_period
from gpufleet.portal.usage import allocation_series, use_summary
from gpufleet.portal.whatif import grow
from gpufleet.specs.cluster import ClusterSpec

from .conftest import CLUSTER

NOW = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC


def test_the_submit_form_parses_only_the_chosen_request_type() -> None:
    got = parse_submit(
        {
            "name": "x",
            "request_type": "mig_profile",
            "mig_profile": "1g.10gb",
            "gpus": "8",
            "workers": "1",
            "runtime_estimate": "90min",
            "env": "A=1\n# note\nB=two=2",
        }
    )
    assert got.errors == {}
    assert got.data == {
        "name": "x",
        "mig_profile": "1g.10gb",
        "workers": 1,
        "preemptible": False,
        "runtime_estimate_s": 5400.0,
        "env": {"A": "1", "B": "two=2"},
    }
    bad = parse_submit({"gpus": "two", "env": "NOEQUALS", "request_type": "tpu"})
    assert set(bad.errors) == {"request_type", "env"}
    bad = parse_submit({"gpus": "two"})
    assert bad.errors == {"gpus": "a whole number"}


def test_periods() -> None:
    p = resolve_period("this-month", "", "", NOW)
    assert (p.start_s, p.end_s, p.complete) == (1_777_593_600.0, NOW, False)  # 2026-05-01
    p = resolve_period("last-month", "", "", NOW)
    assert (p.start_s, p.end_s, p.complete) == (1_775_001_600.0, 1_777_593_600.0, True)
    p = resolve_period("custom", "2026-05-01", "2026-05-01", NOW)
    assert p.end_s - p.start_s == 86_400  # the "to" day is included
    with pytest.raises(UserError, match="future"):
        resolve_period("custom", "2027-01-01", "2027-01-02", NOW)


def _rec(
    team: str, flavor: str, start: float, end: float, milli: int, *, used: float | None = None
) -> UsageRecord:
    return UsageRecord(1, 1, team, None, "u", flavor, "standard", start, end, milli, used)


def test_allocation_series_averages_gpus_per_bucket() -> None:
    records = [_rec("a", "h100", 0, 3600, 8000), _rec("b", "h100", 1800, 5400, 2000)]
    s = allocation_series(records, start_s=0, end_s=7200, buckets=4)
    assert s.values == {"h100": (8.0, 10.0, 2.0, 0.0)}
    t = allocation_series(records, start_s=0, end_s=7200, buckets=2, label="team")
    assert t.values == {"a": (8.0, 0.0), "b": (1.0, 1.0)}
    u = use_summary([_rec("a", "h100", 0, 3600, 1000, used=900)], start_s=0, end_s=3600)
    assert u.collected
    assert u.idle_allocated_gpu_h == pytest.approx(0.75)
    assert not use_summary(records, start_s=0, end_s=7200).collected


def test_formatting() -> None:
    assert fmt.duration(45) == "45 s"
    assert fmt.duration(7800) == "2 h 10 min"
    assert fmt.duration(3 * 86_400 + 4 * 3600) == "3 d 4 h"
    assert fmt.duration(None) == "—"
    assert fmt.gpus(8.0) == "8"
    assert fmt.gpus(0.4286) == "0.429"
    # chargeback list rates: as stored (whole micro-dollars), at least cents, whatever their
    # source; four decimals made rows uncheckable (200.0134 h x 2.1247 = 424.96, not 424.98)
    assert fmt.usd_rate("2.500000") == "2.50"
    assert fmt.usd_rate("2.124738") == "2.124738"
    assert fmt.usd_rate("0.123450") == "0.12345"
    assert fmt.usd_rate(2.5) == "2.50"
    assert fmt.usd_rate(1_000_000.0) == "1000000.00"
    assert fmt.usd_rate(None) == fmt.usd_rate("") == "—"
    assert fmt.request_text({"gpus": 8, "workers": 2, "accelerators": ["h100"]}) == (
        "2 workers × 8 GPUs on h100"
    )
    # a share is held in whole eighths: a list says what is held, not only what was asked
    assert fmt.request_text({"gpu_fraction": 0.3}) == "0.3 of a GPU (0.375 held)"
    assert fmt.request_text({"gpu_fraction": 0.25}) == "0.25 of a GPU"
    assert fmt.placement_text([{"node": "n0", "gpus": [0, 1]}]) == "n0: GPUs 0,1"
    assert fmt.when(NOW) == "2026-05-28 20:26 UTC"


def _team(used: float, weight: float = 1.0) -> TeamOut:
    quota = QuotaOut(
        flavor="h100",
        guaranteed_gpus=8,
        limit_gpus=None,
        borrowing_limit_gpus=None,
        lending_limit_gpus=None,
        used_gpus=used,
        borrowed_gpus=max(0.0, used - 8),
        lent_gpus=0,
    )
    return TeamOut(
        name="vision",
        cohort="ml",
        weight=weight,
        default_priority="standard",
        max_priority_class="standard",
        projects=[],
        quotas=[quota],
        pending_jobs=0,
        running_jobs=0,
        fair_share=used / 16 / weight,
        monthly_budget_gpu_h=None,
        month_gpu_h=0.0,
    )


def test_the_fair_share_sentence() -> None:
    why = fair_share_why(_team(12, weight=2), {"h100": 16}, "default")
    assert why.startswith("vision holds 12 of the cluster's 16 h100 GPUs (75%)")
    assert "weight 2" in why
    assert "score of 0.38" in why
    assert "borrows 4 GPUs" in why
    assert "holds no GPUs" in fair_share_why(_team(0), {"h100": 16}, "default")
    assert "orders the queue by fifo" in fair_share_why(_team(4), {"h100": 16}, "fifo")


def test_growing_the_cluster_clones_a_node() -> None:
    cluster = Cluster.from_spec(ClusterSpec.model_validate(CLUSTER))
    bigger = grow(cluster, "a100-sxm4-80gb", 12)
    assert bigger.gpus_by_accelerator["a100-sxm4-80gb"] == 20
    new = [n for n in bigger.nodes if n.group == "what-if"]
    assert [n.gpus for n in new] == [8, 4]
    assert len(new[1].mig) == 4
    assert grow(cluster, "a100-sxm4-80gb", 0) is cluster
    with pytest.raises(UserError):
        grow(cluster, "b200", 8)
