"""Every default an estimate uses, recorded with where it comes from.

A capacity plan is only defensible if a reader can see which numbers were
given, which were defaulted and on what basis; estimators append to an
`Assumptions` log rather than silently filling gaps.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Assumption:
    name: str
    value: str
    source: str


@dataclass
class Assumptions:
    """An append-only log collected while an estimate is assembled (then frozen to a tuple)."""

    items: list[Assumption] = field(default_factory=list)

    def add(self, name: str, value: object, source: str) -> None:
        if any(a.name == name for a in self.items):
            return
        self.items.append(Assumption(name, str(value), source))

    def frozen(self) -> tuple[Assumption, ...]:
        return tuple(self.items)
