"""Hold the estimator against what `decode_parts.py` measured on a real H200.

Prints Markdown tables for docs/validation.md ("Checked on a real H200"): the decode step
whole and in its parts (linear layers: weight reads or GEMMs; attention: KV-cache reads),
and the training step. The measurement is a check, never a fit input.

Usage: .venv/bin/python -m benchmarks.device.compare_parts \\
    [benchmarks/device/results/h200-2026-12-04-decode-parts.json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.device.compare import train_model
from gpufleet.estimate.decode_probe import probe_case, probe_rows

# the loop is CUDA-graphed PyTorch kernels with no scheduler: closest to vLLM's profile
ENGINE = "vllm"


def decode_table(measured: dict[str, Any]) -> list[str]:
    case = probe_case("llama-3-8b", "h200-sxm-141gb", "bf16", ENGINE, None)
    lines = [
        "| batch | context | step measured (ms) | step model | error | linear measured | "
        "linear model | attention measured | attention model |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    errors = []
    for row in measured["decode"]:
        batch, context = int(row["batch"]), int(row["context"])
        (pred,) = probe_rows(case, 1, [batch], [context])
        step, weights, kv, gemm, attn = pred[2], pred[3], pred[4], pred[5], pred[6]
        err = step / row["all_ms"] - 1
        errors.append(abs(err))
        lines.append(
            f"| {batch} | {context:,} | {row['all_ms']:.2f} | {step:.2f} | {err:+.0%} | "
            f"{row['linear_ms']:.2f} | {max(weights, gemm):.2f} | "
            f"{row['attention_ms']:.2f} | {kv + attn:.2f} |"
        )
    lines.append("")
    lines.append(
        f"Median |error| of the whole step: {statistics.median(errors):.1%} over "
        f"{len(errors)} shapes; largest {max(errors):.1%}."
    )
    return lines


def training_table(measured: dict[str, Any]) -> list[str]:
    """The 8-layer Llama-3-8B-shaped step, in `compare.train_rows`' table, step time only:
    this run's peak-memory counter was not reset after the decode cases (it reads their
    84 GB of weights and KV cache), so it says nothing about the step's activations."""
    t = measured["training"]
    row = {
        "arch": {
            "name": f"llama3-8b-{t['layers']}layers",
            "layers": t["layers"],
            "hidden": 4096,
            "heads": 32,
            "kv_heads": 8,
            "ffn_hidden": 14336,
            "ffn_type": "swiglu",
            "vocab": 128256,
        },
        "seq_len": t["seq_len"],
        "microbatch": t["micro_batch"],
        "recompute": False,
        "step_s": t["step_ms"] / 1e3,
    }
    step_s, _ = train_model(row, "h200-sxm-141gb")
    return [
        "| model | seq×mb | recompute | measured ms | model ms | step error |",
        "|---|---|---|---|---|---|",
        f"| {row['arch']['name']} | {t['seq_len']}×{t['micro_batch']} | none | "
        f"{t['step_ms']:.0f} | {step_s * 1e3:.0f} | {step_s / row['step_s'] - 1:+.1%} |",
    ]


def main() -> None:
    path = Path(
        sys.argv[1]
        if len(sys.argv) > 1
        else "benchmarks/device/results/h200-2026-12-04-decode-parts.json"
    )
    measured = json.loads(path.read_text())
    c = measured["ceilings"]
    print(
        f"Ceilings measured: copy {c['copy_tb_per_s']:.2f} TB/s (read + write), bf16 GEMM "
        f"{c['bf16_gemm_tflops']:.0f} TFLOP/s, fp8 GEMM {c.get('fp8_gemm_tflops', 0):.0f} "
        f"TFLOP/s ({measured['device']}, torch {measured['torch']})."
    )
    print()
    print("\n".join(decode_table(measured)))
    print()
    print("\n".join(training_table(measured)))


if __name__ == "__main__":
    main()
