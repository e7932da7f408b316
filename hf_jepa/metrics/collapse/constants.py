"""The collapse diagnostics' constants, in one place: the RankMe epsilon, the published T-JEPA figures, the paper's
number of candidate completions per span and the per-batch metric names."""

RANKME_EPSILON = 1e-7
# The same three paper figures are repeated in `PAPER` of hf_jepa/trainers/t_jepa.py; that module should import them
# from here instead.
PAPER_MI_CEILING_NATS = 0.35
PAPER_DIVERGENCE_STEP = 9_340
PAPER_COLLAPSED_VAL_RANK = 1.57
DEFAULT_NUM_CANDIDATES = 16

DIAGNOSTIC_METRICS = ("mi_proxy", "effective_rank", "cosine_mean", "cosine_variance", "embedding_std",
                      "embedding_std_ratio")
