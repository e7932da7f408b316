"""The MI proxy: the InfoNCE lower bound on the mutual information between predictions and targets, in nats."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._inputs import _as_matrix, _check_same_shape


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
