"""Per-step collapse diagnostics during training (`CollapseDiagnostics`) and the `CollapseWatchdog` that warns when
they look collapsed."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

import torch

from .history import DiagnosticsHistory
from .information import mi_proxy
from .rank import effective_rank
from .similarity import cosine_similarity_stats, embedding_std

logger = logging.getLogger(__package__)  # "hf_jepa.metrics.collapse", the logger the watchdog documents


class CollapseWatchdog:
    """Warns when a batch's diagnostics look collapsed.

    `check(metrics, step)` reads plain keys (`effective_rank`, `cosine_mean`, `embedding_std_ratio` or
    `embedding_std`) or split-prefixed ones (`val/effective_rank`, ...; every prefix is checked separately) and
    returns one message per tripped rule, each logged at WARNING on the `hf_jepa.metrics.collapse` logger when it
    trips (not again at later checks while it stays tripped):

    - effective rank below `max(rank_threshold, rank_fraction * dim)`; defaults 2.0 absolute (above the paper's collapsed
      T-JEPA, `PAPER_COLLAPSED_VAL_RANK`) and no relative part (`rank_fraction=None`; it needs `dim`),
    - mean pairwise cosine above `cosine_threshold` (default 0.9),
    - `embedding_std` below `std_fraction / sqrt(dim)` (default 0.1, i.e. a tenth of the isotropic value), read from
      `embedding_std_ratio = embedding_std * sqrt(dim)` when present, else from `embedding_std` with `dim`.

    The centred effective rank does not see a collapse to a point with residual jitter (it is scale-invariant); the
    cosine and std rules do. Every warning is also kept in `self.warnings` as `(step, message)`.
    """

    def __init__(
        self,
        rank_threshold: float | None = 2.0,
        cosine_threshold: float | None = 0.9,
        std_fraction: float | None = 0.1,
        rank_fraction: float | None = None,
        dim: int | None = None,
    ):
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
                messages.append(
                    f"{where}cosine_mean {cosine:.3f} > {self.cosine_threshold:.3f}{at}: embeddings point the same way"
                )
            if self.std_fraction is not None:
                ratio = group.get("embedding_std_ratio")
                if ratio is None and group.get("embedding_std") is not None and dim:
                    ratio = group["embedding_std"] * math.sqrt(dim)
                if ratio is not None and ratio < self.std_fraction:
                    messages.append(
                        f"{where}embedding_std is {ratio:.3f} x 1/sqrt(d) < {self.std_fraction:.3f} x "
                        f"1/sqrt(d){at}: representation collapse"
                    )
        # Log a rule when it trips, not again while it stays tripped (a collapsed run would flood the log); it logs
        # again after it has recovered. Every tripped check is still returned and kept in `self.warnings`.
        tripped = {message.split(" ", 1)[0] for message in messages}
        for message in messages:
            if message.split(" ", 1)[0] not in self._tripped:
                logger.warning("Collapse watchdog: %s", message)
            self.warnings.append((step, message))
        checked = {
            f"{prefix}/{rule}" if prefix else rule
            for prefix in self._groups(metrics)
            for rule in ("effective_rank", "cosine_mean", "embedding_std")
        }
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

    def __init__(
        self,
        temperature: float = 0.1,
        rank_variant: str = "rankme",
        center: bool = True,
        max_pairs: int | None = None,
        watchdog: CollapseWatchdog | None | bool = True,
        seed: int = 0,
    ):
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

    def update(
        self, step: int, predictions, targets, embeddings=None, split: str = "train", **scalars: float
    ) -> dict[str, float]:
        metrics = self.compute(predictions, targets, embeddings)
        metrics.update({k: float(v) for k, v in scalars.items()})
        prefixed = {f"{split}/{k}": v for k, v in metrics.items()}
        if self.watchdog is not None:
            dim = (targets if embeddings is None else embeddings).shape[-1]
            self.watchdog.check(prefixed, step=step, dim=dim)
        self.history.add_record({"step": step, **prefixed})
        return prefixed
