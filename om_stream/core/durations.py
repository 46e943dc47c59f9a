"""Durations of the seeds (``activateAfterIdle``): milliseconds, ``"5m"``/``"1hr"`` strings, ``"auto"``, ``false``."""

from __future__ import annotations

import math
import re
from typing import Literal

__all__ = ["AUTO", "IdleSetting", "parse_idle"]

AUTO: Literal["auto"] = "auto"
# None = not set (inherit where the seeds allow it), False = explicitly off, int = milliseconds, "auto" = per provider
IdleSetting = int | Literal["auto", False] | None

_UNITS_MS = {
    "ms": 1, "msec": 1, "msecs": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hrs": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)


def parse_idle(value: object, field: str) -> IdleSetting:
    """Normalise an idle-activation value. Raises ``ValueError`` naming ``field`` on anything else."""
    if value is None:
        return None
    if value is False:
        return False
    if value is True:
        raise ValueError(f"{field}: true is not a duration; use milliseconds, a string like '5m', 'auto' or false")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{field}: must be a finite number of milliseconds >= 0, got {value!r}")
        return int(value)
    if isinstance(value, str):
        if value.strip().lower() == AUTO:
            return AUTO
        match = _DURATION.match(value)
        if not match or match.group(2).lower() not in _UNITS_MS:
            raise ValueError(f"{field}: invalid duration {value!r}; expected e.g. 300000, '30s', '5m', '1hr', 'auto'")
        return int(float(match.group(1)) * _UNITS_MS[match.group(2).lower()])
    raise ValueError(f"{field}: expected milliseconds, a duration string, 'auto' or false, got {type(value).__name__}")
