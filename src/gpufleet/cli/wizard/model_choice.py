"""The model question: a catalog preset, or the shape of a custom model.

Everything after it (memory, compute, how many GPUs one copy needs) follows from
the model, so it is settled to a full `ModelArch` at once. A size such as 70B is
not a model: the answer lists the presets near it rather than guessing a shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError
from rich.table import Table

from gpufleet.catalog.architecture import ModelArch
from gpufleet.catalog.models import ModelPreset, get_model_preset, load_model_presets
from gpufleet.cli.wizard.answers import choice, describe_errors, positive_int
from gpufleet.cli.wizard.askers import Asker
from gpufleet.cli.wizard.explain import billions, model_note, short_count
from gpufleet.errors import UserError
from gpufleet.estimate.params import parameter_count
from gpufleet.quantities import parse_count
from gpufleet.specs.model_ref import ModelSpec


class _Model(NamedTuple):
    written: object  # what the spec's `model:` says; "custom" until the shape is asked
    arch: ModelArch | None


_MODEL_SPEC: TypeAdapter[ModelArch] = TypeAdapter(ModelSpec)
# A sanity bound, not a limit of the estimators: the deepest published LLMs have about 130
# layers (Llama 3.1 405B: 126, PaLM: 118), so more than 1,000 is a typo or another field's
# number (a width, a vocabulary), and it would plan a model no one trains.
MAX_LAYERS = 1000


def _layers(value: object) -> int:
    layers = positive_int(value)
    if layers > MAX_LAYERS:
        raise ValueError(
            f"{layers:,} layers is more than {MAX_LAYERS:,}; the deepest published models have "
            "about 130 (Llama 3.1 405B: 126): check the number"
        )
    return layers


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
            raise ValueError(describe_errors(ModelArch, exc)) from None
        _layers(arch.layers)
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
                f"{p.name} ({billions(parameter_count(p.arch()).total)})"
                for p in _presets_near(size)
            )
            raise ValueError(
                f"'{text}' is a size, not a model; presets near {short_count(size)} parameters: "
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
        active = billions(counts.active_per_token) if preset.experts > 1 else ""
        context = f"{preset.max_seq_len:,}" if preset.max_seq_len else ""
        table.add_row(
            preset.name, billions(counts.total), active, context, ", ".join(preset.aliases[:2])
        )
    return table


def ask_model(w: Asker) -> tuple[object, ModelArch]:
    w.show(
        "The model's size drives everything: memory (bytes per parameter), compute (FLOPs "
        "per token) and how many GPUs one copy needs. Pick a preset (a name or an alias "
        "below), or custom to give the shape (layers, width, heads).",
        _presets_table(),
    )
    picked = w.ask("model", "Which model", _parse_model)
    written: object
    if picked.arch is None:
        arch, written = _ask_custom_model(w)
    else:
        arch, written = picked.arch, picked.written
    w.note(model_note(arch))
    return written, arch


def _ask_custom_model(w: Asker) -> tuple[ModelArch, dict[str, Any]]:
    layers = w.ask("model_layers", "Transformer layers", _layers)
    hidden = w.ask("model_hidden", "Hidden size (model width)", positive_int)

    def heads_of(value: object) -> int:
        heads = positive_int(value)
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        return heads

    heads = w.ask("model_heads", "Attention heads", heads_of)

    def kv_heads_of(value: object) -> int:
        kv_heads = positive_int(value)
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
        choice(ModelArch, "ffn_type"),
        default="swiglu",
    )
    width = math.ceil(hidden * (8 / 3 if ffn_type == "swiglu" else 4) / 256) * 256
    ffn_hidden = w.ask("model_ffn_hidden", "FFN inner width", positive_int, default=str(width))
    vocab = w.ask("model_vocab", "Vocabulary size", positive_int, default="128256")
    max_seq_len = w.ask_optional(
        "model_max_seq_len", "Longest context in tokens", positive_int, blank="not stated"
    )
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
