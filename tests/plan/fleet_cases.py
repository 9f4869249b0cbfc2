"""Small multi-team plan specs the fleet tests share (fast: a few seconds of simulation)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpufleet.specs.fleet import FleetPlanSpec
from gpufleet.specs.load import validate

ROOT = Path(__file__).parents[2]
SACCT_SAMPLE = ROOT / "tests" / "sim" / "data" / "sacct_sample.txt"

# Two teams on H100s over two days: ~9 GPUs of offered load, so clusters of 1-6 nodes.
TINY: dict[str, Any] = {
    "kind": "plan",
    "name": "tiny",
    "deployment": "on-prem",
    "accelerators": ["h100-sxm5-80gb"],
    "horizon": "2d",
    "warmup": "6h",
    "teams": [
        {
            "name": "alpha",
            "targets": {"wait_p95": "1h"},
            "workloads": [
                {
                    "kind": "training",
                    "arrivals_per_day": 6,
                    "gpus": {"choices": [1, 2, 4, 8]},
                    "duration": {"lognormal_median": "2h", "sigma": 0.8},
                    "checkpoint_interval": "30min",
                },
                {
                    "kind": "inference",
                    "name": "chat",
                    "model": {"preset": "llama-3-8b"},
                    "request_rate": 1,
                    "slo": {"ttft_p99_ms": 800},
                },
            ],
        },
        {
            "name": "beta",
            "targets": {"wait_p95": "2h"},
            "fair_share_weight": 2,
            "workloads": [
                {
                    "kind": "training",
                    "arrivals_per_day": 4,
                    "gpus": {"choices": [8, 16]},
                    "duration": {"exponential_mean": "3h", "max": "12h"},
                }
            ],
        },
    ],
}


def tiny(**changes: Any) -> dict[str, Any]:
    """A deep copy of TINY with top-level keys replaced."""
    data = copy.deepcopy(TINY)
    data.update(changes)
    return data


def spec(data: dict[str, Any] | None = None) -> FleetPlanSpec:
    return validate(FleetPlanSpec, data if data is not None else TINY, "inline")


def write_spec(folder: Path, data: dict[str, Any], name: str = "plan.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
