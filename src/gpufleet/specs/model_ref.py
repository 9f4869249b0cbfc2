"""`model:` in a workload spec: a published preset, a preset with overrides, or explicit fields.

Written as `model: {preset: llama-3-70b}`, `model: llama-3-70b`, or the
architecture fields spelled out. Presets are expanded here, before the
architecture is validated, so a typo in an override is reported at its own
path (`model.hiden`) like any other field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from gpufleet.catalog.architecture import ModelArch
from gpufleet.catalog.models import get_model_preset
from gpufleet.errors import UnknownNameError


def expand_preset(value: Any) -> Any:
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, Mapping) or "preset" not in value:
        return value

    overrides = {k: v for k, v in value.items() if k != "preset"}
    try:
        preset = get_model_preset(str(value["preset"]))
    except UnknownNameError as exc:
        raise ValueError(str(exc).replace("unknown model", "unknown model preset", 1)) from None
    # Only the fields the preset states: derived ones (head_dim) must follow overrides.
    base = preset.arch_fields()
    changed = {k for k, v in overrides.items() if k != "name" and base.get(k) != v}
    if changed and "name" not in overrides:
        # A preset with a different architecture is no longer the published model.
        overrides["name"] = f"{preset.name} (modified: {', '.join(sorted(changed))})"
    return {**base, **overrides}


class _PresetOrArchitectureSchema:
    """JSON Schema for `model:`: a preset name, a preset with overrides, or explicit fields."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        explicit = handler(core_schema)
        return {
            "anyOf": [
                {"type": "string", "description": "A preset name, e.g. llama-3-70b."},
                {
                    "type": "object",
                    "description": "A preset with architecture overrides.",
                    "properties": {"preset": {"type": "string"}},
                    "required": ["preset"],
                },
                explicit,
            ],
            "description": "`gpufleet catalog models` lists the presets.",
        }


ModelSpec = Annotated[ModelArch, BeforeValidator(expand_preset), _PresetOrArchitectureSchema]
