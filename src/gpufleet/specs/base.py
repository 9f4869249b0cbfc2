"""Base class for user-facing specs: strict, immutable, documented.

Unknown keys are errors (a typo such as `hiden` silently ignored would plan
the wrong cluster), and a validated spec never changes afterwards.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


def kind_required(schema: dict[str, Any]) -> None:
    """`kind` has a default for Python callers, but files must say which kind they are."""
    required = schema.setdefault("required", [])
    if "kind" not in required:
        required.insert(0, "kind")


class Spec(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        str_strip_whitespace=True,
        validate_default=True,
        populate_by_name=True,
    )
