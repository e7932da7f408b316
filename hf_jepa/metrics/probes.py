"""Probes of frozen features that `hf-jepa probe` runs beside the linear probe (`downstream.linear_probe_accuracy`):
cosine k-nearest neighbours on pooled vectors, and an attentive probe (a learned cross-attention pooler, V-JEPA's) on
token / patch features. Plain functions over tensors; nothing here knows which encoder made the features."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

KNN_WEIGHTINGS = ("temperature", "majority")


def knn_predict(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    k: int = 20,
    temperature: float = 0.07,
    weighting: str = "temperature",
    num_classes: int | None = None,
    chunk_size: int = 1024,
) -> torch.Tensor:
    """Class predictions `(M,)` of cosine k-NN: each test vector's `k` most cosine-similar training vectors vote.

    `weighting="temperature"` (DINO's k-NN): a neighbour at cosine similarity `s` votes `exp(s / temperature)`;
    `"majority"`: one vote each. A tie goes to the smallest class index. `k` larger than the training set uses every
    training vector."""
    if weighting not in KNN_WEIGHTINGS:
        raise ValueError(f"knn_weighting={weighting!r}: choose one of {list(KNN_WEIGHTINGS)}")
    if k < 1:
        raise ValueError(f"knn_k={k}: needs at least one neighbour")
    if weighting == "temperature" and not temperature > 0:
        raise ValueError(f"knn_temperature={temperature}: must be > 0")
    train_y = torch.as_tensor(train_y, dtype=torch.long)
    num_classes = int(train_y.max()) + 1 if num_classes is None else num_classes
    k = min(k, len(train_x))
    bank = F.normalize(train_x.float(), dim=-1)
    predictions = []
    for start in range(0, len(test_x), chunk_size):
        queries = F.normalize(test_x[start : start + chunk_size].float(), dim=-1)
        similarity, index = (queries @ bank.T).topk(k, dim=1)
        votes = torch.exp(similarity / temperature) if weighting == "temperature" else torch.ones_like(similarity)
        scores = torch.zeros(len(queries), num_classes).scatter_add_(1, train_y[index], votes)
        predictions.append(scores.argmax(dim=1))  # argmax returns the first maximum: the smallest tied class
    return torch.cat(predictions)


def knn_probe_accuracy(train_x, train_y, test_x, test_y, **options) -> float:
    """Accuracy of `knn_predict(train_x, train_y, test_x, **options)` on `test_y`."""
    test_y = torch.as_tensor(test_y, dtype=torch.long)
    num_classes = int(max(torch.as_tensor(train_y).max(), test_y.max())) + 1
    predicted = knn_predict(train_x, train_y, test_x, num_classes=num_classes, **options)
    return int((predicted == test_y).sum()) / len(test_y)


class AttentiveProbe(nn.Module):
    """V-JEPA's attentive classifier, one block deep: a learned query attends over the (layer-normalised) tokens
    (`q = q + attention(q, norm(tokens))`), an MLP refines it (`q = q + mlp(norm(q))`), a linear head classifies it.

    With `num_positions`, a learned embedding per token index is added to the tokens first: the cells of a CNN's
    feature map carry no position of their own (ViT and BERT tokens already do), and without it a query could only
    pool them as an unordered set of local patterns."""

    def __init__(self, dim: int, num_classes: int, num_heads: int = 4, mlp_ratio: int = 4, num_positions: int = 0):
        super().__init__()
        self.query = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.positions = nn.Parameter(torch.zeros(1, num_positions, dim)) if num_positions else None
        self.norm_tokens = nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, num_heads, batch_first=True)
        self.norm_query = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits `(B, num_classes)` of tokens `(B, T, dim)`; `mask` `(B, T)` is 1 (True) at real tokens."""
        query = self.query.expand(len(tokens), -1, -1)
        if self.positions is not None:
            tokens = tokens + self.positions[:, : tokens.shape[1]]
        padding = None if mask is None else ~mask.bool()
        keys = self.norm_tokens(tokens)
        query = query + self.attention(query, keys, keys, key_padding_mask=padding, need_weights=False)[0]
        query = query + self.mlp(self.norm_query(query))
        return self.head(query[:, 0])


def _heads_for(dim: int, wanted: int) -> int:
    """The largest head count <= `wanted` that divides `dim` (attention splits the width evenly)."""
    return next(h for h in range(min(wanted, dim), 0, -1) if dim % h == 0)


def _standardise(train: torch.Tensor, train_mask: torch.Tensor | None, *others: torch.Tensor):
    """Per-channel (mean, std) of the real training tokens, applied to `train` and `others`: encoders differ in scale
    by orders of magnitude, and one learning rate should fit them all."""
    flat = train.reshape(-1, train.shape[-1]) if train_mask is None else train[train_mask.bool()]
    mean, std = flat.mean(0), flat.std(0).clamp_min(1e-6)
    return [(t - mean) / std for t in (train, *others)]


def attentive_probe_accuracy(
    train_tokens: torch.Tensor,
    train_y,
    test_tokens: torch.Tensor,
    test_y,
    train_mask: torch.Tensor | None = None,
    test_mask: torch.Tensor | None = None,
    steps: int = 500,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    weight_decay: float = 0.01,
    num_heads: int = 4,
    positions: bool = True,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> float:
    """Accuracy on `test_y` of an `AttentiveProbe` trained on frozen token features `(N, T, dim)` (standardised per
    channel with the training tokens' statistics; masks `(N, T)` mark real tokens, None: all are; `positions`: learned
    position embeddings, see `AttentiveProbe`) for `steps` AdamW
    steps of `batch_size` examples drawn with replacement, cross-entropy loss, constant `learning_rate`. The
    initialisation and the batches are seeded by `seed` (the global random state is left as it was)."""
    train_y = torch.as_tensor(train_y, dtype=torch.long)
    test_y = torch.as_tensor(test_y, dtype=torch.long)
    num_classes = int(max(train_y.max(), test_y.max())) + 1
    train_tokens, test_tokens = _standardise(train_tokens.float(), train_mask, test_tokens.float())
    dim = train_tokens.shape[-1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        probe = AttentiveProbe(
            dim,
            num_classes,
            num_heads=_heads_for(dim, num_heads),
            num_positions=max(train_tokens.shape[1], test_tokens.shape[1]) if positions else 0,
        ).to(device)
    optimizer = torch.optim.AdamW(probe.parameters(), lr=learning_rate, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)

    def batch(tokens, mask, index):
        return tokens[index].to(device), None if mask is None else mask[index].to(device)

    probe.train()
    for _ in range(steps):
        index = torch.randint(len(train_tokens), (batch_size,), generator=generator)
        tokens, mask = batch(train_tokens, train_mask, index)
        loss = F.cross_entropy(probe(tokens, mask), train_y[index].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    probe.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(test_tokens), 512):
            index = torch.arange(start, min(start + 512, len(test_tokens)))
            tokens, mask = batch(test_tokens, test_mask, index)
            correct += int((probe(tokens, mask).argmax(1).cpu() == test_y[index]).sum())
    return correct / len(test_y)


__all__ = ["KNN_WEIGHTINGS", "AttentiveProbe", "attentive_probe_accuracy", "knn_predict", "knn_probe_accuracy"]
