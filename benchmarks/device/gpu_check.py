# ruff: noqa: N812, SIM108, PLW2901, PLR0917, F821, B023, PTH123  (kept exactly as run on the GPU)
"""Measure a GPU for the estimators: ceilings, GEMM efficiency, training steps, decode.

Runs on a machine with PyTorch and a CUDA GPU (the lent H200 here) and writes
one JSON file; `benchmarks/device/compare.py` then sets the estimators'
predictions beside the measurements on any machine. Nothing here tunes the
estimators: calibration uses published ground truth only; this is a check.

    python3 benchmarks/device/gpu_check.py --out results.json          # on the GPU
    python3 benchmarks/device/gpu_check.py --out /tmp/x.json --dry-run # CPU smoke test

Models use random weights (no downloads). Timing: CUDA events, warm-up first,
median of repeats. bf16 autocast training keeps fp32 master weights, fp32
gradients and fused AdamW (16 bytes of state per parameter), as plain PyTorch does.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class Arch:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    ffn_type: str  # swiglu | gelu
    vocab: int


class Block(nn.Module):
    def __init__(self, a: Arch) -> None:
        super().__init__()
        self.a = a
        hd = a.hidden // a.heads
        self.norm1 = nn.RMSNorm(a.hidden)
        self.qkv = nn.Linear(a.hidden, (a.heads + 2 * a.kv_heads) * hd, bias=False)
        self.o = nn.Linear(a.heads * hd, a.hidden, bias=False)
        self.norm2 = nn.RMSNorm(a.hidden)
        if a.ffn_type == "swiglu":
            self.up = nn.Linear(a.hidden, 2 * a.ffn_hidden, bias=False)
        else:
            self.up = nn.Linear(a.hidden, a.ffn_hidden, bias=False)
        self.down = nn.Linear(a.ffn_hidden, a.hidden, bias=False)

    def attention(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None, pos: int = 0
    ) -> torch.Tensor:
        a = self.a
        b, s, _ = x.shape
        hd = a.hidden // a.heads
        qkv = self.qkv(x)
        q, k, v = qkv.split([a.heads * hd, a.kv_heads * hd, a.kv_heads * hd], dim=-1)
        q = q.view(b, s, a.heads, hd).transpose(1, 2)
        k = k.view(b, s, a.kv_heads, hd).transpose(1, 2)
        v = v.view(b, s, a.kv_heads, hd).transpose(1, 2)
        if cache is not None:
            kc, vc = cache
            kc[:, :, pos : pos + s] = k
            vc[:, :, pos : pos + s] = v
            k, v = kc[:, :, : pos + s], vc[:, :, : pos + s]
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=a.kv_heads != a.heads)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=a.kv_heads != a.heads
            )
        return self.o(out.transpose(1, 2).reshape(b, s, a.heads * hd))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        if self.a.ffn_type == "swiglu":
            gate, up = self.up(x).chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.down(F.gelu(self.up(x)))

    def forward(self, x: torch.Tensor, cache: Any = None, pos: int = 0) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), cache, pos)
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, a: Arch, recompute: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = nn.RMSNorm(a.hidden)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False)
        self.recompute = recompute

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            if self.recompute:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.norm(x))


def timed(fn: Callable[[], object], device: torch.device, warmup: int, repeat: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return times


def ceilings(device: torch.device, dry: bool) -> dict[str, float]:
    n = 1 << (20 if dry else 31)  # 2 GiB of bf16 elements -> 4 GiB per buffer
    src = torch.randn(n // 2, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t = statistics.median(timed(lambda: dst.copy_(src), device, 3, 10))
    copy_gbytes_per_s = 2 * src.numel() * 2 / t / 1e9
    m = 256 if dry else 8192
    a = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    b = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    t = statistics.median(timed(lambda: a @ b, device, 3, 10))
    return {"copy_gbytes_per_s": copy_gbytes_per_s, "matmul_8192_tflops": 2 * m**3 / t / 1e12}


def gemm_sweep(device: torch.device, dry: bool) -> list[dict[str, float]]:
    out = []
    tokens = [256] if dry else [2048, 8192, 16384]
    hiddens = [64] if dry else [1024, 2048, 4096, 8192]
    for m in tokens:
        for h in hiddens:
            for n, k in ((3 * h, h), (h, h), (4 * h, h), (h, 4 * h), (8 * h // 3, h)):
                n = int(math.ceil(n / 64) * 64)
                a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
                w = torch.randn(k, n, device=device, dtype=torch.bfloat16)
                t = statistics.median(timed(lambda a=a, w=w: a @ w, device, 3, 10))
                out.append(
                    {"m": m, "n": n, "k": k, "seconds": t, "tflops": 2 * m * n * k / t / 1e12}
                )
    return out


def train_step(
    a: Arch, seq: int, micro: int, recompute: bool, device: torch.device, repeat: int
) -> dict[str, Any]:
    torch.manual_seed(0)
    model = Model(a, recompute).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    tokens = torch.randint(0, a.vocab, (micro, seq + 1), device=device)
    dtype = torch.bfloat16

    def forward_loss() -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype):
            logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.float().view(-1, a.vocab), tokens[:, 1:].reshape(-1))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        forward_loss().backward()
        opt.step()

    def fwd() -> None:
        with torch.no_grad():
            forward_loss()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    step()
    sync()
    static = torch.cuda.memory_allocated() if device.type == "cuda" else 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    step_times = timed(step, device, 2, repeat)
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else 0
    fwd_times = timed(fwd, device, 2, repeat)
    result = {
        "arch": asdict(a),
        "seq_len": seq,
        "microbatch": micro,
        "recompute": recompute,
        "params": params,
        "step_s": statistics.median(step_times),
        "step_s_all": step_times,
        "forward_s": statistics.median(fwd_times),
        "static_bytes": static,
        "peak_bytes": peak,
    }
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def decode(
    a: Arch, batches: list[int], context: int, device: torch.device, repeat: int
) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    blocks = nn.ModuleList(Block(a) for _ in range(a.layers)).to(device, torch.bfloat16)
    head = nn.Linear(a.hidden, a.vocab, bias=False).to(device, torch.bfloat16)
    hd = a.hidden // a.heads
    weight_bytes = sum(p.numel() * 2 for p in [*blocks.parameters(), *head.parameters()])
    out = []
    for b in batches:
        caches = [
            (
                torch.randn(b, a.kv_heads, context + 1, hd, device=device, dtype=torch.bfloat16),
                torch.randn(b, a.kv_heads, context + 1, hd, device=device, dtype=torch.bfloat16),
            )
            for _ in range(a.layers)
        ]
        x = torch.randn(b, 1, a.hidden, device=device, dtype=torch.bfloat16)

        @torch.no_grad()
        def token() -> torch.Tensor:
            y = x
            for blk, cache in zip(blocks, caches, strict=True):
                y = blk(y, cache, context)
            return head(y)

        run = token
        if device.type == "cuda":
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                token()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                token()
            run = graph.replay
        times = timed(run, device, 3, repeat)
        kv_bytes = sum(k.numel() * 2 * 2 for k, _ in caches) * context / (context + 1)
        out.append(
            {
                "batch": b,
                "context": context,
                "token_s": statistics.median(times),
                "weight_bytes": weight_bytes,
                "kv_bytes": kv_bytes,
            }
        )
        del caches
    # one prefill of `context` tokens at batch 1, for time-to-first-token
    prompt = torch.randn(1, context, a.hidden, device=device, dtype=torch.bfloat16)

    @torch.no_grad()
    def prefill() -> None:
        y = prompt
        for blk in blocks:
            y = blk(y)
        head(y[:, -1:])

    t = statistics.median(timed(prefill, device, 2, repeat))
    out.append(
        {"prefill_tokens": context, "batch": 1, "prefill_s": t, "weight_bytes": weight_bytes}
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on CPU")
    args = parser.parse_args()
    dry = args.dry_run
    device = torch.device("cpu" if dry else "cuda")
    started = time.time()
    report: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "started_unix": started,
    }
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        props = torch.cuda.get_device_properties(0)
        report["sms"] = props.multi_processor_count
        report["memory_bytes"] = props.total_memory
    report["ceilings"] = ceilings(device, dry)
    print("ceilings", report["ceilings"], flush=True)
    report["gemm"] = gemm_sweep(device, dry)
    print("gemm shapes", len(report["gemm"]), flush=True)
    if dry:
        archs = [(Arch("tiny", 2, 64, 4, 2, 128, "swiglu", 100), 32, 2)]
    else:
        archs = [
            (Arch("llama-1b-like", 16, 2048, 16, 16, 5632, "swiglu", 32000), 2048, 8),
            (Arch("llama3-8b-4layers", 4, 4096, 32, 8, 14336, "swiglu", 128256), 4096, 2),
            (Arch("gpt-2.7b-like", 32, 2560, 32, 32, 10240, "gelu", 50304), 2048, 4),
        ]
    report["train"] = []
    for arch, seq, micro in archs:
        for recompute in (False, True):
            r = train_step(arch, seq, micro, recompute, device, repeat=3 if dry else 8)
            report["train"].append(r)
            print(
                f"train {arch.name} recompute={recompute}: {r['step_s']:.4f}s "
                f"peak {r['peak_bytes'] / 2**30:.1f} GiB",
                flush=True,
            )
    dec_arch = (
        Arch("tiny", 2, 64, 4, 2, 128, "swiglu", 100)
        if dry
        else Arch("llama-3-8b", 32, 4096, 32, 8, 14336, "swiglu", 128256)
    )
    report["decode"] = decode(
        dec_arch,
        [1, 2] if dry else [1, 8, 32, 128],
        64 if dry else 1024,
        device,
        repeat=3 if dry else 20,
    )
    report["decode_arch"] = asdict(dec_arch)
    for d in report["decode"]:
        print("decode", d, flush=True)
    report["elapsed_s"] = time.time() - started
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    print(f"done in {report['elapsed_s']:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
