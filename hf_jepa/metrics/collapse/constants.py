"""The collapse diagnostics' constants, in one place: the RankMe epsilon, the published T-JEPA figures (from `hf_jepa.paper_figures`), the paper's
number of candidate completions per span and the per-batch metric names."""

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
