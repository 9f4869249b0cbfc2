"""Report renderers: JSON, Markdown, HTML and PDF from one hand-built, realistic plan.

The Markdown is compared with a golden file, tests/report/golden/plan.md. After an
intended change to the report, regenerate it and review the diff:

    GPUFLEET_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/report -q

The PDF text check uses `pdftotext` (poppler-utils) when it is on PATH and is
skipped otherwise; the page count needs nothing beyond the standard library.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gpufleet.errors import UserError
from gpufleet.formatting import fmt_bytes, fmt_count, fmt_pct, fmt_usd, fmt_usd_rate
from gpufleet.plan.model import (
    Alternative,
    Assumption,
    CloudOffer,
    CostBreakdown,
    Design,
    Fabric,
    Plan,
    Recommendation,
    Storage,
    TeamQuota,
    WorkloadChoice,
)
from gpufleet.report import render as render_module
from gpufleet.report import (
    render_html,
    render_json,
    render_markdown,
    render_pdf,
    write_reports,
)
from gpufleet.report.charts import all_charts, nice_ticks
from gpufleet.report.render import fmt_keyed, fmt_metric, md_escape

GOLDEN = Path(__file__).parent / "golden" / "plan.md"
UPDATE_GOLDEN = os.environ.get("GPUFLEET_UPDATE_GOLDEN") == "1"

H200 = "h200-sxm-141gb"


def _pretrain(accelerator: str, gpus: int, days: float, cost: float | None) -> WorkloadChoice:
    return WorkloadChoice(
        workload="pretrain-70b",
        kind="training",
        accelerator=accelerator,
        gpus=gpus,
        parallelism={"tp": 8, "pp": 4, "cp": 1, "dp": gpus // 32, "sequence_parallel": True},
        metrics={
            "train_time_days": days,
            "mfu": 0.412,
            "tokens_per_s": 2_431_000.0,
            "goodput": 0.91,
        },
        gpu_hours=gpus * days * 24,
        cost_usd=cost,
        meets_constraints=True,
        notes=["Checkpoint every 30 min; 2.1% of wall time lost to failures and restarts."],
    )


def _chat(accelerator: str, gpus: int, cost: float | None) -> WorkloadChoice:
    return WorkloadChoice(
        workload="chat",
        kind="inference",
        accelerator=accelerator,
        gpus=gpus,
        parallelism={"tp": 2, "replicas": gpus // 2},
        metrics={
            "ttft_p99_ms": 412.0,
            "tpot_p99_ms": 38.5,
            "tokens_per_s": 17_500.0,
            "utilization": 0.62,
        },
        gpu_hours=gpus * 8760.0,
        cost_usd=cost,
        meets_constraints=True,
    )


def _tornado(
    factor: str, low_label: str, high_label: str, low: float, high: float
) -> dict[str, float | str]:
    return {
        "factor": factor,
        "low_label": low_label,
        "high_label": high_label,
        "low_usd": low,
        "high_usd": high,
        "base_usd": 4_512_300.0,
        "swing_usd": abs(high - low),
    }


def make_plan() -> Plan:
    """Two workloads on H200 in AWS, an on-prem design, two providers, one team."""
    rec_workloads = [_pretrain(H200, 1024, 71.4, 6_878_527.49), _chat(H200, 16, 549_427.20)]
    return Plan(
        name="acme-llm-2027",
        generated_by="gpufleet 0.1.0",
        recommendation=Recommendation(
            accelerator=H200,
            deployment="cloud",
            provider="aws",
            workloads=rec_workloads,
            total_gpus=1040,
            why=[
                "H200 finishes the 70B pretraining in 71 days on 1,024 GPUs, inside the "
                "90-day deadline; H100 needs 1,280 GPUs for the same date.",
                "The chat model's KV cache at 1,800 tokens fits 1.8x more concurrent requests "
                "per H200, so 16 GPUs serve 50 req/s within the SLO instead of 24 on H100.",
                "Owning the cluster pays back only after 42 months at 70% utilization, past "
                "the 36-month horizon, so renting wins.",
            ],
        ),
        alternatives=[
            Alternative(
                accelerator="h100-sxm5-80gb",
                workloads=[
                    _pretrain("h100-sxm5-80gb", 1280, 70.2, 7_760_000.0),
                    _chat("h100-sxm5-80gb", 24, 550_000.0),
                ],
                total_gpus=1304,
                cost_usd=8_310_000.0,
                compared=[
                    "Needs 264 more GPUs (25% more) to meet the same deadline.",
                    "Costs $882,045 more at on-demand list prices.",
                ],
                # what it was ranked on: the headline of the plan it would give
                plan_cost_usd=5_120_000.0,
                plan_cost_what="with the optimised purchase mix",
            ),
            Alternative(
                accelerator="b200-sxm-192gb",
                workloads=[
                    _pretrain("b200-sxm-192gb", 768, 58.9, None),
                    _chat("b200-sxm-192gb", 8, None),
                ],
                total_gpus=776,
                cost_usd=None,
                compared=[
                    "Fewer GPUs (776), but no list price in the selected regions, so its "
                    "cost cannot be compared.",
                ],
            ),
        ],
        design=Design(
            system="dgx-h200",
            accelerator=H200,
            gpus=1040,
            nodes=130,
            racks=44,
            rack_power_kw=40.0,
            power_kw={"it": 1326.0, "facility": 1723.8},
            scaleup_domain_gpus=8,
            fabric=Fabric(
                name="ib-ndr-400",
                topology="rail-optimised two-level fat-tree",
                port_gbit_per_s=400.0,
                nics=1040,
                leaf_switches=40,
                spine_switches=20,
                switch_radix=64,
                oversubscription=1.0,
                cables=2320,
                required_gbit_per_s_per_gpu=212.4,
                available_gbit_per_s_per_gpu=400.0,
                verdict="InfiniBand NDR 400 needed: the data-parallel all-reduce needs "
                "212 Gb/s per GPU across nodes, more than RoCE 200G gives.",
            ),
            storage=Storage(
                capacity_bytes=2.4e15,
                dataset_bytes=6.0e13,
                checkpoint_bytes=1.12e12,
                checkpoints_retained=5,
                read_gbytes_per_s=9.7,
                checkpoint_write_gbytes_per_s=18.7,
                choice="weka",
                units=2183.0,
                rationale="WekaFS meets the 18.7 GB/s checkpoint burst with its smallest "
                "cluster; Lustre would need twice the capacity for that throughput.",
            ),
        ),
        cloud={
            "aws": [
                CloudOffer(
                    provider="aws",
                    instance="p5en.48xlarge",
                    region="us-east-2",
                    instances=130,
                    gpus=1040,
                    on_demand_usd_per_hour=8_229.00,
                    spot_usd_per_hour=3_233.10,
                    networking="EFA (3,200 Gb/s per instance) in one EC2 cluster placement group",
                ),
            ],
            "gcp": [
                CloudOffer(
                    provider="gcp",
                    instance="a3-ultragpu-8g",
                    region="us-central1",
                    instances=130,
                    gpus=1040,
                    on_demand_usd_per_hour=11_024.00,
                    spot_usd_per_hour=None,
                    networking="GPUDirect-RDMA (8 x 400 Gb/s RoCE) with a compact placement policy",
                ),
            ],
        },
        cost=CostBreakdown(
            on_demand=7_427_954.69,
            reserved=5_570_000.0,
            spot=3_980_000.0,
            mix={
                "reserved_1y_gpus": 16.0,
                "reserved_gpus": 16.0,
                "on_demand_gpu_hours": 210_000.0,
                "spot_gpu_hours": 1_544_726.0,
                "reserved_usd": 392_200.0,
                "on_demand_usd": 823_200.0,
                "spot_usd": 3_296_900.0,
                "total_usd": 4_512_300.0,
                "effective_usd_per_gpu_hour": 2.379,
            },
            savings_vs_on_demand=0.3925,
            tco={
                "capex": 62_400_000.0,
                "capex_systems": 54_260_870.0,
                "opex_per_year": 7_200_000.0,
                "depreciation_years": 4.0,
                "total": 91_200_000.0,
                "per_gpu_hour": 3.58,
                "horizon_years": 3.0,
                "utilization": 0.7,
            },
            break_even_months=42.1,
            sensitivity=[
                # As the cost module writes them: *_usd totals and labels for the ends.
                _tornado("gpu_price", "-30 %", "+30 %", 3_610_000.0, 5_410_000.0),
                _tornado("mfu", "×0.85", "×1.15", 5_240_000.0, 4_020_000.0),
                _tornado("utilization", "-20 %", "+20 %", 4_512_300.0, 4_512_300.0),
                _tornado("failure_rate", "×0.5", "×2", 4_430_000.0, 4_700_000.0),
            ],
        ),
        teams=[
            TeamQuota(
                team="research",
                demand_gpus=1031.5,
                guaranteed_gpus=1024,
                burst_gpus=16,
                method="Guaranteed = peak concurrent demand rounded up to whole nodes; burst = "
                "inference headroom (static rule, no simulation).",
            ),
        ],
        infeasible=[],
        assumptions=[
            Assumption(
                name="expected utilization",
                value="0.7",
                source="plan spec (expected_utilization)",
            ),
            Assumption(
                name="h200-sxm-141gb memory",
                value="141 GB HBM3e",
                source="NVIDIA H200 Tensor Core GPU datasheet (retrieved 2026-11-29)",
            ),
            Assumption(
                name="p5en.48xlarge on-demand, us-east-2",
                value="$63.30 per instance-hour",
                source="skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv@00148f2 "
                "(retrieved 2026-11-29)",
            ),
            Assumption(name="PUE", value="1.3", source="default (on_prem.pue)"),
            Assumption(
                name="electricity", value="$0.10/kWh", source="default (on_prem.electricity)"
            ),
            Assumption(name="depreciation", value="4 years", source="default"),
            Assumption(
                name="dgx-h200 power",
                value="10.2 kW per node (max)",
                source="NVIDIA DGX H100/H200 User Guide (retrieved 2026-11-29)",
            ),
        ],
    )


@pytest.fixture(scope="module")
def plan() -> Plan:
    return make_plan()


@pytest.fixture(scope="module")
def markdown(plan: Plan) -> str:
    return render_markdown(plan)


@pytest.fixture(scope="module")
def html(plan: Plan) -> str:
    return render_html(plan)


@pytest.fixture(scope="module")
def pdf(plan: Plan) -> bytes:
    if (why := render_module.pdf_available()) is not None:
        pytest.skip(why)
    return render_pdf(plan)


# -- JSON --------------------------------------------------------------------


def test_json_round_trips_to_the_same_plan(plan: Plan) -> None:
    text = render_json(plan)
    assert Plan.model_validate_json(text) == plan
    assert render_json(Plan.model_validate_json(text)) == text


def test_json_has_the_stable_top_level_fields(plan: Plan) -> None:
    text = render_json(plan)
    for field in ("recommendation", "alternatives", "design", "cloud", "cost", "assumptions"):
        assert f'\n  "{field}": ' in text


# -- Markdown ----------------------------------------------------------------

SECTIONS = [
    "## Executive summary",
    "## Recommendation",
    "## Alternatives",
    "## Workloads",
    "## Cluster design (on-prem)",
    "### Scale-out fabric",
    "### Storage",
    "## Cloud options",
    "### aws",
    "### gcp",
    "## Cost",
    "### Purchase mix",
    "### On-prem total cost of ownership",
    "### Break-even",
    "### Sensitivity",
    "## Teams",
    "## Assumptions and sources",
]


def test_markdown_has_every_section_in_order(markdown: str) -> None:
    positions = [markdown.find(f"\n{heading}\n") for heading in SECTIONS]
    assert all(p >= 0 for p in positions), dict(zip(SECTIONS, positions, strict=True))
    assert positions == sorted(positions)
    assert "What would make it feasible" not in markdown  # nothing infeasible here


@pytest.mark.parametrize(
    "needle",
    [
        pytest.param("**h200-sxm-141gb**, cloud on aws, 1,040† GPUs", id="recommendation"),
        pytest.param("$4,512,300† with the optimised purchase mix", id="recommended-cost"),
        pytest.param("- H200 finishes the 70B pretraining", id="why-sentence"),
        pytest.param("| h100-sxm5-80gb | pretrain-70b: 1,280; chat: 24 | 1,304 |", id="alt"),
        pytest.param("TP 8 · PP 4 · CP 1 · DP 32 · Sequence parallel yes", id="parallelism"),
        pytest.param("MFU 41.2% · 2,431,000 tokens/s", id="metrics-training"),
        pytest.param("TTFT p99 412 ms", id="metrics-inference"),
        pytest.param("| Nodes | 130† |", id="nodes"),
        pytest.param("| Facility power | 1,724 kW† |", id="facility-power"),
        pytest.param("| Leaf switches | 40† |", id="leaf"),
        pytest.param("| Spine switches | 20† |", id="spine"),
        pytest.param("**InfiniBand NDR 400 needed", id="verdict"),
        pytest.param("| Capacity | 2.4 PB† |", id="storage-capacity"),
        pytest.param("1.1 TB† each, 5 retained", id="checkpoints"),
        pytest.param("| 130 | 1,040 | $8,229.00 | $3,233.10 |", id="fleet-prices"),
        pytest.param("| Optimised mix | $4,512,300 |", id="mix-total"),
        pytest.param("saves **39.2%†**", id="savings"),
        pytest.param("| On-demand GPU-hours | 210,000 GPU-h† |", id="mix-hours"),
        pytest.param(
            "| Per delivered GPU-hour (owning ÷ delivered GPU-hours) | $3.58† |", id="tco-rate"
        ),
        pytest.param("| Depreciation | 4 years |", id="tco-input-unmarked"),
        pytest.param("| Utilization | 70.0% |", id="tco-utilization"),
        pytest.param("after **42.1 months†**", id="break-even"),
        pytest.param(
            "| GPU price | -30 % | $3,610,000 | +30 % | $5,410,000 | $1,800,000 |", id="tornado"
        ),
        pytest.param("| research | 1,031.5 | 1,024 | 16 |", id="team"),
        pytest.param("† derived by gpufleet", id="legend"),
        pytest.param("| PUE | 1.3 | default (on_prem.pue) |", id="assumption"),
    ],
)
def test_markdown_shows_key_numbers(markdown: str, needle: str) -> None:
    assert needle in markdown


def test_markdown_sorts_the_tornado_by_swing(markdown: str) -> None:
    section = markdown[markdown.index("### Sensitivity") :]
    names = ("GPU price", "MFU", "Failure rate", "Utilization")
    order = [section.index(f"| {name} |") for name in names]
    assert order == sorted(order)


def test_tornado_reads_the_documented_row_spelling() -> None:
    base = make_plan()
    rows: list[dict[str, float | str]] = [
        {"factor": "utilization", "low": 1_000_000.0, "high": 2_500_000.0, "range": "50%-90%"},
        {"factor": "price", "low": 1_900_000.0, "high": 2_000_000.0},
        {"factor": "broken", "low": "n/a", "high": 1.0},  # not a number: left out
    ]
    plan = base.model_copy(update={"cost": base.cost.model_copy(update={"sensitivity": rows})})
    markdown = render_markdown(plan)
    assert "| Utilization | $1,000,000 | $2,500,000 | $1,500,000 | 50%-90% |" in markdown
    assert "| Price | $1,900,000 | $2,000,000 | $100,000 | — |" in markdown
    assert "Broken" not in markdown
    assert "Base total: $4,512,300†." in markdown  # the recommendation's (cloud mix) total
    assert "chart-tornado" in render_html(plan)


def test_markdown_matches_golden(markdown: str) -> None:
    if UPDATE_GOLDEN:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(markdown, encoding="utf-8")
    assert GOLDEN.exists(), "no golden file: run with GPUFLEET_UPDATE_GOLDEN=1"
    assert markdown == GOLDEN.read_text(encoding="utf-8")


def test_renderers_are_deterministic(plan: Plan, markdown: str, html: str) -> None:
    assert render_markdown(plan) == markdown
    assert render_html(plan) == html


# -- HTML --------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class _Nesting(HTMLParser):
    """Checks that every element closes, in order; collects SVG titles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[str] = []
        self.svg_titles: list[str] = []
        self._in_svg_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append(tag)
        self._in_svg_title = tag == "title" and "svg" in self.stack

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()
        self._in_svg_title = False

    def handle_data(self, data: str) -> None:
        if self._in_svg_title:
            self.svg_titles.append(data)


def _parse(html: str) -> _Nesting:
    parser = _Nesting()
    parser.feed(html)
    parser.close()
    return parser


def test_html_is_well_nested(html: str) -> None:
    parser = _parse(html)
    assert parser.errors == []
    assert parser.stack == []
    assert html.startswith("<!DOCTYPE html>")


def test_html_shows_its_charts_with_titles(html: str) -> None:
    parser = _parse(html)
    assert parser.tags.count("svg") == 4
    assert len(parser.svg_titles) == 4
    assert all("(" in t and ")" in t for t in parser.svg_titles)  # titles state units


def test_html_is_self_contained(html: str) -> None:
    parser = _parse(html)
    assert "script" not in parser.tags
    assert "link" not in parser.tags
    assert "img" not in parser.tags
    assert not re.search(r"""\s(src|href)=["'](https?:)?//""", html)
    assert "<style>" in html


def test_html_has_sections_and_derived_marks(html: str) -> None:
    ids = re.findall(r'<section id="([a-z-]+)">', html)
    assert ids == [
        "executive",
        "recommendation",
        "alternatives",
        "workloads",
        "design",
        "cloud",
        "cost",
        "teams",
        "assumptions",
    ]
    assert html.count('class="derived"') > 30
    assert "1,040" in html
    assert "$4,512,300" in html


def test_charts_have_axis_labels_with_units(plan: Plan) -> None:
    charts = all_charts(plan)
    assert set(charts) == {"cost", "tornado", "alternatives", "break_even"}
    for name, svg in charts.items():
        assert "<title" in svg, name
        assert re.search(r">[^<]*\((USD|count)\)</text>", svg), name
    assert ">Months</text>" in charts["break_even"]
    assert "break-even 42.1 months" in charts["break_even"]


# -- escaping and optional parts ---------------------------------------------


def test_text_is_escaped_everywhere() -> None:
    base = make_plan()
    alternative = base.alternatives[0].model_copy(update={"accelerator": "x<b>&y"})
    hostile = base.model_copy(
        update={
            "name": "R&D <script>alert(1)</script> | *x*",
            "alternatives": [alternative],
            "infeasible": ["Raise the budget to > $9M | or relax <the> deadline."],
        }
    )
    html = render_html(hostile)
    assert "<script>" not in html
    assert "R&amp;D &lt;script&gt;" in html
    assert "x&lt;b&gt;&amp;y" in html  # table cell and SVG label
    assert _parse(html).errors == []
    markdown = render_markdown(hostile)
    assert "# Capacity plan: R&D \\<script\\>alert(1)\\</script\\> \\| \\*x\\*" in markdown
    assert "## What would make it feasible" in markdown
    assert "- Raise the budget to \\> $9M \\| or relax \\<the\\> deadline." in markdown


def test_plan_without_design_break_even_or_teams_renders() -> None:
    base = make_plan()
    cost = base.cost.model_copy(update={"break_even_months": None, "tco": {}, "sensitivity": []})
    lean = base.model_copy(
        update={"design": None, "cost": cost, "teams": [], "alternatives": [], "cloud": {}}
    )
    markdown = render_markdown(lean)
    assert "No on-prem design" in markdown
    assert "No break-even was computed" in markdown
    assert "## Teams" not in markdown
    assert "### Sensitivity" not in markdown
    html = render_html(lean)
    parser = _parse(html)
    assert parser.errors == []
    assert parser.tags.count("svg") == 1  # only the cost comparison is left
    assert set(all_charts(lean)) == {"cost"}


@pytest.mark.parametrize(
    ("got", "want"),
    [
        pytest.param(fmt_usd(4_512_300.4), "$4,512,300", id="usd-total"),
        pytest.param(fmt_usd(None), "—", id="usd-missing"),
        pytest.param(fmt_usd_rate(63.3), "$63.30", id="usd-rate"),
        pytest.param(fmt_count(1040), "1,040", id="count"),
        pytest.param(fmt_count(37.5), "37.5", id="count-fraction"),
        pytest.param(fmt_pct(0.3925), "39.2%", id="pct"),
        pytest.param(fmt_bytes(6.0e13), "60.0 TB", id="bytes-tb"),
        pytest.param(fmt_bytes(141e9), "141.0 GB", id="bytes-gb"),
        pytest.param(fmt_keyed("reserved_gpus", 16.0), "16", id="keyed-gpus"),
        pytest.param(fmt_keyed("total", 1.5e6, "usd"), "$1,500,000", id="keyed-default-usd"),
        pytest.param(fmt_keyed("per_gpu_hour", 2.171, "usd"), "$2.17", id="keyed-rate"),
        pytest.param(fmt_metric("train_time_days", 71.44), "Train time 71.4 days", id="days"),
        pytest.param(fmt_metric("mfu", None), "MFU —", id="metric-missing"),
        pytest.param(md_escape("a|b*c<d>`e` &amp;"), "a\\|b\\*c\\<d\\>\\`e\\` \\&amp;", id="md"),
    ],
)
def test_number_formats(got: str, want: str) -> None:
    assert got == want


def test_nice_ticks_cover_the_range() -> None:
    assert nice_ticks(0, 91_200_000) == [i * 20_000_000.0 for i in range(6)]
    ticks = nice_ticks(3_610_000, 5_410_000)
    assert ticks[0] <= 3_610_000
    assert ticks[-1] >= 5_410_000


# -- PDF ---------------------------------------------------------------------


def _pdf_objects(pdf: bytes) -> bytes:
    """The file with its Flate streams inflated: WeasyPrint packs pages in object streams."""
    chunks = [pdf]
    for match in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.DOTALL):
        try:
            chunks.append(zlib.decompress(match.group(1)))
        except zlib.error:
            continue
    return b"\n".join(chunks)


def test_pdf_renders_several_pages(pdf: bytes) -> None:
    assert pdf.startswith(b"%PDF")
    pages = re.findall(rb"/Type\s*/Page(?![a-zA-Z])", _pdf_objects(pdf))
    assert len(pages) >= 2


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext not installed")
def test_pdf_text_has_the_plan(pdf: bytes, tmp_path: Path) -> None:
    path = tmp_path / "plan.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], capture_output=True, check=True, text=True
    ).stdout
    for needle in ("Capacity plan: acme-llm-2027", "Assumptions and sources", "$4,512,300"):
        assert needle in text
    assert "Cumulative cost" in text  # chart text is real text in the PDF


# -- write_reports -----------------------------------------------------------


def test_write_reports_writes_all_four(plan: Plan, tmp_path: Path) -> None:
    if (why := render_module.pdf_available()) is not None:
        pytest.skip(why)
    out = tmp_path / "nested" / "out"
    written = write_reports(plan, out)
    assert {p.name for p in written.values()} == {"plan.json", "plan.md", "plan.html", "plan.pdf"}
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written.values())
    assert written["md"].read_text(encoding="utf-8") == render_markdown(plan)
    assert Plan.model_validate_json(written["json"].read_text(encoding="utf-8")) == plan
    assert written["pdf"].read_bytes().startswith(b"%PDF")


def test_write_reports_leaves_nothing_when_rendering_fails(
    plan: Plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: Plan) -> bytes:
        raise RuntimeError("no fonts")

    monkeypatch.setattr(render_module, "pdf_available", lambda: None)
    monkeypatch.setattr(render_module, "render_pdf", broken)
    with pytest.raises(RuntimeError, match="no fonts"):
        write_reports(plan, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_write_reports_leaves_no_partials_when_a_rename_fails(
    plan: Plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render_module, "pdf_available", lambda: None)
    monkeypatch.setattr(render_module, "render_pdf", lambda _: b"%PDF-1.7 stub")
    real_replace = Path.replace

    def flaky(self: Path, target: Path) -> Path:
        if self.name == "plan.html.partial":
            raise OSError("disk full")
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", flaky)
    # the user's to change (exit 2, no traceback)
    with pytest.raises(UserError, match=r"cannot write there \(disk full\)"):
        write_reports(plan, tmp_path)
    assert not list(tmp_path.glob("*.partial"))


def test_without_pdf_libraries_the_other_three_are_written(
    plan: Plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render_module, "pdf_available", lambda: "PDF skipped: no pango")
    written = write_reports(plan, tmp_path)
    assert sorted(written) == ["html", "json", "md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.html", "plan.json", "plan.md"]
