"""Figures of the latent-reasoning evaluation: CFG robustness curves and the "mixed latents" PCA."""

from pathlib import Path

from .figures import pyplot, save_figure


def plot_cfg_robustness(results: dict, path: str | Path) -> str:
    plt = pyplot()

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, kind, label in (
        (axes[0], "replacement", "input tokens replaced"),
        (axes[1], "noise", "latent Gaussian noise std"),
    ):
        for name, curves in results.items():
            xs = sorted(curves[kind])
            axis.plot(xs, [100 * curves[kind][x] for x in xs], marker="o", label=name)
        axis.set_xlabel(label)
        axis.set_ylabel("valid under the grammar (%)")
        axis.set_ylim(0, 102)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("CFG completion robustness")
    figure.tight_layout()
    return save_figure(figure, path)


def plot_mixed_latents(stats: dict, task: str, path: str | Path) -> str:
    """The PCA scatter of `hf_jepa.metrics.reasoning.mixed_latents(...)`: predicted latents against the word latents."""
    plt = pyplot()

    figure, axis = plt.subplots(figsize=(6, 5))
    p, v = stats["predicted_2d"], stats["words_2d"]
    axis.scatter(p[:, 0], p[:, 1], s=4, alpha=0.3, label=f"predicted latents ({len(p)})")
    axis.scatter(v[:, 0], v[:, 1], s=20, marker="x", color="black", label="vocabulary latents")
    axis.set_title(f"Mixed latents ({task}): PCA fitted on the vocabulary")
    axis.legend(loc="best", fontsize=8)
    figure.tight_layout()
    return save_figure(figure, path)


def plot_learning_curves(results: dict, path: str | Path) -> str:
    """Accuracy against minutes of training, one panel per tree size and one line per system, from the results of
    `hf_jepa.reproductions.jepa_reasoner_curves` (the coupled transformer's 95% budget marked where it has one)."""
    plt = pyplot()

    trees = results["trees"]
    figure, axes = plt.subplots(1, len(trees), figsize=(5.5 * len(trees), 4), squeeze=False)
    for axis, (nodes, tree) in zip(axes[0], trees.items()):
        for system in tree["systems"].values():
            curve = system["curve"]
            axis.plot(
                [row["train_minutes"] for row in curve],
                [100 * row["accuracy"] for row in curve],
                marker="o",
                markersize=3,
                label=system["label"],
            )
        axis.axhline(95, color="grey", linestyle=":", linewidth=1)
        if tree.get("coupled_reached_target"):
            axis.axvline(tree["target_minutes"], color="grey", linestyle="--", linewidth=1)
        axis.set_title(f"tree search, {nodes} nodes")
        axis.set_xlabel("training time (min, evaluation excluded)")
        axis.set_ylabel("exact-path accuracy (%)")
        axis.set_ylim(0, 102)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return save_figure(figure, path)
