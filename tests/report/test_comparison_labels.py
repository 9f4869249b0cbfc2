"""Every metric the simulator reports has a label of its own in the reports.

`idle_held_gpu_hours` (GPU-hours held beyond what jobs asked for) was added to the metrics
without a label, so compare's tables and `gpufleet simulate` printed the field name
made into words ("Idle held GPU-hours"), which says neither what it is held
beyond nor that it is the rest of what jobs held besides work, lost work and gang wait.
"""

from __future__ import annotations

import pytest

from gpufleet.report.comparison import HEADLINE, LABELS, metric_label
from gpufleet.sim.compare import GROUPED
from gpufleet.sim.metrics import PERCENTILES, SCALARS


@pytest.mark.parametrize("metric", SCALARS)
def test_every_scalar_metric_has_a_label(metric: str) -> None:
    assert metric in LABELS, metric


@pytest.mark.parametrize("group", GROUPED)
def test_every_percentile_has_a_label(group: str) -> None:
    for p in PERCENTILES:
        assert f"{group}.{p}" in LABELS


def test_idle_held_gpu_hours_reads_as_what_it_is() -> None:
    assert metric_label("idle_held_gpu_hours") == "GPU-hours held beyond requests"
    # it sits with the other parts of what jobs held, after the gang wait and work in progress
    order = list(HEADLINE)
    assert order.index("in_progress_gpu_hours") < order.index("idle_held_gpu_hours")
