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
GQA/SwiGLU, 128K context with context parallelism, and 16K GPUs. The estimate there is
trustworthy on speed, but the memory model says the Llama 3 layouts need 92–123 GB per GPU
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


def main() -> int:
    training = run(GPUFLEET, "validate", "training", "--format", "markdown")
    inference = run(GPUFLEET, "validate", "inference", "--format", "markdown")
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
