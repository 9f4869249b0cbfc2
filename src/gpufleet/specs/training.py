"""Training workload spec: a model, a token budget and batch, hardware, optional parallelism.

Checks here are the ones a framework would reject at launch (tp not dividing
heads, a parallel layout that does not multiply out to the GPU count), so a
plan never recommends something Megatron or FSDP would refuse to run.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator

from gpufleet.quantities import BytesPerSecond, PositiveSeconds, Seconds, TokenCount
from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.hardware import HardwareSpec
from gpufleet.specs.model_ref import ModelSpec

TrainingPrecision = Literal["bf16", "fp8"]
Framework = Literal[
    "megatron-core",
    "megatron",
    "megatron-2021",
    "nemo",
    "deepspeed",
    "fsdp",
    "torchtitan-fsdp2",
    "llm-foundry-fsdp",
    "jax",
]
Recompute = Literal["none", "selective", "full"]


class TrainingParams(Spec):
    seq_len: PositiveInt = Field(description="Tokens per sequence.")
    global_batch: PositiveInt = Field(description="Sequences per optimizer step.")
    tokens: TokenCount | None = Field(
        default=None, description="Token budget, e.g. 15.6T; needed for time and cost."
    )
    precision: TrainingPrecision = "bf16"
    optimizer: Literal["adam", "adamw"] = "adam"
    framework: Framework = Field(
        default="megatron-core",
        description="Selects a framework profile (what overlaps with what) with its source; "
        "the default is today's common practice, Megatron-Core with DP and TP overlap.",
    )
    dropout: bool = Field(
        default=False,
        description="Hidden and attention dropout on (GPT-3-era recipes); adds masks to "
        "activation memory and elementwise time.",
    )


class Parallelism(Spec):
    tp: PositiveInt = Field(default=1, description="Tensor parallel size.")
    pp: PositiveInt = Field(default=1, description="Pipeline parallel stages.")
    dp: PositiveInt | None = Field(
        default=None, description="Data parallel size; derived from the GPU count when absent."
    )
    cp: PositiveInt = Field(default=1, description="Context (sequence) parallel size.")
    ep: PositiveInt = Field(default=1, description="Expert parallel size (MoE).")
    microbatch: PositiveInt = 1
    virtual_stages: PositiveInt = Field(default=1, description="Interleaved 1F1B when > 1.")
    zero_stage: NonNegativeInt = Field(default=1, le=3, description="0..3; 3 = FSDP-style.")
    recompute: Recompute = "selective"
    sequence_parallel: bool = True


class Reliability(Spec):
    checkpoint_storage: BytesPerSecond | None = Field(
        default=None, description="Write throughput for checkpoints (bare number: GB/s)."
    )
    checkpoint_interval: PositiveSeconds | None = None
    gpu_mtbf: PositiveSeconds | None = Field(
        default=None, description="Mean time between failures of one GPU."
    )
    restart_overhead: Seconds | None = None


class TrainingSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["training"] = "training"
    name: str | None = None
    model: ModelSpec
    training: TrainingParams
    hardware: HardwareSpec
    parallelism: Parallelism | None = None
    reliability: Reliability | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = training_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def data_parallel(self) -> int | None:
        """dp as given, or derived from hardware.count / (tp·pp·cp)."""
        par = self.parallelism
        if par is None:
            return None
        if par.dp is not None:
            return par.dp
        if self.hardware.count is None:
            return None
        return self.hardware.count // (par.tp * par.pp * par.cp)


def training_problems(spec: TrainingSpec) -> list[str]:
    """Everything that makes the spec unrunnable, each naming the fields to change."""
    out: list[str] = []
    arch, train, hw = spec.model, spec.training, spec.hardware
    device = hw.device()
    if train.precision == "fp8" and device.fp8_dense_tflops is None:
        out.append(
            f"training.precision: fp8 is not supported by {device.name} "
            "(the catalog lists no FP8 throughput); use bf16"
        )
    par = spec.parallelism
    if par is None:
        return out
    if arch.heads % par.tp:
        out.append(f"parallelism.tp ({par.tp}) must divide model.heads ({arch.heads})")
    if par.pp > arch.layers:
        out.append(f"parallelism.pp ({par.pp}) must not exceed model.layers ({arch.layers})")
    if par.virtual_stages > 1:
        if par.pp == 1:
            out.append("parallelism.virtual_stages > 1 needs pipeline parallelism (pp > 1)")
        elif arch.layers < par.pp * par.virtual_stages:
            out.append(
                f"model.layers ({arch.layers}) must be at least "
                f"pp × virtual_stages ({par.pp * par.virtual_stages})"
            )
    if train.seq_len % par.cp:
        out.append(f"parallelism.cp ({par.cp}) must divide training.seq_len ({train.seq_len})")
    if par.ep > 1 and arch.experts == 1:
        out.append(
            f"parallelism.ep ({par.ep}) needs a mixture-of-experts model (model.experts is 1)"
        )
    elif par.ep > 1 and arch.experts % par.ep:
        out.append(f"parallelism.ep ({par.ep}) must divide model.experts ({arch.experts})")
    model_parallel = par.tp * par.pp * par.cp
    if hw.count is not None:
        if par.dp is not None and model_parallel * par.dp != hw.count:
            out.append(
                f"tp × pp × cp × dp = {model_parallel * par.dp} but hardware.count is "
                f"{hw.count}; make them equal or omit dp"
            )
        elif par.dp is None and hw.count % model_parallel:
            out.append(
                f"hardware.count ({hw.count}) is not a multiple of tp × pp × cp ({model_parallel})"
            )
    dp = spec.data_parallel()
    if dp and train.global_batch % (dp * par.microbatch):
        out.append(
            f"training.global_batch ({train.global_batch}) must be a multiple of "
            f"dp × microbatch ({dp} × {par.microbatch} = {dp * par.microbatch})"
        )
    return out
