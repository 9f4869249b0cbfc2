"""Parsing `nvidia-smi -L`: whole GPUs, MIG devices, and hosts without the driver."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

from gpufleet.control.executors.inventory import (
    inventory_from_nvidia_smi,
    parse_nvidia_smi_list,
)

SAMPLE = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5c3b6c4e-1111-2222-3333-444455556666)
  MIG 3g.40gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)
  MIG 3g.40gb     Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000002)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77777777-1111-2222-3333-444455556666)
GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-88888888-1111-2222-3333-444455556666)
  MIG 1g.5gb+me   Device  0: (UUID: MIG-GPU-88888888-1111-2222-3333-444455556666/7/0)
  MIG 1g.5gb      Device  1: (UUID: MIG-bbbbbbbb-0000-5000-8000-000000000003)
  MIG 1g.5gb      Device  2: (UUID: MIG-bbbbbbbb-0000-5000-8000-000000000004)
"""


def fake_run(stdout: str = SAMPLE, returncode: int = 0, calls: list[Any] | None = None) -> Any:
    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if calls is not None:
            calls.append((args, kwargs))
        return subprocess.CompletedProcess(args, returncode, stdout=stdout, stderr="")

    return run


def raising(exc: BaseException) -> Any:
    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise exc

    return run


def test_parses_gpus_and_mig_devices() -> None:
    inv = parse_nvidia_smi_list(SAMPLE, "node-1")
    assert inv.gpu_uuids == {
        "node-1": (
            "GPU-5c3b6c4e-1111-2222-3333-444455556666",
            "GPU-77777777-1111-2222-3333-444455556666",
            "GPU-88888888-1111-2222-3333-444455556666",
        )
    }
    assert inv.mig_uuids == {
        "node-1/gpu0/mig:3g.40gb#0": "MIG-aaaaaaaa-0000-5000-8000-000000000001",
        "node-1/gpu0/mig:3g.40gb#1": "MIG-aaaaaaaa-0000-5000-8000-000000000002",
        "node-1/gpu2/mig:1g.5gb+me#0": "MIG-GPU-88888888-1111-2222-3333-444455556666/7/0",
        "node-1/gpu2/mig:1g.5gb#0": "MIG-bbbbbbbb-0000-5000-8000-000000000003",
        "node-1/gpu2/mig:1g.5gb#1": "MIG-bbbbbbbb-0000-5000-8000-000000000004",
    }


def test_gpus_are_in_index_order_and_noise_is_ignored() -> None:
    text = (
        "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n"
        "GPU 1: Tesla T4 (UUID: GPU-bbb)\n"
        "\n"
        "GPU 0: Tesla T4 (UUID: GPU-aaa)\n"
    )
    assert parse_nvidia_smi_list(text, "n").gpu_uuids == {"n": ("GPU-aaa", "GPU-bbb")}


def test_runs_nvidia_smi_list() -> None:
    calls: list[Any] = []
    inv = inventory_from_nvidia_smi(run=fake_run(calls=calls), node="gpu-7")
    assert inv is not None
    assert len(inv.gpu_uuids["gpu-7"]) == 3
    assert calls[0][0] == ["nvidia-smi", "-L"]
    assert calls[0][1]["timeout"] > 0
    default = inventory_from_nvidia_smi(run=fake_run())
    assert default is not None
    assert list(default.gpu_uuids) == [socket.gethostname()]


def test_none_without_a_working_nvidia_smi() -> None:
    assert inventory_from_nvidia_smi(run=raising(FileNotFoundError("nvidia-smi"))) is None
    assert inventory_from_nvidia_smi(run=raising(PermissionError("denied"))) is None
    timeout = subprocess.TimeoutExpired(["nvidia-smi", "-L"], 10)
    assert inventory_from_nvidia_smi(run=raising(timeout)) is None
    failed = fake_run("NVIDIA-SMI has failed because it couldn't communicate", returncode=9)
    assert inventory_from_nvidia_smi(run=failed) is None
    assert inventory_from_nvidia_smi(run=fake_run("No devices were found\n")) is None


def test_real_binary_absent_or_present() -> None:
    """On a host without the driver the real call yields None instead of raising."""
    inv = inventory_from_nvidia_smi()
    assert inv is None or all(u.startswith("GPU-") for u in next(iter(inv.gpu_uuids.values())))
