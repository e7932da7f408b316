"""`DiagnosticsHistory`: a run's per-step diagnostics, and its T-JEPA failure signature (MI saturation, loss
divergence, rank collapse, and whether they come in the paper's order)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from .constants import PAPER_MI_CEILING_NATS
from .divergence import detect_loss_divergence, moving_average


def _suffix_max(values: Sequence[float]) -> list[float]:
    """`out[i] = max(values[i:])`, with `out[len(values)] = -inf`."""
    out = [-math.inf] * (len(values) + 1)
    for i in range(len(values) - 1, -1, -1):
        out[i] = max(values[i], out[i + 1])
    return out


def _saturation_index(values: Sequence[float], tolerance: float, window: int) -> int | None:
    """First i, followed by at least `window` evaluations, after which the values never exceed their best up to i
    by more than `tolerance`."""
    n = len(values)
    suffix_max = _suffix_max(values)
    best = -math.inf
    for i in range(n):
        best = max(best, values[i])
        if n - 1 - i < window:
            return None
        if suffix_max[i + 1] <= best + tolerance:
            return i
    return None


def _collapse_index(values: Sequence[float], fraction: float | None, threshold: float | None) -> int | None:
    """First i from which every later value stays below `max(threshold, fraction * max(values[:i+1]))`."""
    n = len(values)
    suffix_max = _suffix_max(values)
    peak = -math.inf
    for i in range(n):
        peak = max(peak, values[i])
        limit = max(
            threshold if threshold is not None else -math.inf, fraction * peak if fraction is not None else -math.inf
        )
        if values[i] < limit and suffix_max[i] < limit:
            return i
    return None


class DiagnosticsHistory:
    """Per-step diagnostics of one run, and its T-JEPA failure signature.

    Records are flat dicts `{"step": int, "train/<metric>": float, "val/<metric>": float, ...}` kept sorted by step;
    two records for the same step are merged (later values win). `from_records` reads a trainer's
    `training_log.jsonl` records as they are, with an unprefixed `loss` taken as `train/loss` when `train/loss` is
    missing. Non-numeric values and None are skipped when reading a series.
    """

    def __init__(self, records: Iterable[Mapping] | None = None):
        self._records: dict[int, dict] = {}
        for record in records or []:
            self.add_record(record)

    # -- building ------------------------------------------------------------------------------------------------
    def add_record(self, record: Mapping) -> None:
        if "step" not in record:
            raise ValueError(f"a diagnostics record needs a 'step' key, got keys {sorted(record)}")
        record = dict(record)
        step = int(record["step"])
        if "loss" in record and "train/loss" not in record:
            record["train/loss"] = record["loss"]
        merged = self._records.setdefault(step, {"step": step})
        merged.update(record)
        merged["step"] = step

    def add(
        self, step: int, train: Mapping[str, float] | None = None, val: Mapping[str, float] | None = None, **extra
    ) -> None:
        """Add `train` and `val` metric dicts (unprefixed keys) and any extra flat keys for `step`."""
        record = {"step": step, **extra}
        record.update({f"train/{k}": v for k, v in (train or {}).items()})
        record.update({f"val/{k}": v for k, v in (val or {}).items()})
        self.add_record(record)

    @classmethod
    def from_records(cls, records: Iterable[Mapping]) -> DiagnosticsHistory:
        return cls(records)

    @classmethod
    def from_dict(cls, data: Mapping) -> DiagnosticsHistory:
        return cls(data["records"])

    def to_dict(self) -> dict:
        """`{"records": [...]}` (JSON-serialisable when the values are); `from_dict` reads it back."""
        return {"records": self.records}

    @property
    def records(self) -> list[dict]:
        return [dict(self._records[step]) for step in sorted(self._records)]

    def __len__(self) -> int:
        return len(self._records)

    # -- reading -------------------------------------------------------------------------------------------------
    def series(self, key: str) -> tuple[list[int], list[float]]:
        """Steps and values of every record holding a numeric `key`, in step order."""
        steps, values = [], []
        for step in sorted(self._records):
            value = self._records[step].get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                steps.append(step)
                values.append(float(value))
        return steps, values

    def aligned_losses(self) -> tuple[list[int], list[float], list[float]]:
        """`(steps, train_losses, val_losses)` at every validation step; the train loss is the latest one logged at
        or before that step (validation is usually logged less often)."""
        train_steps, train_values = self.series("train/loss")
        val_steps, val_values = self.series("val/loss")
        steps, train, val = [], [], []
        j = -1
        for step, value in zip(val_steps, val_values):
            while j + 1 < len(train_steps) and train_steps[j + 1] <= step:
                j += 1
            if j >= 0:
                steps.append(step)
                train.append(train_values[j])
                val.append(value)
        return steps, train, val

    def failure_signature(
        self,
        mi_key: str | None = None,
        mi_tolerance: float = 0.02,
        mi_window: int = 3,
        smooth: int = 3,
        divergence_window: int = 5,
        divergence_tolerance: float = 0.05,
        divergence_patience: int = 3,
        rank_key: str = "val/effective_rank",
        rank_fraction: float | None = 0.25,
        rank_threshold: float | None = None,
    ) -> dict:
        """The three events of the T-JEPA failure signature, as steps (None when not found):

        - `mi_saturation_step`: the MI proxy (`mi_key`; default `train/mi_proxy`, else `val/mi_proxy`), smoothed by a
          centred `smooth`-point moving average, stops improving: the first evaluation, followed by at least
          `mi_window` more, after which the MI never again exceeds its best so far by more than `mi_tolerance`
          nats (default 0.02). A curve still rising at the end of the run (I-JEPA) gives None.
        - `divergence_step`: `detect_loss_divergence` on `aligned_losses()` (window, tolerance, patience as given).
        - `rank_collapse_step`: the first evaluation of `rank_key` (default `val/effective_rank`) from which it stays
          below `rank_fraction` (default 0.25) of its running maximum, or below `rank_threshold` (absolute, off by
          default), until the end of the run.
        - `order_matches_paper`: `mi_saturation_step <= divergence_step <= rank_collapse_step` when all three exist,
          else None.

        Also `mi_max` (nats, unsmoothed), `mi_below_paper_ceiling` (mi_max < `PAPER_MI_CEILING_NATS`, the paper's
        ceiling), `val_effective_rank_final` and `val_effective_rank_min` (None without data).
        """
        if mi_key is None:
            mi_key = "train/mi_proxy" if self.series("train/mi_proxy")[0] else "val/mi_proxy"
        mi_steps, mi_values = self.series(mi_key)
        mi_saturation = None
        if mi_values:
            index = _saturation_index(moving_average(mi_values, smooth), mi_tolerance, mi_window)
            mi_saturation = mi_steps[index] if index is not None else None

        steps, train, val = self.aligned_losses()
        divergence = None
        if len(steps) >= 2:
            divergence = detect_loss_divergence(
                steps,
                train,
                val,
                window=divergence_window,
                tolerance=divergence_tolerance,
                patience=divergence_patience,
            )

        rank_steps, rank_values = self.series(rank_key)
        rank_collapse = None
        if rank_values:
            index = _collapse_index(rank_values, rank_fraction, rank_threshold)
            rank_collapse = rank_steps[index] if index is not None else None

        events = (mi_saturation, divergence, rank_collapse)
        order = None if any(e is None for e in events) else bool(mi_saturation <= divergence <= rank_collapse)
        _, val_rank = self.series("val/effective_rank")
        mi_max = max(mi_values) if mi_values else None
        return {
            "mi_saturation_step": mi_saturation,
            "divergence_step": divergence,
            "rank_collapse_step": rank_collapse,
            "order_matches_paper": order,
            "mi_max": mi_max,
            "mi_below_paper_ceiling": None if mi_max is None else mi_max < PAPER_MI_CEILING_NATS,
            "val_effective_rank_final": val_rank[-1] if val_rank else None,
            "val_effective_rank_min": min(val_rank) if val_rank else None,
        }
