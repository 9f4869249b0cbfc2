#!/usr/bin/env python3
"""A training job that follows gpufleet's checkpoint protocol (docs/guide/control-plane.md).

What the protocol asks of a job, and where this script does it:

* gpufleet gives every attempt of a job the same directory, ``$GPUFLEET_CHECKPOINT_DIR``:
  the job resumes from the last checkpoint it finds there (`load`).
* ``SIGUSR1`` (sent every ``checkpoint_interval_s`` by the local executor) means "checkpoint
  now"; ``SIGTERM`` (sent when the job is preempted or cancelled, right after a SIGUSR1 if
  the job has a checkpoint interval) means "checkpoint and exit": the job is killed when the
  grace period (``gpufleet serve --grace``) ends. The handlers only take note (`Requests`);
  the loop acts between two steps, so a checkpoint never holds a half-updated model. A job
  that sets a checkpoint interval must handle SIGUSR1: its default action ends the process.
* After a checkpoint is safely on disk, the job acknowledges it by writing
  ``$GPUFLEET_CHECKPOINT_DIR/gpufleet.ack`` (`acknowledge`); each new modification time is
  one ``checkpointed`` event, and the last acknowledged checkpoint is what the scheduler
  counts as saved work. Both files are written atomically (temporary file, fsync, rename).

It trains a small linear regression on synthetic data that depends only on the step number,
so an interrupted and resumed run ends with exactly the weights of an uninterrupted one. It
uses PyTorch when it is importable (one process per worker; several workers form a
torch.distributed group from the MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE gpufleet sets) and
a pure-Python loop with the same structure otherwise, so it runs anywhere.

Run it by hand:

    GPUFLEET_CHECKPOINT_DIR=/tmp/ckpt python3 train_with_checkpoints.py --steps 400 &
    kill -USR1 %1      # a checkpoint, acknowledged in /tmp/ckpt/gpufleet.ack
    kill -TERM %1      # a checkpoint, then exit 143; run it again to resume

Or submit it to a server that runs the local executor (the path must exist on that host):

    {"name": "ckpt-demo", "gpus": 1, "checkpoint_interval_s": 60, "runtime_estimate_s": 600,
     "command": ["python3", "/abs/path/train_with_checkpoints.py", "--steps", "20000"]}
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

ACK_FILE = "gpufleet.ack"  # the marker the local executor watches
EXIT_STOPPED = 128 + signal.SIGTERM  # 143: "stopped by SIGTERM", as a shell reports it
FEATURES = 8
TRUE_WEIGHTS = [0.5 * (i + 1) * (-1) ** i for i in range(FEATURES)]
TRUE_BIAS = 0.25


# -- the protocol -----------------------------------------------------------------------


class Requests:
    """What the signals asked for. Handlers only set flags: saving inside a handler could
    write a model halfway through an optimizer step."""

    def __init__(self) -> None:
        self.save = False
        self.stop = False

    def install(self) -> None:
        signal.signal(signal.SIGUSR1, self._on_usr1)
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_usr1(self, _signum: int, _frame: FrameType | None) -> None:
        self.save = True

    def _on_term(self, _signum: int, _frame: FrameType | None) -> None:
        self.save = True
        self.stop = True


def write_atomic(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one, never half of it, even after a crash."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a power loss
    finally:
        os.close(dir_fd)


def acknowledge(ckpt_dir: Path, step: int, checkpoint: Path) -> None:
    """Tell gpufleet a checkpoint is on disk: a new gpufleet.ack (its mtime is what counts)."""
    record = {
        "step": step,
        "checkpoint": checkpoint.name,
        "attempt": os.environ.get("GPUFLEET_ATTEMPT"),
        "at_s": time.time(),
    }
    write_atomic(ckpt_dir / ACK_FILE, json.dumps(record).encode())


# -- two trainers with the same interface -------------------------------------------------


def batch(step: int, size: int = 32) -> list[tuple[list[float], float]]:
    """The batch of `step`: a function of the step alone, so a resumed run sees the same data."""
    rng = random.Random(step)
    out = []
    for _ in range(size):
        x = [rng.uniform(-1, 1) for _ in range(FEATURES)]
        y = sum(w * v for w, v in zip(TRUE_WEIGHTS, x, strict=True)) + TRUE_BIAS
        out.append((x, y + rng.gauss(0, 0.01)))
    return out


class PythonTrainer:
    """Plain SGD on lists of floats: what the script runs where PyTorch is not installed."""

    name = "python"
    suffix = ".json"

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.weights = [0.0] * FEATURES
        self.bias = 0.0

    def step(self, step: int) -> float:
        data = batch(step)
        grad_w = [0.0] * FEATURES
        grad_b = 0.0
        loss = 0.0
        for x, y in data:
            err = sum(w * v for w, v in zip(self.weights, x, strict=True)) + self.bias - y
            loss += err * err
            for i, v in enumerate(x):
                grad_w[i] += 2 * err * v / len(data)
            grad_b += 2 * err / len(data)
        self.weights = [w - self.lr * g for w, g in zip(self.weights, grad_w, strict=True)]
        self.bias -= self.lr * grad_b
        return loss / len(data)

    def state(self) -> bytes:
        return json.dumps({"weights": self.weights, "bias": self.bias}).encode()

    def restore(self, data: bytes) -> None:
        state = json.loads(data)
        self.weights, self.bias = state["weights"], state["bias"]

    def summary(self) -> list[float]:
        return [*self.weights, self.bias]

    def agree(self, requests: Requests) -> tuple[bool, bool]:
        return requests.save, requests.stop  # one process: nothing to agree on

    def close(self) -> None:
        pass


class TorchTrainer:
    """The same loop with PyTorch; several workers train as one torch.distributed group."""

    name = "torch"
    suffix = ".pt"

    def __init__(self, lr: float) -> None:
        import torch

        self.torch = torch
        self.distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        cuda = torch.cuda.is_available()
        # CUDA_VISIBLE_DEVICES holds this worker's GPUs only: its first one is cuda:0
        self.device = torch.device("cuda", 0) if cuda else torch.device("cpu")
        if self.distributed:
            import torch.distributed as dist

            # env:// reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which gpufleet sets
            dist.init_process_group("nccl" if cuda else "gloo")
        torch.manual_seed(0)
        self.model = torch.nn.Linear(FEATURES, 1).to(self.device)
        with torch.no_grad():
            self.model.weight.zero_()
            self.model.bias.zero_()
        self.net: Any = self.model
        if self.distributed:
            self.net = torch.nn.parallel.DistributedDataParallel(self.model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)

    def step(self, step: int) -> float:
        torch = self.torch
        data = batch(step)  # every rank the same batch here; a real job reads its own shard
        x = torch.tensor([d[0] for d in data], device=self.device)
        y = torch.tensor([[d[1]] for d in data], device=self.device)
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        loss.backward()
        self.opt.step()
        return float(loss.item())

    def state(self) -> bytes:
        buf = io.BytesIO()
        self.torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict()}, buf)
        return buf.getvalue()

    def restore(self, data: bytes) -> None:
        state = self.torch.load(io.BytesIO(data), map_location=self.device)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])

    def summary(self) -> list[float]:
        return [*self.model.weight.flatten().tolist(), float(self.model.bias.item())]

    def agree(self, requests: Requests) -> tuple[bool, bool]:
        """Every rank acts on the same step: a rank that stopped alone would leave the
        others waiting in their next all-reduce until the grace period ends."""
        if not self.distributed:
            return requests.save, requests.stop
        import torch.distributed as dist

        flags = self.torch.tensor([float(requests.save), float(requests.stop)], device=self.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return bool(flags[0].item()), bool(flags[1].item())

    def close(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.destroy_process_group()


def make_trainer(backend: str, lr: float) -> PythonTrainer | TorchTrainer:
    if backend == "python":
        return PythonTrainer(lr)
    try:
        import torch  # noqa: F401
    except ImportError:
        if backend == "torch":
            raise SystemExit("--backend torch: PyTorch is not installed") from None
        return PythonTrainer(lr)
    return TorchTrainer(lr)


# -- the loop -----------------------------------------------------------------------------


def load(trainer: PythonTrainer | TorchTrainer, path: Path) -> int:
    """The step to resume at: 0 without a checkpoint."""
    if not path.exists():
        return 0
    blob = path.read_bytes()
    header, _, body = blob.partition(b"\n")
    meta = json.loads(header)
    if meta.get("backend") != trainer.name:
        raise SystemExit(
            f"{path} was written by the {meta.get('backend')} backend, not {trainer.name}"
        )
    trainer.restore(body)
    return int(meta["step"])


def save(trainer: PythonTrainer | TorchTrainer, path: Path, step: int) -> None:
    header = json.dumps({"step": step, "backend": trainer.name}).encode()
    write_atomic(path, header + b"\n" + trainer.state())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="Train this many steps in all.")
    parser.add_argument(
        "--step-seconds", type=float, default=0.02, help="Extra time per step (a slow model)."
    )
    parser.add_argument(
        "--save-every", type=int, default=0, help="Also checkpoint every N steps (0: on request)."
    )
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--backend", choices=("auto", "torch", "python"), default="auto")
    args = parser.parse_args(argv)

    ckpt_dir = Path(os.environ.get("GPUFLEET_CHECKPOINT_DIR") or "checkpoints")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))
    requests = Requests()
    requests.install()  # before anything slow: an early SIGUSR1 must not kill the job
    trainer = make_trainer(args.backend, args.lr)
    path = ckpt_dir / f"checkpoint{trainer.suffix}"
    start = load(trainer, path)
    where = f"resuming at step {start}" if start else "starting at step 0"
    print(
        f"[rank {rank}] {where} of {args.steps} ({trainer.name} backend, attempt "
        f"{os.environ.get('GPUFLEET_ATTEMPT', '-')}, checkpoints in {ckpt_dir})",
        flush=True,
    )

    def checkpoint(step: int, why: str) -> None:
        if rank == 0:  # data-parallel replicas are identical: one writer
            save(trainer, path, step)
            acknowledge(ckpt_dir, step, path)
        print(f"[rank {rank}] checkpoint at step {step} ({why})", flush=True)

    try:
        loss = math.nan
        for step in range(start, args.steps):
            loss = trainer.step(step)
            if args.step_seconds > 0:
                time.sleep(args.step_seconds)
            done = step + 1
            save_now, stop_now = trainer.agree(requests)
            periodic = args.save_every > 0 and done % args.save_every == 0
            if save_now or stop_now or periodic:
                why = "SIGTERM" if stop_now else "SIGUSR1" if save_now else "periodic"
                checkpoint(done, why)
                requests.save = False
            if stop_now:
                print(
                    f"[rank {rank}] stopping at step {done}: resume from the checkpoint", flush=True
                )
                return EXIT_STOPPED
            if done % 100 == 0:
                print(f"[rank {rank}] step {done} loss {loss:.6f}", flush=True)
        if start < args.steps:
            checkpoint(args.steps, "final")  # a rerun of a finished job exits at once
        weights = ", ".join(f"{w:.6f}" for w in trainer.summary())
        print(f"[rank {rank}] done at step {args.steps}; weights [{weights}]", flush=True)
        return 0
    finally:
        trainer.close()


if __name__ == "__main__":
    sys.exit(main())
