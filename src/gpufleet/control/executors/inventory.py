"""Which GPUs and MIG devices this host has, from ``nvidia-smi -L``.

The control plane names devices by index and slice id ("node/gpu0/mig:3g.40gb#0"),
but a process only sees the devices named in CUDA_VISIBLE_DEVICES, and a MIG
device can only be named there by its UUID. This module maps one to the other.
``nvidia-smi -L`` is used because it is present wherever the driver is, needs no
Python bindings, and lists MIG devices under their parent GPU.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Callable
from typing import Any

from gpufleet.cluster import slice_id
from gpufleet.control.executors.base import Inventory

_GPU_LINE = re.compile(r"^GPU\s+(?P<index>\d+):.*\(UUID:\s*(?P<uuid>[^)\s]+)\)\s*$")
_MIG_LINE = re.compile(
    r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<device>\d+):.*\(UUID:\s*(?P<uuid>[^)\s]+)\)\s*$"
)

Runner = Callable[..., "subprocess.CompletedProcess[Any]"]


def parse_nvidia_smi_list(text: str, node: str) -> Inventory:
    """The inventory described by ``nvidia-smi -L`` output, for `node`.

    MIG devices get slice ids numbered per profile on their GPU in listing order
    (the k-th 3g.40gb device of GPU 0 is ``node/gpu0/mig:3g.40gb#k``), the same
    numbering `gpufleet.cluster` uses for a layout. Lines that match neither
    form (warnings, blank lines) are ignored.
    """
    gpus: dict[int, str] = {}
    migs: dict[str, str] = {}
    gpu: int | None = None
    seen: dict[str, int] = {}  # profile -> instances seen so far on the current GPU
    for line in text.splitlines():
        if m := _GPU_LINE.match(line):
            gpu = int(m["index"])
            gpus[gpu] = m["uuid"]
            seen = {}
        elif (m := _MIG_LINE.match(line)) and gpu is not None:
            profile = m["profile"]
            k = seen.get(profile, 0)
            seen[profile] = k + 1
            migs[slice_id(node, gpu, profile, k)] = m["uuid"]
    return Inventory(
        gpu_uuids={node: tuple(gpus[i] for i in sorted(gpus))},
        mig_uuids=migs,
    )


def inventory_from_nvidia_smi(
    run: Runner = subprocess.run, node: str | None = None, timeout_s: float = 10.0
) -> Inventory | None:
    """This host's devices, or None when nvidia-smi is missing, fails or finds no GPU.

    `node` names the host in the result (default: the host name); `run` is
    injectable so that the parsing can be tested without a GPU.
    """
    try:
        done = run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    out = done.stdout if isinstance(done.stdout, str) else bytes(done.stdout or b"").decode()
    inventory = parse_nvidia_smi_list(out, node or socket.gethostname())
    if not any(inventory.gpu_uuids.values()):
        return None
    return inventory
