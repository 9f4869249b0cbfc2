"""Inference workload spec: a model served at a load with latency SLOs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from gpufleet.specs.base import Spec, kind_required
from gpufleet.specs.hardware import HardwareSpec
from gpufleet.specs.model_ref import ModelSpec

# fp4 is NVFP4 (Blackwell): it needs an FP4 figure in the accelerator catalog.
ServingPrecision = Literal["bf16", "fp16", "fp8", "int8", "int4", "fp4"]
Engine = Literal["vllm", "tensorrt-llm", "sglang", "generic"]


class TokenLength(Spec):
    """A request length distribution summarised by its mean and p99."""

    mean: PositiveInt
    p99: PositiveInt | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.p99 is not None and self.p99 < self.mean:
            raise ValueError(f"p99 ({self.p99}) must be at least mean ({self.mean})")
        return self


_TOKEN_COUNT: TypeAdapter[int] = TypeAdapter(PositiveInt)


class Slo(Spec):
    ttft_p99_ms: PositiveFloat | None = Field(default=None, description="Time to first token.")
    tpot_p99_ms: PositiveFloat | None = Field(default=None, description="Time per output token.")
    e2e_p99_ms: PositiveFloat | None = Field(
        default=None,
        description="Whole request: TTFT + (output tokens - 1) × TPOT, with the p99 prompt, "
        "the p99 output length and the p99 queue wait.",
    )


class ServingParams(Spec):
    precision: ServingPrecision = Field(default="bf16", description="Weight precision.")
    kv_precision: ServingPrecision | None = Field(
        default=None,
        description="KV-cache precision; defaults to precision for bf16, fp16 and fp8 weights, "
        "fp8 for fp4 and bf16 for the weight-only int8 and int4.",
    )
    engine: Engine = "generic"
    input_tokens: PositiveInt | TokenLength
    output_tokens: PositiveInt | TokenLength
    batch: PositiveInt | None = Field(default=None, description="Static batch (point estimate).")
    concurrency: PositiveInt | None = Field(
        default=None, description="Requests in flight under continuous batching."
    )
    request_rate: PositiveFloat | None = Field(
        default=None, description="Requests per second to size the fleet for (finite)."
    )
    slo: Slo = Slo()

    @field_validator("input_tokens", "output_tokens", mode="wrap")
    @classmethod
    def _one_form(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A mapping is a distribution and anything else a count: each is checked as that
        form alone, so {mean: 2000, p99: 1000} reports its order, not also that a mapping
        is not a whole number."""
        if isinstance(value, Mapping):
            return TokenLength.model_validate(value)
        if isinstance(value, TokenLength):
            return handler(value)
        return _TOKEN_COUNT.validate_python(value)

    @field_validator("request_rate")
    @classmethod
    def _finite_rate(cls, value: float | None) -> float | None:
        """`.inf` parses as a positive float; no fleet is sized for it."""
        if value is not None and not math.isfinite(value):
            raise ValueError(f"must be a finite number of requests per second, got {value}")
        return value

    @model_validator(mode="after")
    def _one_load(self) -> Self:
        given = [k for k in ("batch", "concurrency", "request_rate") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(
                f"give one of batch, concurrency or request_rate, not {' and '.join(given)}"
            )
        return self

    def mean_tokens(self, which: Literal["input", "output"]) -> int:
        value = self.input_tokens if which == "input" else self.output_tokens
        return value if isinstance(value, int) else value.mean

    def max_tokens(self, which: Literal["input", "output"]) -> int:
        value = self.input_tokens if which == "input" else self.output_tokens
        if isinstance(value, int):
            return value
        return value.p99 or value.mean


class InferenceParallelism(Spec):
    tp: PositiveInt = 1
    pp: PositiveInt = 1


class InferenceSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=kind_required)

    kind: Literal["inference"] = "inference"
    name: str | None = None
    model: ModelSpec
    serving: ServingParams
    hardware: HardwareSpec
    parallelism: InferenceParallelism | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = inference_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def inference_problems(spec: InferenceSpec) -> list[str]:
    out: list[str] = []
    arch, serving, device = spec.model, spec.serving, spec.hardware.device()
    for field in ("precision", "kv_precision"):
        precision = getattr(serving, field)
        if precision == "fp8" and device.fp8_dense_tflops is None:
            out.append(
                f"serving.{field}: fp8 is not supported by {device.name} "
                "(the catalog lists no FP8 throughput); use bf16 or int8"
            )
        if precision == "fp4" and device.fp4_dense_tflops is None:
            instead = "fp8 or bf16" if device.fp8_dense_tflops is not None else "bf16 or int8"
            out.append(
                f"serving.{field}: fp4 is not supported by {device.name} "
                f"(the catalog lists no FP4 throughput); use {instead}"
            )
    longest = serving.max_tokens("input") + serving.max_tokens("output")
    if arch.max_seq_len is not None and longest > arch.max_seq_len:
        out.append(
            f"serving: input + output tokens ({longest}) exceed the model's context "
            f"({arch.max_seq_len})"
        )
    par = spec.parallelism
    if par is not None:
        if arch.heads % par.tp:
            out.append(f"parallelism.tp ({par.tp}) must divide model.heads ({arch.heads})")
        if par.pp > arch.layers:
            out.append(f"parallelism.pp ({par.pp}) must not exceed model.layers ({arch.layers})")
        count = spec.hardware.count
        if count is not None and count % (par.tp * par.pp):
            out.append(f"hardware.count ({count}) is not a multiple of tp × pp ({par.tp * par.pp})")
    return out
