"""GPU-hour budgets: where a team stands against its budget, and the alerts to send.

Apart from the chargeback report because a budget compares one number (GPU-hours used in
the period) with a limit: it needs the calendar month, not the report's exact money.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from gpufleet.errors import UserError


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """Where a team stands against its GPU-hour budget.

    `fraction` is used / budget (None without a budget, or with a budget of 0, where any use
    is over). `alerts` holds one message, for the highest threshold reached (it names the
    lower ones passed too), or none: the same sentence once per threshold read as one alert
    sent twice ("used 1123% ... (alert at 80%)", then "(alert at 100%)"). A notifier that
    sends each threshold once per period reads `thresholds_reached`, every one reached.
    """

    used_gpu_h: float
    budget_gpu_h: float | None
    fraction: float | None
    alerts: tuple[str, ...]
    over: bool
    thresholds_reached: tuple[float, ...] = ()


def budget_status(
    used_gpu_h: float,
    budget_gpu_h: float | None,
    thresholds: Sequence[float] = (0.8, 1.0),
    *,
    team: str | None = None,
    period_label: str = "monthly",
) -> BudgetStatus:
    """Compare GPU-hours used with a budget and phrase an alert per threshold reached.

    A threshold is reached when used ≥ threshold × budget; `over` means strictly above the
    budget, so using exactly the budget alerts at 100% but is not over. Percentages are
    rounded down so that 99.7% never reads "100%" while the team is still under. Amounts
    keep three significant figures (`gpu_hours_text`), so a budget of 0.04 GPU-hours never
    reads "0".
    """
    if not math.isfinite(used_gpu_h) or used_gpu_h < 0:
        raise UserError(f"GPU-hours used must be a finite number >= 0, not {used_gpu_h}")
    if any(not (math.isfinite(t) and t > 0) for t in thresholds):
        raise UserError(f"budget thresholds must be positive fractions, not {list(thresholds)}")
    if budget_gpu_h is None:
        return BudgetStatus(used_gpu_h, None, None, (), over=False)
    if not math.isfinite(budget_gpu_h) or budget_gpu_h < 0:
        raise UserError(f"a GPU-hour budget must be a finite number >= 0, not {budget_gpu_h}")
    who = f"team {team}" if team else "the team"
    used_text, budget_amount = gpu_hours_pair(used_gpu_h, budget_gpu_h)
    budget_text = f"{budget_amount} GPU-hour {period_label} budget"
    if budget_gpu_h == 0:
        if used_gpu_h == 0:
            return BudgetStatus(used_gpu_h, 0.0, None, (), over=False)
        message = f"{who} has used {used_text} GPU-hours of its {budget_text}"
        return BudgetStatus(used_gpu_h, 0.0, None, (message,), True, (1.0,))
    fraction = used_gpu_h / budget_gpu_h
    reached = tuple(sorted(t for t in set(thresholds) if used_gpu_h >= t * budget_gpu_h))
    pct = _percent(fraction, [t for t in thresholds if t not in reached])
    alerts: tuple[str, ...] = ()
    if reached:
        passed = "".join(f", past {_fmt_pct(t)} too" for t in reversed(reached[:-1]))
        alerts = (
            f"{who} has used {pct:,}% ({used_text} GPU-hours) of its "
            f"{budget_text} (alert at {_fmt_pct(reached[-1])}{passed})",
        )
    return BudgetStatus(
        used_gpu_h, budget_gpu_h, fraction, alerts, used_gpu_h > budget_gpu_h, reached
    )


SIGNIFICANT_FIGURES = 3


# Not `formatting.fmt_num`/`fmt_count`/`fmt_pct`, whose precision differs: they write 150.5
# GPU-hours as "150" and a threshold of 0.8 as "80.0%"; an alert says "150.5" and "80%".
def gpu_hours_text(x: float, figures: int = SIGNIFICANT_FIGURES) -> str:
    """GPU-hours with at least one decimal and `figures` significant figures, trailing zeros
    dropped: 1,000 · 150.5 · 2.5 · 0.17 · 0.04 · 0.000123. A budget of 0.04 read "0" and
    0.17 read "0.2" (one decimal), beside "used 87%"; rounding is monotonic, so an amount at
    or over the budget never reads below it."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(1, figures - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def gpu_hours_pair(used: float, budget: float) -> tuple[str, str]:
    """Used and budget GPU-hours as `gpu_hours_text` writes them, with more figures where
    that would write two different amounts the same: 999.96 of a 1,000 budget reads
    "999.96", not "1,000" of "1,000" beside "used 99%"."""
    for figures in range(SIGNIFICANT_FIGURES, 16):
        pair = gpu_hours_text(used, figures), gpu_hours_text(budget, figures)
        if used == budget or pair[0] != pair[1]:
            return pair
    return pair


def _percent(fraction: float, unreached: Sequence[float]) -> int:
    """Whole percent used, rounded down, and below every threshold not reached. The
    rounding to 6 decimals first keeps 0.29 of a budget at 29% (float reads 28.999…), but
    read 999.9999999 of 1,000 as "used 100% … (alert at 80%)": a percentage at a threshold
    that has not fired, beside a team still under its budget."""
    pct = math.floor(round(fraction * 100, 6))
    for t in unreached:
        pct = min(pct, math.ceil(round(t * 100, 6)) - 1)
    return pct


def _fmt_pct(t: float) -> str:
    return f"{round(t * 100, 6):g}%"


def month_bounds(now_s: float) -> tuple[float, float]:
    """The calendar month (UTC) containing `now_s`: [first instant, first of next month)."""
    now = datetime.fromtimestamp(now_s, UTC)
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        first.replace(year=first.year + 1, month=1)
        if first.month == 12
        else first.replace(month=first.month + 1)
    )
    return first.timestamp(), nxt.timestamp()
