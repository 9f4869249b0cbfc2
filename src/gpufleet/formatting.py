"""Numbers for people: one way to write a size, a price, a share or a duration everywhere.

Every face (terminal, JSON-side prose, Markdown, HTML, PDF) formats through these, so the
same number reads the same in each. It sits at the bottom of the layers (design 0015) with
`quantities` (the way in: text to numbers), so that estimators and planners can build
sentences without importing the report package above them.
"""

from __future__ import annotations

import math

MISSING = "—"  # a value that is not there (None, NaN): never "0" or "nan"


def _trim(text: str) -> str:
    """'1.50' -> '1.5', '2.0' -> '2': trailing zeros say nothing."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_num(value: float | None, digits: int | None = None) -> str:
    """Thousands separators; precision falls with magnitude unless given."""
    if value is None or not math.isfinite(value):
        return MISSING
    if digits is None:
        size = abs(value)
        digits = 0 if size >= 100 else 1 if size >= 10 else 2
        return _trim(f"{value:,.{digits}f}")
    return f"{value:,.{digits}f}"


def fmt_count(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return MISSING
    if abs(value - round(value)) < 1e-9:
        return f"{round(value):,}"
    return fmt_num(value)


def _usd_decimals(size: float) -> int:
    """Decimals a total of `size` dollars needs: none from $100, cents below, and below a
    cent two significant digits, so that a small total never rounds to a round number that
    another, different total also rounds to ($1.83 and $2.41 both read "$2")."""
    if round(size, 2) >= 100 or size == 0:
        return 0
    if size >= 0.01:
        return 2
    return 1 - math.floor(math.log10(size))


def fmt_usd(value: float | None, decimals: int | None = None) -> str:
    """Totals: whole dollars from $100, cents below (`_usd_decimals`) unless `decimals`."""
    if value is None or not math.isfinite(value):
        return MISSING
    sign = "-" if value < 0 else ""
    places = _usd_decimals(abs(value)) if decimals is None else decimals
    return f"{sign}${abs(value):,.{places}f}"


def fmt_usd_apart(a: float, b: float) -> tuple[str, str]:
    """Two totals a sentence compares, each as `fmt_usd` writes it, with more decimals
    where that would print two different totals the same ("$1,234 vs $1,234" under a
    verdict that one is cheaper): the fewest that tell them apart."""
    first, second = fmt_usd(a), fmt_usd(b)
    places = max(_usd_decimals(abs(a)), _usd_decimals(abs(b)))
    while first == second and a != b and places < 12:
        places += 1 if places else 2
        first, second = fmt_usd(a, places), fmt_usd(b, places)
    return first, second


def fmt_usd_rate(value: float | None) -> str:
    """Unit prices ($/h, $/GPU-hour): cents matter."""
    if value is None or not math.isfinite(value):
        return MISSING
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.2f}"


def fmt_pct(value: float | None) -> str:
    """A fraction (0.412) as a percentage (41.2%)."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value * 100:,.1f}%"


def fmt_bytes(value: float | None) -> str:
    """Decimal units, as storage is sold: 1 TB = 10^12 bytes."""
    if value is None or not math.isfinite(value):
        return MISSING
    for limit, unit in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB")):
        if abs(value) >= limit:
            return f"{value / limit:,.1f} {unit}"
    return f"{value:,.0f} B"


def fmt_ratio(value: float | None) -> str:
    """Oversubscription 2.0 -> '2:1'."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{fmt_num(value)}:1"


def fmt_duration(seconds: float | None) -> str:
    """Seconds in the unit a person would say: 45 s, 12 min, 3.5 h, 2.1 d."""
    if seconds is None or not math.isfinite(seconds):
        return MISSING
    s = abs(seconds)
    for limit, scale, unit in ((120, 1, "s"), (7_200, 60, "min"), (172_800, 3_600, "h")):
        if s < limit:
            return f"{fmt_num(seconds / scale)} {unit}"
    return f"{fmt_num(seconds / 86_400)} d"


def format_gb(value: float) -> str:
    """Decimal GB with one decimal: for comparing sizes in one sentence (needs vs has)."""
    return f"{value / 1e9:,.1f} GB"


def format_bytes(value: float) -> str:
    """Binary units when the value is a whole number of them (32 GiB), else decimal."""
    for unit, scale in (("PiB", 2.0**50), ("TiB", 2.0**40), ("GiB", 2.0**30)):
        if value >= scale and value % scale == 0:
            return f"{value / scale:,.0f} {unit}"
    return format_decimal_bytes(value)


def format_decimal_bytes(value: float) -> str:
    """Decimal units only: for parts printed side by side and added up by the reader (a
    2 GiB reserve beside 4.471 GB of activations reads as two units on one line)."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if value >= scale:
            return f"{value / scale:,.4g} {unit}"
    return f"{value:,.0f} B"


_WORDS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "mfu": "MFU",
    "ttft": "TTFT",
    "tpot": "TPOT",
    "kv": "KV",
    "it": "IT",
    "tco": "TCO",
    "pue": "PUE",
    "usd": "USD",
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "cp": "CP",
    "ep": "EP",
    "sp": "SP",
    "kwh": "kWh",
    "kw": "kW",
    "lp": "LP",
}
_UNIT_SUFFIXES = ("_usd", "_ms", "_days", "_hours", "_months", "_years", "_bytes", "_fraction")


def fmt_label(key: str, strip_unit: bool = True) -> str:
    """snake_case key -> words people read: 'on_demand_gpu_hours' -> 'On-demand GPU-hours'."""
    text = key.replace("on_demand", "on-demand").replace("gpu_hour", "gpu-hour")
    if strip_unit:
        for suffix in _UNIT_SUFFIXES:
            if text.endswith(suffix) and text != suffix.lstrip("_"):
                text = text.removesuffix(suffix)
                if suffix == "_usd" and not text.endswith("cost"):
                    text += "_cost"  # reserved_usd -> "Reserved cost", not "Reserved"
                break
    words = [
        "-".join(_WORDS.get(part, part) for part in word.split("-")) for word in text.split("_")
    ]
    phrase = " ".join(w for w in words if w)
    return phrase[:1].upper() + phrase[1:] if phrase else key
