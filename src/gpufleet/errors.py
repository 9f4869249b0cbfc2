"""The error surface of gpufleet.

Every error a user can cause derives from `UserError`; the CLI turns it into a
message on stderr and exit code 2, never a traceback. Internal bugs stay plain
exceptions so they are loud.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_USER_ERROR = 2


class GpufleetError(Exception):
    """Base of all errors gpufleet raises on purpose."""


class UserError(GpufleetError):
    """Something the user can fix: bad input, an unknown name, a missing file."""


class SpecError(UserError):
    """A workload, cluster or team spec failed validation.

    `problems` holds one line per problem, each starting with the field path.
    Every field-level problem is reported at once; checks across fields (a
    parallel layout against the GPU count, a MIG layout against its GPU) run
    once the fields they compare have parsed, so they may surface in a second
    round.
    """

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source}: invalid spec\n{lines}")


class UnknownNameError(UserError):
    """A name that is not in a catalog, with the closest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = suggest(name, known)
        hint = f"; did you mean {_or_list(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"unknown {kind} '{name}'{hint}")


class CatalogError(GpufleetError):
    """The shipped catalog data is inconsistent: a bug in the data, not user input."""


def suggest(name: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """Closest known names, compared case-insensitively."""
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(k.lower(), k)
    target = name.lower()
    matches = difflib.get_close_matches(target, list(by_lower), n=limit, cutoff=0.6)
    if matches:
        # Offer only the near-ties of the best match: one good hint beats three guesses.
        best = difflib.SequenceMatcher(None, target, matches[0]).ratio()
        matches = [
            m for m in matches if difflib.SequenceMatcher(None, target, m).ratio() >= best - 0.05
        ]
    else:
        # Substring hits catch short forms such as "h100" -> "h100-sxm5-80gb".
        matches = [k for k in by_lower if name.lower() in k][:limit]
    return [by_lower[m] for m in matches]


def _or_list(items: list[str]) -> str:
    quoted = [f"'{i}'" for i in items]
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def os_reason(exc: OSError) -> str:
    """An OS error as a user reads it: what went wrong and on which path ("File exists:
    /tmp/out", when a folder to create is a file), not only the errno's text."""
    if exc.strerror and exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    return exc.strerror or str(exc)
