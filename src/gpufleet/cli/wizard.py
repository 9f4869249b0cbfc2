"""`gpufleet wizard`: a guided interview that writes a plan spec and runs the planner.

The wizard asks in plain language what the user trains or serves, how big, by
when, with what budget, and where (cloud, on-prem or both), explaining each
trade-off as it asks, with numbers computed for the chosen model. Every answer
is checked at once with the same pydantic fields and quantity parsers the spec
files use, so the written spec always loads; a bad answer is asked again with
the message (or, with `--answers FILE`, is a user error naming the key).

Every question has a key. `--answers FILE` reads the same keys from a YAML
mapping and asks nothing: that is how the wizard is scripted and tested. Keys
are documented in docs/guide/wizard.md.
"""

from __future__ import annotations

import importlib
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TextIO, TypeVar, cast

import typer
import yaml
from pydantic import BaseModel, PositiveInt, TypeAdapter, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.prompt import Confirm, Prompt
from rich.syntax import Syntax
from rich.table import Table

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.catalog.architecture import ModelArch
from gpufleet.catalog.models import ModelPreset, get_model_preset, load_model_presets
from gpufleet.errors import UserError, suggest
from gpufleet.estimate.params import parameter_count
from gpufleet.estimate.training import TRAINING_STATE_BYTES_PER_PARAM
from gpufleet.quantities import parse_count
from gpufleet.specs.inference import ServingParams, Slo, TokenLength
from gpufleet.specs.load import describe, read_yaml, validate
from gpufleet.specs.model_ref import ModelSpec
from gpufleet.specs.plan import (
    Constraints,
    OnPremPreferences,
    PlanSpec,
    TrainingWorkload,
)
from gpufleet.specs.training import TrainingParams

T = TypeVar("T")

# When each key is asked: for "not used" errors in answers files and for the docs.
PLAN_KEYS: dict[str, str] = {
    "deployment": "always",
    "providers": "when deployment is cloud or both",
    "regions": "when deployment is cloud or both",
    "expected_utilization": "when deployment is on-prem or both",
    "rack_power_kw": "when deployment is on-prem or both",
    "electricity_usd_per_kwh": "when deployment is on-prem or both",
    "accelerators": "always",
    "plan_name": "always",
    "overwrite": "when the --spec file already exists",
}
WORKLOAD_KEYS: dict[str, str] = {
    "kind": "always",
    "model": "always",
    "model_layers": "when model is custom",
    "model_hidden": "when model is custom",
    "model_heads": "when model is custom",
    "model_kv_heads": "when model is custom",
    "model_ffn_hidden": "when model is custom",
    "model_ffn_type": "when model is custom",
    "model_vocab": "when model is custom",
    "model_max_seq_len": "when model is custom",
    "tokens": "for training workloads",
    "seq_len": "for training workloads",
    "global_batch": "for training workloads",
    "deadline": "for training workloads",
    "budget_usd": "for training workloads",
    "request_rate": "for serving workloads",
    "input_tokens": "for serving workloads",
    "output_tokens": "for serving workloads",
    "ttft_p99_ms": "for serving workloads",
    "tpot_p99_ms": "for serving workloads",
    "precision": "always",
    "max_gpus": "always",
    "team": "always",
    "name": "always",
}
WORKLOADS_KEY = "workloads"

# Reference points for the explanations: the two GPUs that differ only in HBM.
HBM_COMPARISON = ("h100-sxm5-80gb", "h200-sxm-141gb")
# Tokens per optimizer step that 70B-class pretraining runs use (Llama 2 and 3: 4M).
TOKENS_PER_STEP = 4 * 2**20
# Chinchilla's compute-optimal ratio (Hoffmann et al. 2022).
CHINCHILLA_TOKENS_PER_PARAM = 20
# A rough MFU for the back-of-envelope explanation only; the planner uses fitted profiles.
ROUGH_MFU = 0.4
REQUEST_TOKENS_EXAMPLE = 4096

_NONE_WORDS = frozenset({"none", "null", "-"})
_KINDS = {
    "training": "training",
    "train": "training",
    "pretraining": "training",
    "pre-training": "training",
    "fine-tuning": "training",
    "finetuning": "training",
    "fine-tune": "training",
    "serving": "inference",
    "serve": "inference",
    "service": "inference",
    "inference": "inference",
}
_TRUE = frozenset({"y", "yes", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "false", "off", "0"})


# --- checking one answer --------------------------------------------------------------------


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    """A validator for one field, with the field's own type and constraints."""
    return TypeAdapter(model.model_fields[name].rebuild_annotation())


def _errors(model: type[BaseModel], exc: ValidationError) -> str:
    return "; ".join(describe(model, err) for err in exc.errors())


def _check(model: type[BaseModel], name: str, value: object) -> Any:
    """Validate `value` as field `name` of `model`; the message is the spec loader's."""
    try:
        return _adapter(model, name).validate_python(value)
    except ValidationError as exc:
        raise ValueError(_errors(model, exc)) from None


def _choice(model: type[BaseModel], name: str) -> Callable[[object], Any]:
    """A literal field: case does not matter."""

    def parse(value: object) -> Any:
        return _check(model, name, value.strip().lower() if isinstance(value, str) else value)

    return parse


def _field(model: type[BaseModel], name: str) -> Callable[[object], Any]:
    return lambda value: _check(model, name, value)


_POSITIVE_INT: TypeAdapter[int] = TypeAdapter(PositiveInt)


def _positive_int(value: object) -> int:
    try:
        return _POSITIVE_INT.validate_python(value)
    except ValidationError as exc:
        raise ValueError(_errors(ModelArch, exc)) from None


def _number(value: float) -> int | float:
    """Whole numbers as integers, so the written spec reads 800 rather than 800.0."""
    return int(value) if float(value).is_integer() else value


def _items(value: object) -> list[object]:
    """A YAML list, or text separated by commas or spaces."""
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    raise ValueError(f"expected a list or comma-separated text, got {type(value).__name__}")


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected yes or no, got {value!r}")


class Quantity(NamedTuple):
    """An answer with units: as written (for the spec) and in base units (for the notes)."""

    written: object
    amount: float


def _quantity(model: type[BaseModel], name: str) -> Callable[[object], Quantity]:
    def parse(value: object) -> Quantity:
        amount = _check(model, name, value)
        written = value.strip() if isinstance(value, str) else amount
        return Quantity(written, float(amount))

    return parse


# --- the two ways of answering --------------------------------------------------------------


class _Lines:
    """A text stream read like `input()`: no newline, EOFError at the end."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def readline(self) -> str:
        line = self._stream.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")


class _Asker(ABC):
    """Where answers come from: a person at a terminal, or an answers file."""

    @abstractmethod
    def ask(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T:
        """An answer that must be given (or defaults to `default`)."""

    @abstractmethod
    def ask_optional(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T | None:
        """An answer that may be `none`; blank takes `default`, or none without one."""

    @abstractmethod
    def confirm(self, key: str, question: str, *, default: bool) -> bool: ...

    @abstractmethod
    def workloads(self) -> Iterator[_Asker]:
        """One asker per workload, until the user (or the file) has no more."""

    @abstractmethod
    def note(self, text: str) -> None:
        """A remark after an answer (shown interactively only)."""

    @abstractmethod
    def show(self, intro: str, table: Table) -> None:
        """An explanation and a table to choose from (shown interactively only)."""

    @abstractmethod
    def finish(self) -> None:
        """Called once every question was asked."""

    def fail(self, key: str, message: str) -> UserError:
        """An error about the answer to `key` that cannot be asked again."""
        return UserError(f"{key}: {message}")


def _settle(
    value: object, parse: Callable[[Any], T], default: str | None, *, missing: bool
) -> T | None:
    """Blank (or missing) takes the default; `none` is no answer; anything else is parsed."""
    blank = missing or value is None or (isinstance(value, str) and not value.strip())
    if blank:
        return None if default is None else parse(default)
    if isinstance(value, str) and value.strip().lower() in _NONE_WORDS:
        return None
    return parse(value)


class _Interactive(_Asker):
    def __init__(self, console: Console, stream: TextIO | None) -> None:
        self.console = console
        self.stream = cast(TextIO, _Lines(stream)) if stream is not None else None
        self.key = ""

    def _explain(self, text: str) -> None:
        if text:
            self.console.print(text, style="cyan", highlight=False)

    def _input(self, key: str, question: str, default: str | None) -> str:
        self.key = key
        prompt = f"[bold]{escape(question)}[/bold] [dim]{escape(f'[{key}]')}[/dim]"
        return Prompt.ask(
            prompt,
            console=self.console,
            stream=self.stream,
            default=default if default is not None else "",
            show_default=default is not None,
        )

    def _loop(self, key: str, question: str, attempt: Callable[[str], T], default: str | None) -> T:
        while True:
            raw = self._input(key, question, default)
            try:
                return attempt(raw)
            except (ValueError, UserError) as exc:
                self.console.print(f"[red]✗ {escape(str(exc))}[/red]", highlight=False)

    def ask(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T:
        self._explain(explain)

        def attempt(raw: str) -> T:
            value = _settle(raw, parse, default, missing=False)
            if value is None:
                raise ValueError("this one needs an answer")
            return value

        return self._loop(key, question, attempt, default)

    def ask_optional(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T | None:
        self._explain(explain)
        return self._loop(
            key,
            question if default is not None else f"{question} (blank: none)",
            lambda raw: _settle(raw, parse, default, missing=False),
            default,
        )

    def confirm(self, key: str, question: str, *, default: bool) -> bool:
        self.key = key
        prompt = f"[bold]{escape(question)}[/bold] [dim]{escape(f'[{key}]')}[/dim]"
        return Confirm.ask(prompt, console=self.console, stream=self.stream, default=default)

    def workloads(self) -> Iterator[_Asker]:
        index = 1
        while True:
            self.console.rule(f"Workload {index}")
            yield self
            more = self.confirm(
                "another",
                "Add another workload (serving the model you train, another team's job)?",
                default=False,
            )
            if not more:
                return
            index += 1

    def note(self, text: str) -> None:
        self.console.print(f"  {text}", style="green", highlight=False)

    def show(self, intro: str, table: Table) -> None:
        self._explain(intro)
        self.console.print(table)

    def finish(self) -> None:
        pass


class _Scripted(_Asker):
    """Answers from a YAML mapping; a bad or missing answer is a UserError naming its key."""

    def __init__(self, data: Mapping[str, Any], source: str, prefix: str = "") -> None:
        self.data = data
        self.source = source
        self.prefix = prefix
        self.used: set[str] = set()
        self.children: list[_Scripted] = []

    def fail(self, key: str, message: str) -> UserError:
        return UserError(f"{self.source}: {self.prefix}{key}: {message}")

    def _answer(
        self, key: str, parse: Callable[[Any], T], default: str | None
    ) -> tuple[T | None, bool]:
        self.used.add(key)
        missing = key not in self.data
        try:
            return _settle(self.data.get(key), parse, default, missing=missing), missing
        except (ValueError, UserError) as exc:
            raise self.fail(key, str(exc)) from None

    def ask(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T:
        value, missing = self._answer(key, parse, default)
        if value is None:
            why = "missing" if missing else "needs an answer"
            raise self.fail(key, f"{why}; the question is: {question}?")
        return value

    def ask_optional(
        self,
        key: str,
        question: str,
        parse: Callable[[Any], T],
        *,
        default: str | None = None,
        explain: str = "",
    ) -> T | None:
        return self._answer(key, parse, default)[0]

    def confirm(self, key: str, question: str, *, default: bool) -> bool:
        value, _ = self._answer(key, _as_bool, "yes" if default else "no")
        return bool(value)

    def note(self, text: str) -> None:
        pass

    def show(self, intro: str, table: Table) -> None:
        pass

    def mark_used(self, key: str) -> None:
        self.used.add(key)

    def workloads(self) -> Iterator[_Asker]:
        entries = self.data.get(WORKLOADS_KEY)
        if entries is None:  # the flat form: one workload, its keys at the top level
            yield self
            return
        for index, entry in enumerate(entries):
            child = _Scripted(entry, self.source, f"{WORKLOADS_KEY}[{index}].")
            self.children.append(child)
            yield child

    def finish(self) -> None:
        """Answers that no question used would be silently ignored: refuse them."""
        for asker in [self, *self.children]:
            for key in asker.data:
                if key in asker.used or key == WORKLOADS_KEY:
                    continue
                when = WORKLOAD_KEYS.get(key) or PLAN_KEYS.get(key, "")
                raise asker.fail(key, f"not used with these answers: it is asked only {when}")


def _check_keys(data: Mapping[str, Any], source: str) -> None:
    """Unknown keys are errors with the closest known key, before anything is asked."""

    def unknown(key: object, known: Sequence[str], where: str) -> UserError:
        hints = suggest(str(key), known, limit=1)
        tail = f"; did you mean '{hints[0]}'?" if hints else "; see docs/guide/wizard.md"
        return UserError(f"{source}: {where}{key}: unknown question key{tail}")

    entries = data.get(WORKLOADS_KEY)
    if entries is None:
        allowed = [*PLAN_KEYS, *WORKLOAD_KEYS, WORKLOADS_KEY]
        for key in data:
            if key not in allowed:
                raise unknown(key, allowed, "")
        return
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{source}: {WORKLOADS_KEY}: expected a list of at least one workload")
    for key in data:
        if key in WORKLOAD_KEYS:
            raise UserError(
                f"{source}: {key}: a workload question; with a {WORKLOADS_KEY} list, "
                "put it inside the workload's entry"
            )
        if key not in PLAN_KEYS and key != WORKLOADS_KEY:
            raise unknown(key, [*PLAN_KEYS, WORKLOADS_KEY], "")
    for index, entry in enumerate(entries):
        where = f"{WORKLOADS_KEY}[{index}]."
        if not isinstance(entry, Mapping):
            raise UserError(f"{source}: {WORKLOADS_KEY}[{index}]: expected a mapping of answers")
        for key in entry:
            if key in PLAN_KEYS:
                raise UserError(f"{source}: {where}{key}: a plan question; put it at the top level")
            if key not in WORKLOAD_KEYS:
                raise unknown(key, list(WORKLOAD_KEYS), where)


# --- numbers for the explanations -----------------------------------------------------------


def _short_count(n: float) -> str:
    """15e12 -> '15T', 1.41e12 -> '1.4T': two significant digits, SI suffix."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = float(f"{n / scale:.2g}")
            return f"{value:g}{suffix}"
    return f"{n:g}"


def _gb(n: float) -> str:
    if n < 1e9:
        return f"{n / 1e6:,.0f} MB"
    return f"{n / 1e9:,.1f} GB" if n < 1e12 else f"{n / 1e12:,.2f} TB"


def _billions(n: float) -> str:
    return f"{n / 1e9:,.1f} B"


def _model_note(arch: ModelArch) -> str:
    counts = parameter_count(arch)
    name = arch.name or "this model"
    moe = ""
    if arch.is_moe:
        moe = (
            f", {_billions(counts.active_per_token)} active per token (memory follows the "
            "total, compute the active part)"
        )
    return (
        f"{name}: {_billions(counts.total)} parameters, counted from its shape ({arch.layers} "
        f"layers, width {arch.hidden:,}, {arch.heads} heads / {arch.kv_heads} KV heads, "
        f"vocabulary {arch.vocab:,}){moe}. Its weights alone take {_gb(2 * counts.total)} in "
        f"bf16, {_gb(counts.total)} in fp8."
    )


def _training_memory_note(arch: ModelArch) -> str:
    state = TRAINING_STATE_BYTES_PER_PARAM * parameter_count(arch).total
    fits = []
    for name in HBM_COMPARISON:
        device = get_accelerator(name)
        fits.append(f"{math.ceil(state / device.memory_bytes):,} × {_gb(device.memory_bytes)}")
    return (
        f"Training keeps about {TRAINING_STATE_BYTES_PER_PARAM} bytes per parameter "
        "(bf16 weights and "
        f"gradients, fp32 master weights and two Adam moments): {_gb(state)} before "
        f"activations, so at least {' or '.join(fits)} GPUs just to hold it, sharded "
        "(ZeRO/FSDP). More HBM per GPU means less splitting, so less communication per step."
    )


def _gpu_seconds(arch: ModelArch, tokens: float) -> tuple[float, float]:
    """6 · active parameters · tokens FLOPs (Kaplan et al. 2020) and H100-seconds at ROUGH_MFU."""
    flops = 6.0 * parameter_count(arch).active_per_token * tokens
    peak = get_accelerator(HBM_COMPARISON[0]).dense_flops("bf16")
    assert peak is not None  # the catalog lists H100 bf16 throughput
    return flops, flops / (peak * ROUGH_MFU)


def _compute_note(arch: ModelArch, tokens: float) -> str:
    flops, seconds = _gpu_seconds(arch, tokens)
    return (
        f"6 × parameters × tokens ≈ {flops:.1e} FLOPs: about {seconds / 86_400:,.0f} H100-days "
        f"at {ROUGH_MFU:.0%} MFU (a rough figure; the planner sizes it properly)."
    )


def _deadline_note(arch: ModelArch, tokens: float, deadline_s: float) -> str:
    _, seconds = _gpu_seconds(arch, tokens)
    gpus = math.ceil(seconds / deadline_s)
    return (
        f"To finish in {deadline_s / 86_400:,.3g} days that is at least ~{gpus:,} H100s running "
        f"at {ROUGH_MFU:.0%} MFU, before failures and restarts."
    )


def _requests_that_fit(arch: ModelArch, device_name: str, tokens: int) -> tuple[int, int, int]:
    """(GPUs, concurrent REQUEST_TOKENS_EXAMPLE-token requests, requests of `tokens`) on the
    smallest tensor-parallel group (1-8 GPUs) that holds fp8 weights; (0, 0, 0) if none."""
    import numpy as np

    from gpufleet.estimate.inference import (
        ENGINE_RESERVE_BYTES,
        kv_bytes_per_token_per_gpu,
        weight_bytes_per_gpu,
    )

    capacity = float(get_accelerator(device_name).memory_bytes)
    weights = float(weight_bytes_per_gpu(arch, "fp8", np.array([1.0]))[0])
    for tp in (1, 2, 4, 8):
        free = tp * (capacity - ENGINE_RESERVE_BYTES) - weights
        kv = tp * float(kv_bytes_per_token_per_gpu(arch, "fp8", np.array([float(tp)]))[0])
        if free >= kv * REQUEST_TOKENS_EXAMPLE:
            return tp, int(free // (kv * REQUEST_TOKENS_EXAMPLE)), int(free // (kv * tokens))
    return 0, 0, 0


def _hbm_note(arch: ModelArch, request_tokens: int) -> str:
    import numpy as np

    from gpufleet.estimate.inference import kv_bytes_per_token, weight_bytes_per_gpu

    kv16 = kv_bytes_per_token(arch, "bf16")
    kv8 = kv_bytes_per_token(arch, "fp8")
    weights = float(weight_bytes_per_gpu(arch, "fp8", np.array([1.0]))[0])
    parts = [
        f"Each token in flight keeps {kv16 / 1024:,.0f} KiB of KV cache in bf16 "
        f"({kv8 / 1024:,.0f} KiB in fp8); a {REQUEST_TOKENS_EXAMPLE:,}-token request holds "
        f"{_gb(kv8 * REQUEST_TOKENS_EXAMPLE)} in fp8. After {_gb(weights)} of fp8 weights:"
    ]
    for name in HBM_COMPARISON:
        device = get_accelerator(name)
        gpus, example, yours = _requests_that_fit(arch, name, request_tokens)
        where = f"{device.display_name} ({_gb(device.memory_bytes)})"
        if not gpus:
            parts.append(f"{where}: does not fit on 8 GPUs; it needs pipeline stages.")
            continue
        group = "one GPU holds" if gpus == 1 else f"{gpus} GPUs (tp {gpus}) hold"
        parts.append(
            f"{where}: {group} about {example:,} concurrent {REQUEST_TOKENS_EXAMPLE:,}-token "
            f"requests ({yours:,} of yours at {request_tokens:,} tokens)."
        )
    parts.append("More HBM buys more requests in flight per GPU, so fewer GPUs for the same rate.")
    return " ".join(parts)


# --- questions ------------------------------------------------------------------------------


def _parse_kind(value: object) -> str:
    text = str(value).strip().lower()
    if text in _KINDS:
        return _KINDS[text]
    hints = suggest(text, _KINDS, limit=1)
    tail = f"; did you mean '{hints[0]}'?" if hints else ""
    raise ValueError(f"answer training or serving, got {value!r}{tail}")


class _Model(NamedTuple):
    written: object  # what the spec's `model:` says; "custom" until the shape is asked
    arch: ModelArch | None


_MODEL_SPEC: TypeAdapter[ModelArch] = TypeAdapter(ModelSpec)


def _presets_near(size: float) -> list[ModelPreset]:
    def distance(p: ModelPreset) -> float:
        return abs(math.log(parameter_count(p.arch()).total / size))

    ranked = sorted(load_model_presets(), key=distance)
    close = [p for p in ranked if distance(p) < math.log(1.5)]
    return close or ranked[:3]


def _parse_model(value: object) -> _Model:
    if isinstance(value, Mapping):
        try:
            arch = _MODEL_SPEC.validate_python(dict(value))
        except ValidationError as exc:
            raise ValueError(_errors(ModelArch, exc)) from None
        return _Model(dict(value), arch)
    if not isinstance(value, str):
        raise ValueError(f"expected a preset name or custom, got {value!r}")
    text = value.strip()
    if text.lower() == "custom":
        return _Model("custom", None)
    try:
        preset = get_model_preset(text)
    except UserError as exc:
        size = _as_size(text)
        if size is not None:
            near = ", ".join(
                f"{p.name} ({_billions(parameter_count(p.arch()).total)})"
                for p in _presets_near(size)
            )
            raise ValueError(
                f"'{text}' is a size, not a model; presets near {_short_count(size)} parameters: "
                f"{near}; answer one of them, or custom to give the shape"
            ) from None
        raise ValueError(str(exc).replace("unknown model", "unknown model preset", 1)) from None
    return _Model({"preset": preset.name}, preset.arch())


def _as_size(text: str) -> float | None:
    """'70B' -> 7e10 when the text is a parameter count with a suffix."""
    if not text[-1:].isalpha():
        return None
    try:
        return float(parse_count(text))
    except ValueError:
        return None


def _presets_table() -> Table:
    table = Table(title="Model presets (gpufleet catalog models)", title_justify="left")
    table.add_column("preset")
    table.add_column("parameters", justify="right")
    table.add_column("active", justify="right")
    table.add_column("context", justify="right")
    table.add_column("also")
    for preset in load_model_presets():
        counts = parameter_count(preset.arch())
        active = _billions(counts.active_per_token) if preset.experts > 1 else ""
        context = f"{preset.max_seq_len:,}" if preset.max_seq_len else ""
        table.add_row(
            preset.name, _billions(counts.total), active, context, ", ".join(preset.aliases[:2])
        )
    return table


def _ask_model(w: _Asker) -> tuple[object, ModelArch]:
    w.show(
        "The model's size drives everything: memory (bytes per parameter), compute (FLOPs "
        "per token) and how many GPUs one copy needs. Pick a preset (a name or an alias "
        "below), or custom to give the shape (layers, width, heads).",
        _presets_table(),
    )
    choice = w.ask("model", "Which model", _parse_model)
    written: object
    if choice.arch is None:
        arch, written = _ask_custom_model(w)
    else:
        arch, written = choice.arch, choice.written
    w.note(_model_note(arch))
    return written, arch


def _ask_custom_model(w: _Asker) -> tuple[ModelArch, dict[str, Any]]:
    layers = w.ask("model_layers", "Transformer layers", _positive_int)
    hidden = w.ask("model_hidden", "Hidden size (model width)", _positive_int)

    def heads_of(value: object) -> int:
        heads = _positive_int(value)
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        return heads

    heads = w.ask("model_heads", "Attention heads", heads_of)

    def kv_heads_of(value: object) -> int:
        kv_heads = _positive_int(value)
        if heads % kv_heads:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
        return kv_heads

    kv_heads = w.ask(
        "model_kv_heads",
        "Key/value heads",
        kv_heads_of,
        default=str(heads),
        explain="Fewer KV heads than heads (grouped-query attention) shrinks the KV cache.",
    )
    ffn_type = w.ask(
        "model_ffn_type",
        "FFN type: swiglu or gelu",
        _choice(ModelArch, "ffn_type"),
        default="swiglu",
    )
    width = math.ceil(hidden * (8 / 3 if ffn_type == "swiglu" else 4) / 256) * 256
    ffn_hidden = w.ask("model_ffn_hidden", "FFN inner width", _positive_int, default=str(width))
    vocab = w.ask("model_vocab", "Vocabulary size", _positive_int, default="128256")
    max_seq_len = w.ask_optional("model_max_seq_len", "Longest context in tokens", _positive_int)
    fields: dict[str, Any] = {
        "name": "custom",
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "ffn_hidden": ffn_hidden,
        "ffn_type": ffn_type,
        "vocab": vocab,
    }
    if max_seq_len is not None:
        fields["max_seq_len"] = max_seq_len
    try:
        arch = _parse_model(fields).arch
    except ValueError as exc:  # each field was checked above; this is the last line of defence
        raise w.fail("model", str(exc)) from None
    assert arch is not None
    return arch, fields


def _parse_budget(value: object) -> float:
    if isinstance(value, str):
        text = value.strip().replace(",", "").replace("_", "").removeprefix("$").strip()
        text = text.removesuffix("USD").removesuffix("usd").strip()
        try:
            value = float(text)
        except ValueError:
            try:
                value = parse_count(text)
            except ValueError:
                raise ValueError(
                    f"expected an amount in USD such as 5M, $2.5M or 750000, got {value!r}"
                ) from None
    return float(_check(Constraints, "budget_usd", value))


def _ask_training(w: _Asker, arch: ModelArch) -> tuple[dict[str, Any], dict[str, Any]]:
    w.note(_training_memory_note(arch))
    counts = parameter_count(arch)
    basis = counts.active_per_token if arch.is_moe else counts.total
    chinchilla = _short_count(CHINCHILLA_TOKENS_PER_PARAM * basis)
    tokens = w.ask(
        "tokens",
        "How many tokens will it train on (e.g. 15T, 2B)",
        _quantity(TrainingParams, "tokens"),
        default=chinchilla,
        explain=(
            f"Tokens set the compute. About {CHINCHILLA_TOKENS_PER_PARAM} tokens per parameter "
            f"is compute-optimal (Chinchilla: {chinchilla} here); Llama 3 trained far past it "
            "(15T) to get a smaller model that is cheaper to serve. Fine-tunes use billions."
        ),
    )
    w.note(_compute_note(arch, tokens.amount))
    seq_default = min(arch.max_seq_len, 8192) if arch.max_seq_len else 4096
    seq_len: int = w.ask(
        "seq_len",
        "Sequence length in tokens",
        _field(TrainingParams, "seq_len"),
        default=str(seq_default),
        explain=(
            "Longer sequences teach longer context but cost activation memory and attention "
            "compute; pretraining usually runs at 4k-8k and extends context in a short later "
            "phase."
        ),
    )
    batch_default = max(1, round(TOKENS_PER_STEP / seq_len))
    global_batch: int = w.ask(
        "global_batch",
        "Global batch in sequences per optimizer step",
        _field(TrainingParams, "global_batch"),
        default=str(batch_default),
        explain=(
            f"About 4M tokens per step is what 70B-class pretraining runs use: "
            f"{TOKENS_PER_STEP:,} ÷ {seq_len:,} = {batch_default:,} sequences. A bigger batch "
            "keeps more GPUs busy (more data parallelism), but past the critical batch size "
            "extra tokens per step stop speeding up learning."
        ),
    )
    precision: str = w.ask(
        "precision",
        "Training precision: bf16 or fp8",
        _choice(TrainingParams, "precision"),
        default="bf16",
        explain=(
            "fp8 runs the matrix multiplies up to 2× faster on H100-class and newer GPUs "
            "(A100 has no fp8); weights and optimizer states stay in higher precision, so it "
            "saves little memory. bf16 is the safe, proven choice."
        ),
    )
    deadline = w.ask_optional(
        "deadline",
        "Deadline: how long may it run (e.g. 90d, 6w)",
        _quantity(Constraints, "deadline"),
        explain=(
            "A tighter deadline needs more GPUs at once; doubling them less than halves the "
            "time, because communication grows. Blank: the planner assumes a default."
        ),
    )
    if deadline is not None:
        w.note(_deadline_note(arch, tokens.amount, deadline.amount))
    max_gpus = w.ask_optional(
        "max_gpus",
        "Most GPUs it may use at once",
        _field(Constraints, "max_gpus"),
        explain="A quota or the size of a cluster you already have.",
    )
    budget = w.ask_optional(
        "budget_usd",
        "Budget for the run in USD (e.g. 5M)",
        _parse_budget,
        explain="Layouts whose GPU-hours × price exceed it are rejected.",
    )
    training = {
        "seq_len": seq_len,
        "global_batch": global_batch,
        "tokens": tokens.written,
        "precision": precision,
    }
    constraints: dict[str, Any] = {}
    if deadline is not None:
        constraints["deadline"] = deadline.written
    if max_gpus is not None:
        constraints["max_gpus"] = max_gpus
    if budget is not None:
        constraints["budget_usd"] = _number(budget)
    return training, constraints


def _parse_length(value: object) -> int | dict[str, Any]:
    """A mean length, or (answers files) a mapping {mean, p99}."""
    if isinstance(value, Mapping):
        try:
            length = TokenLength.model_validate(dict(value))
        except ValidationError as exc:
            raise ValueError(_errors(TokenLength, exc)) from None
        return length.model_dump(exclude_none=True)
    return _positive_int(value)


def _longest(length: int | dict[str, Any]) -> int:
    if isinstance(length, int):
        return length
    return int(length.get("p99") or length["mean"])


def _mean(length: int | dict[str, Any]) -> int:
    return length if isinstance(length, int) else int(length["mean"])


def _ask_serving(w: _Asker, arch: ModelArch) -> tuple[dict[str, Any], dict[str, Any]]:
    rate: float = w.ask(
        "request_rate",
        "Peak requests per second",
        _field(ServingParams, "request_rate"),
        default="10",
        explain=(
            "The fleet grows about linearly with the rate; the planner adds queueing headroom "
            "so the p99 latency holds at this peak."
        ),
    )
    input_tokens = w.ask(
        "input_tokens",
        "Prompt length in tokens (mean)",
        _parse_length,
        default="1500",
        explain=(
            "System prompt, history and question together. Longer prompts cost prefill compute "
            "(time to first token) and KV-cache memory."
        ),
    )

    def output_of(value: object) -> int | dict[str, Any]:
        output = _parse_length(value)
        longest = _longest(input_tokens) + _longest(output)
        if arch.max_seq_len is not None and longest > arch.max_seq_len:
            raise ValueError(
                f"input + output tokens ({longest:,}) exceed the model's context "
                f"({arch.max_seq_len:,})"
            )
        return output

    output_tokens = w.ask(
        "output_tokens",
        "Answer length in tokens (mean)",
        output_of,
        default="300",
        explain="Each output token is one decode step: it sets how long a request holds a slot.",
    )
    precision: str = w.ask(
        "precision",
        "Weight precision: bf16, fp8, int8 or int4",
        _choice(ServingParams, "precision"),
        default="bf16",
        explain=(
            "fp8 halves weight and KV-cache memory versus bf16 and speeds up decoding, with "
            "little quality loss; it needs H100-class or newer GPUs (int8/int4 are weight-only "
            "and run on older ones). " + _hbm_note(arch, _mean(input_tokens) + _mean(output_tokens))
        ),
    )
    ttft = w.ask_optional(
        "ttft_p99_ms",
        "Time to first token, p99, in ms",
        _field(Slo, "ttft_p99_ms"),
        default="800",
        explain=(
            "How long until the answer starts to appear, for 99 % of requests. 800 ms feels "
            "responsive in a chat; a tighter target needs more spare capacity (less queueing). "
            "Answer none for no target."
        ),
    )
    tpot = w.ask_optional(
        "tpot_p99_ms",
        "Time per output token, p99, in ms",
        _field(Slo, "tpot_p99_ms"),
        default="60",
        explain=(
            "The streaming speed once it starts: 60 ms is ~17 tokens/s, faster than people "
            "read. Lower needs smaller batches per GPU, so more GPUs. Answer none for no target."
        ),
    )
    max_gpus = w.ask_optional(
        "max_gpus",
        "Most GPUs the service may use",
        _field(Constraints, "max_gpus"),
        explain="A quota or the size of a cluster you already have.",
    )
    slo = {k: _number(v) for k, v in (("ttft_p99_ms", ttft), ("tpot_p99_ms", tpot)) if v}
    serving: dict[str, Any] = {
        "precision": precision,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "request_rate": _number(rate),
    }
    if slo:
        serving["slo"] = slo
    constraints = {} if max_gpus is None else {"max_gpus": max_gpus}
    return serving, constraints


def _default_name(kind: str, arch: ModelArch, taken: Sequence[str]) -> str:
    base = f"{'train' if kind == 'training' else 'serve'}-{arch.name or 'model'}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def _ask_workload(w: _Asker, index: int, taken: list[str]) -> dict[str, Any]:
    kind = w.ask(
        "kind",
        f"Workload {index + 1}: training a model, or serving one (training/serving)",
        _parse_kind,
        explain=(
            "A training run needs GPUs until it finishes, sized by tokens and deadline; a "
            "service needs them all the time, sized by request rate and latency targets."
        ),
    )
    model, arch = _ask_model(w)
    if kind == "training":
        body, constraints = _ask_training(w, arch)
    else:
        body, constraints = _ask_serving(w, arch)
    team = w.ask_optional(
        "team",
        "Which team owns it",
        _field(TrainingWorkload, "team"),
        explain="Teams get a guaranteed GPU quota each in a shared cluster.",
    )

    def name_of(value: object) -> str:
        name = str(_check(TrainingWorkload, "name", value))
        if name in taken:
            raise ValueError(
                f"'{name}' is already the name of workload {taken.index(name) + 1}; "
                "names must be unique"
            )
        return name

    name = w.ask("name", "A short name for it", name_of, default=_default_name(kind, arch, taken))
    workload: dict[str, Any] = {"name": name, "kind": kind}
    if team is not None:
        workload["team"] = team
    workload["model"] = model
    workload["training" if kind == "training" else "serving"] = body
    if constraints:
        workload["constraints"] = constraints
    return workload


def _parse_deployment(value: object) -> str:
    text = str(value).strip().lower().replace("_", "-").replace(" ", "-")
    text = {"onprem": "on-prem", "on-premises": "on-prem", "own": "on-prem"}.get(text, text)
    return str(_check(PlanSpec, "deployment", text))


def _parse_providers(value: object) -> list[str]:
    providers: list[str] = []
    for item in _items(value):
        provider = str(_check(PlanSpec, "providers", [str(item).strip().lower()])[0])
        if provider not in providers:
            providers.append(provider)
    if not providers:
        raise ValueError("name at least one of aws, gcp, azure")
    return providers


def _known_regions(providers: Sequence[str]) -> list[str]:
    from gpufleet.catalog.instances import load_instances

    return sorted({r.region for r in load_instances() if r.provider in providers})


def _parse_regions(value: object, providers: Sequence[str]) -> list[str]:
    known = _known_regions(providers)
    by_lower = {r.lower(): r for r in known}
    regions: list[str] = []
    for item in _items(value):
        text = str(item).strip()
        region = by_lower.get(text.lower())
        if region is None:
            hints = suggest(text, known, limit=2)
            tail = f"; did you mean {' or '.join(repr(h) for h in hints)}?" if hints else ""
            raise ValueError(f"no {', '.join(providers)} region '{text}' in the catalog{tail}")
        if region not in regions:
            regions.append(region)
    return regions


def _parse_utilization(value: object) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            value = float(value.strip()[:-1]) / 100
        except ValueError:
            raise ValueError(f"expected a fraction such as 0.7 or 70%, got {value!r}") from None
    try:
        return float(_check(PlanSpec, "expected_utilization", value))
    except ValueError as exc:
        raise ValueError(f"{exc} (a fraction: write 0.7 or 70%)") from None


def _parse_accelerators(value: object, fp8_training: Sequence[str]) -> list[str]:
    names: list[str] = []
    for item in _items(value):
        name = str(_check(PlanSpec, "accelerators", [str(item).strip()])[0])
        device = get_accelerator(name)
        if fp8_training and device.fp8_dense_tflops is None:
            raise ValueError(
                f"{name} has no fp8 units, but {', '.join(fp8_training)} trains in fp8; "
                "leave it out or train in bf16"
            )
        if name not in names:
            names.append(name)
    return names


def _plan_questions(asker: _Asker, workloads: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = asker.ask(
        "deployment",
        "Where will it run: cloud, on-prem or both (compare them)",
        _parse_deployment,
        default="both",
        explain=(
            "Cloud rents GPUs by the hour: no capital outlay, pay for what you use. On-prem buys "
            "them: cheaper per GPU-hour when kept busy, but capex, power, space and staff. Both "
            "prices the two side by side with the break-even point."
        ),
    )
    plan: dict[str, Any] = {"kind": "plan", "name": "plan", "deployment": deployment}
    if deployment != "on-prem":
        providers = asker.ask(
            "providers",
            "Which clouds to price (aws, gcp, azure)",
            _parse_providers,
            default="aws, gcp, azure",
            explain="Instance types, networking and prices differ by provider.",
        )
        regions = asker.ask_optional(
            "regions",
            "Regions to price (e.g. us-east-1, us-central1)",
            lambda v: _parse_regions(v, providers),
            explain="Prices and GPU availability vary by region. Blank: every listed region.",
        )
        plan["providers"] = providers
        if regions:
            plan["regions"] = regions
    plan["currency"] = "USD"
    if deployment != "cloud":
        plan["expected_utilization"] = asker.ask(
            "expected_utilization",
            "Expected utilization of owned GPUs (e.g. 0.7 or 70%)",
            _parse_utilization,
            default="0.7",
            explain=(
                "The share of hours your own GPUs do useful work. Owning pays off only when "
                "they are busy: at 35 % each useful GPU-hour costs twice what it costs at 70 %, "
                "which moves the break-even against renting."
            ),
        )
        rack_kw = asker.ask(
            "rack_power_kw",
            "Power per rack in kW",
            _field(OnPremPreferences, "rack_power_kw"),
            default="30",
            explain=(
                "An 8-GPU H100 server draws about 10 kW: air-cooled racks (~30 kW) hold two or "
                "three, liquid-cooled ones (60 kW and more) hold more, so fewer racks and "
                "shorter cables, at the cost of liquid cooling."
            ),
        )
        price = asker.ask(
            "electricity_usd_per_kwh",
            "Electricity price in USD per kWh",
            _field(OnPremPreferences, "electricity_usd_per_kwh"),
            default="0.10",
            explain="Power × PUE × this price is a main running cost of owned GPUs.",
        )
        plan["on_prem"] = {"rack_power_kw": _number(rack_kw), "electricity_usd_per_kwh": price}
    fp8_training = [
        w["name"]
        for w in workloads
        if w["kind"] == "training" and w["training"]["precision"] == "fp8"
    ]
    accelerators = asker.ask_optional(
        "accelerators",
        "Accelerators to consider (e.g. h100, h200, mi300x)",
        lambda v: _parse_accelerators(v, fp8_training),
        explain=(
            "Catalog names or aliases (gpufleet catalog gpus), for example what you can buy "
            "or rent. Blank: the planner's standard set. It compares them and says why the "
            "winner wins."
        ),
    )
    if accelerators:
        plan["accelerators"] = accelerators
    plan["name"] = asker.ask(
        "plan_name",
        "A name for the plan",
        _field(PlanSpec, "name"),
        default=workloads[0]["name"] if len(workloads) == 1 else "plan",
    )
    plan["workloads"] = workloads
    return plan


# --- the interview, the spec file and the planner -------------------------------------------


def _confirm_overwrite(asker: _Asker, spec_out: Path, scripted: bool) -> bool:
    """Before any question: an existing spec is replaced only when the user says so."""
    if isinstance(asker, _Scripted):
        asker.mark_used("overwrite")
    if not spec_out.exists():
        return False
    if spec_out.is_dir():
        raise UserError(f"--spec {spec_out}: is a directory; give a file path such as plan.yaml")
    if asker.confirm("overwrite", f"{spec_out} exists. Replace it", default=False):
        return True
    how = "add `overwrite: true` to the answers file" if scripted else "answer yes"
    raise UserError(
        f"{spec_out} already exists and was left unchanged; {how} to replace it, "
        "or pass --spec PATH to write elsewhere"
    )


def _interview(asker: _Asker, spec_out: Path, scripted: bool) -> tuple[dict[str, Any], bool]:
    overwrite = _confirm_overwrite(asker, spec_out, scripted)
    workloads: list[dict[str, Any]] = []
    for index, w in enumerate(asker.workloads()):
        workloads.append(_ask_workload(w, index, [x["name"] for x in workloads]))
    plan = _plan_questions(asker, workloads)
    asker.finish()
    return plan, overwrite


HEADER = (
    "# Written by `gpufleet wizard`. Edit freely; `gpufleet check {spec}` validates it and\n"
    "# `gpufleet plan {spec} --out DIR` plans it. Fields: docs/guide/specs.md.\n"
)


def render_spec(plan: Mapping[str, Any], spec_out: Path) -> str:
    body = yaml.safe_dump(
        dict(plan), sort_keys=False, default_flow_style=None, allow_unicode=True, width=100
    )
    return HEADER.format(spec=spec_out) + body


def write_atomic(path: Path, text: str, *, overwrite: bool) -> None:
    """Write `path.partial`, then rename it into place: never a half-written spec.

    Without `overwrite` the rename is a hard link, which fails if `path` appeared meanwhile.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            partial.replace(path)
            return
        try:
            path.hardlink_to(partial)
        except FileExistsError:
            raise UserError(f"{path} already exists and was left unchanged") from None
        except OSError:  # a filesystem without hard links
            if path.exists():
                raise UserError(f"{path} already exists and was left unchanged") from None
            partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


RunPlan = Callable[[Path, Path], int]


def _run_plan_function(spec_out: Path, out: Path) -> RunPlan:
    """`gpufleet.cli.plan.run_plan`, imported only when the plan is run."""
    problem = ""
    try:
        module = importlib.import_module("gpufleet.cli.plan")
    except ImportError as exc:
        problem = f"cannot import gpufleet.cli.plan ({exc})"
    else:
        function = getattr(module, "run_plan", None)
        if callable(function):
            return cast(RunPlan, function)
        problem = "gpufleet.cli.plan has no run_plan function"
    raise UserError(
        f"wrote {spec_out}, but the planner cannot run: {problem}; run "
        f"`gpufleet plan {spec_out} --out {out}` once it is installed, or pass --no-run"
    )


def _load_answers(path: Path) -> Mapping[str, Any]:
    data = read_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise UserError(
            f"{path}: expected a mapping of question keys to answers, got {type(data).__name__}"
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise UserError(f"{path}: question keys are text, got {bad[0]!r}")
    return data


def run_wizard(
    answers: Path | None,
    out: Path,
    spec_out: Path,
    run: bool,
    *,
    console: Console | None = None,
    stream: TextIO | None = None,
) -> int:
    """Interview (or read `answers`), write the spec to `spec_out`, and plan it into `out`.

    Returns the planner's exit code, or 0 with `run` false. `console` and `stream` are where
    the interview prints and reads (default: the terminal); tests pass StringIO objects.
    """
    console = console or Console()
    asker: _Asker
    if answers is not None:
        data = _load_answers(answers)
        _check_keys(data, str(answers))
        asker = _Scripted(data, str(answers))
    else:
        console.print(
            "[bold]gpufleet wizard[/bold]: a few questions about what you train or serve, "
            "then a plan spec and a capacity plan. Blank takes the suggestion in "
            "parentheses; the key in brackets is the name to use in an --answers file.",
            highlight=False,
        )
        asker = _Interactive(console, stream)
    try:
        plan, overwrite = _interview(asker, spec_out, scripted=answers is not None)
    except EOFError:
        key = asker.key if isinstance(asker, _Interactive) else ""
        raise UserError(
            f"input ended at question '{key}'; nothing was written "
            "(use --answers FILE to answer from a file)"
        ) from None
    except KeyboardInterrupt:
        console.print("\ncancelled; nothing was written")
        raise typer.Exit(130) from None
    validate(PlanSpec, plan, f"{spec_out} (from the wizard's answers)")
    text = render_spec(plan, spec_out)
    write_atomic(spec_out, text, overwrite=overwrite)
    if isinstance(asker, _Interactive):
        console.print(Syntax(text, "yaml", background_color="default"))
    count = len(plan["workloads"])
    console.print(
        f"[green]wrote[/green] {escape(str(spec_out))} ({count} workload{'s' * (count != 1)})",
        highlight=False,
        soft_wrap=True,
    )
    if not run:
        console.print(
            f"next: gpufleet plan {escape(str(spec_out))} --out {escape(str(out))}",
            highlight=False,
            soft_wrap=True,
        )
        return 0
    return _run_plan_function(spec_out, out)(spec_out, out)


def wizard(
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers",
            help="A YAML file of answers by question key: ask nothing (docs/guide/wizard.md).",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Where the plan's reports go (with --run).")
    ] = Path("gpufleet-plan"),
    spec_out: Annotated[
        Path, typer.Option("--spec", help="Where to write the plan spec (YAML).")
    ] = Path("plan.yaml"),
    run: Annotated[
        bool, typer.Option("--run/--no-run", help="Run the planner on the written spec.")
    ] = True,
) -> int:
    """Answer a few questions; get a plan spec and a capacity plan.

    Asks what you train or serve, how big, by when, budget, cloud or on-prem and where,
    explaining each trade-off. Writes the spec, then runs `gpufleet plan` on it. Exit code:
    the planner's; 2 for a bad answer in --answers mode.
    """
    code = run_wizard(answers, out, spec_out, run)
    if code:
        raise typer.Exit(code)
    return code
