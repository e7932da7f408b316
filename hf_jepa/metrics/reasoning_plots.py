"""Figures of the latent-reasoning evaluation: CFG robustness curves, the "mixed latents" PCA (against isolated and
contextual vocabulary latents), candidate continuations at tree-search branches, learning curves and decomposition,
and GSM8K accuracy against the number of in-context exemplars."""

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


ROBUSTNESS_PANELS = (
    ("replacement", "input tokens replaced (fraction)"),
    ("noise", "noise on each system's latent (std / RMS)"),
    ("residual_noise", "noise on every block's residual stream (std / RMS)"),
)


def plot_cfg_robustness_seeds(aggregate: dict, path: str | Path, title: str = "CFG completion robustness") -> str:
    """One panel per curve kind of `hf_jepa.metrics.reasoning_robustness.aggregate_seeds(...)` (those present), one
    line per system: the mean over seeds with error bars of +- one sample standard deviation."""
    plt = pyplot()
    panels = [(kind, label) for kind, label in ROBUSTNESS_PANELS if any(kind in c for c in aggregate.values())]
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for axis, (kind, label) in zip(axes[0], panels):
        for name, curves in aggregate.items():
            points = sorted((float(x), p) for x, p in curves.get(kind, {}).items())
            axis.errorbar(
                [x for x, _ in points],
                [100 * p["mean"] for _, p in points],
                yerr=[100 * p["std"] for _, p in points],
                marker="o",
                capsize=3,
                label=name,
            )
        axis.set_xlabel(label)
        axis.set_ylabel("valid under the grammar (%)")
        axis.set_ylim(0, 102)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(title)
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


def plot_decomposition(results: dict, path: str | Path) -> str | None:
    """Where the reasoner + Talker systems lose accuracy, one row per tree size: left, against minutes of training,
    the pair's accuracy (solid), the reasoner alone by nearest target latent (dashed) and the Talker on the oracle
    chain (dotted); right, at the last checkpoint, the cosine to the targets by chain position, teacher-forced
    (solid) and free-running (dashed). None (no file) when no checkpoint holds the decomposition."""
    rows = []
    for nodes, tree in results["trees"].items():
        systems = {n: s for n, s in tree["systems"].items() if "reasoner_alone_accuracy" in s["curve"][-1]}
        if systems:
            rows.append((nodes, systems))
    if not rows:
        return None
    plt = pyplot()
    figure, axes = plt.subplots(len(rows), 2, figsize=(11, 4 * len(rows)), squeeze=False)
    for (nodes, systems), (left, right) in zip(rows, axes):
        for index, system in enumerate(systems.values()):
            color = f"C{index}"
            curve = [row for row in system["curve"] if "reasoner_alone_accuracy" in row]
            minutes = [row["train_minutes"] for row in curve]
            for key, style, what in (
                ("pair_accuracy", "-", "pair"),
                ("reasoner_alone_accuracy", "--", "reasoner alone"),
                ("talker_oracle_accuracy", ":", "Talker on oracle chain"),
            ):
                left.plot(
                    minutes,
                    [100 * row[key] for row in curve],
                    ls=style,
                    color=color,
                    label=f"{system['label']}: {what}",
                )
            last = curve[-1]
            for key, style, what in (
                ("cosine_teacher_forced", "-", "teacher-forced"),
                ("cosine_free_running", "--", "free-running"),
            ):
                right.plot(
                    range(len(last[key])),
                    last[key],
                    ls=style,
                    marker="o",
                    markersize=3,
                    color=color,
                    label=f"{system['label']}: {what}",
                )
        left.set_title(f"tree search, {nodes} nodes: accuracy parts")
        left.set_xlabel("training time (min)")
        left.set_ylabel("exact-path accuracy (%)")
        left.set_ylim(0, 102)
        right.set_title(f"{nodes} nodes: cosine to the targets, last checkpoint")
        right.set_xlabel("chain position (answer token)")
        right.set_ylabel("mean cosine")
        for axis in (left, right):
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    figure.tight_layout()
    return save_figure(figure, path)


def plot_contextual_mixed_latents(stats: dict, task: str, path: str | Path) -> str:
    """The figure of `hf_jepa.metrics.reasoning_superposition.contextual_mixed_latents(...)`: left, the PCA (fitted on
    the teacher-context candidate latents) of the predictions, the candidates and the true tokens' contextual latents;
    right, the top-1 minus top-2 cosine margin of every step against isolated and contextual candidates."""
    plt = pyplot()

    points = stats["points"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    pca = points.get("pca")
    if pca is not None:
        c, t, p = pca["candidates_2d"], pca["answer_tokens_2d"], pca["predicted_2d"]
        left.scatter(c[:, 0], c[:, 1], s=3, alpha=0.15, color="grey", label=f"candidates in context ({len(c)})")
        left.scatter(t[:, 0], t[:, 1], s=14, marker="x", color="black", label=f"true tokens in context ({len(t)})")
        left.scatter(p[:, 0], p[:, 1], s=4, alpha=0.3, color="C0", label=f"predicted latents ({len(p)})")
        left.legend(loc="best", fontsize=7)
    left.set_title(f"{task}: PCA fitted on contextual candidate latents", fontsize=9)
    for index, (name, label) in enumerate(
        (
            ("isolated", "isolated vocabulary"),
            ("contextual_teacher", "in context, teacher prefix"),
            ("contextual_decoded", "in context, own decoded prefix"),
        )
    ):
        margin = points[name]["margin"].numpy()
        right.hist(
            margin, bins=40, range=(0, max(0.05, float(margin.max()))), histtype="step", color=f"C{index}", label=label
        )
    right.axvline(stats["delta"], color="grey", linestyle=":", linewidth=1)
    right.set_xlabel("top-1 minus top-2 cosine (dotted: delta)")
    right.set_ylabel("chain steps")
    right.set_title("how far the nearest candidate leads the next one", fontsize=9)
    right.legend(fontsize=7)
    figure.tight_layout()
    return save_figure(figure, path)


def plot_candidate_continuations(stats: dict, task: str, path: str | Path) -> str:
    """The figure of `hf_jepa.metrics.reasoning_superposition.candidate_continuations(...)`: at each two-child step,
    the cosine to the correct child against the cosine to the other child (predicted and oracle), the number of
    candidates kept within delta, and the other child's weight by hops to the target."""
    plt = pyplot()

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    styles = (("predicted", "C0", f"predicted ({stats['chain_source']})"), ("oracle", "C1", "oracle (targets)"))
    for name, color, label in styles:
        p = stats["points"][name]
        axes[0].scatter(p["cos_other"], p["cos_correct"], s=6, alpha=0.4, color=color, label=label)
    low = min(
        float(min(stats["points"][n]["cos_other"].min(), stats["points"][n]["cos_correct"].min())) for n, _, _ in styles
    )
    axes[0].plot([low, 1], [low, 1], color="grey", linestyle=":", linewidth=1)  # zoomed: trained latents sit near 1
    axes[0].set_xlabel("cosine to the other child's contextual latent")
    axes[0].set_ylabel("cosine to the correct child's contextual latent")
    axes[0].set_title(f"{task}: two-child steps ({stats['branch_steps']})", fontsize=9)
    kept_max = max(int(stats["points"][name]["kept"].max()) for name, _, _ in styles)
    for offset, (name, color, label) in zip((-0.2, 0.2), styles):
        histogram = stats[name]["candidates_kept_histogram"]
        axes[1].bar([k + offset for k in histogram], list(histogram.values()), width=0.4, color=color, label=label)
    axes[1].set_xticks(range(1, kept_max + 1))
    axes[1].set_xlabel(f"candidates within {stats['delta']:g} of the top-1 cosine")
    axes[1].set_ylabel("two-child steps")
    for name, color, label in styles:
        by_hops = stats[name]["by_hops_to_target"]
        hops = sorted(by_hops)
        axes[2].plot(
            hops, [by_hops[h]["other_child_weight_median"] for h in hops], marker="o", color=color, label=label
        )
    axes[2].set_xlabel("hops from the correct child to the target")
    axes[2].set_ylabel("median weight of the other child (0: none, 0.5: even mix)")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    return save_figure(figure, path)


def plot_accuracy_vs_shots(accuracy: dict[str, dict[int, float]], path: str | Path, paper: dict | None = None) -> str:
    """GSM8K accuracy (%) against the number of exemplars, one line per system (`{system: {shots: accuracy}}`), with
    the paper's points (`{system: {shots: accuracy}}`, hollow markers, same colour) where given."""
    plt = pyplot()

    figure, axis = plt.subplots(figsize=(6, 4))
    for name, by_shots in accuracy.items():
        shots = sorted(by_shots)
        (line,) = axis.plot(shots, [100 * by_shots[k] for k in shots], marker="o", label=name)
        reference = (paper or {}).get(name, {})
        if reference:
            points = sorted(reference)
            axis.plot(
                points,
                [100 * reference[k] for k in points],
                linestyle="--",
                marker="o",
                markerfacecolor="none",
                color=line.get_color(),
                label=f"{name} (paper)",
            )
    axis.set_xticks(sorted({k for by_shots in accuracy.values() for k in by_shots}))
    axis.set_xlabel("in-context exemplars (shots)")
    axis.set_ylabel("GSM8K exact match of the final number (%)")
    axis.set_ylim(0, 100)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return save_figure(figure, path)
