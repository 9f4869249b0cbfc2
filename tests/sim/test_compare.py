"""`sim.compare` (means and Student-t intervals over seeds, the summary) and `report.comparison`."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from scipy import stats

from gpufleet.cluster import Cluster
from gpufleet.formatting import fmt_duration
from gpufleet.report.comparison import (
    CHART_FILES,
    compare_files,
    fmt_estimate,
    fmt_value,
    render_html,
    render_markdown,
)
from gpufleet.sim.compare import (
    Run,
    cdf_points,
    mean_ci,
    run_matrix,
    scalars,
    summarize,
    team_shares,
)
from gpufleet.sim.engine import FailureModel, SimConfig
from gpufleet.sim.setup import load_workload, open_teams
from gpufleet.sim.workload import Workload
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load

EXAMPLES = Path(__file__).parents[2] / "examples"
SMALL_CLUSTER = """\
kind: cluster
name: small
nodes:
  - {name: a, count: 2, accelerator: a100-sxm4-80gb, gpus_per_node: 8,
     topology: {block: b1, leaf: l1}}
  - {name: m, count: 1, accelerator: a100-sxm4-80gb, gpus_per_node: 8,
     topology: {block: b1, leaf: l2}, mig_layout: all-balanced}
  - {name: s, count: 1, accelerator: a100-sxm4-80gb, gpus_per_node: 8,
     topology: {block: b1, leaf: l2}, fractions: true}
"""


# -- the interval ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        [1.0, 2.0, 3.0, 4.0],
        [0.5, 0.7],
        [10.0, 10.5, 9.0, 12.25, 11.0, 8.5],
        [-3.0, 4.0, 0.0],
    ],
)
def test_mean_ci_is_the_student_t_interval(values: list[float]) -> None:
    est = mean_ci(values)
    mean = sum(values) / len(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
    assert est.n == len(values)
    assert est.mean == pytest.approx(mean)
    assert est.low == pytest.approx(low)
    assert est.high == pytest.approx(high)
    assert est.half_width == pytest.approx((high - low) / 2)


def test_mean_ci_by_hand_and_other_levels() -> None:
    # [1, 2, 3, 4]: mean 2.5, s = sqrt(5/3), t(0.975, 3) = 3.182446305284263
    est = mean_ci([1.0, 2.0, 3.0, 4.0])
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2
    assert est.low == pytest.approx(2.5 - half, rel=1e-12)
    assert est.high == pytest.approx(2.5 + half, rel=1e-12)
    wide = mean_ci([1.0, 2.0, 3.0, 4.0], confidence=0.99)
    assert wide.low is not None
    assert est.low is not None
    assert wide.low < est.low


def test_mean_ci_edges() -> None:
    assert mean_ci([]) == mean_ci([None, None])
    assert mean_ci([]).mean is None
    one = mean_ci([3.0])
    assert (one.mean, one.low, one.high, one.n) == (3.0, None, None, 1)
    assert one.half_width is None
    flat = mean_ci([2.0, 2.0, 2.0])
    assert (flat.low, flat.high) == (2.0, 2.0)
    skipped = mean_ci([1.0, None, 3.0])  # a metric absent on one seed is left out
    assert skipped.n == 2
    assert skipped.mean == 2.0


def test_cdf_points() -> None:
    assert cdf_points([]) == []
    pts = cdf_points([5.0, 1.0, 3.0], points=5)
    assert pts[0] == [1.0, 0.0]
    assert pts[-1] == [5.0, 1.0]
    assert [p[0] for p in pts] == sorted(p[0] for p in pts)


# -- the matrix and its summary ----------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, ...]:
    path = tmp_path_factory.mktemp("cmp") / "cluster.yaml"
    path.write_text(SMALL_CLUSTER, encoding="utf-8")
    cluster = Cluster.from_spec(load(ClusterSpec, path))

    def workload_for(seed: int) -> Workload:
        full = load_workload(EXAMPLES / "sim-workload-mixed.yaml", None, seed)
        return replace(full, jobs=tuple(j for j in full.jobs if j.submit_s < 6 * 3600))

    return run_matrix(
        cluster,
        lambda w: open_teams(cluster, w),
        workload_for,
        profiles=["fifo", "default"],
        seeds=[0, 1, 2],
        config=SimConfig(failures=FailureModel(gpu_mtbf_h=300.0)),
    )


def test_run_matrix_order_and_common_workloads(runs: tuple[Run, ...]) -> None:
    assert [(r.profile, r.seed) for r in runs] == [
        ("fifo", 0),
        ("fifo", 1),
        ("fifo", 2),
        ("default", 0),
        ("default", 1),
        ("default", 2),
    ]
    by = {(r.profile, r.seed): r.metrics for r in runs}
    for seed in (0, 1, 2):  # every profile saw the same jobs of a seed
        done = by[("fifo", seed)].jobs_completed + by[("fifo", seed)].jobs_unfinished
        assert done == by[("default", seed)].jobs_completed + by[("default", seed)].jobs_unfinished


def test_scalars_and_team_shares(runs: tuple[Run, ...]) -> None:
    row = scalars(runs[0].metrics)
    assert {"gpu_allocation_ratio", "lost_gpu_hours", "wait_s.p95", "jct_s.p50"} <= set(row)
    assert "per_team" not in row
    assert "wait_s" not in row
    assert all(v is None or isinstance(v, float) for v in row.values())
    shares = team_shares(runs[0].metrics)
    assert set(shares) <= {"vision", "product", "research"}
    assert sum(shares.values()) == pytest.approx(1.0)


def test_summary_means_intervals_and_plots(runs: tuple[Run, ...]) -> None:
    summary = summarize(runs, context={"note": "x"})
    assert summary["note"] == "x"
    assert summary["profiles"] == ["fifo", "default"]
    assert summary["seeds"] == [0, 1, 2]
    for profile in ("fifo", "default"):
        mine = [r.metrics for r in runs if r.profile == profile]
        est = summary["metrics"][profile]["lost_gpu_hours"]
        values = [m.lost_gpu_hours for m in mine]
        assert est["values"] == values
        assert est["mean"] == pytest.approx(sum(values) / 3)
        expected = mean_ci(values)
        assert (est["ci_low"], est["ci_high"]) == (expected.low, expected.high)
        wait = summary["metrics"][profile]["wait_s.p95"]
        assert wait["values"] == [m.wait_s["p95"] for m in mine]
        alloc = summary["plots"]["allocation_first_seed"][profile]
        assert alloc == [[s.t_s, s.allocated_ratio] for s in mine[0].samples]
        cdf = summary["plots"]["jct_cdf_s"][profile]
        assert cdf[-1][0] == max(c for m in mine for c in m.jcts)  # pooled over seeds
    json.dumps(summary, allow_nan=False)  # plain data


def test_report_renders_every_chart_and_escapes(runs: tuple[Run, ...]) -> None:
    summary = summarize(runs, context={"warnings": ["<b>team</b> | a*b"]})
    html = render_html(summary)
    md = render_markdown(summary)
    assert html.count("<svg") == len(CHART_FILES)
    assert "&lt;b&gt;team&lt;/b&gt;" in html
    assert "<b>team" not in html
    assert r"\<b\>team\</b\> \| a\*b" in md
    assert "| Lost GPU-hours |" in md
    files = compare_files(summary)
    assert set(files) == {"compare.json", "compare.md", "compare.html", *CHART_FILES.values()}
    assert files == compare_files(summary)  # pure: same summary, same bytes
    assert json.loads(files["compare.json"]) == json.loads(json.dumps(summary))


def test_formatting() -> None:
    assert fmt_duration(45) == "45 s"
    assert fmt_duration(600) == "10 min"
    assert fmt_duration(3 * 3600) == "3 h"
    assert fmt_duration(3 * 86_400) == "3 d"
    assert fmt_value("gpu_allocation_ratio", 0.4123) == "41.2%"
    assert fmt_value("wait_s.p95", 90) == "90 s"
    assert fmt_value("lost_gpu_hours", 12.5) == "12.5 GPU-h"
    assert fmt_value("slo_attainment", None) == "—"
    est = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    assert fmt_estimate("goodput_ratio", est) == "50.0% ± 10.0%"
    assert fmt_estimate("goodput_ratio", {"mean": 0.5, "ci_low": None}) == "50.0%"
