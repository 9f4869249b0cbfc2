"""Efficiency parameters and framework profiles, loaded from estimate/data/*.yaml.

Kept as data so that a calibration run rewrites numbers, not code, and a
reader can see each value's source and the physical range it was held to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml

# flash: a portable FlashAttention-2-class kernel (flash-attn, PyTorch SDPA, CK on ROCm, XLA);
# fused: the vendor's architecture-specific fused kernel (cuDNN fused attention through
# Transformer Engine, FlashAttention-3 class on Hopper/Blackwell); unfused: GEMMs + softmax.
AttentionKernel = Literal["flash", "fused", "unfused"]


Precision = Literal["bf16", "fp8"]
# Parameters a family (one vendor generation) may set; the rest come from `common`.
FAMILY_PARAMETERS = (
    "gemm_peak_fraction",
    "fp8_gemm_peak_fraction",
    "attention_vs_gemm",
    "fused_attention_vs_gemm",
    "memory_bandwidth_fraction",
    "scaleup_link_fraction",
    "scaleout_link_fraction",
)
# Fractions of a datasheet peak that a borrowed family's penalty scales (compute only:
# links and HBM of a different part are taken as its datasheet says).
PENALISED = ("gemm_peak_fraction", "fp8_gemm_peak_fraction")


@dataclass(frozen=True)
class Efficiency:
    """How close a GPU and its links get to their datasheet numbers."""

    gemm_peak_fraction: float  # large bf16 GEMMs, of the dense bf16 peak
    kernel_overhead_s: float
    memory_bandwidth_fraction: float
    attention_vs_gemm: float  # flash attention (bf16) relative to bf16 GEMMs
    scaleup_link_fraction: float
    scaleout_link_fraction: float
    scaleup_latency_s: float
    scaleout_latency_s: float
    overlap_interference: float
    source: str  # where gemm_peak_fraction came from for this device
    fp8_gemm_peak_fraction: float = 0.0  # of the dense fp8 peak; 0 = as bf16
    fused_attention_vs_gemm: float = 0.0  # vendor fused attention kernel; 0 = as flash

    def attention_fraction(self, kernel: str) -> float:
        """Attention core throughput relative to bf16 GEMMs for a kernel kind."""
        if kernel == "unfused":
            return 1.0  # plain GEMMs (the softmax is timed apart, as HBM traffic)
        if kernel == "fused" and self.fused_attention_vs_gemm > 0:
            return self.fused_attention_vs_gemm
        return self.attention_vs_gemm

    def with_values(self, **values: float) -> Efficiency:
        return replace(self, **values)  # type: ignore[arg-type]

    def gemm_fraction(self, precision: str) -> float:
        """GEMM fraction of the peak at `precision` (FP8 GEMMs have their own, lower one:
        per-tensor scaling and the casts around them)."""
        if precision == "fp8" and self.fp8_gemm_peak_fraction > 0:
            return self.fp8_gemm_peak_fraction
        return self.gemm_peak_fraction


@dataclass(frozen=True)
class Calibration:
    """Which published rows an accelerator's efficiency rests on.

    `calibrated` is true when the accelerator belongs to a family fitted on its own rows;
    otherwise the values are `borrowed_from` the nearest fitted family with its GEMM
    fractions multiplied by `penalty` (< 1), and a plan says so in its assumptions.
    """

    accelerator: str
    family: str  # the family whose values are used
    calibrated: bool
    borrowed_from: str | None
    penalty: float
    rows: str  # the efficiency rows behind the values
    why: str  # why this family is the nearest (borrowed only)
    # parameters the family itself takes from another family, with the reason
    borrowed_parameters: tuple[str, ...] = ()

    def describe(self) -> str:
        inner = "".join(f"; {note}" for note in self.borrowed_parameters)
        if self.calibrated:
            return f"{self.family} family, fitted on {self.rows}{inner}"
        return (
            f"no rows for {self.accelerator}: borrowed from the {self.borrowed_from} family "
            f"({self.rows}) with GEMM fractions x {self.penalty:g} ({self.why}){inner}"
        )


@dataclass(frozen=True)
class FrameworkProfile:
    """What a training stack overlaps with what (docs/design/0016-overlap-and-efficiency.md).

    dp_overlap: the data-parallel gradient reduce-scatter (or all-reduce) runs while the
    last microbatch's backward still computes; param_gather_overlap: the distributed
    optimizer's all-gather of updated weights runs under the next step's first forward;
    zero3_prefetch: ZeRO-3/FSDP gathers the next layer's weights during this layer's
    compute; tp_overlap: tensor-parallel all-gather/reduce-scatter are split and pipelined
    with the GEMMs they feed; cp_overlap: the context-parallel K/V ring exchange runs under
    the attention of the block already received. Overlapped traffic is not free: it costs
    `overlap_interference` of the overlapped time (shared SMs and HBM).
    """

    name: str
    description: str
    attention_kernel: AttentionKernel
    dp_overlap: bool
    zero3_prefetch: bool
    tp_overlap: bool
    grad_reduce_bytes: int
    grad_bytes: int
    zero_stages: tuple[int, ...]
    fused_mlp: bool
    source: str
    virtual_stages: tuple[int, ...] = (1,)  # interleaved pipeline schedules it offers
    param_gather_overlap: bool = False
    cp_overlap: bool = True
    # What selective recomputation keeps (docs/design/0003 "Memory"): "inputs" = Megatron's
    # (Korthikanti et al. 2022 §5: every activation but the attention core); "matmul_outputs"
    # = JAX's checkpoint_dots_with_no_batch_dims (MaxText remat_policy=minimal): the layer
    # input and the outputs of weight GEMMs, everything else recomputed in the backward.
    selective_keeps: Literal["inputs", "matmul_outputs"] = "inputs"
    # FSDP-style sharding (FULL_SHARD, FSDP2, XLA SPMD) shards the fp32 parameter itself, the
    # optimizer's master copy: no persistent bf16 shard beside it, only the gathered layers.
    fp32_sharded_params: bool = False
    # Where optimizer state may live (training_offload): "optimizer" = host memory with the
    # step on the CPU (DeepSpeed offload_optimizer, FSDP CPUOffload); stacks without it: none.
    offload: tuple[str, ...] = ("none",)
    # Whether the data-parallel ring spreads a node's network traffic over the NICs of all
    # the group's ranks on the node (NCCL rings, one channel per NIC: training_comm.ring_bandwidth)
    # or each rank's traffic crosses its own NIC (measured so for DeepSpeed ZeRO-3 in 2021).
    dp_rails_aggregate: bool = True
    # ZeRO-3: whether a fully recomputed forward gathers the weights a third time (released
    # after the first forward and again after the recompute) or reuses the backward's gather.
    recompute_regathers: bool = False

    @property
    def flash_attention(self) -> bool:
        """A flash-style kernel (portable or fused): no stored scores, causal blocks skipped."""
        return self.attention_kernel != "unfused"

    def overlaps(self) -> str:
        """One line for a report: what this profile overlaps."""
        flags = (
            ("DP grad reduce with backward", self.dp_overlap),
            ("param all-gather with next forward", self.param_gather_overlap),
            ("ZeRO-3 prefetch", self.zero3_prefetch),
            ("TP comm with GEMMs", self.tp_overlap),
            ("CP ring with attention", self.cp_overlap),
        )
        on = [name for name, flag in flags if flag]
        return "overlaps " + (", ".join(on) if on else "nothing") + " (interference charged)"


def _data(name: str) -> Any:
    text = resources.files("gpufleet.estimate").joinpath("data", name).read_text("utf-8")
    return yaml.safe_load(text)


@cache
def efficiency_table() -> dict[str, Any]:
    data: dict[str, Any] = _data("efficiency.yaml")
    return data


def family_of(accelerator: str, table: dict[str, Any] | None = None) -> str | None:
    """The family whose rows include `accelerator`, or None."""
    table = table or efficiency_table()
    for name, fam in table["families"].items():
        if accelerator in fam["devices"]:
            return str(name)
    return None


def family_values(family: str, table: dict[str, Any] | None = None) -> dict[str, float]:
    """Every Efficiency number of a family: common values overridden by the family's own
    (a `same_as: <family>` entry takes that family's value)."""
    table = table or efficiency_table()
    values = {k: float(v["value"]) for k, v in table["common"].items()}
    params = table["families"][family].get("params", {})
    for name in FAMILY_PARAMETERS:
        spec = params.get(name)
        if spec is None:
            continue
        if "same_as" in spec:
            # Borrowed from another family, times an explicit penalty where one is given.
            values[name] = family_values(spec["same_as"], table)[name] * float(
                spec.get("penalty", 1.0)
            )
        else:
            values[name] = float(spec["value"])
    values.setdefault("fp8_gemm_peak_fraction", values.get("gemm_peak_fraction", 0.0))
    values.setdefault("fused_attention_vs_gemm", values.get("attention_vs_gemm", 0.0))
    return values


def device_gemm_scale(accelerator: str, table: dict[str, Any] | None = None) -> float:
    """A device's compute relative to its family's value (1 unless the family lists it):
    parts of one silicon at different power limits sustain different clocks at the same
    listed peak (MI300X at 750 W against MI325X at 1000 W)."""
    table = table or efficiency_table()
    family = family_of(accelerator, table)
    if family is None:
        return 1.0
    spec = table["families"][family].get("device_gemm_scale", {}).get(accelerator)
    return 1.0 if spec is None else float(spec["value"])


def efficiency_for(
    accelerator: str, table: dict[str, Any] | None = None
) -> tuple[Efficiency, Calibration]:
    """Parameters for an accelerator and the rows they rest on (borrowed ones named)."""
    table = table or efficiency_table()
    own = family_of(accelerator, table)
    if own is not None:
        fam = table["families"][own]
        cal = Calibration(accelerator, own, True, None, 1.0, str(fam["rows"]), "")
    else:
        near = table["nearest"].get(accelerator) or table["default_nearest"]
        family = str(near["family"])
        cal = Calibration(
            accelerator,
            family,
            False,
            family,
            float(near["penalty"]),
            str(table["families"][family]["rows"]),
            str(near["why"]),
        )
    params = table["families"][cal.family].get("params", {})
    notes = tuple(f"{name}: {spec['source']}" for name, spec in params.items() if "same_as" in spec)
    cal = replace(cal, borrowed_parameters=notes)
    values = family_values(cal.family, table)
    scale = cal.penalty * device_gemm_scale(accelerator, table)
    for name in PENALISED:
        values[name] *= scale
    source = cal.describe()
    return Efficiency(source=source, **values), cal


def fitted_parameters(marker: str = "fitted") -> dict[str, tuple[float, float, float]]:
    """Name -> (value, low, high) of every parameter whose source is `marker`: `fitted`
    (the A100 calibration fit) or `fitted-modern` (the current-accelerator fit)."""
    table = efficiency_table()
    out: dict[str, tuple[float, float, float]] = {}
    sections = [("", table["common"])] + [
        (f"{name}.", {**fam.get("params", {}), **fam.get("device_gemm_scale", {})})
        for name, fam in table["families"].items()
    ]
    for prefix, params in sections:
        for name, spec in params.items():
            if spec.get("source") == marker:
                low, high = spec["range"]
                out[f"{prefix}{name}"] = (float(spec["value"]), float(low), float(high))
    return out


@cache
def framework_profiles() -> dict[str, FrameworkProfile]:
    out: dict[str, FrameworkProfile] = {}
    for name, spec in _data("frameworks.yaml").items():
        out[name] = FrameworkProfile(
            name=name,
            **{
                **spec,
                "zero_stages": tuple(spec["zero_stages"]),
                "virtual_stages": tuple(spec["virtual_stages"]),
                "offload": tuple(spec.get("offload", ("none",))),
            },
        )
    return out


def framework_profile(name: str) -> FrameworkProfile:
    return framework_profiles()[name]
