"""Template filters: times, durations, GPU amounts and job requests as people read them.

Pages show times in UTC with the zone written out (the server's clock, not the browser's)
and durations in the two largest units, so "waiting 2 h 10 min" reads the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from gpufleet.api.schemas import held_gpu_fraction
from gpufleet.control.chargeback_budget import gpu_hours_text


def _datetime(t_s: float) -> datetime | None:
    """The time as a datetime, or None where it has none (NaN, infinite, past year 9999):
    a store written by an older version may hold such a value, and one row must not make a
    whole page fail to render."""
    try:
        return datetime.fromtimestamp(t_s, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def when(t_s: float | None) -> str:
    """A Unix time as 'YYYY-MM-DD HH:MM UTC' ('—' for none)."""
    if t_s is None:
        return "—"
    at = _datetime(t_s)
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else f"{t_s:.4g} (not a date)"


def iso(t_s: float | None) -> str:
    """A Unix time as ISO 8601 (for `<time datetime=...>`)."""
    at = None if t_s is None else _datetime(t_s)
    return at.isoformat(timespec="seconds").replace("+00:00", "Z") if at else ""


def duration(seconds: float | None) -> str:
    """'45 s', '12 min', '2 h 10 min', '3 d 4 h' ('—' for none)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    minutes, _ = divmod(s, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def gpus(value: float | None) -> str:
    """A GPU amount: whole numbers without decimals, shares with up to three."""
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def hours(value: float | None) -> str:
    """GPU-hours to two decimals, thousands separated."""
    if value is None:
        return "—"
    return f"{value:,.2f}"


def gpu_h_amount(value: float | None) -> str:
    """A budget or its use in GPU-hours, to three significant figures as the budget alerts
    write it (`chargeback_budget.gpu_hours_text`): a 0.004 GPU-hour budget read "0.00"."""
    if value is None:
        return "—"
    return gpu_hours_text(value)


def gib(value: float | None) -> str:
    """Bytes as GiB to one decimal (GPU memory, as nvidia-smi counts it: binary units)."""
    if value is None:
        return "—"
    return f"{value / 2**30:,.1f} GiB"


RATE_DECIMALS = 6  # rates are stored in whole micro-dollars per GPU-hour
MIN_RATE_DECIMALS = 2


def usd_rate(value: object) -> str:
    """A chargeback rate (USD per GPU-hour: a report's decimal string, or the rates API's
    number) as stored: whole micro-dollars, trailing zeros dropped down to cents,
    "2.500000" -> "2.50", "2.124738" -> "2.124738", 0.4567 -> "0.4567".

    One rule for every list rate on the chargeback table, its PDF and the admin's rates.
    Not rounded to four decimals: a row must be checkable by hand, and 200.0134 GPU-hours
    at 2.1247 is 424.96, but the row bills 424.98 (at 2.124738). A rate averaged over
    several rates has more decimals; the chargeback table prints those itself
    (`portal.chargeback_table`)."""
    if value is None or value == "":
        return "—"
    try:
        exact = Decimal(str(value))
    except InvalidOperation:
        return "—"
    if not exact.is_finite():
        return "—"
    stored = exact.quantize(Decimal(1).scaleb(-RATE_DECIMALS), rounding=ROUND_HALF_UP)
    places = max(MIN_RATE_DECIMALS, -int(stored.normalize().as_tuple().exponent))
    return str(stored.quantize(Decimal(1).scaleb(-places)))


def pct(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 100:.0f}%"


def request_text(request: Mapping[str, Any]) -> str:
    """A job's resource request: '2 workers × 8 GPUs', 'MIG 3g.40gb', '0.5 of a GPU', and
    for a share that is not whole eighths what is held: '0.3 of a GPU (0.375 held)' (the
    scheduler places and bills whole eighths; the job page says it, and every list the
    job appears in says it too)."""
    workers = int(request.get("workers", 1))
    if request.get("gpus"):
        n = int(request["gpus"])
        one = f"{n} GPU{'s' if n != 1 else ''}"
        what = f"{workers} workers × {one}" if workers > 1 else one
    elif request.get("mig_profile"):
        what = f"MIG {request['mig_profile']}"
    elif request.get("gpu_fraction"):
        asked = float(request["gpu_fraction"])
        held = held_gpu_fraction(asked)
        what = f"{gpus(asked)} of a GPU" + (f" ({gpus(held)} held)" if held != asked else "")
    else:
        what = "?"
    accs = request.get("accelerators") or []
    return f"{what} on {' or '.join(accs)}" if accs else what


def placement_text(placement: Sequence[Mapping[str, Any]]) -> str:
    """'h100-0: GPUs 0,1,2,3; h100-1: GPUs 0,1' or the slices, or the share."""
    parts = []
    for p in placement:
        node = p.get("node", "?")
        if p.get("mig_slices"):
            slices = ", ".join(
                str(s).rsplit("/", 2)[-2] + "/" + str(s).rsplit("/", 1)[-1] for s in p["mig_slices"]
            )
            parts.append(f"{node}: {slices}")
        elif p.get("fraction"):
            parts.append(f"{node}: {gpus(float(p['fraction']))} of GPU {p['gpus'][0]}")
        else:
            parts.append(
                f"{node}: GPU{'s' if len(p.get('gpus', ())) != 1 else ''} "
                + ",".join(str(g) for g in p.get("gpus", ()))
            )
    return "; ".join(parts) if parts else "—"


EVENT_LABELS = {
    "submitted": "queued",
    "admitted": "admitted (waiting for preempted jobs to stop)",
    "starting": "admitted, starting",
    "running": "started",
    "checkpointed": "checkpointed",
    "stopping": "stopping",
    "pending": "requeued (will restart)",
    "priority": "priority changed",
    "moved": "moved in the team's queue",
    "quota": "team quotas changed",
    "staged": "data staged",
    "cancel": "cancel requested",
    "succeeded": "finished: succeeded",
    "failed": "finished: failed",
    "cancelled": "finished: cancelled",
}


def event_label(kind: str) -> str:
    """An event kind in the words of the job's timeline ("pending" again is a requeue)."""
    return EVENT_LABELS.get(kind, kind)


FILTERS: dict[str, Callable[..., Any]] = {
    "event_label": event_label,
    "when": when,
    "iso": iso,
    "duration": duration,
    "gpus": gpus,
    "hours": hours,
    "gpu_h_amount": gpu_h_amount,
    "gib": gib,
    "pct": pct,
    "usd_rate": usd_rate,
    "request_text": request_text,
    "placement_text": placement_text,
}
