"""Pairwise cosine similarity statistics of embeddings, and the std of l2-normalised embeddings: the measures that
catch a representation collapsed to a point or a direction."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._inputs import _as_matrix


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
