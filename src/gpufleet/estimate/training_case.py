"""Build the training model's inputs from a validated spec, recording every default."""

from __future__ import annotations

from gpufleet.catalog.architecture import ModelArch
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.efficiency import efficiency_for, framework_profile
from gpufleet.estimate.hardware import resolve_hardware
from gpufleet.estimate.training import Layouts, TrainingCase
from gpufleet.specs.training import Parallelism, TrainingSpec


def case_for(
    spec: TrainingSpec,
    log: Assumptions,
    accelerator: str | None = None,
    arch: ModelArch | None = None,
) -> TrainingCase:
    """The workload on `accelerator` (default: the spec's), with efficiency parameters."""
    name = accelerator or spec.hardware.accelerator
    same = name == spec.hardware.accelerator
    hw = resolve_hardware(
        name,
        spec.training.precision,
        log,
        system=spec.hardware.system if same else None,
        scale_out=spec.hardware.scale_out if same else None,
    )
    # Always stated: the network the step time crosses nodes on (a stated scale_out logs its
    # own derivation first under the same name, hardware.resolve_hardware).
    log.add(
        f"scale_out[{hw.accelerator}]",
        f"{hw.fabric or 'unnamed'}: {hw.scaleout_bytes_per_s * 8 / 1e9:,.0f} Gb/s per GPU",
        f"{hw.system}'s network (systems.csv); a stated hardware.scale_out replaces it"
        if hw.system
        else "no system row: the default scale-out fabric",
    )
    eff, cal = efficiency_for(hw.accelerator)
    profile = framework_profile(spec.training.framework)
    # Always stated: which efficiency rows this accelerator's figures rest on, and when
    # none of its own exist, which family they are borrowed from and at what penalty.
    log.add(
        f"efficiency[{hw.accelerator}]",
        f"GEMM {eff.gemm_fraction(spec.training.precision):.0%} of the "
        f"{spec.training.precision} peak, {profile.attention_kernel} attention "
        f"{eff.attention_fraction(profile.attention_kernel):.2f}x bf16 GEMM, "
        f"HBM {eff.memory_bandwidth_fraction:.0%}, collectives {eff.scaleup_link_fraction:.0%} "
        f"of the scale-up and {eff.scaleout_link_fraction:.0%} of the scale-out link",
        cal.describe(),
    )
    log.add(
        f"framework[{profile.name}]",
        f"{profile.description}; {profile.overlaps()}",
        profile.source,
    )
    return TrainingCase(
        arch=arch or spec.model,
        seq_len=spec.training.seq_len,
        global_batch=spec.training.global_batch,
        precision=spec.training.precision,
        dropout=spec.training.dropout,
        hw=hw,
        eff=eff,
        profile=profile,
    )


def layout_for(spec: TrainingSpec, parallelism: Parallelism, gpus: int) -> Layouts:
    par = parallelism
    dp = par.dp if par.dp is not None else gpus // (par.tp * par.pp * par.cp)
    return Layouts.single(
        tp=par.tp,
        pp=par.pp,
        dp=dp,
        cp=par.cp,
        ep=par.ep,
        mb=par.microbatch,
        vs=par.virtual_stages,
        zero=par.zero_stage,
        recompute=par.recompute,
        sp=par.sequence_parallel,
    )
