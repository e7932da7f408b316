"""The RankMe entropy effective rank of an embedding matrix (of its covariance, by default)."""

from __future__ import annotations

import torch

from ._inputs import _as_matrix
from .constants import RANKME_EPSILON


def effective_rank(embeddings, variant: str = "rankme", center: bool = True, epsilon: float = RANKME_EPSILON) -> float:
    """RankMe entropy effective rank of an `(N, D)` embedding matrix.

    With `s_1..s_m` (m = min(N, D)) the singular values of the matrix (centred over the N rows when `center=True`):

        variant="rankme"  (default):  p_i = s_i   / sum_j s_j   + epsilon
        variant="squared":            p_i = s_i^2 / sum_j s_j^2 + epsilon
        effective_rank = exp( -sum_i p_i log p_i ),   epsilon = RANKME_EPSILON (RankMe, Garrido et al. 2023)

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
