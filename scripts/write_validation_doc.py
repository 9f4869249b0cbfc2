"""Regenerate docs/validation.md from the validation commands' own output.

    .venv/bin/python scripts/write_validation_doc.py

Every table in that page comes from a command a reader can re-run; only the prose is
kept here. Run it after any change to the estimators or their parameters.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPUFLEET = str(Path(sys.executable).with_name("gpufleet"))


def run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()


TRAINING = """\
## Training estimator vs published runs

```sh
.venv/bin/gpufleet validate training                   # terminal table
.venv/bin/gpufleet validate training --format markdown # these tables
.venv/bin/gpufleet validate training --fit             # refit the efficiency parameters
```

Every row of `src/gpufleet/validation/data/training_calibration.csv` (the team's ground truth,
35 rows) is rebuilt as published: architecture, GPU, layout and software generation
(`megatron-2021` for Narayanan et al. 2021 and Korthikanti et al. 2022, `deepspeed` for the
ZeRO-3 rows, an overlapping flash-attention stack for LLaMA). What a paper leaves out
(microbatch, LLaMA's parallelism) is chosen as `gpufleet search` would: the fastest layout that
fits. TFLOP/s rows are compared in the paper's own FLOP convention; GPU-hour rows include the
goodput model (failures, checkpoints, restarts).

Targets (issue 3): throughput rows median |error| <= 10 %, max <= 25 %; GPU-hour rows median
<= 15 %. `tests/validation/test_training_targets.py` fails the build if they stop holding.

Fitted parameters (A100 rows only; `src/gpufleet/estimate/data/efficiency.yaml`, bounds in that
file): bf16 GEMM fraction of peak 0.731, per-kernel overhead 21 µs, HBM fraction 0.840, NVLink
collective fraction 0.775, InfiniBand fraction 0.92 (at its upper bound), overlap interference
0.32. Fitting moved the median error from 4.2 % (the physical first guesses) to 3.9 %.
"""

HOLDOUT = """\
The hold-out rows are not in the ground truth and never enter a fit; their figures were
transcribed from the publications (see `training_holdout.yaml`). They test other GPUs (H100),
GQA/SwiGLU, 128K context with context parallelism, and 16K GPUs. Since issue 28 the H100
runs use the Hopper family's efficiency fitted on the modern rows, no longer the A100 values,
and Meta's Llama 3 405B runs are predicted 15-26 % below their published MFU (within 6 %
before). The efficiency is not the cause: the spec leaves `virtual_stages` out, no layout fits
the memory model, and the search then keeps one or two virtual stages at pp 16 (31-48 % of
the step in the bubble) where Meta interleaved more. Given `virtual_stages: 4`, they are +4 %,
-0.3 % and +15 % (448, 399 and 436 TFLOP/s against 430, 400 and 380). The fix belongs to
the memory model and the knob search (issue 28 items 3-4); these rows stay out of the fit.
The memory model says the Llama 3 layouts need 92–123 GB per GPU
where Meta ran them in 80 GB: Meta balanced and trimmed its pipeline stages and deallocated
pipeline outputs, which the model does not represent, so treat "does not fit" near the limit
as "needs memory engineering", not as impossible.
"""

INFERENCE = """\
## Inference estimator vs published measurements

```sh
.venv/bin/gpufleet validate inference                   # terminal table
.venv/bin/gpufleet validate inference --format markdown # this table
.venv/bin/gpufleet validate inference --fit             # refit the TensorRT-LLM profile
```

Rows: `src/gpufleet/validation/data/inference_calibration.csv`. Targets (issue 4): throughput
rows median |error| <= 15 %, TTFT rows median <= 20 %, the KV-cache accounting row within 3 %;
`tests/validation/test_inference_targets.py` enforces them.

Fitted on the six TensorRT-LLM A100 rows whose request lengths are published
(`src/gpufleet/estimate/data/engines.yaml`): decode bandwidth fraction 0.733, prefill compute
fraction 0.753, fixed step cost 0 (at its lower bound), per-request overhead 7.0 ms. Other
engines are stated ratios of TensorRT-LLM with their sources; AMD and Intel carry a software
maturity factor (0.63) taken from MLPerf v4.1 results, so an MI300X is not ranked by its
datasheet bandwidth alone.

The KV-cache row follows vLLM's own accounting: 0.9 × device memory (the driver-reported size,
40,960 MiB, from the catalog) − weights − the profiling run's activation peak, modelled as the
logits of every profiled token kept as bf16 + fp32 + fp32 probabilities (10 bytes per logit,
an assumption about vLLM V1 internals). The row's own log splits these as 35.55 GiB usable and
a 9.37 GiB peak; the model has 36.00 and 9.85 — each off by about 1–5 %, which partly cancel.

The MLPerf row gives no request lengths; it is predicted with an assumed 870 input / 290
output tokens per request (the OpenOrca subset's means as recalled, not checked) and is not
used in the fit. Its error (about −33 %) cannot be split between that assumption and the
model: prefill dominates at these lengths, so shorter real prompts would raise the prediction.
It counts in the throughput median, which stays within target with or without it.
"""


MODERN = """\
## Modern rows

```sh
.venv/bin/gpufleet validate training --rows modern                    # terminal tables
.venv/bin/gpufleet validate training --rows modern --format markdown  # the tables below
.venv/bin/gpufleet validate training --rows modern --fit              # refit per family + LOSO
.venv/bin/gpufleet validate training --rows modern --fit --write      # ... and save the values
.venv/bin/gpufleet validate inference --rows modern --format markdown
.venv/bin/gpufleet validate training --rows all --format json         # both sets, every field
```

Published runs on current hardware (`src/gpufleet/validation/data/training_modern.csv`, 157
rows, and `inference_modern.csv`, 143 rows; provenance in that folder's README). Training is
measured with the per-family efficiency fitted on these rows (design note
`docs/design/0016-overlap-and-efficiency.md`); inference is still the baseline, nothing
fitted. {when}

Each row is rebuilt as published: the model shape from its columns (MPT with LayerNorm,
biases, learned positions and tied embeddings; MaxText with its 256-wide heads), the device
mapped to a catalog accelerator by an explicit table (`gpufleet.validation.modern`), its
precision (FP8 GEMMs at the FP8 peak, attention in bf16), the stated tp/pp/dp/cp, microbatch,
recompute, sequence parallelism, ZeRO stage and virtual pipeline stages, and the framework's
profile (`llm-foundry-fsdp`, `torchtitan-fsdp2`, `fsdp` for AMD's FSDP script,
`megatron-core` for Megatron-Bridge, `nemo`, `jax` for MaxText). What a source leaves out
(NeMo's recompute and microbatch, for example) is chosen as `gpufleet search` would: the
fastest choice that fits, or the one nearest to fitting when none fits the memory model (flagged in
the layout). Training is compared in the row's own metric: tokens/s per GPU where the source
measured it, else TFLOP/s in the source's FLOP convention, which
`tests/validation/test_modern_training.py` checks against every rate the sources printed
(within 0.3 %). Rows using a speed-up the model has no knob for (torch.compile, async TP,
MXFP8) are compared and flagged under "not modelled". A row the estimators cannot express is
skipped and counted under a fixed reason. Inference: offline rows run `continuous` at the
most requests whose KV cache fits; static latency rows run `static_batch`; errors are also
stated as output-throughput errors so that both kinds summarise together.

{headline}

### Training: the per-family fit and leave-one-source-out

Before issue 28's training work (the A100-fitted parameters reused on every accelerator, most
communication exposed) the same rows gave a median |error| of 32.8 % (+29.6 %: optimistic);
per accelerator H100 38 %, H200 5 %, GB200 38 %, B200 33 %, MI300X 88 %, MI325X 16 %, TPU v5p
8 %; FP8 rows +67 %, bf16 +18 %. The fit below (each family on its own rows, bounded, robust,
with a weak prior; `tests/validation/test_modern_fit.py` checks that efficiency.yaml holds
exactly its output and that the figures do not regress):

{fit}

Against the issue's targets: overall median {overall} (target 8 %); per accelerator with at
least 5 rows {per_acc} (target 12 %); leave-one-source-out {loso} (target 15 %). The overall
and leave-one-source-out targets are not met; why, as far as the rows show it:

- Leave-one-source-out is the figure for runs nobody fitted on, and it is large where one
  source is a family's only source: without MaxText the TPU borrows Hopper's fractions
  × 0.9 and is 30 % slow; without Megatron-Bridge, Blackwell borrows Hopper's × 0.9 (23 %
  slow); without llm-foundry, Hopper has no flash-attn row at long sequences. Plans for an
  accelerator without rows carry the same uncertainty, and say so in their assumptions.
- The worst rows are not efficiency: llm-foundry FSDP at microbatch 2 on 16-64 GPUs is
  predicted 60-70 % slow (its gathers would need more than one 400 Gb/s NIC per GPU in the
  model); the memory model rejects layouts that ran (MaxText's selective remat, Megatron's
  405B, the MI325X FP8 runs without recompute), so the search falls back to full recompute or
  to the layout nearest to fitting (issue 28 item 4). These rows bound how low the medians
  can honestly go with bounded efficiencies.
- The flash-attn-class attention kernel fits at its lower bound (0.30 of the bf16 GEMM rate on
  Hopper): llm-foundry's 16K-64K-token rows are that slow; no faster value fits them.
- Inference is optimistic by a median of {inf_signed} (not refitted here). On MI300X latency
  rows the throughput error grows with the batch, from about 0 at batch 1-4 to +55-90 % at
  128-256: the model's decode step slows less with batch than vLLM on ROCm does. The
  H200/H100 ratio is overstated for Llama 3.1 8B (median predicted {ratio_8b_pred} against
  a published {ratio_8b_pub}) and close for 405B at TP8 ({ratio_405b} median |error|).
- No B200/GB200 inference baseline: every row on them is NVFP4, which the inference model
  does not have. The Grand Teton H100 (torchtitan, 30 rows) is not in the catalog.
"""


def modern_text() -> str:
    """The modern-rows prose with this run's numbers (from the commands' JSON output)."""
    import json
    import statistics

    train = json.loads(run(GPUFLEET, "validate", "training", "--rows", "modern", "-f", "json"))
    infer = json.loads(run(GPUFLEET, "validate", "inference", "--rows", "modern", "-f", "json"))
    t, i = train["summary"], infer["summary"]

    def groups(summary: dict[str, object], key: str) -> str:
        items = summary[key]
        assert isinstance(items, list)
        return ", ".join(f"{g['key']} {g['median_abs']:.0%} ({g['rows']} rows)" for g in items)

    def pair_median(model: str, field: str) -> float:
        values = [p[field] for p in infer["pairs"] if p["model"] == model]
        return float(statistics.median(values))

    pair_errors = [abs(p["error"]) for p in infer["pairs"] if p["model"] == "llama-3.1-405b"]
    headline = (
        f"**Where the models stand.** Training: {t['validated']} rows compared, "
        f"{t['skipped']} skipped; median |error| {t['median_abs']:.1%} (median error "
        f"{t['median_signed']:+.1%}; > 0 = model faster than published); "
        f"{t['within_10']} rows within 10 %, {t['within_25']} within 25 %. Per accelerator: "
        f"{groups(t, 'by_accelerator')}. Per source: {groups(t, 'by_source')}. "
        f"Inference: {i['validated']} rows compared, {i['skipped']} skipped; median |output "
        f"throughput error| {i['median_abs']:.1%} (median {i['median_signed']:+.1%}), "
        f"{i['within_15']} rows within 15 %. Per accelerator: {groups(i, 'by_accelerator')}. "
        f"H200/H100 throughput ratio over {len(infer['pairs'])} pairs at the same settings: "
        f"published median {i['pairs_published_median']:.2f}, predicted "
        f"{i['pairs_predicted_median']:.2f}, median |ratio error| {i['pairs_median_abs']:.1%}."
    )
    when = (
        f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} on {platform.machine()} "
        f"({platform.system()}), Python {platform.python_version()}; the estimators are "
        "deterministic and need no accelerator."
    )
    fit = json.loads(
        run(GPUFLEET, "validate", "training", "--rows", "modern", "--fit", "-f", "json")
    )
    per_acc = ", ".join(
        f"{g['key']} {g['median_abs']:.1%}" for g in fit["after_by_accelerator"] if g["rows"] >= 5
    )
    return MODERN.format(
        when=when,
        headline=headline,
        fit=run(GPUFLEET, "validate", "training", "--rows", "modern", "--fit", "-f", "markdown"),
        overall=f"{fit['after_median_abs']:.1%}",
        per_acc=per_acc,
        loso=f"{fit['loso_median_abs']:.1%}",
        inf_signed=f"{i['median_signed']:+.0%}",
        ratio_8b_pred=f"{pair_median('llama-3.1-8b', 'predicted'):.2f}",
        ratio_8b_pub=f"{pair_median('llama-3.1-8b', 'published'):.2f}",
        ratio_405b=f"{statistics.median(pair_errors):.0%}",
    )


def main() -> int:
    training = run(GPUFLEET, "validate", "training", "--format", "markdown")
    inference = run(GPUFLEET, "validate", "inference", "--format", "markdown")
    modern_training = run(GPUFLEET, "validate", "training", "--rows", "modern", "-f", "markdown")
    modern_inference = run(GPUFLEET, "validate", "inference", "--rows", "modern", "-f", "markdown")
    device = run(
        sys.executable,
        "-m",
        "benchmarks.device.compare",
        "benchmarks/device/results/h200-2026-11-29.json",
    ).replace("\n### ", "\n#### ")
    head = [
        "# Validation of the estimators",
        "",
        "Accuracy targets are checked by commands in the repository; this page is written by",
        "`scripts/write_validation_doc.py` from their output. Last run: "
        f"{time.strftime('%Y-%m-%d', time.gmtime())} on {platform.machine()}, "
        f"Python {platform.python_version()} (the estimators are deterministic; the machine "
        "does not change the numbers).",
        "",
    ]
    table, _, held = training.partition("Hold-out runs (never fitted):")
    page = "\n".join(
        [
            *head,
            TRAINING,
            table.strip(),
            "",
            "Hold-out runs (never fitted):",
            "",
            held.strip(),
            "",
            HOLDOUT,
            INFERENCE,
            inference,
            "",
            modern_text(),
            "### Training, modern rows",
            "",
            modern_training,
            "",
            "### Inference, modern rows",
            "",
            modern_inference,
            "",
            "## Device check: one H200 (not used for fitting)",
            "",
            "`benchmarks/device/gpu_check.py` ran on a lent H200 (PyTorch 2.11, CUDA 13) on",
            "2026-11-29; raw results are in `benchmarks/device/results/`.",
            "`python -m benchmarks.device.compare` sets the model beside them:",
            "",
            device,
            "",
            READING,
        ]
    )
    (ROOT / "docs" / "validation.md").write_text(page + "\n", encoding="utf-8")
    return 0


READING = """\
Reading: the GEMM term, fitted on A100 rows only, carries to the H200 within about 4 % median
on transformer-sized GEMMs (n, k >= 4096); small GEMMs (n or k = 1024) run slower than the
model by up to 40 %. Whole eager-PyTorch training steps are 12–21 % slower than the model,
which is calibrated on fused Megatron kernels: eager PyTorch re-casts fp32 master weights every
step and launches unfused elementwise kernels. Activation memory without recomputation matches
within 9 %. The "measured activations" column is peak minus the bytes left after a step;
because `zero_grad(set_to_none=True)` frees gradients at the start of the next step, rows with
full recomputation (small activations) peak in the optimizer instead, so their measured value
is not an activation size (the 0.4 GiB row). Prefill of the 8B stack lands within 3 % of the
model. Decode is 41–49 % faster than the `generic` engine profile predicts: that profile
assumes a Python generation loop (2 ms per step) and unfused kernels, while the benchmark
replays CUDA graphs; the bandwidth term alone would be about 10 % slow. A CUDA-graph PyTorch
deployment is closer to the `vllm` profile.
"""


if __name__ == "__main__":
    sys.exit(main())
