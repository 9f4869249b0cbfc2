"""Plans as they were reviewed: costed with checkpoint storage of 2,000 GB/s.

Until the storage design and the goodput shared one bandwidth, every plan's goodput assumed the
goodput model's default write rate, Llama 3's Tectonic at 2,000 GB/s (reliability.csv), while
its design sized far less. The reviews behind several tests (ranking on the headline, whole
instances, the spot deadline, the rented burst) quote figures from those plans; stating that
storage in the spec keeps their scenario, now with a design that builds it too. The storage a
plan designs when the spec states none is checked in test_checkpoint_storage.py.
"""

from __future__ import annotations

from typing import Any

from gpufleet.specs.plan import InferenceWorkload, PlanSpec, TrainingWorkload
from gpufleet.specs.training import Reliability

# The rate the reviewed plans' goodput used: the goodput model's default (2 TB/s sustained).
REVIEWED_CHECKPOINT_STORAGE = "2000GB/s"


def at_storage(spec: PlanSpec, checkpoint_storage: str) -> PlanSpec:
    """`spec` with every training run's checkpoint storage stated (a rate with its unit,
    e.g. "2000GB/s"), its other reliability inputs kept."""
    workloads: list[TrainingWorkload | InferenceWorkload] = []
    for w in spec.workloads:
        if not isinstance(w, TrainingWorkload):
            workloads.append(w)
            continue
        rel = w.reliability.model_dump(exclude={"checkpoint_storage"}) if w.reliability else {}
        rel["checkpoint_storage"] = checkpoint_storage
        workloads.append(w.model_copy(update={"reliability": Reliability.model_validate(rel)}))
    return spec.model_copy(update={"workloads": workloads})


def at_reviewed_storage(spec: PlanSpec) -> PlanSpec:
    """`spec` with every training run's checkpoint storage the reviewed 2,000 GB/s."""
    return at_storage(spec, REVIEWED_CHECKPOINT_STORAGE)


def reviewed_reliability() -> dict[str, Any]:
    """The `reliability` block of a training workload written as spec data."""
    return {"checkpoint_storage": REVIEWED_CHECKPOINT_STORAGE}
