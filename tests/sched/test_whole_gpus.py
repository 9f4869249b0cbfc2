"""whole_gpus_only (k8s-default): slices and fractions are rounded up to one whole GPU."""

from __future__ import annotations

from gpufleet.sched.decide import decide

from .scenarios import A100, PLENTY, cluster, job, leaves


def test_whole_gpus_only_rounds_slices_and_fractions_up_to_one_gpu() -> None:
    c, state = cluster(*leaves(1, gpus=2, acc=A100, fractions=True))
    pending = [
        job("frac", gpu_fraction=0.25, submitted_s=0),
        job("mig", mig_profile="1g.10gb", submitted_s=1),
        job("frac2", gpu_fraction=0.25, submitted_s=2),
    ]
    d = decide(c, state, [], pending, PLENTY, profile="k8s-default")
    assert sorted(d.admitted) == ["frac", "mig"]  # two GPUs, two jobs: frac2 waits
    for (p,) in d.admitted.values():
        assert len(p.gpus) == 1
        assert not p.milli
        assert not p.mig_slices
    d = decide(c, state, [], pending, PLENTY, profile="kueue-like")  # the control: shares
    assert sorted(d.admitted) == ["frac", "frac2"]
