"""The plot of the T-JEPA failure signature; matplotlib (Agg backend) is imported here only, lazily."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from ..figures import pyplot, save_figure
from .constants import PAPER_MI_CEILING_NATS
from .history import DiagnosticsHistory

_EVENT_STYLES = {
    "mi_saturation_step": (":", "MI saturation"),
    "divergence_step": ("--", "loss divergence"),
    "rank_collapse_step": ("-.", "rank collapse"),
}


def plot_failure_signature(
    records_by_run: Mapping[str, Sequence[Mapping] | DiagnosticsHistory],
    path,
    title: str = "JEPA collapse diagnostics (T-JEPA failure signature)",
    signature_kwargs: Mapping | None = None,
) -> str:
    """Save a PNG of the failure signature of one or more runs and return its path.

    `records_by_run`: run name -> log records (see the module's record convention) or a `DiagnosticsHistory`.
    Six panels, one colour per run, train solid and validation dashed: MI proxy (nats, with the paper's 0.35-nat
    T-JEPA ceiling), effective rank, mean pairwise cosine with a +-std band (std = sqrt(cosine_variance)), cosine
    variance, train/val loss, irreducible conditional variance (when logged). Vertical lines mark each run's
    detected MI saturation (dotted), loss divergence (dashed) and rank collapse (dash-dot) on every panel
    (`signature_kwargs` go to `failure_signature`). Matplotlib with the Agg backend, imported lazily.
    """
    plt = pyplot()
    from matplotlib.lines import Line2D

    histories = {
        run: records if isinstance(records, DiagnosticsHistory) else DiagnosticsHistory.from_records(records)
        for run, records in records_by_run.items()
    }
    panels = [
        ("mi_proxy", "MI proxy (InfoNCE bound)", "nats"),
        ("effective_rank", "effective rank (RankMe)", "rank"),
        ("cosine_mean", "mean pairwise cosine (+- std)", "cosine"),
        ("cosine_variance", "pairwise cosine variance", "variance"),
        ("loss", "loss", "loss"),
        ("irreducible_variance", "irreducible conditional variance", "squared distance"),
    ]
    figure, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    signatures = {}
    for index, (run, history) in enumerate(histories.items()):
        color = colors[index % len(colors)]
        signatures[run] = history.failure_signature(**(signature_kwargs or {}))
        for axis, (metric, _, _) in zip(axes.flat, panels):
            for split, style in (("train", "-"), ("val", "--")):
                steps, values = history.series(f"{split}/{metric}")
                if not steps:
                    continue
                axis.plot(steps, values, ls=style, color=color, marker="o", ms=2, lw=1.3, label=f"{run} {split}")
                if metric == "cosine_mean":
                    variance = dict(zip(*history.series(f"{split}/cosine_variance")))
                    band = [(s, v, math.sqrt(max(variance[s], 0.0))) for s, v in zip(steps, values) if s in variance]
                    if band:
                        s, v, sd = zip(*band)
                        axis.fill_between(
                            s,
                            [a - b for a, b in zip(v, sd)],
                            [a + b for a, b in zip(v, sd)],
                            color=color,
                            alpha=0.12 if split == "train" else 0.07,
                            lw=0,
                        )
            for key, (style, _) in _EVENT_STYLES.items():
                if signatures[run][key] is not None:
                    axis.axvline(signatures[run][key], color=color, ls=style, lw=1.1, alpha=0.8)
    for axis, (metric, name, ylabel) in zip(axes.flat, panels):
        if metric == "mi_proxy":
            axis.axhline(
                PAPER_MI_CEILING_NATS,
                color="grey",
                ls=(0, (1, 3)),
                lw=1,
                label=f"T-JEPA ceiling {PAPER_MI_CEILING_NATS} nats",
            )
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("step")
        axis.set_ylabel(ylabel)
        if not axis.lines:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes, color="grey")
        elif axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    event_handles = [Line2D([], [], color="black", ls=style, label=label) for style, label in _EVENT_STYLES.values()]
    figure.legend(handles=event_handles, loc="lower center", ncol=3, fontsize=9, frameon=False)
    summary = "; ".join(
        f"{run}: MI sat. {s['mi_saturation_step']}, diverge {s['divergence_step']}, collapse {s['rank_collapse_step']}"
        f", paper order {s['order_matches_paper']}"
        for run, s in signatures.items()
    )
    figure.suptitle(f"{title}\n{summary}", fontsize=10)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return save_figure(figure, path)


_BAND_PANELS = (
    ("mi_proxy", "MI proxy (nats)"),
    ("effective_rank", "effective rank (RankMe)"),
    ("cosine_mean", "mean pairwise cosine"),
    ("loss", "loss"),
)


def _seed_band(histories: Sequence[DiagnosticsHistory], key: str) -> tuple[list[int], list[float], list[float]]:
    """Steps every seed logged `key` at, with the mean and the sample std (0 for one seed) across seeds there."""
    series = [dict(zip(*history.series(key))) for history in histories]
    steps = sorted(set.intersection(*(set(s) for s in series))) if series else []
    values = [[s[step] for s in series] for step in steps]
    means = [statistics.fmean(v) for v in values]
    stds = [statistics.stdev(v) if len(v) > 1 else 0.0 for v in values]
    return steps, means, stds


def plot_seed_bands(
    records_by_run: Mapping[str, Sequence[Sequence[Mapping]]],
    path,
    title: str,
    one_column_per_run: bool = False,
) -> str:
    """Save a PNG of diagnostics over training averaged over seeds and return its path.

    `records_by_run`: run name -> one list of log records per seed. Panels: MI proxy, effective rank, mean pairwise
    cosine and loss; train solid, validation dashed; the line is the mean over seeds, the band +- one standard
    deviation across seeds. `one_column_per_run=True` gives each run its own column of panels (runs trained for
    different numbers of steps, such as T-JEPA beside I-JEPA); otherwise the runs share the panels, one colour each.
    """
    plt = pyplot()
    histories = {run: [DiagnosticsHistory.from_records(r) for r in seeds] for run, seeds in records_by_run.items()}
    columns = len(histories) if one_column_per_run else 1
    figure, axes = plt.subplots(
        len(_BAND_PANELS), columns, figsize=(5.2 * columns + 1.5, 2.6 * len(_BAND_PANELS)), squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (run, seeds) in enumerate(histories.items()):
        color = colors[index % len(colors)]
        column = index if one_column_per_run else 0
        for row, (metric, name) in enumerate(_BAND_PANELS):
            axis = axes[row][column]
            for split, style in (("train", "-"), ("val", "--")):
                steps, means, stds = _seed_band(seeds, f"{split}/{metric}")
                if not steps:
                    continue
                axis.plot(steps, means, ls=style, color=color, lw=1.4, label=f"{run} {split} (n={len(seeds)})")
                axis.fill_between(
                    steps,
                    [m - s for m, s in zip(means, stds)],
                    [m + s for m, s in zip(means, stds)],
                    color=color,
                    alpha=0.18 if split == "train" else 0.1,
                    lw=0,
                )
            axis.set_title(f"{run}: {name}" if one_column_per_run else name, fontsize=10)
            axis.set_xlabel("step")
            if axis.lines:
                axis.legend(fontsize=7)
    figure.suptitle(f"{title}\nmean over seeds, band = +- 1 std across seeds", fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path)
