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

Modules: `measures` (the functions over tensors), `detection` (loss divergence, `DiagnosticsHistory`), `watchdog`
(`CollapseWatchdog`, `CollapseDiagnostics`), `plots` (`plot_failure_signature`) and `constants` (the paper's
figures); every public name is re-exported here.
"""

# Names outside `__all__` (noqa: F401) stay importable from here, as they were from the single module `collapse.py`.
from .constants import (  # noqa: F401
    DEFAULT_NUM_CANDIDATES,
    DIAGNOSTIC_METRICS,
    PAPER_COLLAPSED_VAL_RANK,
    PAPER_DIVERGENCE_STEP,
    PAPER_MI_CEILING_NATS,
    RANKME_EPSILON,
)
from .detection import DiagnosticsHistory, detect_loss_divergence, moving_average
from .measures import (
    centroid_loss_decomposition,
    cosine_similarity_stats,
    effective_rank,
    embedding_std,
    irreducible_conditional_variance,
    mi_proxy,
    mi_proxy_details,
)
from .plots import plot_failure_signature, plot_seed_bands
from .watchdog import CollapseDiagnostics, CollapseWatchdog

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
    "plot_seed_bands",
]
