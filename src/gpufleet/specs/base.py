"""Base class for user-facing specs: strict, immutable, documented.

Unknown keys are errors (a typo such as `hiden` silently ignored would plan
the wrong cluster), and a validated spec never changes afterwards.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        str_strip_whitespace=True,
        validate_default=True,
        populate_by_name=True,
    )
