"""`ReproductionResult`: what every `reproduce_<family>` returns, and how it is written to disk."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class ReproductionResult:
    """One reproduction run: `summary` (JSON-ready numbers: the table's rows and everything behind them), `table`
    (the markdown the CLI prints and `results.md` holds) and the folder the runs were saved in."""

    family: str
    summary: dict[str, Any]
    table: str
    output_dir: Path

    def save(self, extra: dict[str, Any] | None = None) -> None:
        """Write `results.json` (the summary, plus `extra` such as per-run records) and `results.md` (the table)."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        payload = self.summary if extra is None else {"summary": self.summary, **extra}
        (self.output_dir / "results.json").write_text(json.dumps(payload, indent=2, default=str))
        (self.output_dir / "results.md").write_text(self.table + "\n")


def percent_better(ours: float, theirs: float) -> float:
    """How much lower (better) `ours` is than `theirs`, in percent of `theirs`."""
    return 100.0 * (theirs - ours) / theirs


def mean_and_std(values: Iterable) -> tuple[float, float] | None:
    """Mean and sample standard deviation (0 for one value) of the finite numbers in `values`; None if there are none
    (a metric a run did not produce, or that came out NaN)."""
    finite = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    if not finite:
        return None
    return statistics.fmean(finite), (statistics.stdev(finite) if len(finite) > 1 else 0.0)


def mean_history(histories: list[list[dict]]) -> list[dict]:
    """Average log records of several seeds step by step (keys present in all of them)."""
    by_step: dict[int, list[dict]] = {}
    for history in histories:
        for record in history:
            by_step.setdefault(record["step"], []).append(record)
    merged = []
    for step in sorted(by_step):
        records = by_step[step]
        keys = set.intersection(*(set(r) for r in records)) - {"step"}
        merged.append(
            {
                "step": step,
                **{
                    k: statistics.fmean(float(r[k]) for r in records)
                    for k in keys
                    if all(isinstance(r[k], (int, float)) and math.isfinite(r[k]) for r in records)
                },
            }
        )
    return merged
