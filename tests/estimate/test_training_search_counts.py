"""Which GPU counts the training search tries (issue 28): any count a user has.

The search used to try only 8 · 2^k GPUs. It now tries the whole-server counts that split
into tp · pp · cp · dp layouts, up to max_gpus (else the spec's hardware.count, else
16,384), always with the user's own count, and says why when that count gets no layout.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.training_case import case_for
from gpufleet.estimate.training_search import (
    COUNTS_PER_OCTAVE,
    DEFAULT_MAX_GPUS,
    POWER_OF_TWO_COUNTS,
    Constraints,
    SearchResult,
    gpu_counts_for,
    layout_products,
    search_training,
    server_gpus,
)
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"


def make_spec(
    model: str,
    *,
    global_batch: int,
    count: int | None = None,
    accelerator: str = H100,
    system: str | None = None,
) -> TrainingSpec:
    hardware: dict[str, Any] = {"accelerator": accelerator}
    if count is not None:
        hardware["count"] = count
    if system is not None:
        hardware["system"] = system
    return validate(
        TrainingSpec,
        {
            "kind": "training",
            "model": {"preset": model},
            "training": {"seq_len": 4096, "global_batch": global_batch, "tokens": "1T"},
            "hardware": hardware,
        },
        "inline",
    )


def is_power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


def test_a_users_5128_gpus_get_layouts_on_exactly_5128() -> None:
    # 5,128 = 8 × 641 and 641 is prime: only dp can hold it, so the batch must too.
    result = search_training(
        make_spec("llama-3-8b", global_batch=8 * 641, count=5128), [H100], top_k=1000
    )
    on_count = [c for c in result.top if c.gpus == 5128]
    assert len(on_count) == 1
    best = on_count[0]
    assert best.tp * best.pp * best.dp * best.cp == 5128
    assert best.dp % 641 == 0
    # hardware.count is the ceiling when max_gpus is not given: a run may use fewer
    assert max(c.gpus for c in result.top) == 5128
    assert not [why for why in result.rejected if why.startswith("hardware.count")]


def test_a_count_no_layout_can_split_is_refused_with_the_nearest_that_do() -> None:
    result = search_training(
        make_spec("llama-3-8b", global_batch=2048, count=5128), [H100], top_k=1000
    )
    assert result.top  # the smaller counts still run
    assert all(c.gpus != 5128 for c in result.top)
    why = [w for w in result.rejected if w.startswith("hardware.count 5,128")]
    assert why == [
        "hardware.count 5,128 on h100-sxm5-80gb: no layout: it is not tp × pp × cp × dp with "
        "dp dividing global_batch (2,048); the nearest counts that split are 5,120 and 6,144"
    ]
    assert result.rejected[why[0]] == 1


def test_a_count_whose_layouts_do_not_fit_says_so() -> None:
    # 405B on 5,128 GPUs: dp holds 641, leaving tp · pp · cp = 8 for 405B parameters.
    result = search_training(
        make_spec("llama-3.1-405b", global_batch=8 * 641, count=5128), [H100], top_k=1000
    )
    why = [w for w in result.rejected if w.startswith("hardware.count 5,128")]
    assert len(why) == 1
    assert "layouts fits in memory (the smallest needs" in why[0]


def test_3072_gpus_with_a_power_of_two_batch_put_the_3_in_the_pipeline() -> None:
    result = search_training(
        make_spec("llama-3-70b", global_batch=2048, count=3072), [H100], top_k=1000
    )
    best = next(c for c in result.top if c.gpus == 3072)
    assert best.tp * best.pp * best.dp * best.cp == 3072
    assert best.pp % 3 == 0  # dp divides 2,048, tp and cp are powers of two
    assert result.top[0].gpus == 3072  # the most GPUs the user has is the fastest here


@pytest.fixture(scope="module")
def under_3000() -> SearchResult:
    spec = make_spec("llama-3-8b", global_batch=512)
    return search_training(spec, [H100, A100], constraints=Constraints(max_gpus=3000), top_k=1000)


def test_max_gpus_3000_is_a_ceiling_and_counts_between_powers_of_two_run(
    under_3000: SearchResult,
) -> None:
    counts = {c.gpus for c in under_3000.top}
    assert max(counts) <= 3000
    assert 2560 in counts  # 2,048 < 2,560 ≤ 3,000: the old grid stopped at 2,048
    assert {n for n in counts if not is_power_of_two(n)}
    assert all(c.gpus <= 3000 for c in under_3000.pareto)


def test_every_count_is_whole_servers(under_3000: SearchResult) -> None:
    assert all(c.gpus % 8 == 0 for c in under_3000.top)
    for accelerator, system, unit in [
        (H100, None, 8),
        ("gb200", "gb200-nvl72", 4),  # a 72-GPU rack of 18 trays: jobs get whole trays
        ("l40s", None, 1),
    ]:
        case = case_for(
            make_spec("llama-3-8b", global_batch=512, accelerator=accelerator, system=system),
            Assumptions(),
        )
        assert server_gpus(case.hw) == unit
        counts = gpu_counts_for(case, DEFAULT_MAX_GPUS)
        assert counts == sorted(set(counts))
        assert all(n % unit == 0 and n <= DEFAULT_MAX_GPUS for n in counts)
        assert set(POWER_OF_TWO_COUNTS) <= set(counts)


def test_previous_power_of_two_results_are_still_found() -> None:
    spec = make_spec("llama-3-8b", global_batch=512)
    before = search_training(spec, [H100, A100], gpu_counts=POWER_OF_TWO_COUNTS, top_k=1000)
    after = search_training(spec, [H100, A100], top_k=1000)
    now = {(c.accelerator, c.gpus): c for c in after.top}
    assert len(now) > len(before.top)
    for c in before.top:  # the same best layout for every (accelerator, count) tried before
        assert now[(c.accelerator, c.gpus)] == c
    assert after.top[0].train_time_s is not None
    assert before.top[0].train_time_s is not None
    assert after.top[0].train_time_s <= before.top[0].train_time_s


def test_a_batch_with_many_divisors_keeps_one_count_per_band() -> None:
    # 5,040 = 2^4·3^2·5·7: ~150 whole-server counts up to 16,384 split; the bands thin them.
    case = case_for(make_spec("llama-3-8b", global_batch=5040), Assumptions())
    splits = [n for n in layout_products(case, DEFAULT_MAX_GPUS) if n % 8 == 0]
    counts = gpu_counts_for(case, DEFAULT_MAX_GPUS)
    assert len(splits) > 2 * COUNTS_PER_OCTAVE * 5
    assert set(counts) <= set(splits)
    pinned = set(POWER_OF_TWO_COUNTS) | {max(splits)}
    bands = [math.floor(COUNTS_PER_OCTAVE * math.log2(n / 8) + 1e-9) for n in counts]
    free = [b for n, b in zip(counts, bands, strict=True) if n not in pinned]
    assert len(free) == len(set(free))  # one count per band
    octaves = math.log2(DEFAULT_MAX_GPUS / 8) + 1
    assert len(counts) <= COUNTS_PER_OCTAVE * octaves + len(pinned)


def test_a_count_above_max_gpus_is_not_searched_and_says_so() -> None:
    spec = make_spec("llama-3-8b", global_batch=512, count=3072)
    result = search_training(spec, [H100], constraints=Constraints(max_gpus=1000), top_k=1000)
    assert result.top
    assert max(c.gpus for c in result.top) <= 1000
    assert result.rejected["hardware.count (3,072) above max_gpus (1,000), not searched"] == 1


def test_no_whole_server_count_under_max_gpus_is_reported() -> None:
    result = search_training(
        make_spec("llama-3-8b", global_batch=512), [H100], constraints=Constraints(max_gpus=4)
    )
    assert result.top == []
    assert result.rejected["no GPU count up to 4 on whole 8-GPU servers of h100-sxm5-80gb"] == 1
