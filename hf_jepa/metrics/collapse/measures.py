"""The collapse measures as plain functions over tensors: MI proxy, effective rank, pairwise cosine statistics, std
of normalised embeddings, and the irreducible conditional variance with the centroid decomposition of a loss."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .constants import RANKME_EPSILON

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


def cosine_similarity_stats(
    embeddings, max_pairs: int | None = None, generator: torch.Generator | None = None
) -> dict[str, float]:
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
    return {
        "mean": cosines.mean().item(),
        "variance": variance,
        "std": math.sqrt(variance),
        "num_pairs": int(cosines.numel()),
    }


def embedding_std(embeddings) -> float:
    """Mean over dimensions of the per-dimension standard deviation (over the N rows, unbiased, `torch.std`'s
    default) of the l2-normalised `(N, D)` embeddings. Isotropic (healthy) embeddings give about `1/sqrt(D)`,
    a representation collapsed to one direction gives 0. `embedding_std(x) * sqrt(D)` is the dimension-free ratio
    (~1 healthy, 0 collapsed) that `CollapseDiagnostics` reports as `embedding_std_ratio`."""
    x = _as_matrix(embeddings, "embeddings")
    return F.normalize(x.double(), dim=-1).std(dim=0).mean().item()


# ----------------------------------------------------------------------------------------------------------------------
# 5. Irreducible conditional variance (centroid degeneracy)


def _as_candidates(candidate_embeddings) -> torch.Tensor:
    x = candidate_embeddings
    x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if x.ndim != 3:
        raise ValueError(
            f"candidate_embeddings must be a 3-D (B, K, D) tensor (B spans, K candidate completions "
            f"each, D dims), got shape {tuple(x.shape)}"
        )
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
        raise ValueError(
            f"predictions {tuple(p.shape)} do not match candidate_embeddings "
            f"{tuple(candidates.shape)}: expected ({candidates.shape[0]}, {candidates.shape[2]})"
        )
    p = p.detach().double().to(candidates.device)
    centroids = candidates.mean(dim=1)
    total = (p.unsqueeze(1) - candidates).pow(2).sum(-1).mean().item()
    reducible = (p - centroids).pow(2).sum(-1).mean().item()
    irreducible = (candidates - centroids.unsqueeze(1)).pow(2).sum(-1).mean().item()
    return {
        "total": total,
        "reducible": reducible,
        "irreducible": irreducible,
        "irreducible_fraction": irreducible / total if total > 0 else 0.0,
    }
