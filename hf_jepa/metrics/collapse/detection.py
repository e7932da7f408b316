"""Collapse events in a run's history: train/validation loss divergence (`detect_loss_divergence`) and the
`DiagnosticsHistory` whose `failure_signature` finds MI saturation, divergence and rank collapse."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from .constants import PAPER_MI_CEILING_NATS

# ----------------------------------------------------------------------------------------------------------------------
# 4. Train/validation loss divergence


def _finite_or_inf(values: Iterable[float]) -> list[float]:
    out = []
    for value in values:
        value = float(value)
        out.append(value if math.isfinite(value) else math.inf)
    return out


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Centred moving average over `window` points (`(window - 1) // 2` before, `window // 2` after), the window
    shrinking at both ends; `window <= 1` returns the values unchanged."""
    values = [float(v) for v in values]
    if window <= 1:
        return values
    before, after = (window - 1) // 2, window // 2
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - before) : i + after + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def _relative_rise(value: float, minimum: float) -> float:
    if math.isinf(value):
        return math.inf
    return (value - minimum) / max(abs(minimum), 1e-12)


def detect_loss_divergence(
    steps: Sequence[int],
    train_losses: Sequence[float],
    val_losses: Sequence[float],
    window: int = 5,
    tolerance: float = 0.05,
    patience: int = 3,
    train_fraction: float = 0.5,
) -> int | None:
    """First step at which the validation loss parts from the training loss, or None.

    `steps`, `train_losses` and `val_losses` are aligned evaluation points (same length, steps increasing).
    The rule:

    1. Smooth both curves with a centred moving average of `window` points (`moving_average`); non-finite losses
       count as +inf.
    2. At each point i, the relative rise of each curve above its running minimum:
       `rise_val(i) = (v_i - min_{j<=i} v_j) / |min_{j<=i} v_j|`, and `rise_train(i)` likewise.
    3. The curves are *parted* at i when `rise_val(i) > tolerance` and the train loss rose less than
       `train_fraction` as much (`rise_train(i) <= train_fraction * rise_val(i)`): the gap grows. When both losses
       blow up together (both infinite, or rising alike) that is instability, not parting.
    4. Divergence is declared once the curves stay parted for `patience` consecutive evaluations (at index `e`, the
       confirmation). A run that ends before `patience` parted evaluations returns None.
    5. The step returned is the *onset*, where the curves started to part: the breakpoint of a least-squares hinge
       fit of the raw gap `val - train` (constant before the breakpoint, rising linearly after it) over the
       evaluations `[m - 2 (e - m), e]` (at least 6 before `m`), where `m` is the index at which the smoothed
       validation loss last reached its minimum before the sustained rise. The hinge locates the kink to within an
       evaluation or two on noisy curves, where the validation minimum alone lags it whenever the train loss is
       still falling, and wanders on flat stretches. When the fit is not possible (non-finite losses in the window,
       a non-rising fitted gap), the step of `m` is returned.

    Defaults: a 5-point window, a 5% relative rise, 3 evaluations of patience, train rising at most half as much.
    """
    steps = [int(s) for s in steps]
    train, val = _finite_or_inf(train_losses), _finite_or_inf(val_losses)
    if not (len(steps) == len(train) == len(val)):
        raise ValueError(
            f"steps ({len(steps)}), train_losses ({len(train)}) and val_losses ({len(val)}) must have the same length"
        )
    if len(steps) < 2:
        raise ValueError(f"detect_loss_divergence needs at least 2 evaluation points, got {len(steps)}")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError("steps must be strictly increasing")
    if tolerance <= 0 or patience < 1 or window < 1:
        raise ValueError("need tolerance > 0, patience >= 1 and window >= 1")
    raw_train, raw_val = train, val
    train, val = moving_average(train, window), moving_average(val, window)
    val_min, val_argmin, train_min = math.inf, 0, math.inf
    streak, onset = 0, 0
    for i, (t, v) in enumerate(zip(train, val)):
        if v < val_min:
            val_min, val_argmin = v, i
        train_min = min(train_min, t)
        if math.isinf(val_min):
            streak = 0
            continue
        rise_val = _relative_rise(v, val_min)
        rise_train = _relative_rise(t, train_min) if not math.isinf(train_min) else math.inf
        if math.isinf(rise_val):
            parted = not math.isinf(rise_train)
        else:
            parted = rise_val > tolerance and rise_train <= train_fraction * rise_val
        if parted:
            if streak == 0:
                onset = val_argmin
            streak += 1
            if streak >= patience:
                return steps[_hinge_onset(steps, raw_train, raw_val, onset, i)]
        else:
            streak = 0
    return None


def _hinge_onset(steps: list[int], train: list[float], val: list[float], minimum: int, end: int) -> int:
    """Index of the breakpoint of the least-squares fit `gap = a + c * max(0, step - step_b)` (c > 0) over
    `[minimum - max(2 (end - minimum), 6), end]`; `minimum` when the fit is impossible."""
    start = max(0, minimum - max(2 * (end - minimum), 6))
    gap = [v - t for v, t in zip(val[start : end + 1], train[start : end + 1])]
    if len(gap) < 3 or not all(math.isfinite(g) for g in gap):
        return minimum
    xs_steps = [float(s) for s in steps[start : end + 1]]
    n = len(gap)
    mean_g = sum(gap) / n
    best, best_index = math.inf, None
    for b in range(n - 1):
        x = [max(0.0, s - xs_steps[b]) for s in xs_steps]
        mean_x = sum(x) / n
        var_x = sum((xi - mean_x) ** 2 for xi in x)
        slope = sum((xi - mean_x) * (gi - mean_g) for xi, gi in zip(x, gap)) / var_x
        if slope <= 0:
            continue
        intercept = mean_g - slope * mean_x
        sse = sum((gi - intercept - slope * xi) ** 2 for xi, gi in zip(x, gap))
        if sse < best:
            best, best_index = sse, start + b
    return minimum if best_index is None else best_index


# ----------------------------------------------------------------------------------------------------------------------
# 7. History and failure signature


def _saturation_index(values: Sequence[float], tolerance: float, window: int) -> int | None:
    """First i, followed by at least `window` evaluations, after which the values never exceed their best up to i
    by more than `tolerance`."""
    n = len(values)
    suffix_max = [-math.inf] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix_max[i] = max(values[i], suffix_max[i + 1])
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
    suffix_max = [-math.inf] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix_max[i] = max(values[i], suffix_max[i + 1])
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

        Also `mi_max` (nats, unsmoothed), `mi_below_paper_ceiling` (mi_max < 0.35 nats), `val_effective_rank_final`
        and `val_effective_rank_min` (None without data).
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
