"""Name lookup shared by every catalog table: canonical names, aliases, any case."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

from gpufleet.errors import CatalogError, UnknownNameError


class Named(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...


T = TypeVar("T", bound=Named)


def normalise(name: str) -> str:
    """Case, spaces and underscores do not distinguish catalog names."""
    return "-".join(name.strip().lower().replace("_", " ").split())


class NameIndex(Generic[T]):
    """Resolve a canonical name or alias to its row; unknown names get suggestions."""

    def __init__(self, kind: str, rows: Iterable[T]) -> None:
        self.kind = kind
        self._rows: dict[str, T] = {}
        self._canonical: list[str] = []
        for row in rows:
            self._canonical.append(row.name)
            for key in (row.name, *row.aliases):
                norm = normalise(key)
                other = self._rows.get(norm)
                if other is not None and other.name != row.name:
                    raise CatalogError(
                        f"{kind} name '{key}' is claimed by both '{other.name}' and '{row.name}'"
                    )
                self._rows[norm] = row

    def get(self, name: str) -> T:
        row = self._rows.get(normalise(name))
        if row is None:
            raise UnknownNameError(self.kind, name, self._canonical)
        return row

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalise(name) in self._rows

    @property
    def names(self) -> list[str]:
        return list(self._canonical)
