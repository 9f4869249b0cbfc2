"""The emulated collector's memory readings stay within what is there: a job on a MIG slice
(or a GPU fraction) reads at most the memory it holds, and the readings of one GPU never add
up to more than the GPU has (a review read 179.2 GB used of an 80 GB GPU: each slice's job
read a whole GPU's share, and the store sums a GPU's readings)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.telemetry.emulated import PROFILES, EmulatedCollector, EmulatedGpu, EmulatedJob

GIB = 2**30
TOTAL = 80 * GIB
A100_SLICES_BYTES = (10 * GIB, 20 * GIB, 40 * GIB, 80 * GIB)  # 1g.10gb .. 7g.80gb


@st.composite
def jobs_on_one_node(draw: st.DrawFn) -> list[EmulatedJob]:
    """Jobs on 4 GPUs of one node: some hold whole GPUs, some share a GPU, with the memory
    they hold there declared (a slice's, within the GPU's) or not (an older caller)."""
    left = dict.fromkeys(range(4), TOTAL)
    out = []
    for i in range(draw(st.integers(1, 10))):
        gpus = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True))
        held = []
        for g in gpus:
            if draw(st.booleans()):
                size = draw(st.sampled_from(A100_SLICES_BYTES))
                if size <= left[g]:
                    left[g] -= size
                    held.append((g, size))
        out.append(
            EmulatedJob(
                str(i),
                draw(st.sampled_from(PROFILES)),
                "n1",
                tuple(sorted(gpus)),
                start_s=draw(st.floats(0, 10_000)),
                mem_held_bytes=tuple(held),
            )
        )
    return out


@given(jobs_on_one_node(), st.floats(10_000, 100_000))
@settings(max_examples=300, deadline=None)
def test_no_job_reads_more_than_it_holds_and_no_gpu_more_than_it_has(
    jobs: list[EmulatedJob], now_s: float
) -> None:
    collector = EmulatedCollector(lambda: jobs, gpu=EmulatedGpu(mem_total_bytes=TOTAL))
    per_gpu: dict[tuple[str, int | None], int] = defaultdict(int)
    held = {(j.job_id, g): size for j in jobs for g, size in j.mem_held_bytes}
    for s in collector.collect(now_s):
        assert s.mem_used_bytes is not None
        assert s.mem_total_bytes == TOTAL
        assert 0 <= s.mem_used_bytes <= held.get((s.job_id or "", s.gpu_index or 0), TOTAL)
        per_gpu[(s.node, s.gpu_index)] += s.mem_used_bytes
    assert all(used <= TOTAL for used in per_gpu.values()), per_gpu


def test_a_1g_10gb_slice_reads_at_most_10_gb() -> None:
    jobs = [
        EmulatedJob(str(k), "training", "n1", (0,), 0.0, mem_held_bytes=((0, 10 * GIB),))
        for k in range(7)
    ]
    samples = EmulatedCollector(lambda: jobs).collect(3_600.0)
    assert len(samples) == 7
    assert all(0 < (s.mem_used_bytes or 0) <= 10 * GIB for s in samples)
    assert sum(s.mem_used_bytes or 0 for s in samples) <= TOTAL


def test_jobs_sharing_a_gpu_undeclared_split_its_memory() -> None:
    """Two training jobs on one GPU read 0.88 of it each before (141 GB of 80)."""
    jobs = [EmulatedJob(k, "training", "n1", (0,), 0.0) for k in ("1", "2")]
    samples = EmulatedCollector(lambda: jobs).collect(3_600.0)
    assert sum(s.mem_used_bytes or 0 for s in samples) <= TOTAL
    assert all((s.mem_used_bytes or 0) > 0.4 * TOTAL for s in samples)  # half each, 88 % used
