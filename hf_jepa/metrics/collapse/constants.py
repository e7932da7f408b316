"""The collapse diagnostics' constants, in one place: the RankMe epsilon, the published T-JEPA figures (from
`hf_jepa.paper_figures`, under the names the diagnostics use), the paper's number of candidate completions per span
and the per-batch metric names."""

from ...paper_figures import T_JEPA_COLLAPSED_VAL_RANK, T_JEPA_DIVERGENCE_STEP, T_JEPA_MI_CEILING_NATS

PAPER_MI_CEILING_NATS = T_JEPA_MI_CEILING_NATS
PAPER_DIVERGENCE_STEP = T_JEPA_DIVERGENCE_STEP
PAPER_COLLAPSED_VAL_RANK = T_JEPA_COLLAPSED_VAL_RANK
RANKME_EPSILON = 1e-7
DEFAULT_NUM_CANDIDATES = 16

DIAGNOSTIC_METRICS = (
    "mi_proxy",
    "effective_rank",
    "cosine_mean",
    "cosine_variance",
    "embedding_std",
    "embedding_std_ratio",
)
