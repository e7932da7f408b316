"""How the reproductions' markdown tables write their numbers."""

from __future__ import annotations

import math
from typing import Any


def percent(value: Any, *, unit: str = "%", missing: str = "n/a") -> str:
    """A fraction as a percentage with one decimal (`0.519` -> `"51.9%"`; `unit=""` for a table whose header says
    "in %"); `missing` for anything that is not a finite number (a metric a run did not produce, or NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return missing
    return f"{100 * value:.1f}{unit}"


def mean_spread(value: tuple[float, float] | None, *, missing: str = "-") -> str:
    """A (mean, std) pair over seeds as `"0.2365 +- 0.0012"`; `missing` where a run did not measure it (None)."""
    if value is None:
        return missing
    mean, std = value
    return f"{mean:.4f} +- {std:.4f}"
