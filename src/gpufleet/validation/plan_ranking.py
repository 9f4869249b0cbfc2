"""Issue 28's ranking check: one 70B pre-training plan across the current accelerators.

The test (`tests/plan/test_training_ranking.py`) and the validation page
(`scripts/write_validation_doc.py`, "Plans across accelerators") plan the same run, so the
order the page reports is the order the test checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.plan.model import Plan, WorkloadChoice
from gpufleet.specs.plan import PlanSpec

# In the order published throughput ranks them per GPU (issue 28)
ACCELERATORS = ("b200-sxm-192gb", "h200-sxm-141gb", "h100-sxm5-80gb", "mi300x")


def pretrain_70b_spec(accelerators: Sequence[str] = ACCELERATORS) -> PlanSpec:
    """Llama-3-70B on 15T tokens at 8K context, bf16, within 90 days on at most 4,096 GPUs."""
    return PlanSpec.model_validate(
        {
            "kind": "plan",
            "name": "pretrain-70b",
            "deployment": "on-prem",
            "accelerators": list(accelerators),
            "workloads": [
                {
                    "name": "pretrain-70b",
                    "kind": "training",
                    "model": {"preset": "llama-3-70b"},
                    "training": {
                        "seq_len": 8192,
                        "global_batch": 1024,
                        "tokens": "15T",
                        "precision": "bf16",
                    },
                    "constraints": {"deadline": "90d", "max_gpus": 4096},
                }
            ],
        }
    )


def choices(p: Plan) -> dict[str, WorkloadChoice]:
    """Each accelerator's sized run, the recommendation's and the alternatives'."""
    runs = [*p.recommendation.workloads, *(c for a in p.alternatives for c in a.workloads)]
    return {c.accelerator: c for c in runs}
