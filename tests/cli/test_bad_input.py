"""Bad input, table-driven: each case is a file a user might write and the exact message.

Every case must exit 2, print one `error:` block on stderr naming what to change,
print no traceback and write nothing.
"""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from gpufleet.cli.main import main

TRAIN = """\
kind: training
model: {model}
training: {training}
hardware: {hardware}
"""


def training(
    model: str = "{preset: llama-3-8b}",
    training: str = "{seq_len: 8192, global_batch: 512, tokens: 15T}",
    hardware: str = "{accelerator: h100-sxm5-80gb, count: 64}",
    extra: str = "",
) -> str:
    return TRAIN.format(model=model, training=training, hardware=hardware) + extra


CASES = [
    pytest.param(
        training(model="{preset: llama-3-8b, hiden: 4096}"),
        ["model.hiden: unknown field; did you mean 'hidden'?"],
        id="typo-in-preset-override",
    ),
    pytest.param(
        training(
            model="{layers: 32, hiden: 4096, heads: 32, ffn_hidden: 14336,"
            " ffn_type: swiglu, vocab: 128256}"
        ),
        [
            "model.hidden: required field missing",
            "model.hiden: unknown field; did you mean 'hidden'?",
        ],
        id="typo-in-explicit-architecture",
    ),
    pytest.param(
        training().replace("hardware:", "hardwre:"),
        [
            "hardware: required field missing",
            "hardwre: unknown field; did you mean 'hardware'?",
        ],
        id="typo-at-top-level",
    ),
    pytest.param(
        training(training="{seq_len: long, global_batch: 512}"),
        ["training.seq_len: expected a whole number, got 'long'"],
        id="wrong-type",
    ),
    pytest.param(
        training(hardware="{accelerator: h100-sxm5-80gb, count: -8}"),
        ["hardware.count: must be greater than 0, got -8"],
        id="negative-count",
    ),
    pytest.param(
        training(training="{seq_len: 8192, global_batch: 0}"),
        ["training.global_batch: must be greater than 0, got 0"],
        id="zero-batch",
    ),
    pytest.param(
        training(
            hardware="{accelerator: h100-sxm5-80gb, count: 48}", extra="parallelism: {tp: 3}\n"
        ),
        ["parallelism.tp (3) must divide model.heads (32)"],
        id="tp-not-dividing-heads",
    ),
    pytest.param(
        training(hardware="{accelerator: h10-sxm5, count: 64}"),
        ["hardware.accelerator: unknown accelerator 'h10-sxm5'; did you mean 'h100-sxm5-80gb'?"],
        id="unknown-accelerator",
    ),
    pytest.param(
        training(model="{preset: llama-3-80b}"),
        ["model: unknown model preset 'llama-3-80b'; did you mean 'llama-3-8b' or 'llama-3-70b'?"],
        id="unknown-preset",
    ),
    pytest.param(
        training(training="{seq_len: 8192, global_batch: 512, tokens: 15X}"),
        ["training.tokens: unknown count suffix 'X' in '15X'; use K, M, B, T or P"],
        id="bad-quantity-suffix",
    ),
    pytest.param(
        training(
            training="{seq_len: 8192, global_batch: 512, precision: fp8}",
            hardware="{accelerator: a100-sxm4-80gb, count: 64}",
        ),
        [
            "training.precision: fp8 is not supported by a100-sxm4-80gb "
            "(the catalog lists no FP8 throughput); use bf16"
        ],
        id="fp8-on-a100",
    ),
    pytest.param(
        training(training="{seq_len: 8192, global_batch: 512, precision: fp32}"),
        ["training.precision: must be one of 'bf16' or 'fp8', got 'fp32'"],
        id="unknown-precision",
    ),
    pytest.param(
        training(extra="parallelism: {tp: 8, pp: 2, dp: 8}\n"),
        ["tp × pp × cp × dp = 128 but hardware.count is 64; make them equal or omit dp"],
        id="parallel-layout-does-not-multiply-out",
    ),
    pytest.param(
        training(
            hardware="{accelerator: h100-sxm5-80gb, count: 64}",
            extra="parallelism: {tp: 8, dp: 8, microbatch: 3}\n",
        ),
        ["training.global_batch (512) must be a multiple of dp × microbatch (8 × 3 = 24)"],
        id="batch-not-divisible",
    ),
    pytest.param(
        "kind: trainig\nmodel: {preset: llama-3-8b}\n",
        ["kind: unknown kind 'trainig'; did you mean 'training'?"],
        id="unknown-kind",
    ),
    pytest.param(
        "model: {preset: llama-3-8b}\n",
        [
            "kind: required field missing; one of training, inference, cluster, teams, plan, "
            "jobs, workload"
        ],
        id="missing-kind",
    ),
    pytest.param(
        "- a\n- b\n",
        ["expected a mapping of fields at the top level, got list"],
        id="list-at-top-level",
    ),
    pytest.param(
        "",
        ["expected a mapping of fields at the top level, got empty"],
        id="empty-file",
    ),
    pytest.param(
        """\
        kind: cluster
        node_groups:
          - {name: g, count: 2, accelerator: l40s, mig_layout: all-balanced}
        """,
        ["node_groups[0].mig_layout: l40s does not support MIG"],
        id="mig-on-a-gpu-without-mig",
    ),
    pytest.param(
        """\
        kind: cluster
        node_groups:
          - {name: g, count: 2, accelerator: a100-sxm4-80gb, mig_layout: {3g.40gb: 2, 2g.20gb: 1}}
        """,
        [
            "node_groups[0].mig_layout: compute: 8 slices requested, a100-sxm4-80gb has 7",
            "node_groups[0].mig_layout: memory: 100 GB requested, more than a100-sxm4-80gb's "
            "80 GB even allowing 1 GB of name rounding per instance",
        ],
        id="mig-layout-overfull",
    ),
    pytest.param(
        """\
        kind: cluster
        node_groups:
          - {name: g, count: 2, accelerator: h100, topology: leaf-1}
        """,
        ["node_groups[0].topology: 'leaf-1' has 1 level; expected 2 (block/leaf)"],
        id="topology-path-too-short",
    ),
    pytest.param(
        """\
        kind: teams
        teams:
          - name: a
            quotas: [{flavor: h100, guaranteed_gpus: 8, limit_gpus: 4}]
        """,
        ["teams[0].quotas[0]: limit_gpus (4) is below guaranteed_gpus (8)"],
        id="quota-limit-below-guarantee",
    ),
    pytest.param(
        """\
        kind: inference
        model: {preset: llama-2-70b}
        serving: {input_tokens: 1024, output_tokens: 256, batch: 8, request_rate: 5}
        hardware: {accelerator: h100, count: 8}
        """,
        ["serving: give one of batch, concurrency or request_rate, not batch and request_rate"],
        id="two-load-modes",
    ),
    pytest.param(
        """\
        kind: plan
        workloads:
          - {name: x, kind: trainng, model: llama-3-8b}
          - {name: y, model: llama-3-8b}
        """,
        [
            "workloads[0].kind: unknown kind 'trainng'; did you mean 'training'?",
            "workloads[1].kind: required field missing",
        ],
        id="plan-workload-kind",
    ),
    pytest.param(
        """\
        kind: plan
        workloads:
          - {name: a, kind: inference, model: llama-3-8b,
             serving: {input_tokens: 100, output_tokens: 10}}
          - {name: a, kind: inference, model: llama-3-8b,
             serving: {input_tokens: 100, output_tokens: 10}}
        """,
        ["workloads: names must be unique; repeated: a"],
        id="plan-duplicate-names",
    ),
    pytest.param(
        """\
        kind: inference
        model: {preset: llama-2-70b}
        serving: {input_tokens: 4000, output_tokens: 1000}
        hardware: {accelerator: h100, count: 8}
        """,
        ["serving: input + output tokens (5000) exceed the model's context (4096)"],
        id="longer-than-context",
    ),
]


@pytest.mark.parametrize(("text", "problems"), CASES)
def test_bad_spec_gets_exact_messages_and_exit_2(
    text: str, problems: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(dedent(text), encoding="utf-8")
    before = sorted(tmp_path.iterdir())

    code = main(["check", str(spec)])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"error: {spec}: invalid spec", *(f"  {p}" for p in problems)]
    assert "Traceback" not in err
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["check", "{tmp}/nope.yaml"], "{tmp}/nope.yaml: no such file", id="missing"),
        pytest.param(
            ["check", "{tmp}"], "{tmp}: is a directory, expected a YAML file", id="directory"
        ),
        pytest.param(
            ["check", "{tmp}/broken.yaml"],
            "{tmp}/broken.yaml: YAML syntax error at line 3, column 9: "
            "expected ',' or '}}', but got ':'",
            id="yaml-syntax",
        ),
        pytest.param(
            ["check", "{tmp}/latin1.yaml"],
            "{tmp}/latin1.yaml: not a UTF-8 text file",
            id="not-utf8",
        ),
        pytest.param(
            ["schema", "trainnig"],
            "unknown schema 'trainnig'; did you mean 'training'?",
            id="schema",
        ),
        pytest.param(
            ["catalog", "gpus", "--filter", "vendr=NVIDIA"],
            "--filter 'vendr=NVIDIA': unknown column 'vendr'; did you mean 'vendor'?",
            id="filter-column",
        ),
        pytest.param(
            ["catalog", "gpus", "--filter", "tdp_w>=lots"],
            "--filter 'tdp_w>=lots': 'lots' is not a number",
            id="filter-number",
        ),
        pytest.param(
            ["catalog", "gpus", "--filter", "vendor"],
            "--filter 'vendor': expected KEY=VALUE (also !=, ~=, >=, <=, >, <), e.g. vendor=NVIDIA",
            id="filter-shape",
        ),
    ],
)
def test_bad_command_input(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.yaml").write_text("kind: training\nmodel: {preset: x\ntraining: [}\n")
    (tmp_path / "latin1.yaml").write_bytes("kind: é\n".encode("latin-1"))
    args = [a.format(tmp=tmp_path) for a in argv]

    code = main(args)

    _, err = capsys.readouterr()
    assert code == 2
    assert err.strip() == "error: " + message.format(tmp=tmp_path)


def test_usage_errors_exit_2_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "gpus", "--bogus"]) == 2
    _, err = capsys.readouterr()
    assert "No such option" in err
    assert "Traceback" not in err


def test_a_spec_of_another_kind_gets_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    examples = Path(__file__).parents[2] / "examples"
    code = main(["estimate", "training", str(examples / "plan-chat-70b.yaml")])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines()[1:] == [
        "  kind: this command reads training specs; this file is kind 'plan'"
    ]


def test_reports_under_a_file_exit_2_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --out` naming a folder that cannot be made (a file is in the way) is the
    user's to change, as a bad spec is."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    spec = Path(__file__).resolve().parents[2] / "examples" / "plan-pretrain-70b.yaml"
    assert main(["plan", str(spec), "--out", str(blocker / "reports")]) == 2
    err = capsys.readouterr().err
    assert f"--out {blocker / 'reports'}: cannot write there (Not a directory:" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
