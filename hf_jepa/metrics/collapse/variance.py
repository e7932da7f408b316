"""The irreducible conditional variance of K candidate completions per masked span, and the centroid decomposition
of a squared-error prediction loss into its reducible and irreducible parts."""

from __future__ import annotations

import torch


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
    target encoder; the paper's K is `DEFAULT_NUM_CANDIDATES`) with centroids `c_b = (1/K) sum_k e_{b,k}`:

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
