"""fmt: the one way every tool writes a figure for a person, and reads a duration setting.

Every table, line and page the tools print renders percents, dollars, times and "we do not
know" through these functions, so a run's pass rate reads the same in the tally, the watch,
the plan and the report, and an unknown figure is always UNKNOWN (never 0, never a blank).

Durations come in four shapes, each for one kind of figure:
    elapsed(s)   12m05s, 3h04m   how long something took or has left (clock-like)
    hours(s)     31.2 h          a long span compared with others (plans, budgets)
    span(s)      30 min, 90 s    a setting as the user typed it (a window, a grace)
    parse_duration("24h")        an hf-style setting (<number>[s|m|h|d]) in seconds

scripts/lib.sh's `duration_seconds` is the shell's one parser of the same syntax.
The watchdog's bundle ships this file beside tools/run/watchdog.py: it runs on HF with the standard
library only, so it must stay so.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

UNKNOWN = "n/a"
STAMP = "%Y-%m-%dT%H:%M:%SZ"   # the manifest's timestamps (scripts/lib-manifest.sh writes the same)
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# At most nine digits before the point: 999,999,999 d is already far past any job's life, and a
# bound keeps float() off a thousand-digit string.
DURATION = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,9})?)([smhd]?)")


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def percent(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percent, 0.125 -> '12.5%'; UNKNOWN for None, NaN or infinity."""
    return f"{100 * fraction:.{digits}f}%" if _known(fraction) else UNKNOWN


def share(part: int, whole: int, digits: int = 1) -> str:
    """part of whole as a percent; UNKNOWN when whole is 0."""
    return percent(part / whole if whole else None, digits)


def dollars(x: float | None) -> str:
    """'$1,234.56'; UNKNOWN for None, NaN or infinity."""
    return f"${x:,.2f}" if _known(x) else UNKNOWN


def small_dollars(x: float | None) -> str:
    """dollars, but two significant figures below a cent ('$0.0045'), where a sandbox's minutes are priced."""
    return dollars(x) if not _known(x) or x == 0 or abs(x) >= 0.01 else f"${x:.2g}"


def elapsed(seconds: float | None) -> str:
    """A clock-like duration: 45s, 12m05s, 3h04m (whole seconds, rounded; past an hour, minutes)."""
    if not _known(seconds):
        return UNKNOWN
    s = int(round(max(seconds, 0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def hours(seconds: float | None) -> str:
    """seconds as hours with one decimal, '31.2 h'."""
    return f"{seconds / 3600:.1f} h" if _known(seconds) else UNKNOWN


def span(seconds: float | None) -> str:
    """A setting's duration as typed: whole minutes from two on as minutes ('30 min'), else seconds ('90 s')."""
    if not _known(seconds):
        return UNKNOWN
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def parse_duration(text: str | None) -> float | None:
    """An hf-style duration (90, 90s, 10m, 2h, 1d) in seconds; None when empty or not one.

    Callers decide what a zero or a missing value means and word their own error with the
    setting's name; this only reads the syntax.
    """
    m = DURATION.fullmatch((text or "").strip())
    return float(m.group(1)) * UNIT_SECONDS[m.group(2)] if m else None


def utc_now() -> datetime:
    """Now, timezone-aware in UTC: the one clock the tools read (tests patch this)."""
    return datetime.now(timezone.utc)


def stamp(when: datetime | None = None) -> str:
    """A UTC timestamp as the manifest writes it, 2026-12-04T23:17:23Z (now when `when` is None)."""
    return (when or utc_now()).astimezone(timezone.utc).strftime(STAMP)
