"""Plain metric functions over tensors, with thin local `evaluate` modules for users who want them (offline)."""

from pathlib import Path

from .collapse import (
    CollapseDiagnostics,
    CollapseWatchdog,
    DiagnosticsHistory,
    centroid_loss_decomposition,
    cosine_similarity_stats,
    detect_loss_divergence,
    effective_rank,
    embedding_std,
    irreducible_conditional_variance,
    mi_proxy,
    mi_proxy_details,
    plot_failure_signature,
)
from .modular_arithmetic import (
    evaluate_modular_arithmetic,
    modular_accuracy,
    modular_targets,
    pca_project,
    plot_latent_pca,
    prototype_off_diagonal_cosine,
    summarize_operation_accuracies,
    zero_shot_under_perturbations,
)
from .world_model import (
    SIGMA_EMBED_SAFETY_THRESHOLD,
    evaluate_world_model,
    normalized_prediction_error,
    parameter_drift,
    plot_world_model_diagnostics,
)

EVALUATE_MODULES_DIR = Path(__file__).parent / "evaluate_modules"


def evaluate_module_path(name: str) -> str:
    """Path of a bundled `evaluate` module, for `evaluate.load(path)` (works offline)."""
    path = EVALUATE_MODULES_DIR / name / f"{name}.py"
    if not path.exists():
        available = sorted(p.name for p in EVALUATE_MODULES_DIR.iterdir() if p.is_dir())
        raise ValueError(f"unknown metric {name!r}; bundled evaluate modules: {available}")
    return str(path)


def load_metric(name: str, **kwargs):
    """`evaluate.load` of a bundled metric module, e.g. `load_metric("modular_arithmetic_accuracy")`."""
    import evaluate

    return evaluate.load(evaluate_module_path(name), **kwargs)


__all__ = [
    "CollapseDiagnostics",
    "CollapseWatchdog",
    "DiagnosticsHistory",
    "centroid_loss_decomposition",
    "cosine_similarity_stats",
    "detect_loss_divergence",
    "effective_rank",
    "embedding_std",
    "irreducible_conditional_variance",
    "mi_proxy",
    "mi_proxy_details",
    "plot_failure_signature",
    "SIGMA_EMBED_SAFETY_THRESHOLD",
    "evaluate_world_model",
    "normalized_prediction_error",
    "parameter_drift",
    "plot_world_model_diagnostics",
    "evaluate_modular_arithmetic",
    "evaluate_module_path",
    "load_metric",
    "modular_accuracy",
    "modular_targets",
    "pca_project",
    "plot_latent_pca",
    "prototype_off_diagonal_cosine",
    "summarize_operation_accuracies",
    "zero_shot_under_perturbations",
]
