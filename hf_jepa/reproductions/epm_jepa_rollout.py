"""EPM-JEPA's rollout readout: the episodic protocol's tables on D_k, the k-step latent rollout error
(`hf_jepa.metrics.epm_rollout`), and the pre-registered outcome class for it. Called by `reproduce_episodic` when
`readout_steps` is set (`hf-jepa reproduce epm-jepa --set protocol=rollout`, or `protocol=episodic` with the options);
not a family of its own.

Per seed and track it records D_k for every k of `readout_steps` with a same-g, an other-g (the farthest evaluation
gravity's support) and an empty buffer, adaptation without gradient steps on D_k (buffer from n support sequences of
each unseen gravity), and, with `specialist_gravity`, the upper bound on what knowing g is worth: a track-A predictor
trained on episodes of that gravity alone against the mixed-gravity track A, both scored at that gravity.

The outcome class (`rollout_outcome`) is fixed here and in research/epm_jepa/rollout/README.md before any number.
"""

import statistics
from typing import Any

from ..metrics.epm_rollout import rollout_adaptation_curve, rollout_errors, rollout_swap_ablation
from ..modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES
from .formatting import mean_spread
from .result import mean_and_std, percent_better

# The registered design (`protocol=rollout`): D_1, D_5, D_10, trained on the 10-step rollout loss, and the specialist
# upper bound at a large seen gravity. The gravities are hf_jepa.data.moving_mnist's ROLLOUT_* constants.
ROLLOUT_READOUT_STEPS = (1, 5, 10)
ROLLOUT_LOSS_STEPS = 10
ROLLOUT_SPECIALIST_GRAVITY = 1.5
BUFFER_KINDS = ("same", "different", "empty")
MEMORY_TRACKS = ("ei", "epm")


def rollout_outcome(same_vs_other_percent: list[float], k: int) -> str:
    """Pre-registered: per seed, how much better (%) D_k (mean over evaluation gravities) is with a same-g buffer than
    with the other-g buffer, at the largest k of the readout (k = 10 in the registered run). The memory pays when the
    mean over seeds exceeds the seed spread, the sample std over seeds of those per-seed differences (so the mean is
    > 0); otherwise it is not shown to pay. A spread needs at least 2 seeds."""
    if len(same_vs_other_percent) < 2:
        return "not measured (a seed spread needs at least 2 seeds)"
    mean, std = mean_and_std(same_vs_other_percent)
    if mean > std:
        return f"memory pays at k={k}: same-g beats other-g by more than the seed spread"
    return f"memory not shown to pay at k={k}: same-g does not beat other-g by more than the seed spread"


def _keyed(mapping: dict) -> dict:
    """JSON keys: gravities, step counts and support counts as strings, nested."""
    return {str(key): _keyed(value) if isinstance(value, dict) else value for key, value in mapping.items()}


def measure_rollout(model, episodes: dict, readout_steps, supports, unseen) -> dict[str, Any]:
    """One trained model's rollout record: `swap` (per gravity, per buffer kind, per k), `copy_last` (per gravity, per
    k) and, for tracks B and C, `adaptation` on the `unseen` gravities (per gravity, per support count, per k)."""
    swap = rollout_swap_ablation(model, episodes, readout_steps)
    record: dict[str, Any] = {
        "swap": _keyed({g: {kind: row[kind] for kind in BUFFER_KINDS} for g, row in swap.items()}),
        "copy_last": _keyed({g: row["copy_last"] for g, row in swap.items()}),
    }
    if model.config.track in MEMORY_TRACKS and supports:
        chosen = {g: e for g, e in episodes.items() if g in unseen}
        record["adaptation"] = _keyed(rollout_adaptation_curve(model, chosen, supports, readout_steps))
    return record


def measure_specialist(specialist, mixed, episode: dict, gravity: float, readout_steps) -> dict[str, Any]:
    """The upper bound on knowing g: D_k at `gravity` of a track-A model trained on that gravity alone (`specialist`)
    and of the mixed-gravity track A (`mixed`), on the same query sequences (neither has a buffer)."""
    return {
        "gravity": gravity,
        "specialist": _keyed(
            {k: v["normalized_error"] for k, v in rollout_errors(specialist, episode["query"], readout_steps).items()}
        ),
        "mixed": _keyed(
            {k: v["normalized_error"] for k, v in rollout_errors(mixed, episode["query"], readout_steps).items()}
        ),
    }


def _over_gravities(record: dict, kind: str, k: str, gravities=None) -> float:
    """D_k of one buffer kind, averaged over the record's gravities (or those of `gravities`)."""
    rows = record["swap"]
    return statistics.fmean(rows[g][kind][k] for g in rows if gravities is None or g in gravities)


def summarize_rollout(per_seed: list[dict], readout_steps, supports) -> dict[str, Any]:
    """Means and sample stds over seeds (with the per-seed values) of every rollout table entry, C vs B and C vs A
    per k, and the pre-registered outcome of each memory track at the largest k."""
    steps = [str(k) for k in sorted(readout_steps)]
    tracks = [t for t in per_seed[0]["tracks"] if "rollout" in per_seed[0]["tracks"][t]]
    records = {t: [seed["tracks"][t]["rollout"] for seed in per_seed] for t in tracks}
    summary: dict[str, Any] = {"readout_steps": [int(k) for k in steps], "tracks": {}, "outcome": {}}
    for track, entries in records.items():
        per_k = {}
        for k in steps:
            row = {}
            for kind in BUFFER_KINDS:
                values = [_over_gravities(e, kind, k) for e in entries]
                row[kind], row[f"{kind}_per_seed"] = mean_and_std(values), values
            gaps = [percent_better(_over_gravities(e, "same", k), _over_gravities(e, "different", k)) for e in entries]
            row["same_vs_different_percent"], row["same_vs_different_per_seed"] = mean_and_std(gaps), gaps
            row["same_vs_empty_percent"] = mean_and_std(
                percent_better(_over_gravities(e, "same", k), _over_gravities(e, "empty", k)) for e in entries
            )
            per_k[k] = row
        stats: dict[str, Any] = {"per_k": per_k}
        if "adaptation" in entries[0] and supports:
            counts = [str(n) for n in sorted(supports)]
            curve, gains = {}, {}
            for k in steps:
                curve[k] = {
                    n: mean_and_std(statistics.fmean(c[n][k] for c in e["adaptation"].values()) for e in entries)
                    for n in counts
                }
                if len(counts) > 1:
                    gains[k] = mean_and_std(
                        percent_better(
                            statistics.fmean(c[counts[-1]][k] for c in e["adaptation"].values()),
                            statistics.fmean(c[counts[0]][k] for c in e["adaptation"].values()),
                        )
                        for e in entries
                    )
            stats["adaptation"], stats["adaptation_gain_percent"] = curve, gains
            stats["adaptation_gravities"] = sorted(float(g) for g in entries[0]["adaptation"])
        if track in MEMORY_TRACKS:
            summary["outcome"][track] = rollout_outcome(per_k[steps[-1]]["same_vs_different_per_seed"], int(steps[-1]))
        summary["tracks"][track] = stats
    reference = records.get("vanilla") or next(iter(records.values()))
    summary["copy_last"] = {
        k: mean_and_std(statistics.fmean(row[k] for row in e["copy_last"].values()) for e in reference) for k in steps
    }
    summary["comparisons"] = {}
    for name, ours, theirs in (("C vs B", "epm", "ei"), ("C vs A", "epm", "vanilla"), ("B vs A", "ei", "vanilla")):
        if ours in records and theirs in records:
            summary["comparisons"][name] = {}
            for k in steps:
                values = [
                    percent_better(_over_gravities(a, "same", k), _over_gravities(b, "same", k))
                    for a, b in zip(records[ours], records[theirs])
                ]
                summary["comparisons"][name][k] = {"percent": mean_and_std(values), "per_seed": values}
    specialists = [seed["specialist"] for seed in per_seed if seed.get("specialist")]
    if specialists:
        summary["specialist"] = {"gravity": specialists[0]["gravity"], "per_k": {}}
        for k in steps:
            worth = [percent_better(s["specialist"][k], s["mixed"][k]) for s in specialists]
            summary["specialist"]["per_k"][k] = {
                "specialist": mean_and_std(s["specialist"][k] for s in specialists),
                "mixed": mean_and_std(s["mixed"][k] for s in specialists),
                "worth_percent": mean_and_std(worth),
                "worth_per_seed": worth,
            }
    return summary


def _pct(value) -> str:
    return "-" if value is None else f"{value[0]:+.2f}% +- {value[1]:.2f}"


def _seeds(values) -> str:
    return ", ".join(f"{v:.4f}" for v in values)


def format_rollout_tables(summary: dict[str, Any], gravities_text: str = "", unseen_text: str = "") -> str:
    """Markdown tables of the rollout readout: buffer swap on D_k with the outcome, C vs B / C vs A, adaptation on
    D_k, and the specialist upper bound."""
    steps = [str(k) for k in summary["readout_steps"]]
    lines = [
        f"**(e) Rollout readout D_k** (k-step latent rollout from every context window, buffer fixed; mean over "
        f"gravities {gravities_text}; mean +- std over seeds; fp32, while (a)-(d) read the trained models through "
        "the trainer's bf16 autocast, so D_1 differs from (a)'s D by that rounding)",
        "",
        "| Track | k | same-g buffer | other-g buffer | empty buffer | same vs other (per seed) | same vs empty |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for track, stats in summary["tracks"].items():
        for k in steps:
            row = stats["per_k"][k]
            lines.append(
                f"| {TRACK_NAMES[track]} | {k} | {mean_spread(row['same'])} (seeds {_seeds(row['same_per_seed'])}) | "
                f"{mean_spread(row['different'])} | {mean_spread(row['empty'])} | {_pct(row['same_vs_different_percent'])} "
                f"({', '.join(f'{v:+.2f}%' for v in row['same_vs_different_per_seed'])}) | "
                f"{_pct(row['same_vs_empty_percent'])} |"
            )
    lines.append(
        "| copy the last latent | "
        + " / ".join(steps)
        + " | "
        + " / ".join(mean_spread(summary["copy_last"][k]) for k in steps)
        + " | | | | |"
    )
    lines += ["", f"Pre-registered outcome at k = {steps[-1]} (same-g vs other-g beyond the seed spread):"]
    lines += [f"- {TRACK_NAMES[track]}: {outcome}" for track, outcome in summary["outcome"].items()]
    if summary["comparisons"]:
        lines += [
            "",
            "| Comparison (same-g buffer; % lower D_k) | " + " | ".join(f"k={k}" for k in steps) + " |",
            "|---|" + "---:|" * len(steps),
        ]
        for name, per_k in summary["comparisons"].items():
            lines.append(f"| {name} | " + " | ".join(_pct(per_k[k]["percent"]) for k in steps) + " |")
    adapted = {t: s for t, s in summary["tracks"].items() if "adaptation" in s}
    if adapted:
        counts = list(next(iter(next(iter(adapted.values()))["adaptation"].values())))
        lines += [
            "",
            f"**(f) Adaptation without gradient steps on D_k** (unseen g = {unseen_text}, buffer from n support "
            "sequences, no optimiser step)",
            "",
            "| Track | k | " + " | ".join(f"n={n}" for n in counts) + " | gain n_max vs 0 |",
            "|---|---:|" + "---:|" * len(counts) + "---:|",
        ]
        for track, stats in adapted.items():
            for k in steps:
                cells = " | ".join(mean_spread(stats["adaptation"][k][n]) for n in counts)
                lines.append(
                    f"| {TRACK_NAMES[track]} | {k} | {cells} | {_pct(stats['adaptation_gain_percent'].get(k))} |"
                )
    if "specialist" in summary:
        bound = summary["specialist"]
        lines += [
            "",
            f"**(g) What knowing g is worth (upper bound)**: track A trained on g = {bound['gravity']:g} alone vs on "
            f"the mixed gravities, D_k at g = {bound['gravity']:g} (the specialist also sees more data at its g)",
            "",
            "| k | A, mixed g | A, this g alone | specialist better by (per seed) |",
            "|---:|---:|---:|---:|",
        ]
        for k in steps:
            row = bound["per_k"][k]
            seeds = ", ".join(f"{v:+.2f}%" for v in row["worth_per_seed"])
            lines.append(
                f"| {k} | {mean_spread(row['mixed'])} | {mean_spread(row['specialist'])} | {_pct(row['worth_percent'])} ({seeds}) |"
            )
    return "\n".join(lines)


__all__ = [
    "ROLLOUT_LOSS_STEPS",
    "ROLLOUT_READOUT_STEPS",
    "ROLLOUT_SPECIALIST_GRAVITY",
    "format_rollout_tables",
    "measure_rollout",
    "measure_specialist",
    "rollout_outcome",
    "summarize_rollout",
]
