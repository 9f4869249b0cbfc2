"""Measure what the performance model predicts, on one real GPU: ceilings, decode, a training step.

Run on a lent GPU machine (`device`), which has torch but not gpufleet's
dependencies, so this file imports torch and the standard library only. It
writes one JSON file; `benchmarks/device/compare_parts.py` compares it with the
estimator's predictions for the same shapes (computed on a machine with
gpufleet installed). Nothing here is fitted on: it is an independent check.

What it measures, each the median of timed CUDA-graph replays after warm-up:

* ceilings: a device-to-device copy (bytes read + written) and 8192³ bf16/fp8
  matrix products on random data;
* decode: one Llama-3-8B-shaped step (32 layers, GQA 32/8, SwiGLU 14336, vocab
  128256, bf16, random weights) at several batch × context sizes, whole and as
  its parts (linear layers only; attention over the KV cache only), so the
  composition weights + KV + GEMM can be checked term by term;
* training: forward + backward + AdamW of the same shape cut to 8 layers
  (AMP bf16, fp32 master weights, flash attention), tokens per second.

Usage: python3 benchmarks/device/decode_parts.py --out $OUT/h200_perf.json
(run on 2026-12-04 as scripts/device/h200_perf.py; results in
benchmarks/device/results/h200-2026-12-04-decode-parts.json)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB, LAYERS = 4096, 32, 8, 128, 14336, 128256, 32
DECODE_SHAPES = [
    (1, 1024),
    (1, 4096),
    (16, 1024),
    (16, 4096),
    (64, 1024),
    (64, 4096),
    (128, 1024),
    (128, 4096),
    (256, 1024),
    (256, 2048),
]


def _events_ms(fn: Callable[[], Any], reps: int = 20, warm: int = 3) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times: list[float] = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _graphed(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture fn in a CUDA graph so launch gaps stay out of the timing."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def ceilings() -> dict[str, float]:
    n = 2 * 1024**3  # 2 GiB of bf16
    src = torch.randn(n // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_ms = _events_ms(lambda: dst.copy_(src))
    out = {"copy_tb_per_s": 2 * n / (copy_ms / 1e3) / 1e12}
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    ms = _events_ms(lambda: a @ b, reps=10)
    out["bf16_gemm_tflops"] = 2 * m**3 / (ms / 1e3) / 1e12
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.tensor(1.0, device="cuda")
        ms8 = _events_ms(
            lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
            reps=10,
        )
        out["fp8_gemm_tflops"] = 2 * m**3 / (ms8 / 1e3) / 1e12
    except (RuntimeError, AttributeError) as exc:  # no fp8 path in this build
        out["fp8_error"] = str(exc)[:200]  # type: ignore[assignment]
    return out


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype)


class DecodeModel:
    """Weights of a Llama-3-8B-shaped model; distinct per layer so every read hits HBM."""

    def __init__(self) -> None:
        def w(i: int, o: int) -> torch.Tensor:
            return torch.randn(i, o, device="cuda", dtype=torch.bfloat16) * 0.02

        qkv = (HEADS + 2 * KV_HEADS) * HEAD_DIM
        self.layers = [
            (w(HIDDEN, qkv), w(HIDDEN, HIDDEN), w(HIDDEN, 2 * FFN), w(FFN, HIDDEN))
            for _ in range(LAYERS)
        ]
        self.head = w(HIDDEN, VOCAB)

    def weight_bytes(self) -> int:
        n = sum(t.numel() for layer in self.layers for t in layer) + self.head.numel()
        return 2 * n


def decode_case(model: DecodeModel, batch: int, context: int) -> dict[str, float]:
    kv = [
        (
            torch.randn(batch, KV_HEADS, context, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
            torch.randn(batch, KV_HEADS, context, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
        )
        for _ in range(LAYERS)
    ]
    x0 = torch.randn(batch, HIDDEN, device="cuda", dtype=torch.bfloat16)
    group = HEADS // KV_HEADS
    scale = 1.0 / math.sqrt(HEAD_DIM)

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # q (B, 8, 4, 128) against K/V (B, 8, ctx, 128): each K and V byte read once.
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        return torch.matmul(torch.softmax(scores.float(), -1).to(q.dtype), v)

    def step(parts: str) -> Callable[[], Any]:
        def run() -> torch.Tensor:
            x = x0
            for (wqkv, wo, wgu, wd), (k, v) in zip(model.layers, kv, strict=True):
                if parts in ("all", "linear"):
                    qkv = _rms(x) @ wqkv
                    q = qkv[:, : HEADS * HEAD_DIM]
                else:
                    q = x0[:, : HEADS * HEAD_DIM]
                if parts in ("all", "attention"):
                    a = attention(q.reshape(batch, KV_HEADS, group, HEAD_DIM), k, v)
                    a = a.reshape(batch, HIDDEN)
                else:
                    a = q
                if parts in ("all", "linear"):
                    x = x + a @ wo
                    g, u = (_rms(x) @ wgu).chunk(2, dim=-1)
                    x = x + (functional.silu(g) * u) @ wd
                else:
                    x = x + a
            if parts in ("all", "linear"):
                return _rms(x) @ model.head
            return x

        return run

    out: dict[str, float] = {"batch": batch, "context": context}
    for parts in ("all", "linear", "attention"):
        out[f"{parts}_ms"] = _events_ms(_graphed(step(parts)))
    out["kv_bytes"] = float(sum(k.numel() + v.numel() for k, v in kv) * 2)
    return out


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        qkv = (HEADS + 2 * KV_HEADS) * HEAD_DIM
        self.n1 = torch.nn.RMSNorm(HIDDEN)
        self.n2 = torch.nn.RMSNorm(HIDDEN)
        self.qkv = torch.nn.Linear(HIDDEN, qkv, bias=False)
        self.o = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gu = torch.nn.Linear(HIDDEN, 2 * FFN, bias=False)
        self.d = torch.nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).split(
            [HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1
        )
        q = q.view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = k.view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = v.view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        a = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, HIDDEN))
        g, u = self.gu(self.n2(x)).chunk(2, dim=-1)
        return x + self.d(functional.silu(g) * u)


def training(layers: int, micro: int, seq: int, steps: int) -> dict[str, float]:
    torch.manual_seed(0)
    emb = torch.nn.Embedding(VOCAB, HIDDEN)
    blocks = torch.nn.ModuleList(Block() for _ in range(layers))
    norm = torch.nn.RMSNorm(HIDDEN)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
    model = torch.nn.ModuleList([emb, blocks, norm, head]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, VOCAB, (micro, seq + 1), device="cuda")

    def one() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = emb(tokens[:, :-1])
            for blk in blocks:
                x = blk(x)
            logits = head(norm(x))
            targets = tokens[:, 1:].reshape(-1)
            loss = functional.cross_entropy(logits.float().view(-1, VOCAB), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    ms = _events_ms(one, reps=steps, warm=3)
    params = sum(p.numel() for p in model.parameters())
    return {
        "layers": layers,
        "micro_batch": micro,
        "seq_len": seq,
        "params": float(params),
        "step_ms": ms,
        "tokens_per_s": micro * seq / (ms / 1e3),
        "peak_mem_bytes": float(torch.cuda.max_memory_allocated()),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-decode", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    result["ceilings"] = ceilings()
    print("ceilings", result["ceilings"], flush=True)
    torch.cuda.empty_cache()
    if not args.skip_decode:
        model = DecodeModel()
        result["decode_weight_bytes"] = model.weight_bytes()
        result["decode"] = []
        for batch, context in DECODE_SHAPES:
            row = decode_case(model, batch, context)
            torch.cuda.empty_cache()  # the case's KV cache is gone with its frame
            result["decode"].append(row)
            print("decode", row, flush=True)
            with Path(args.out).open("w") as fh:  # keep what was measured if a later case dies
                json.dump(result, fh, indent=1)
        del model
        torch.cuda.empty_cache()
    result["training"] = training(layers=8, micro=2, seq=4096, steps=8)
    print("training", result["training"], flush=True)
    result["wall_s"] = time.time() - t0
    with Path(args.out).open("w") as fh:
        json.dump(result, fh, indent=1)
    print(f"done in {result['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
