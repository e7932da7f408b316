"""Collapse diagnostics for any JEPA: the T-JEPA failure signature ("The JEPA paradox in language") as plain
functions over tensors, a per-step diagnostics container with a watchdog, a history that finds the signature's
three events, and its plot.

The paper tracks five quantities; each has one function here, defined exactly in its docstring:

1. MI proxy (`mi_proxy`): the InfoNCE lower bound `log N - L_InfoNCE` in nats, predictions vs targets.
2. Effective rank of the representation covariance (`effective_rank`): RankMe entropy rank of the *centred*
   embedding matrix by default.
3. Pairwise cosine similarity and its variance (`cosine_similarity_stats`), plus the std of l2-normalised embeddings
   (`embedding_std`, ~1/sqrt(d) healthy, 0 collapsed).
4. Train/validation loss divergence (`detect_loss_divergence`).
5. Irreducible conditional target variance from K candidate completions per masked span (the paper uses K = 16):
   `irreducible_conditional_variance` and `centroid_loss_decomposition`.

The published T-JEPA signature (C4 / BERT-Large): the MI proxy saturates early below 0.35 nats while the effective
rank is still high; train and validation losses part around step 9,340 (validation spikes, train turns erratic);
then the validation effective rank collapses to ~1.57 while the train rank inflates. I-JEPA's MI keeps rising.
`DiagnosticsHistory.failure_signature()` finds the three events (MI saturation, divergence, rank collapse) in a run's
log records and says whether they come in the paper's order.

Record convention (`DiagnosticsHistory`, `CollapseDiagnostics.update`, `plot_failure_signature`): flat dicts with an
integer `step` and keys `"<split>/<metric>"`, split `train` or `val`, metric one of `mi_proxy`, `effective_rank`,
`cosine_mean`, `cosine_variance`, `embedding_std`, `embedding_std_ratio`, `loss`, `irreducible_variance` (any other
key is kept and ignored). The trainer's own unprefixed `loss` is read as `train/loss` when `train/loss` is absent.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F


logger = logging.getLogger(__name__)  # "hf_jepa.metrics.collapse"

RANKME_EPSILON = 1e-7
PAPER_MI_CEILING_NATS = 0.35
PAPER_DIVERGENCE_STEP = 9_340
PAPER_COLLAPSED_VAL_RANK = 1.57
DEFAULT_NUM_CANDIDATES = 16

DIAGNOSTIC_METRICS = ("mi_proxy", "effective_rank", "cosine_mean", "cosine_variance", "embedding_std",
                      "embedding_std_ratio")


# ----------------------------------------------------------------------------------------------------------------------
# validation helpers


def _as_matrix(x, name: str, min_rows: int = 2) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (N, D) tensor, got shape {tuple(x.shape)}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows (N >= {min_rows}), got N = {x.shape[0]}")
    if x.shape[1] < 1:
        raise ValueError(f"{name} needs at least one dimension, got shape {tuple(x.shape)}")
    return x.detach()


def _check_same_shape(a: torch.Tensor, b: torch.Tensor, names: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{names} differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")


# ----------------------------------------------------------------------------------------------------------------------
# 1. MI proxy


def mi_proxy_details(predictions, targets, temperature: float = 0.1, normalize: bool = True) -> dict[str, float]:
    """`mi_proxy` with its parts: `mi_proxy` (nats), `infonce_loss` (nats), `log_n` and `top1_accuracy` (fraction of
    rows whose highest-scoring target is their own, i.e. in-batch retrieval accuracy)."""
    predictions = _as_matrix(predictions, "predictions")
    targets = _as_matrix(targets, "targets")
    _check_same_shape(predictions, targets, "predictions and targets")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    p, t = predictions.double(), targets.double()
    if normalize:
        p, t = F.normalize(p, dim=-1), F.normalize(t, dim=-1)
    logits = p @ t.T / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    loss = F.cross_entropy(logits, labels).item()
    log_n = math.log(logits.shape[0])
    return {
        "mi_proxy": log_n - loss,
        "infonce_loss": loss,
        "log_n": log_n,
        "top1_accuracy": (logits.argmax(-1) == labels).double().mean().item(),
    }


def mi_proxy(predictions, targets, temperature: float = 0.1, normalize: bool = True) -> float:
    """InfoNCE lower bound on the mutual information between predictions and targets, in nats.

    For `(N, D)` predictions `p_i` and targets `t_i` (row i of each is a positive pair), with
    `s_ij = cos(p_i, t_j) / temperature` (or the dot product `p_i . t_j / temperature` when `normalize=False`):

        L_InfoNCE = -(1/N) sum_i log( exp(s_ii) / sum_j exp(s_ij) )      (cross-entropy, diagonal = positives)
        mi_proxy  = log N - L_InfoNCE

    Rows are predictions, columns targets (one direction, not the symmetric CLIP loss). The bound is at most `log N`:
    identical, well-separated pairs at a low temperature approach `log N`; independent pairs give about 0, slightly
    below on average (for random unit vectors in D dims, about `-sigma^2 / 2` with `sigma = 1 / (temperature *
    sqrt(D))`, give or take `sigma / sqrt(N)`), so values near or below 0 mean "no information". Computed in float64; returns a Python float.
    """
    return mi_proxy_details(predictions, targets, temperature=temperature, normalize=normalize)["mi_proxy"]


# ----------------------------------------------------------------------------------------------------------------------
# 2. Effective rank


def effective_rank(embeddings, variant: str = "rankme", center: bool = True, epsilon: float = RANKME_EPSILON) -> float:
    """RankMe entropy effective rank of an `(N, D)` embedding matrix.

    With `s_1..s_m` (m = min(N, D)) the singular values of the matrix (centred over the N rows when `center=True`):

        variant="rankme"  (default):  p_i = s_i   / sum_j s_j   + epsilon
        variant="squared":            p_i = s_i^2 / sum_j s_j^2 + epsilon
        effective_rank = exp( -sum_i p_i log p_i ),   epsilon = 1e-7 (RankMe, Garrido et al. 2023)

    `center=True` (default) measures the rank of the representation *covariance*, as the T-JEPA paper does: the
    singular values of the centred matrix are `sqrt((N - 1) * lambda_i)` for the covariance eigenvalues `lambda_i`,
    so "squared" is the entropy rank of the covariance spectrum itself and "rankme" that of its square root.
    `center=False` is Garrido et al.'s original RankMe on the raw matrix (where a common mean direction counts as one
    dimension). Hand checks: k equal non-zero singular values give exactly k (up to the epsilon); a rank-1 matrix
    gives 1; an isotropic Gaussian in d dims with N >> d gives nearly d ("squared" is always <= "rankme").

    The centred rank is scale-invariant: a representation collapsed to a point plus tiny isotropic jitter still reads
    as full rank. `embedding_std` and `cosine_similarity_stats` catch that case; watch them together. A matrix with
    no variation at all (every singular value 0) returns 1.0, the measure's minimum. Computed in float64.
    """
    if variant not in ("rankme", "squared"):
        raise ValueError(f"variant must be 'rankme' or 'squared', got {variant!r}")
    x = _as_matrix(embeddings, "embeddings").double()
    if center:
        x = x - x.mean(dim=0, keepdim=True)
    singular_values = torch.linalg.svdvals(x)
    weights = singular_values.pow(2) if variant == "squared" else singular_values
    total = weights.sum()
    if not torch.isfinite(total):
        raise ValueError("embeddings contain non-finite values")
    if total.item() <= 0.0:
        return 1.0
    p = weights / total + epsilon
    return torch.exp(-(p * p.log()).sum()).item()


# ----------------------------------------------------------------------------------------------------------------------
# 3. Cosine similarity and std of normalised embeddings


def cosine_similarity_stats(embeddings, max_pairs: int | None = None,
                            generator: torch.Generator | None = None) -> dict[str, float]:
    """Mean and variance of the cosine similarity over distinct pairs of rows of an `(N, D)` matrix.

    All `N (N - 1) / 2` pairs `i < j` by default; with `max_pairs` smaller than that, `max_pairs` pairs drawn
    uniformly at random (with replacement, `i != j`) using `generator` (CPU generator; pass one for reproducibility).
    Returns `mean`, `variance` (population variance over the pairs used), `std` (its square root) and `num_pairs`.
    Healthy representations have a mean near 0; a collapsed one approaches 1 with vanishing variance. A zero row
    has cosine 0 with everything (rows are l2-normalised with `F.normalize`).
    """
    x = _as_matrix(embeddings, "embeddings")
    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1 or None, got {max_pairs}")
    x = F.normalize(x.double(), dim=-1)
    n = x.shape[0]
    total_pairs = n * (n - 1) // 2
    if max_pairs is None or max_pairs >= total_pairs:
        rows, cols = torch.triu_indices(n, n, offset=1, device=x.device)
    else:
        rows = torch.randint(0, n, (max_pairs,), generator=generator)
        cols = torch.randint(0, n - 1, (max_pairs,), generator=generator)
        cols = cols + (cols >= rows).long()
        rows, cols = rows.to(x.device), cols.to(x.device)
    cosines = (x[rows] * x[cols]).sum(-1)
    variance = cosines.var(unbiased=False).item()
    return {"mean": cosines.mean().item(), "variance": variance, "std": math.sqrt(variance),
            "num_pairs": int(cosines.numel())}


def embedding_std(embeddings) -> float:
    """Mean over dimensions of the per-dimension standard deviation (over the N rows, unbiased, `torch.std`'s
    default) of the l2-normalised `(N, D)` embeddings. Isotropic (healthy) embeddings give about `1/sqrt(D)`,
    a representation collapsed to one direction gives 0. `embedding_std(x) * sqrt(D)` is the dimension-free ratio
    (~1 healthy, 0 collapsed) that `CollapseDiagnostics` reports as `embedding_std_ratio`."""
    x = _as_matrix(embeddings, "embeddings")
    return F.normalize(x.double(), dim=-1).std(dim=0).mean().item()


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
        chunk = values[max(0, i - before): i + after + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def _relative_rise(value: float, minimum: float) -> float:
    if math.isinf(value):
        return math.inf
    return (value - minimum) / max(abs(minimum), 1e-12)


def detect_loss_divergence(steps: Sequence[int], train_losses: Sequence[float], val_losses: Sequence[float],
                           window: int = 5, tolerance: float = 0.05, patience: int = 3,
                           train_fraction: float = 0.5) -> int | None:
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
        raise ValueError(f"steps ({len(steps)}), train_losses ({len(train)}) and val_losses ({len(val)}) must have "
                         "the same length")
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
    gap = [v - t for v, t in zip(val[start: end + 1], train[start: end + 1])]
    if len(gap) < 3 or not all(math.isfinite(g) for g in gap):
        return minimum
    xs_steps = [float(s) for s in steps[start: end + 1]]
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
# 5. Irreducible conditional variance (centroid degeneracy)


def _as_candidates(candidate_embeddings) -> torch.Tensor:
    x = candidate_embeddings
    x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if x.ndim != 3:
        raise ValueError(f"candidate_embeddings must be a 3-D (B, K, D) tensor (B spans, K candidate completions "
                         f"each, D dims), got shape {tuple(x.shape)}")
    if x.shape[0] < 1 or x.shape[1] < 2:
        raise ValueError(f"candidate_embeddings needs B >= 1 spans and K >= 2 candidates, got shape {tuple(x.shape)}")
    return x.detach().double()


def irreducible_conditional_variance(candidate_embeddings) -> float:
    """Irreducible part of a squared-error latent prediction loss, from K candidate completions per masked span.

    For `(B, K, D)` candidate embeddings `e_{b,k}` (B masked spans, K valid completions of each embedded by the
    target encoder; the paper uses K = 16) with centroids `c_b = (1/K) sum_k e_{b,k}`:

        irreducible = (1/B) sum_b (1/K) sum_k || e_{b,k} - c_b ||^2

    (squared L2 norms summed over dimensions; divide by D for a per-dimension MSE). No predictor can go below it on
    such a span: the best constant prediction for a set of equally likely completions is their centroid, and its
    loss is exactly this spread (see `centroid_loss_decomposition`).
    """
    x = _as_candidates(candidate_embeddings)
    centroids = x.mean(dim=1, keepdim=True)
    return (x - centroids).pow(2).sum(-1).mean().item()


def centroid_loss_decomposition(predictions, candidate_embeddings) -> dict[str, float]:
    """Split a squared-error prediction loss against K candidate completions into reducible and irreducible parts.

    For `(B, D)` predictions `p_b` and `(B, K, D)` candidates `e_{b,k}` with centroids `c_b`, the exact identity

        total       = (1/B) sum_b (1/K) sum_k || p_b - e_{b,k} ||^2
                    = (1/B) sum_b || p_b - c_b ||^2            (reducible: a better predictor can remove it)
                    + (1/B) sum_b (1/K) sum_k || e_{b,k} - c_b ||^2   (irreducible_conditional_variance)

    holds because `sum_k (e_{b,k} - c_b) = 0`. Returns `total`, `reducible`, `irreducible` and
    `irreducible_fraction` (irreducible / total; 0 when total is 0). Squared norms are summed over dimensions.
    """
    candidates = _as_candidates(candidate_embeddings)
    p = predictions if isinstance(predictions, torch.Tensor) else torch.as_tensor(predictions)
    if p.ndim != 2:
        raise ValueError(f"predictions must be a 2-D (B, D) tensor, got shape {tuple(p.shape)}")
    if p.shape[0] != candidates.shape[0] or p.shape[1] != candidates.shape[2]:
        raise ValueError(f"predictions {tuple(p.shape)} do not match candidate_embeddings "
                         f"{tuple(candidates.shape)}: expected ({candidates.shape[0]}, {candidates.shape[2]})")
    p = p.detach().double().to(candidates.device)
    centroids = candidates.mean(dim=1)
    total = (p.unsqueeze(1) - candidates).pow(2).sum(-1).mean().item()
    reducible = (p - centroids).pow(2).sum(-1).mean().item()
    irreducible = (candidates - centroids.unsqueeze(1)).pow(2).sum(-1).mean().item()
    return {"total": total, "reducible": reducible, "irreducible": irreducible,
            "irreducible_fraction": irreducible / total if total > 0 else 0.0}


# ----------------------------------------------------------------------------------------------------------------------
# 6. Per-step diagnostics and the watchdog


class CollapseWatchdog:
    """Warns when a batch's diagnostics look collapsed.

    `check(metrics, step)` reads plain keys (`effective_rank`, `cosine_mean`, `embedding_std_ratio` or
    `embedding_std`) or split-prefixed ones (`val/effective_rank`, ...; every prefix is checked separately) and
    returns one message per tripped rule, each logged at WARNING on the `hf_jepa.metrics.collapse` logger when it
    trips (not again at later checks while it stays tripped):

    - effective rank below `max(rank_threshold, rank_fraction * dim)`; defaults 2.0 absolute (the paper's collapsed
      T-JEPA sits at ~1.57) and no relative part (`rank_fraction=None`; it needs `dim`),
    - mean pairwise cosine above `cosine_threshold` (default 0.9),
    - `embedding_std` below `std_fraction / sqrt(dim)` (default 0.1, i.e. a tenth of the isotropic value), read from
      `embedding_std_ratio = embedding_std * sqrt(dim)` when present, else from `embedding_std` with `dim`.

    The centred effective rank does not see a collapse to a point with residual jitter (it is scale-invariant); the
    cosine and std rules do. Every warning is also kept in `self.warnings` as `(step, message)`.
    """

    def __init__(self, rank_threshold: float | None = 2.0, cosine_threshold: float | None = 0.9,
                 std_fraction: float | None = 0.1, rank_fraction: float | None = None, dim: int | None = None):
        self.rank_threshold = rank_threshold
        self.cosine_threshold = cosine_threshold
        self.std_fraction = std_fraction
        self.rank_fraction = rank_fraction
        self.dim = dim
        self.warnings: list[tuple[int | None, str]] = []
        self._tripped: set[str] = set()

    @staticmethod
    def _groups(metrics: Mapping[str, float]) -> dict[str, dict[str, float]]:
        groups: dict[str, dict[str, float]] = {}
        for key, value in metrics.items():
            prefix, _, name = key.rpartition("/")
            groups.setdefault(prefix, {})[name] = value
        return groups

    def check(self, metrics: Mapping[str, float], step: int | None = None, dim: int | None = None) -> list[str]:
        """Messages for every tripped rule (empty when healthy); `dim` overrides the constructor's."""
        dim = dim if dim is not None else self.dim
        messages = []
        for prefix, group in self._groups(metrics).items():
            where = f"{prefix}/" if prefix else ""
            at = f" at step {step}" if step is not None else ""
            rank = group.get("effective_rank")
            rank_limit = self.rank_threshold
            if self.rank_fraction is not None and dim is not None:
                rank_limit = max(rank_limit or 0.0, self.rank_fraction * dim)
            if rank is not None and rank_limit is not None and rank < rank_limit:
                messages.append(f"{where}effective_rank {rank:.3f} < {rank_limit:.3f}{at}: dimensional collapse")
            cosine = group.get("cosine_mean")
            if cosine is not None and self.cosine_threshold is not None and cosine > self.cosine_threshold:
                messages.append(f"{where}cosine_mean {cosine:.3f} > {self.cosine_threshold:.3f}{at}: embeddings "
                                "point the same way")
            if self.std_fraction is not None:
                ratio = group.get("embedding_std_ratio")
                if ratio is None and group.get("embedding_std") is not None and dim:
                    ratio = group["embedding_std"] * math.sqrt(dim)
                if ratio is not None and ratio < self.std_fraction:
                    messages.append(f"{where}embedding_std is {ratio:.3f} x 1/sqrt(d) < {self.std_fraction:.3f} x "
                                    f"1/sqrt(d){at}: representation collapse")
        # Log a rule when it trips, not again while it stays tripped (a collapsed run would flood the log); it logs
        # again after it has recovered. Every tripped check is still returned and kept in `self.warnings`.
        tripped = {message.split(" ", 1)[0] for message in messages}
        for message in messages:
            if message.split(" ", 1)[0] not in self._tripped:
                logger.warning("Collapse watchdog: %s", message)
            self.warnings.append((step, message))
        checked = {f"{prefix}/{rule}" if prefix else rule for prefix in self._groups(metrics)
                   for rule in ("effective_rank", "cosine_mean", "embedding_std")}
        self._tripped = (self._tripped - checked) | tripped
        return messages


class CollapseDiagnostics:
    """The five per-batch collapse diagnostics of any JEPA, plus a training hook that logs them.

    `compute(predictions, targets, embeddings=None)` returns a dict of floats:

    - `mi_proxy`: `mi_proxy(predictions, targets, temperature)` (nats), predictions vs targets `(N, D)`,
    - `effective_rank`: `effective_rank(embeddings, rank_variant, center)`,
    - `cosine_mean`, `cosine_variance`: `cosine_similarity_stats(embeddings, max_pairs)`,
    - `embedding_std`: `embedding_std(embeddings)` and `embedding_std_ratio` = that times sqrt(D) (~1 healthy).

    `embeddings` is the representation whose collapse is watched (e.g. pooled encoder outputs); it defaults to
    `targets` (the EMA target encoder's latents, the representation a JEPA ships). Higher-rank inputs `(..., D)` are
    flattened to `(N, D)` first, so `(B, L, D)` token latents work directly.

    `update(step, predictions, targets, embeddings=None, split="train", **scalars)` is the training callback: it
    computes the metrics, prefixes them `"<split>/"`, adds the extra scalars (e.g. `loss=val_loss`), runs the
    watchdog (with `dim` = the embedding width), appends everything to `self.history` (a `DiagnosticsHistory`) and
    returns the prefixed dict, ready to merge into the trainer's log record in a recipe's `on_log`.
    """

    def __init__(self, temperature: float = 0.1, rank_variant: str = "rankme", center: bool = True,
                 max_pairs: int | None = None, watchdog: CollapseWatchdog | None | bool = True, seed: int = 0):
        if rank_variant not in ("rankme", "squared"):
            raise ValueError(f"rank_variant must be 'rankme' or 'squared', got {rank_variant!r}")
        self.temperature = temperature
        self.rank_variant = rank_variant
        self.center = center
        self.max_pairs = max_pairs
        self.watchdog = CollapseWatchdog() if watchdog is True else (watchdog or None)
        self.generator = torch.Generator().manual_seed(seed)
        self.history = DiagnosticsHistory()

    @staticmethod
    def _flatten(x, name: str) -> torch.Tensor:
        x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
        if x.ndim < 2:
            raise ValueError(f"{name} must be (N, D) or (..., D), got shape {tuple(x.shape)}")
        return x.detach().reshape(-1, x.shape[-1])

    @torch.no_grad()
    def compute(self, predictions, targets, embeddings=None) -> dict[str, float]:
        predictions, targets = self._flatten(predictions, "predictions"), self._flatten(targets, "targets")
        embeddings = targets if embeddings is None else self._flatten(embeddings, "embeddings")
        cosine = cosine_similarity_stats(embeddings, max_pairs=self.max_pairs, generator=self.generator)
        std = embedding_std(embeddings)
        return {
            "mi_proxy": mi_proxy(predictions, targets, temperature=self.temperature),
            "effective_rank": effective_rank(embeddings, variant=self.rank_variant, center=self.center),
            "cosine_mean": cosine["mean"],
            "cosine_variance": cosine["variance"],
            "embedding_std": std,
            "embedding_std_ratio": std * math.sqrt(embeddings.shape[-1]),
        }

    def update(self, step: int, predictions, targets, embeddings=None, split: str = "train",
               **scalars: float) -> dict[str, float]:
        metrics = self.compute(predictions, targets, embeddings)
        metrics.update({k: float(v) for k, v in scalars.items()})
        prefixed = {f"{split}/{k}": v for k, v in metrics.items()}
        if self.watchdog is not None:
            dim = (targets if embeddings is None else embeddings).shape[-1]
            self.watchdog.check(prefixed, step=step, dim=dim)
        self.history.add_record({"step": step, **prefixed})
        return prefixed


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
        limit = max(threshold if threshold is not None else -math.inf,
                    fraction * peak if fraction is not None else -math.inf)
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

    def add(self, step: int, train: Mapping[str, float] | None = None, val: Mapping[str, float] | None = None,
            **extra) -> None:
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

    def failure_signature(self, mi_key: str | None = None, mi_tolerance: float = 0.02, mi_window: int = 3,
                          smooth: int = 3, divergence_window: int = 5, divergence_tolerance: float = 0.05,
                          divergence_patience: int = 3, rank_key: str = "val/effective_rank",
                          rank_fraction: float | None = 0.25, rank_threshold: float | None = None) -> dict:
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
            divergence = detect_loss_divergence(steps, train, val, window=divergence_window,
                                                tolerance=divergence_tolerance, patience=divergence_patience)

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


# ----------------------------------------------------------------------------------------------------------------------
# 8. Plot


_EVENT_STYLES = {
    "mi_saturation_step": (":", "MI saturation"),
    "divergence_step": ("--", "loss divergence"),
    "rank_collapse_step": ("-.", "rank collapse"),
}


def plot_failure_signature(records_by_run: Mapping[str, Sequence[Mapping] | DiagnosticsHistory], path,
                           title: str = "JEPA collapse diagnostics (T-JEPA failure signature)",
                           signature_kwargs: Mapping | None = None) -> str:
    """Save a PNG of the failure signature of one or more runs and return its path.

    `records_by_run`: run name -> log records (see the module's record convention) or a `DiagnosticsHistory`.
    Six panels, one colour per run, train solid and validation dashed: MI proxy (nats, with the paper's 0.35-nat
    T-JEPA ceiling), effective rank, mean pairwise cosine with a +-std band (std = sqrt(cosine_variance)), cosine
    variance, train/val loss, irreducible conditional variance (when logged). Vertical lines mark each run's
    detected MI saturation (dotted), loss divergence (dashed) and rank collapse (dash-dot) on every panel
    (`signature_kwargs` go to `failure_signature`). Matplotlib with the Agg backend, imported lazily.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    histories = {run: records if isinstance(records, DiagnosticsHistory) else DiagnosticsHistory.from_records(records)
                 for run, records in records_by_run.items()}
    panels = [
        ("mi_proxy", "MI proxy (InfoNCE bound)", "nats"),
        ("effective_rank", "effective rank (RankMe)", "rank"),
        ("cosine_mean", "mean pairwise cosine (+- std)", "cosine"),
        ("cosine_variance", "pairwise cosine variance", "variance"),
        ("loss", "loss", "loss"),
        ("irreducible_variance", "irreducible conditional variance", "squared distance"),
    ]
    figure, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    signatures = {}
    for index, (run, history) in enumerate(histories.items()):
        color = colors[index % len(colors)]
        signatures[run] = history.failure_signature(**(signature_kwargs or {}))
        for axis, (metric, _, _) in zip(axes.flat, panels):
            for split, style in (("train", "-"), ("val", "--")):
                steps, values = history.series(f"{split}/{metric}")
                if not steps:
                    continue
                axis.plot(steps, values, ls=style, color=color, marker="o", ms=2, lw=1.3, label=f"{run} {split}")
                if metric == "cosine_mean":
                    variance = dict(zip(*history.series(f"{split}/cosine_variance")))
                    band = [(s, v, math.sqrt(max(variance[s], 0.0))) for s, v in zip(steps, values) if s in variance]
                    if band:
                        s, v, sd = zip(*band)
                        axis.fill_between(s, [a - b for a, b in zip(v, sd)], [a + b for a, b in zip(v, sd)],
                                          color=color, alpha=0.12 if split == "train" else 0.07, lw=0)
            for key, (style, _) in _EVENT_STYLES.items():
                if signatures[run][key] is not None:
                    axis.axvline(signatures[run][key], color=color, ls=style, lw=1.1, alpha=0.8)
    for axis, (metric, name, ylabel) in zip(axes.flat, panels):
        if metric == "mi_proxy":
            axis.axhline(PAPER_MI_CEILING_NATS, color="grey", ls=(0, (1, 3)), lw=1,
                         label=f"T-JEPA ceiling {PAPER_MI_CEILING_NATS} nats")
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("step")
        axis.set_ylabel(ylabel)
        if not axis.lines:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes, color="grey")
        elif axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    event_handles = [Line2D([], [], color="black", ls=style, label=label) for style, label in _EVENT_STYLES.values()]
    figure.legend(handles=event_handles, loc="lower center", ncol=3, fontsize=9, frameon=False)
    summary = "; ".join(
        f"{run}: MI sat. {s['mi_saturation_step']}, diverge {s['divergence_step']}, collapse {s['rank_collapse_step']}"
        f", paper order {s['order_matches_paper']}" for run, s in signatures.items())
    figure.suptitle(f"{title}\n{summary}", fontsize=10)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)


__all__ = [
    "CollapseDiagnostics",
    "CollapseWatchdog",
    "DEFAULT_NUM_CANDIDATES",
    "DiagnosticsHistory",
    "PAPER_MI_CEILING_NATS",
    "centroid_loss_decomposition",
    "cosine_similarity_stats",
    "detect_loss_divergence",
    "effective_rank",
    "embedding_std",
    "irreducible_conditional_variance",
    "mi_proxy",
    "mi_proxy_details",
    "moving_average",
    "plot_failure_signature",
]
