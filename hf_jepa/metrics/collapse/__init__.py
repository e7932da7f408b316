"""Collapse diagnostics for any JEPA: the T-JEPA failure signature ("The JEPA paradox in language") as plain
functions over tensors, a per-step diagnostics container with a watchdog, a history that finds the signature's
three events, and its plot.

The paper tracks five quantities; each has one function here, defined exactly in its docstring, in a module of its
own concept:

- information (`mi_proxy`, `mi_proxy_details`): the InfoNCE lower bound `log N - L_InfoNCE` in nats, predictions vs
  targets.
- rank (`effective_rank`): RankMe entropy rank of the representation covariance (the *centred* embedding matrix) by
  default.
- similarity (`cosine_similarity_stats`, `embedding_std`): pairwise cosine similarity and its variance, and the std of
  l2-normalised embeddings (~1/sqrt(d) healthy, 0 collapsed).
- divergence (`detect_loss_divergence`, `moving_average`): where the validation loss parts from the training loss.
- variance (`irreducible_conditional_variance`, `centroid_loss_decomposition`): the irreducible conditional target
  variance from K candidate completions per masked span (the paper's K: `DEFAULT_NUM_CANDIDATES`).

The published T-JEPA signature (C4 / BERT-Large): the MI proxy saturates early below `PAPER_MI_CEILING_NATS` while the
effective rank is still high; train and validation losses part around step `PAPER_DIVERGENCE_STEP` (validation
spikes, train turns erratic); then the validation effective rank collapses to about `PAPER_COLLAPSED_VAL_RANK` while
the train rank inflates (the figures: `hf_jepa.paper_figures`). I-JEPA's MI keeps rising. The history module's
`DiagnosticsHistory.failure_signature()` finds the three events (MI saturation, divergence, rank collapse) in a run's
log records and says whether they come in the paper's order.

Record convention (`DiagnosticsHistory`, `CollapseDiagnostics.update`, `plot_failure_signature`): flat dicts with an
integer `step` and keys `"<split>/<metric>"`, split `train` or `val`, metric one of `mi_proxy`, `effective_rank`,
`cosine_mean`, `cosine_variance`, `embedding_std`, `embedding_std_ratio`, `loss`, `irreducible_variance` (any other
key is kept and ignored). The trainer's own unprefixed `loss` is read as `train/loss` when `train/loss` is absent.

Modules: `information`, `rank`, `similarity`, `variance` (the measures, plain functions over tensors), `divergence`,
`history` (`DiagnosticsHistory` and the failure signature), `watchdog` (`CollapseWatchdog`, `CollapseDiagnostics`),
`plots` (`plot_failure_signature`, `plot_seed_bands`) and `constants` (the paper's figures, the RankMe epsilon);
every public name is re-exported here.
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
from .divergence import detect_loss_divergence, moving_average
from .history import DiagnosticsHistory
from .information import mi_proxy, mi_proxy_details
from .plots import plot_failure_signature, plot_seed_bands
from .rank import effective_rank
from .similarity import cosine_similarity_stats, embedding_std
from .variance import centroid_loss_decomposition, irreducible_conditional_variance
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
