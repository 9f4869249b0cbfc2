"""Decayed usage for fair share: what each team has used lately, forgetting with a half-life.

Slurm's multifactor fair share and Kueue's fair sharing both rank teams by use
relative to entitlement; a memory of *past* use (not just what runs now) keeps
a team that has just finished a large run from winning every tie. We keep, per
(team, flavor), GPU-seconds decayed by `2^(-age/half_life_s)` and convert it to
an average number of GPUs over the half-life window (`mean_gpus`): a team that
held g GPUs for ever converges to exactly g. The caller (simulator, control
plane) advances it between cycles with what each team held; `decide()` only
reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

DEFAULT_HALF_LIFE_S = 7 * 86_400.0  # Slurm's PriorityDecayHalfLife default is 7 days


@dataclass(frozen=True)
class DecayedUsage:
    """Per (team, flavor) decayed GPU-seconds as of `at_s`; immutable, advanced by copy."""

    half_life_s: float = DEFAULT_HALF_LIFE_S
    at_s: float = 0.0
    gpu_s: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.half_life_s > 0:
            raise ValueError(f"half_life_s must be > 0, got {self.half_life_s}")
        object.__setattr__(self, "gpu_s", MappingProxyType(dict(self.gpu_s)))

    def advance(self, to_s: float, held_gpus: Mapping[tuple[str, str], float]) -> DecayedUsage:
        """Usage at `to_s` when each (team, flavor) held `held_gpus` constantly since `at_s`.

        Exact for piecewise-constant holdings: u' = u·d + g·H/ln2·(1 − d), d = 2^(−Δ/H).
        """
        dt = to_s - self.at_s
        if dt < 0:
            raise ValueError(f"cannot advance usage backwards ({self.at_s} -> {to_s})")
        d = 2.0 ** (-dt / self.half_life_s)
        gain = self.half_life_s / math.log(2.0) * (1.0 - d)
        out = {k: v * d for k, v in self.gpu_s.items()}
        for k, g in held_gpus.items():
            out[k] = out.get(k, 0.0) + g * gain
        return self._at(to_s, {k: v for k, v in out.items() if v > 1e-9})

    def _at(self, at_s: float, gpu_s: dict[tuple[str, str], float]) -> DecayedUsage:
        """A new usage with this half-life (already checked), owning the fresh `gpu_s`: the
        simulator advances usage at every start and finish, so no check and no copy."""
        made = object.__new__(DecayedUsage)
        object.__setattr__(made, "half_life_s", self.half_life_s)
        object.__setattr__(made, "at_s", at_s)
        object.__setattr__(made, "gpu_s", MappingProxyType(gpu_s))
        return made

    def mean_gpus(self, team: str, flavor: str, now_s: float | None = None) -> float:
        """Average GPUs the team held of `flavor`, weighted towards the recent past."""
        u = self.gpu_s.get((team, flavor), 0.0)
        if now_s is not None and now_s > self.at_s:
            u *= 2.0 ** (-(now_s - self.at_s) / self.half_life_s)
        return u * math.log(2.0) / self.half_life_s
