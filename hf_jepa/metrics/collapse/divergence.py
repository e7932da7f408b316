"""Train/validation loss divergence: where the validation loss parts from the training loss
(`detect_loss_divergence`), and the centred moving average it smooths with."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


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
