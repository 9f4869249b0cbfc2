"""Set the estimators' predictions beside measurements taken on a real GPU.

    .venv/bin/python -m benchmarks.device.compare benchmarks/device/results/h200-2026-11-29.json

Writes a Markdown report to stdout. Nothing here changes a parameter: the
efficiency values come from the published ground truth (the A100 rows and, since
issue 28, the per-family fit on the modern rows); this shows how far they carry
to plain PyTorch on one GPU.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from gpufleet.catalog.architecture import ModelArch
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for, framework_profile
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.training import Layouts, TrainingCase, evaluate

GiB = 2**30


def gemm_rows(report: dict[str, Any], accelerator: str) -> tuple[list[str], list[float]]:
    hw = resolve_hardware(accelerator, "bf16", Assumptions())
    eff, _ = efficiency_for(hw.accelerator)
    lines, errors = [], []
    for g in report["gemm"]:
        flops = 2.0 * g["m"] * g["n"] * g["k"]
        predicted_s = flops / (hw.peak_flops * eff.gemm_peak_fraction) + eff.kernel_overhead_s
        err = predicted_s / g["seconds"] - 1
        errors.append(err)
        lines.append(
            f"| {g['m']} | {g['n']} | {g['k']} | {g['tflops']:.0f} | "
            f"{flops / predicted_s / 1e12:.0f} | {err:+.1%} |"
        )
    return lines, errors


def train_model(t: dict[str, Any], accelerator: str) -> tuple[float, float]:
    """The model's step time (s) and activation bytes for one measured training step."""
    a = t["arch"]
    arch = ModelArch.model_validate(
        {
            k: a[k]
            for k in (
                "layers",
                "hidden",
                "heads",
                "kv_heads",
                "ffn_hidden",
                "ffn_type",
                "vocab",
            )
        }
        | {"norm": "rmsnorm"}
    )
    log = Assumptions()
    hw = resolve_hardware(accelerator, "bf16", log)
    eff, _ = efficiency_for(hw.accelerator)
    case = TrainingCase(
        arch=arch,
        seq_len=t["seq_len"],
        global_batch=t["microbatch"],
        precision="bf16",
        dropout=False,
        hw=hw,
        eff=eff,
        profile=framework_profile("fsdp"),  # SDPA flash attention, fp32 gradients
    )
    lay = Layouts.single(
        mb=t["microbatch"], zero=0, recompute="full" if t["recompute"] else "none", sp=False
    )
    ev = evaluate(case, lay)
    return float(ev.step_time_s[0]), float(ev.activations_bytes[0])


def train_rows(report: dict[str, Any], accelerator: str) -> list[str]:
    lines = []
    for t in report["train"]:
        a = t["arch"]
        step_s, act_bytes = train_model(t, accelerator)
        measured_act = (t["peak_bytes"] - t["static_bytes"]) / GiB
        model_act = act_bytes / GiB
        step_err = step_s / t["step_s"] - 1
        lines.append(
            f"| {a['name']} | {t['seq_len']}×{t['microbatch']} | "
            f"{'full' if t['recompute'] else 'none'} | {t['step_s'] * 1e3:.0f} | "
            f"{step_s * 1e3:.0f} | {step_err:+.1%} | {measured_act:.1f} | "
            f"{model_act:.1f} | {model_act / measured_act - 1:+.1%} |"
        )
    return lines


def decode_rows(report: dict[str, Any], accelerator: str) -> list[str]:
    """Decode and prefill of the Llama-3-8B-shaped stack against the `generic` engine."""
    import numpy as np

    from gpufleet.estimate.engines import engine
    from gpufleet.estimate.inference import InferenceCase, decode_step, prefill

    a = report["decode_arch"]
    arch = ModelArch.model_validate(
        {
            k: a[k]
            for k in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_type", "vocab")
        }
        | {"tied_embeddings": True}  # the benchmark has no input embedding table
    )
    hw = resolve_hardware(accelerator, "bf16", Assumptions())
    eff, _ = efficiency_for(hw.accelerator)
    case = InferenceCase(
        arch=arch,
        precision="bf16",
        kv_precision="bf16",
        hw=hw,
        engine=engine("generic"),
        scaleup_link_fraction=eff.scaleup_link_fraction,
    )
    one = np.array([1.0])
    lines = []
    for d in report["decode"]:
        if "token_s" in d:
            t = decode_step(
                case, one, np.array([float(d["batch"])]), np.array([float(d["context"])])
            )
            model = float(t.seconds[0])
            lines.append(
                f"| decode | batch {d['batch']}, context {d['context']} | "
                f"{d['token_s'] * 1e3:.2f} | {model * 1e3:.2f} | {model / d['token_s'] - 1:+.1%} |"
            )
        else:
            t = prefill(case, one, one, np.array([float(d["prefill_tokens"])]))
            model = float(t.seconds[0])
            lines.append(
                f"| prefill | {d['prefill_tokens']} tokens | {d['prefill_s'] * 1e3:.2f} | "
                f"{model * 1e3:.2f} | {model / d['prefill_s'] - 1:+.1%} |"
            )
    return lines


def main() -> int:
    path = Path(sys.argv[1])
    report = json.loads(path.read_text())
    accelerator = "h200-sxm-141gb"
    out = [
        f"Measurements: `{path}` ({report['device']}, PyTorch {report['torch']}); "
        f"copy {report['ceilings']['copy_gbytes_per_s']:.0f} GB/s, "
        f"8192³ bf16 matmul {report['ceilings']['matmul_8192_tflops']:.0f} TFLOP/s.",
        "",
        "### bf16 GEMMs: measured vs the model's GEMM term (its fitted Hopper bf16 fraction)",
        "",
        "| m | n | k | measured TFLOP/s | model TFLOP/s | time error |",
        "|---|---|---|---|---|---|",
    ]
    lines, errors = gemm_rows(report, accelerator)
    out += lines
    abs_err = sorted(abs(e) for e in errors)
    large = [
        abs(e) for e, g in zip(errors, report["gemm"], strict=True) if min(g["n"], g["k"]) >= 4096
    ]
    out += [
        "",
        f"All {len(errors)} shapes: median |time error| {statistics.median(abs_err):.1%}, "
        f"max {abs_err[-1]:.1%}; shapes with n, k >= 4096: median {statistics.median(large):.1%}.",
        "",
        "### Single-GPU training steps (plain PyTorch, bf16 autocast, fused AdamW, SDPA)",
        "",
        "| model | seq×mb | recompute | measured ms | model ms | step error | measured "
        "activations GiB | model GiB | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    out += train_rows(report, accelerator)
    out += [
        "",
        "Measured activations = peak allocated during a step minus allocated after it "
        "(weights, fp32 gradients and Adam states); PyTorch keeps fp32 master weights, so "
        "its static bytes per parameter (16) differ from Megatron's (18) modelled for clusters.",
    ]
    out += [
        "",
        "### Decode and prefill (Llama-3-8B shape, bf16, PyTorch with CUDA graphs)",
        "",
        "Against gpufleet's `generic` engine profile (TensorRT-LLM fractions scaled by the",
        "profile's stated ratios; nothing fitted to these numbers).",
        "",
        "| phase | shape | measured ms | model ms | error |",
        "|---|---|---|---|---|",
    ]
    out += decode_rows(report, accelerator)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
