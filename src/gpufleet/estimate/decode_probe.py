"""Print the model's decode step time and its parts for a grid of batch × context.

Why: to hold the composed decode step (estimate/inference.py) against a measured decode loop
on a real GPU, point by point, part by part. Usage:

    python -m gpufleet.estimate.decode_probe --model llama-3-8b --accelerator h200-sxm-141gb \\
        --precision bf16 --engine generic --tp 1 --batch 1,8,32,64,128,256 --context 1024,4096
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.models import get_model_preset
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for
from gpufleet.estimate.engines import engine
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.inference import COMPUTE_PRECISION, InferenceCase, decode_step

COLUMNS: tuple[str, ...] = ("batch", "context", "step_ms", "weights_ms", "kv_ms", "gemm_ms")
COLUMNS += ("attn_ms", "comm_ms", "overhead_ms", "tokens_per_s")


def probe_case(
    model: str, accelerator: str, precision: str, engine_name: str, kv_precision: str | None
) -> InferenceCase:
    device = get_accelerator(accelerator)
    hw = resolve_hardware(device.name, COMPUTE_PRECISION[precision], Assumptions())
    train_eff, _ = efficiency_for(hw.accelerator)
    return InferenceCase(
        arch=get_model_preset(model).arch(),
        precision=precision,  # type: ignore[arg-type]
        kv_precision=(kv_precision or precision),  # type: ignore[arg-type]
        hw=hw,
        engine=engine(engine_name, device.vendor, device.name),
        scaleup_link_fraction=train_eff.scaleup_link_fraction,
    )


def probe_rows(
    case: InferenceCase, tp: int, batches: Sequence[int], contexts: Sequence[int]
) -> list[tuple[float, ...]]:
    """One row per (batch, context): the step in ms, its parts in ms and tokens/s."""
    grid = [(float(b), float(c)) for b in batches for c in contexts]
    b = np.array([g[0] for g in grid])
    c = np.array([g[1] for g in grid])
    step = decode_step(case, np.full_like(b, float(tp)), b, c)
    parts = (step.weights_s, step.kv_s, step.gemm_s, step.attention_s, step.comm_s)
    ms = [p * 1e3 for p in (step.seconds, *parts, step.overhead_s)]
    return [
        (b[i], c[i], *(float(m[i]) for m in ms), float(b[i] / step.seconds[i]))
        for i in range(len(grid))
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llama-3-8b")
    parser.add_argument("--accelerator", default="h200-sxm-141gb")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--kv-precision", default=None)
    parser.add_argument("--engine", default="generic", help="engines.yaml profile")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--batch", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--context", default="1024,2048,4096")
    args = parser.parse_args(argv)
    case = probe_case(args.model, args.accelerator, args.precision, args.engine, args.kv_precision)
    eng = case.engine
    print(
        f"# {args.model} on {case.hw.accelerator} tp{args.tp} {args.precision}, engine "
        f"{eng.name}: weights {eng.decode_bandwidth_fraction:.3f} and KV {eng.kv_fraction:.3f} "
        f"of {case.hw.memory_bytes_per_s / 1e12:.2f} TB/s, GEMMs {eng.prefill_compute_fraction:.3f}"
        f" of {case.hw.peak_flops / 1e12:.0f} TFLOP/s; {eng.source}"
    )
    print(",".join(COLUMNS))
    batches = [int(x) for x in args.batch.split(",")]
    contexts = [int(x) for x in args.context.split(",")]
    for row in probe_rows(case, args.tp, batches, contexts):
        print(
            f"{row[0]:.0f},{row[1]:.0f},"
            + ",".join(f"{v:.4f}" for v in row[2:-1])
            + f",{row[-1]:.1f}"
        )


if __name__ == "__main__":
    main()
