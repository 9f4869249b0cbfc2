"""`gpufleet estimate|search|validate inference` on the command line.

Exit codes: 0 when the load fits and meets its SLOs, 1 when it does not (or the
search finds nothing), 2 for bad input. JSON output keeps the stable fields of
InferenceEstimate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main

EXAMPLE = Path(__file__).parents[2] / "examples" / "inference-llama2-70b.yaml"

SPEC = """\
kind: inference
model: {{preset: {model}}}
serving:
  precision: {precision}
  engine: {engine}
  input_tokens: {input_tokens}
  output_tokens: 256
  {load}
  slo: {slo}
hardware: {{accelerator: {accelerator}, count: {count}}}
"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def write(
    tmp_path: Path,
    *,
    model: str = "llama-2-70b",
    precision: str = "fp8",
    engine: str = "tensorrt-llm",
    input_tokens: int = 1024,
    load: str = "request_rate: 50",
    slo: str = "{ttft_p99_ms: 1000, tpot_p99_ms: 100}",
    accelerator: str = "h100-sxm5-80gb",
    count: int = 8,
    extra: str = "",
) -> Path:
    path = tmp_path / "spec.yaml"
    text = SPEC.format(
        model=model,
        precision=precision,
        engine=engine,
        input_tokens=input_tokens,
        load=load,
        slo=slo,
        accelerator=accelerator,
        count=count,
    )
    path.write_text(text + extra, encoding="utf-8")
    return path


def example_with_count(tmp_path: Path, count: int) -> Path:
    """The 70B example with its hardware.count set: its rate needs 24 GPUs."""
    text = re.sub(r"count: \d+", f"count: {count}", EXAMPLE.read_text(encoding="utf-8"))
    path = tmp_path / f"example-{count}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def table_value(out: str, label: str) -> str:
    """The value on the terminal table's row `label`."""
    found = re.search(rf"^\s*{re.escape(label)}\s+(.+?)\s*$", out, re.MULTILINE)
    assert found is not None, label
    return found[1]


def estimate_json(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = run(["estimate", "inference", str(path), "--format", "json"], capsys)
    assert err == ""
    return code, json.loads(out)


STABLE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "ttft_ms": float,
    "tpot_ms": float,
    "output_tokens_per_s": (int, float),
    "output_tokens_per_s_per_gpu": float,
    "replica_capacity_output_tokens_per_s": float,
    "max_batch": int,
    "kv_cache_bytes_per_token": float,
    "kv_cache_bytes": float,
    "fits": bool,
    "replicas": int,
    "gpus": int,
    "slo_met": bool,
    "cost_per_million_output_tokens_usd": float,
}
MEMORY_FIELDS = ("weights", "kv_cache", "activations", "other", "total")


def test_example_json_has_every_stable_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = estimate_json(example_with_count(tmp_path, 24), capsys)

    assert code == 0
    for name, kind in STABLE_FIELDS.items():
        assert isinstance(data[name], kind), name
        assert not isinstance(data[name], bool) or kind is bool, name
    assert data["fits"] is True
    assert data["slo_met"] is True
    assert data["replicas"] * data["tp"] == data["gpus"]
    assert data["cost_per_million_output_tokens_usd"] > 0
    assert data["kv_cache_bytes_per_token"] == 80 * 2 * 8 * 128 * 1  # fp8 GQA
    memory = data["memory_per_gpu_bytes"]
    assert set(memory) == set(MEMORY_FIELDS)
    assert all(isinstance(memory[k], int) and memory[k] >= 0 for k in MEMORY_FIELDS)
    parts = sum(memory[k] for k in MEMORY_FIELDS if k != "total")
    assert abs(memory["total"] - parts) <= 3  # each part rounded to whole bytes
    assert memory["total"] <= data["memory_capacity_bytes"]
    # The H100 has MIG profiles; 70 GB of fp8 weights fit only the whole-GPU slice, where
    # TensorRT-LLM's 0.9 of the ~7 GB left free holds the KV cache of some requests.
    assert data["mig_fit"]
    for item in data["mig_fit"]:
        assert {"profile", "fits", "output_tokens_per_s"} <= set(item)
        assert isinstance(item["profile"], str)
        assert item["fits"] is (item["profile"] == "7g.80gb")
        assert (item["output_tokens_per_s"] > 0.0) is item["fits"]
    assert data["assumptions"]
    for item in data["assumptions"]:
        assert set(item) == {"name", "value", "source"}
        assert all(isinstance(v, str) and v for v in item.values())
    names = {a["name"] for a in data["assumptions"]}
    assert {"engine[tensorrt-llm]", "queueing", "price[h100-sxm5-80gb]"} <= names
    assert data["reasons"] == []


def test_example_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = example_with_count(tmp_path, 24)
    code, data = estimate_json(example, capsys)
    assert code == 0

    code, out, err = run(["estimate", "inference", str(example)], capsys)

    assert code == 0
    assert err == ""
    # The header gives the rate, then the slots each replica is sized for and the requests
    # the rate keeps in flight in them: it printed the slots (509) as "509 in flight".
    in_flight = data["in_flight_per_replica"]
    assert out.startswith(
        "h100-sxm5-80gb · fp8 weights · fp8 KV · tensorrt-llm · tp 8 · request_rate 50 req/s "
        f"· {data['slots_per_replica']} slots per replica, {in_flight:,.0f} in flight at this "
        "rate\n"
    )
    assert data["slots_per_replica"] == data["batch"] == 509
    assert table_value(out, "slots per replica (largest batch within the SLOs)") == "509"
    assert table_value(out, "time per output token at full slots (SLO check)") == (
        f"{data['tpot_ms']:,.1f} ms"
    )
    label = (
        f"in flight per replica at the load ({data['arrival_rate_per_replica_per_s']:,.3g} "
        f"req/s × {data['request_time_at_load_s']:,.3g} s)"
    )
    assert table_value(out, label) == f"{in_flight:,.0f}"
    assert table_value(out, f"time per output token at the load ({in_flight:,.0f} in flight)") == (
        f"{data['tpot_at_load_ms']:,.1f} ms"
    )
    assert f"{data['replicas']} × 8 = {data['gpus']}" in out
    assert table_value(out, "output tokens/s (system)") == "12,800"
    assert table_value(out, "output tokens/s per GPU") == f"{12_800 / data['gpus']:,.0f}"
    capacity = f"{data['replica_capacity_output_tokens_per_s']:,.0f}"
    assert table_value(out, "output tokens/s capacity per replica") == capacity
    assert table_value(out, "load fits") == "yes"
    assert "MIG profiles that hold it: 7g.80gb (" in out
    assert "SLO met" in out


def test_batch_and_concurrency_specs_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for load, mode in (("batch: 16", "batch"), ("concurrency: 32", "concurrency")):
        spec = write(tmp_path, load=load, extra="parallelism: {tp: 4}\n")
        code, data = estimate_json(spec, capsys)
        assert code == 0, load
        assert (data["mode"], data["tp"], data["replicas"], data["gpus"]) == (mode, 4, 2, 8)
        assert data["batch"] == int(load.split(": ")[1])


def test_a_load_that_does_not_fit_exits_1_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(
        tmp_path,
        model="llama-3.1-405b",
        precision="bf16",
        engine="vllm",
        load="batch: 8",
        slo="{}",
        accelerator="l4",
    )

    code, data = estimate_json(spec, capsys)

    assert code == 1
    assert data["fits"] is False
    assert data["slo_met"] is False
    assert len(data["reasons"]) == 2
    assert data["reasons"][0].startswith("does not fit: 8 requests of 1280 tokens need ")
    assert data["reasons"][0].endswith("; at most 0 fit at tp 1")
    # not even one request fits: the per-GPU numbers, and what would help (never the SLO)
    assert data["reasons"][1].startswith("no request fits: at TP 1 the weights alone take ")
    assert "What would help: " in data["reasons"][1]
    assert "SLO" not in data["reasons"][1]

    code, out, err = run(["estimate", "inference", str(spec)], capsys)
    assert code == 1
    assert err == ""
    assert "does not fit: 8 requests of 1280 tokens need" in out


def test_an_slo_no_concurrency_meets_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, slo="{tpot_p99_ms: 0.001}", extra="parallelism: {tp: 8}\n")
    code, data = estimate_json(spec, capsys)
    assert code == 1
    assert data["reasons"][0].startswith("no concurrency meets the time-per-output-token SLO")


def test_a_tight_ttft_slo_is_met_at_a_lower_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(
        tmp_path,
        slo="{ttft_p99_ms: 100, tpot_p99_ms: 100}",
        count=64,
        extra="parallelism: {tp: 8}\n",
    )
    # The search shows this very layout (H100, fp8, tp 8) meets both SLOs.
    code, out, _ = run(
        ["search", "inference", str(spec), "-a", "h100-sxm5-80gb", "--format", "json"], capsys
    )
    assert code == 0
    feasible = [c for c in json.loads(out)["top"] if (c["precision"], c["tp"]) == ("fp8", 8)]
    assert feasible
    assert all(c["ttft_ms"] <= 100 and c["tpot_ms"] <= 100 for c in feasible)

    code, out, err = run(["estimate", "inference", str(spec), "--format", "json"], capsys)

    assert code == 0, err
    assert err == ""
    data = json.loads(out)
    assert data["slo_met"] is True
    assert data["ttft_ms"] <= 100


def test_a_count_too_small_for_the_rate_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = example_with_count(tmp_path, 8)
    code, data = estimate_json(example, capsys)
    assert code == 1
    assert (data["gpus"], data["fits"], data["slo_met"]) == (24, False, True)
    reason = "the request rate needs 24 GPUs (3 replicas at tp 8); hardware.count gives 8"
    assert data["reasons"] == [reason]

    code, out, err = run(["estimate", "inference", str(example)], capsys)
    assert code == 1
    assert err == ""
    assert table_value(out, "load fits") == "no"
    assert reason in out


def test_an_unserved_rate_reports_nothing_served_in_table_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(
        tmp_path, slo="{ttft_p99_ms: 1000, tpot_p99_ms: 5}", extra="parallelism: {tp: 8}\n"
    )
    code, data = estimate_json(spec, capsys)
    assert code == 1
    assert (data["batch"], data["gpus"], data["fits"], data["slo_met"]) == (0, 8, False, False)
    # no slots within the SLO: nothing is served, so no throughput and no cost per token
    assert data["output_tokens_per_s"] == 0
    assert data["output_tokens_per_s_per_gpu"] == 0
    assert data["cost_per_million_output_tokens_usd"] is None
    assert data["reasons"][0].startswith("no concurrency meets the time-per-output-token SLO (")

    code, out, _ = run(["estimate", "inference", str(spec)], capsys)
    assert code == 1
    assert "· request_rate 50 req/s · 0 slots per replica\n" in out
    assert data["in_flight_per_replica"] is None
    assert data["tpot_at_load_ms"] is None
    assert table_value(out, "output tokens/s (system)") == "0"
    assert table_value(out, "$ per million output tokens") == "-"


BAD_INPUT = [
    pytest.param(
        {"engine": "tensorrt-llm", "accelerator": "mi300x"},
        "error: serving.engine: tensorrt-llm does not run on AMD accelerators; it runs on NVIDIA",
        id="engine-vendor",
    ),
    pytest.param(
        {"precision": "fp8", "engine": "vllm", "accelerator": "a100-sxm4-80gb"},
        "error: {path}: invalid spec\n"
        "  serving.precision: fp8 is not supported by a100-sxm4-80gb (the catalog lists no "
        "FP8 throughput); use bf16 or int8",
        id="fp8-on-a100",
    ),
    pytest.param(
        {"extra": "parallelism: {tp: 3}\n"},
        "error: {path}: invalid spec\n"
        "  parallelism.tp (3) must divide model.heads (64)\n"
        "  hardware.count (8) is not a multiple of tp × pp (3)",
        id="tp-divides-heads",
    ),
]


@pytest.mark.parametrize(("fields", "message"), BAD_INPUT)
def test_bad_input_exits_2(
    fields: dict[str, str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, **fields)  # type: ignore[arg-type]

    code, out, err = run(["estimate", "inference", str(spec), "--format", "json"], capsys)

    assert code == 2
    assert out == ""
    assert err.strip() == message.format(path=spec)
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["estimate", "search"])
def test_unknown_format_is_bad_input(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([command, "inference", str(EXAMPLE), "--format", "yaml"], capsys)
    assert code == 2
    assert out == ""
    assert err.strip() == "error: --format: 'yaml' is not one of table, json"


def test_search_json_top_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["search", "inference", str(EXAMPLE), "--format", "json", "--top", "3"], capsys
    )

    assert code == 0
    assert err == ""
    data = json.loads(out)
    assert set(data) == {"candidates_evaluated", "rejected", "why_none", "top", "assumptions"}
    top = data["top"]
    assert 1 <= len(top) <= 3
    costs = [c["cost_per_million_output_tokens_usd"] for c in top]
    assert all(isinstance(c, float) and c > 0 for c in costs)
    assert costs == sorted(costs)
    for c in top:
        assert c["replicas"] * c["tp"] == c["gpus"]
        assert c["tpot_ms"] <= 100
        assert c["ttft_ms"] <= 1000
        assert c["slo_met"] is True
    rejected = data["rejected"]
    assert all(isinstance(n, int) and n > 0 for n in rejected.values())
    # tensorrt-llm on the two AMD parts, 4 precisions × 4 tensor-parallel sizes each
    assert rejected["engine does not run on this vendor"] == 32
    assert data["candidates_evaluated"] > 0
    for item in data["assumptions"]:
        assert set(item) == {"name", "value", "source"}


def test_search_table_and_accelerator_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["search", "inference", str(EXAMPLE), "-a", "h100-sxm5-80gb", "--format", "json"], capsys
    )
    assert code == 0
    assert {c["accelerator"] for c in json.loads(out)["top"]} == {"h100-sxm5-80gb"}

    code, out, err = run(["search", "inference", str(EXAMPLE), "--top", "2"], capsys)
    assert code == 0
    assert err == ""
    assert "Rejected: " in out
    assert "engine does not run on this vendor" in out


def test_search_with_nothing_feasible_exits_1_in_json_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write(tmp_path, slo="{tpot_p99_ms: 0.001}")
    argv = ["search", "inference", str(spec)]
    table_code, _, _ = run(argv, capsys)
    json_code, out, _ = run([*argv, "--format", "json"], capsys)
    data = json.loads(out)
    assert data["top"] == []
    assert data["rejected"]["no concurrency meets the SLO"] > 0
    assert table_code == 1
    assert json_code == 1


def test_search_with_only_the_wrong_vendor_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        ["search", "inference", str(EXAMPLE), "-a", "mi300x", "--format", "json"], capsys
    )
    assert code == 1
    data = json.loads(out)
    assert data["top"] == []
    assert data["rejected"] == {"engine does not run on this vendor": 16}


def test_validate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["validate", "inference", "--format", "json"], capsys)
    assert code == 0
    assert err == ""
    data = json.loads(out)
    assert set(data["summary"]) == {"throughput_median_abs", "ttft_median_abs", "kv_abs"}
    assert data["summary"]["throughput_median_abs"] <= 0.15
    for row in data["rows"]:
        assert row["error"] == pytest.approx(row["predicted"] / row["published"] - 1)


def test_validate_markdown_states_the_targets(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["validate", "inference", "--format", "markdown"], capsys)
    assert code == 0
    assert out.startswith("| id | metric | published | predicted | error | how |\n")
    assert "(target ≤ 15%)" in out
    assert "(target ≤ 20%)" in out
    assert "(target ≤ 3%)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--write"], "error: --write needs --fit", id="write-without-fit"),
        pytest.param(
            ["--format", "yaml"],
            "error: --format: 'yaml' is not one of table, json, markdown",
            id="format",
        ),
    ],
)
def test_validate_bad_input(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["validate", "inference", *argv], capsys)
    assert code == 2
    assert out == ""
    assert err.strip() == message


def test_validate_inference_modern_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["validate", "inference", "--rows", "modern"], capsys)
    assert code == 0
    assert err == ""
    found = re.search(r"modern inference rows: (\d+) compared, (\d+) skipped", out)
    assert found is not None
    assert int(found[1]) + int(found[2]) == 143
    assert "H200 / H100 throughput ratio at the same settings" in out
    assert "H200/H100 ratio: published median" in out


def test_validate_inference_modern_markdown_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["validate", "inference", "--rows", "all", "--format", "markdown"], capsys)
    assert code == 0
    assert out.startswith("| id | metric | published | predicted | error | how |\n")
    assert "**Inference estimator vs modern published measurements (engine profiles" in out
    code, out, _ = run(["validate", "inference", "--rows", "modern", "--format", "json"], capsys)
    data = json.loads(out)
    assert len(data["rows"]) + len(data["skipped"]) == 143
    assert len(data["pairs"]) == 20


def test_validate_inference_unknown_rows_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["validate", "inference", "--rows", "h100"], capsys)
    assert code == 2
    assert out == ""
    assert err.strip() == "error: --rows: 'h100' is not one of calibration, modern, all"


def test_search_with_nothing_that_fits_says_why_in_table_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model no TP on one node holds: the search names what it tried and what would help
    (it printed only "Rejected: 16 model and one request do not fit in memory")."""
    spec = write(tmp_path, model="llama-3.1-405b", precision="bf16", accelerator="l4")
    argv = ["search", "inference", str(spec), "-a", "l4"]
    code, out, _ = run(argv, capsys)
    assert code == 1
    flat = " ".join(out.split())
    assert (
        "Nothing serves it: llama-3.1-405b in bf16 does not fit on l4 at TP 1 on one node" in flat
    )
    assert "What would help:" in flat

    code, out, _ = run([*argv, "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 1
    assert data["top"] == []
    assert data["why_none"].startswith("llama-3.1-405b in bf16 does not fit on l4 at TP 1")


def test_search_columns_say_slots_and_load_apart(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["search", "inference", str(EXAMPLE), "--format", "json", "--top", "3"], capsys
    )
    assert code == 0
    data = json.loads(out)
    assert data["why_none"] is None
    for c in data["top"]:
        assert "concurrency" not in c
        assert 1 <= c["in_flight"] < c["slots"]
        assert c["tpot_at_load_ms"] < c["tpot_ms"]
    code, out, _ = run(["search", "inference", str(EXAMPLE), "--top", "2"], capsys)
    assert "in flight" in out
    assert "TPOT ms (load)" in out


def test_a_load_too_big_for_the_count_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviewer's cnt.yaml: a 70B bf16 model on a count of 1 H100 was put at tp 2 and
    printed "1 × 2 = 2" GPUs and "load fits yes"."""
    spec = write(
        tmp_path, precision="bf16", engine="vllm", load="concurrency: 4", slo="{}", count=1
    )
    code, data = estimate_json(spec, capsys)
    assert code == 1
    assert (data["tp"], data["gpus"], data["fits"]) == (1, 1, False)
    assert "hardware.count gives 1 GPU: tp 2 (2 GPUs) would hold the load" in data["reasons"][-1]
