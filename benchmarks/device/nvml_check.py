"""Check the NVML collector on a real GPU: idle, then a bf16 matmul load, then idle again.

What the lead runs on a GPU host (needs only torch, nvidia-ml-py and this repo's src):

    PYTHONPATH=src python3 benchmarks/device/nvml_check.py --out "$OUT"

It samples every GPU every `--interval-s` while a child process keeps GPU 0 busy with
bf16 matrix products for `--load-s` seconds, prints every reading and a summary per phase
(before the child, its startup, the load, after it; a second either side of the load's
start and end is left out, since NVML's window lags), and writes the readings (with their
phase) to ``$OUT/nvml_samples.jsonl``. The child is mapped to a job ("load") by its pid,
through `job_by_ancestry`, so the summary also says whether NVML's pids match this process
namespace. It also runs ``python -m gpufleet.telemetry.nvml`` with pydantic and numpy
blocked, to show the entry point needs neither. Exit 0 when idle stays low and the load
reads high.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gpufleet.telemetry.nvml import NvmlCollector, job_by_ancestry
from gpufleet.telemetry.samples import GpuSample

LOAD = r"""
import sys, time, torch
n = 8192
a = torch.randn(n, n, device="cuda:0", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda:0", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
print("READY", time.time(), flush=True)
end = time.time() + float(sys.argv[1])
products = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    products += 20
print("DONE", time.time(), products, flush=True)
"""

BLOCKED = r"""
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pydantic", "numpy"):
            raise ImportError(f"{name} is blocked for this check")
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["nvml", "--samples", "2", "--interval-s", "0.5", "--json"]
runpy.run_module("gpufleet.telemetry.nvml", run_name="__main__")
"""


@dataclass(frozen=True)
class Times:
    """When the load child was started, had CUDA ready, and finished (Unix seconds)."""

    launch_s: float
    ready_s: float | None
    done_s: float | None

    def phase(self, t: float) -> str:
        """before / startup (torch and CUDA starting) / load / after."""
        if t < self.launch_s:
            return "before"
        if self.ready_s is None or t < self.ready_s:
            return "startup"
        if self.done_s is None or t <= self.done_s:
            return "load"
        return "after"

    def steady(self, t: float) -> bool:
        """Not within a second of the load's start or end: NVML's window lags up to 1 s."""
        edges = [e for e in (self.ready_s, self.done_s) if e is not None]
        return all(abs(t - e) > 1.0 for e in edges)


def run_load(load_s: float, roots: dict[int, str]) -> tuple[Times, int]:
    """Run the load child (its pid is the job "load"): when it ran, and its exit code."""
    launch_s = time.time()
    child = subprocess.Popen(
        [sys.executable, "-c", LOAD, str(load_s)], stdout=subprocess.PIPE, text=True
    )
    roots[child.pid] = "load"
    ready_s = done_s = None
    assert child.stdout is not None
    for line in child.stdout:
        print(f"[load] {line.strip()}", flush=True)
        word, *rest = line.split()
        if word == "READY":
            ready_s = float(rest[0])
        elif word == "DONE":
            done_s = float(rest[0])
            print(f"[load] {int(rest[1]) * 2 * 8192**3 / load_s / 1e12:.0f} TFLOP/s")
    return Times(launch_s, ready_s, done_s), child.wait()


def summarize(samples: list[GpuSample], times: Times) -> bool:
    """Per phase, GPU 0's mean utilisation and power; True if idle <= 10 % and load >= 80 %."""
    ok = times.ready_s is not None and times.done_s is not None
    for name in ("before", "startup", "load", "after"):
        rows = [
            s
            for s in samples
            if s.gpu_index == 0 and times.phase(s.time_s) == name and times.steady(s.time_s)
        ]
        if not rows:
            print(f"{name}: no samples")
            ok = ok and name == "startup"
            continue
        util = sum(s.sm_util_pct for s in rows) / len(rows)
        power = sum(s.power_w or 0 for s in rows) / len(rows)
        jobs = sorted({s.job_id or "-" for s in rows})
        print(f"{name}: {len(rows)} samples, util {util:.1f} %, power {power:.0f} W, jobs {jobs}")
        if name == "load":
            ok = ok and util >= 80
        elif name != "startup":
            ok = ok and util <= 10
    mapped = any(s.job_id == "load" for s in samples)
    print(f"pid -> job mapping: {'works' if mapped else 'NVML pids not visible here'}")
    return ok


def check_entry_point() -> bool:
    """`python -m gpufleet.telemetry.nvml` with pydantic and numpy made unimportable."""
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "src")}
    blocked = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, env=env, check=False
    )
    print(f"entry point without pydantic/numpy: rc {blocked.returncode}")
    print(blocked.stdout + blocked.stderr)
    return blocked.returncode == 0 and blocked.stdout.count("\n") >= 2


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--idle-s", type=float, default=4.0)
    parser.add_argument("--load-s", type=float, default=20.0)
    parser.add_argument("--interval-s", type=float, default=0.5)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    roots: dict[int, str] = {}
    collector = NvmlCollector(xid_events=True, job_of_pid=job_by_ancestry(roots))
    print(f"{collector.gpu_count} GPUs on {collector.node}", flush=True)
    samples: list[GpuSample] = []
    stop = threading.Event()

    def sample() -> None:
        next_s = time.monotonic()
        while not stop.is_set():
            for s in collector.collect(time.time()):
                samples.append(s)
                print(
                    f"{s.time_s:.2f} gpu{s.gpu_index} util {s.sm_util_pct:5.1f}% "
                    f"mem {(s.mem_used_bytes or 0) / 2**30:6.1f} GiB "
                    f"power {s.power_w or 0:6.1f} W temp {s.temp_c or 0:4.0f} C "
                    f"job={s.job_id} {s.holder} {s.health_detail}",
                    flush=True,
                )
            next_s += args.interval_s
            stop.wait(max(0.0, next_s - time.monotonic()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(args.idle_s)
    times, code = run_load(args.load_s, roots)
    time.sleep(args.idle_s)
    stop.set()
    sampler.join()
    if collector.reason:
        print(f"note: {collector.reason}")
    collector.close()

    with (out / "nvml_samples.jsonl").open("w") as f:
        for s in samples:
            row = s.to_dict() | {"phase": times.phase(s.time_s)}
            f.write(json.dumps(row, sort_keys=True) + "\n")
    print(f"wrote {len(samples)} samples to {out / 'nvml_samples.jsonl'}")
    ok = summarize(samples, times) and code == 0
    ok = check_entry_point() and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
