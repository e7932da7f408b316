"""EPM-JEPA reproduction: the pre-registered three-track comparison (vanilla / experience injection / EPM) of
D_shift after n experience steps from one shared pretrained base per seed."""

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..cards.epm_jepa import render_card
from ..data import MnistSplits
from ..data.moving_mnist import (
    EPISODIC_EVAL_GRAVITIES,
    EPISODIC_TRAIN_GRAVITIES,
    ROLLOUT_EVAL_GRAVITIES,
    ROLLOUT_TRAIN_GRAVITIES,
)
from ..metrics.world_model import plot_world_model_diagnostics
from ..modeling.epm_jepa import EpmJepaConfig
from ..modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES
from ..paper_figures import (
    EPM_JEPA_C_VS_A_PERCENT,
    EPM_JEPA_C_VS_B_PERCENT,
    EPM_JEPA_D_SHIFT,
    EPM_JEPA_D_SHIFT_STD,
    EPM_JEPA_OUTCOME_THRESHOLD_PERCENT,
)
from ..progress import progress
from ..recipes.epm_jepa import ADAPT_DEFAULTS, TRAINING_DEFAULTS, EpmJepaDataArguments, EpmJepaRecipe, build_eval_pixels
from ..recipes.family import PRESETS
from ..trainers import JepaTrainer, TrainingArguments
from .epm_jepa_episodic import reproduce_episodic
from .epm_jepa_rollout import ROLLOUT_LOSS_STEPS, ROLLOUT_READOUT_STEPS, ROLLOUT_SPECIALIST_GRAVITY
from .result import ReproductionResult, mean_and_std, mean_history

logger = logging.getLogger(__name__)

FAMILY = "epm-jepa"
TRACKS_IN_ORDER = ("vanilla", "ei", "epm")
PROTOCOLS = ("current", "episodic", "rollout")
# What `None` means for the rollout options, per protocol: "episodic" keeps the measured protocol (one-step readout
# and loss, the small gravities), "rollout" is the registered design of research/epm_jepa/rollout/README.md.
PROTOCOL_DEFAULTS = {
    "episodic": dict(
        readout_steps=(),
        rollout_loss_steps=1,
        train_gravities=EPISODIC_TRAIN_GRAVITIES,
        eval_gravities=EPISODIC_EVAL_GRAVITIES,
        specialist_gravity=None,
    ),
    "rollout": dict(
        readout_steps=ROLLOUT_READOUT_STEPS,
        rollout_loss_steps=ROLLOUT_LOSS_STEPS,
        train_gravities=ROLLOUT_TRAIN_GRAVITIES,
        eval_gravities=ROLLOUT_EVAL_GRAVITIES,
        specialist_gravity=ROLLOUT_SPECIALIST_GRAVITY,
    ),
}


def relative_improvement(ours: float, theirs: float) -> float:
    """How much lower (better) `ours` is than `theirs`, in percent of `theirs`."""
    return 100.0 * (theirs - ours) / theirs


def preregistered_outcome(delta_c_vs_b: float, threshold: float = EPM_JEPA_OUTCOME_THRESHOLD_PERCENT) -> str:
    """The paper's pre-registered classes for C vs B: A (C better by > 5%), B (C worse by > 5%), C (null)."""
    if delta_c_vs_b > threshold:
        return "A (EPM better than EI by > 5%)"
    if delta_c_vs_b < -threshold:
        return "B (EPM worse than EI by > 5%)"
    return "C (null: abs(delta) < 5%)"


def summarize_runs(runs: list[dict]) -> dict[str, Any]:
    """Per-track D_shift mean and sample std over seeds, the deltas and the outcome class."""
    per_track = {}
    for track in TRACKS_IN_ORDER:
        values = [r["d_shift"] for r in runs if r["track"] == track]
        if values:
            mean, std = mean_and_std(values)
            per_track[track] = {
                "d_shift_mean": mean,
                "d_shift_std": std,
                "seeds": len(values),
                "d_shift_per_seed": values,
            }
    summary: dict[str, Any] = {"tracks": per_track}
    if {"ei", "epm"} <= per_track.keys():
        summary["delta_c_vs_b_percent"] = relative_improvement(
            per_track["epm"]["d_shift_mean"], per_track["ei"]["d_shift_mean"]
        )
        summary["outcome"] = preregistered_outcome(summary["delta_c_vs_b_percent"])
    if {"vanilla", "epm"} <= per_track.keys():
        summary["delta_c_vs_a_percent"] = relative_improvement(
            per_track["epm"]["d_shift_mean"], per_track["vanilla"]["d_shift_mean"]
        )
    if {"vanilla", "ei"} <= per_track.keys():
        summary["delta_b_vs_a_percent"] = relative_improvement(
            per_track["ei"]["d_shift_mean"], per_track["vanilla"]["d_shift_mean"]
        )
    bases = [r for r in runs if r["track"] == "base"]
    if bases:
        for key in ("d_shift", "d_shift_copy_last", "d_train", "gate_fire_rate_shift", "gate_fire_rate_train"):
            summary[f"base_{key}"] = mean_and_std([r[key] for r in bases])
    return summary


def format_results_table(summary: dict[str, Any]) -> str:
    """Markdown: D_shift per track (ours mean +- std over seeds, the paper's beside), deltas, outcome, references."""
    n = summary.get("experience_steps", 50)
    lines = [f"| Track | D_shift(n={n}), ours | per seed | paper (n=50) |", "|---|---:|---|---:|"]
    for track, stats in summary["tracks"].items():
        paper = EPM_JEPA_D_SHIFT[track]
        paper_text = f"{paper:.4f}" + (
            f" +- {EPM_JEPA_D_SHIFT_STD[track]:.4f}" if track in EPM_JEPA_D_SHIFT_STD else ""
        )
        seeds = ", ".join(f"{v:.4f}" for v in stats["d_shift_per_seed"])
        lines.append(
            f"| {TRACK_NAMES[track]} | {stats['d_shift_mean']:.4f} +- {stats['d_shift_std']:.4f} | {seeds} | {paper_text} |"
        )
    lines += ["", "| Comparison | ours | paper |", "|---|---:|---:|"]
    if "delta_c_vs_b_percent" in summary:
        lines.append(
            f"| C vs B (EPM better than EI by) | {summary['delta_c_vs_b_percent']:+.2f}% | {EPM_JEPA_C_VS_B_PERCENT:.2f}% |"
        )
        lines.append(f"| Pre-registered outcome | {summary['outcome']} | C (null) |")
    if "delta_c_vs_a_percent" in summary:
        lines.append(
            f"| C vs A (EPM better than vanilla by) | {summary['delta_c_vs_a_percent']:+.2f}% | {EPM_JEPA_C_VS_A_PERCENT:.2f}% |"
        )
    if "delta_b_vs_a_percent" in summary:
        lines.append(
            f"| B vs A (EI better than vanilla by) | {summary['delta_b_vs_a_percent']:+.2f}% | "
            f"{relative_improvement(EPM_JEPA_D_SHIFT['ei'], EPM_JEPA_D_SHIFT['vanilla']):.2f}% |"
        )
    if "base_d_shift" in summary:

        def fmt(key):
            mean, std = summary[key]
            return f"{mean:.4f} +- {std:.4f}"

        lines += [
            "",
            "| Pretrained base (n = 0, before any experience) | value |",
            "|---|---:|",
            f"| D on the training distribution (g = 0) | {fmt('base_d_train')} |",
            f"| D_shift (g in (0, 0.5]) | {fmt('base_d_shift')} |",
            f"| D_shift of copying the last latent | {fmt('base_d_shift_copy_last')} |",
            "| D of predicting the targets' mean | 1.0000 (by definition) |",
            f"| Gate firing rate, g = 0 / shifted | {fmt('base_gate_fire_rate_train')} / {fmt('base_gate_fire_rate_shift')} |",
        ]
    return "\n".join(lines)


def reproduce_epm_jepa(
    data: str | None = None,
    output_dir: str | None = None,
    quick: bool = False,
    seeds: tuple[int, ...] = (0, 1, 2),
    pretrain_steps: int | None = None,
    experience_steps: int = 0,
    preset: str = "cpu_fast",
    tracks: tuple[str, ...] = TRACKS_IN_ORDER,
    protocol: str = "current",
    episode_support: int = 8,
    adaptation_ks: tuple[int, ...] = (0, 1, 2, 4, 8, 16),
    freeze_at: tuple[int, ...] = (25, 50, 100, 150),
    lora_ranks: tuple[int, ...] = (2, 8, 32),
    weight_decays: tuple[float, ...] = (0.0, 0.1, 1.0),
    eval_every: int = 5,
    modulation_init: str | None = None,
    eval_sequences: int | None = None,
    readout_steps: tuple[int, ...] | None = None,
    rollout_loss_steps: int | None = None,
    train_gravities: tuple[float, ...] | None = None,
    eval_gravities: tuple[float, ...] | None = None,
    specialist_gravity: float | None = None,
) -> ReproductionResult:
    """The pre-registered comparison: per seed, pretrain a vanilla base on g = 0, then run the experience phase
    (`experience_steps` = n, default 50) for each track from that base and measure D_shift(n). `quick=True` is a
    smoke run (tiny model, a few steps: not a result). Writes `results.json`, `results.md` and `diagnostics.png`.

    `protocol="episodic"` runs the memory experiments of `epm_jepa_episodic` instead (one gravity per episode,
    buffer from the current episode; default n = 200): buffer swap, adaptation over `adaptation_ks`, D_shift(n)
    every `eval_every` steps, LoRA freezes at `freeze_at`, and track C over `lora_ranks` x `weight_decays`, with
    research/epm_jepa/memory_diagnosis/README.md). The options after `protocol` apply to it only, except
    `modulation_init`: track C's `EpmJepaConfig.modulation_init` in both protocols (None: the config's default,
    `"zero"`; the tables measured before that default changed pin `"unit"` in their commands).

    `protocol="rollout"` is the episodic protocol with the rollout readout (`epm_jepa_rollout`): D_k over
    `readout_steps`, every experience run trained on the `rollout_loss_steps`-step rollout loss, episodes from
    `train_gravities`, evaluation on `eval_gravities`, and the `specialist_gravity` upper bound; each of these options
    left at None takes the protocol's value (`PROTOCOL_DEFAULTS`; with "episodic": the measured protocol's).
    `eval_sequences` (None: 256, 16 with `quick`) are split over the evaluation gravities."""
    output_dir = Path(output_dir or "outputs/reproduce-epm-jepa")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(map(repr, PROTOCOLS))}; got {protocol!r}")
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {list(PRESETS)}, got {preset!r}")
    if protocol != "current":
        given = dict(
            readout_steps=readout_steps,
            rollout_loss_steps=rollout_loss_steps,
            train_gravities=train_gravities,
            eval_gravities=eval_gravities,
            specialist_gravity=specialist_gravity,
        )
        options = {k: PROTOCOL_DEFAULTS[protocol][k] if v is None else v for k, v in given.items()}
        if isinstance(options["readout_steps"], int):  # `--set readout_steps=10`
            options["readout_steps"] = (options["readout_steps"],)
        if quick:
            preset, pretrain_steps, experience_steps, eval_every, adaptation_ks = "tiny", 4, 4, 1, (0, 2)
            # The rollout smoke run skips the freeze and LoRA experiments (c, d): the episodic one covers them.
            freeze_at, lora_ranks, weight_decays = ((2,), (1, 2), (0.0,)) if protocol == "episodic" else ((), (), ())
        return reproduce_episodic(
            protocol=protocol,
            eval_sequences=eval_sequences or (16 if quick else 256),
            **options,
            data=data,
            output_dir=output_dir,
            quick=quick,
            seeds=tuple(seeds),
            pretrain_steps=pretrain_steps,
            experience_steps=experience_steps or 200,
            preset=preset,
            tracks=tuple(tracks),
            episode_support=episode_support,
            adaptation_ks=tuple(adaptation_ks),
            freeze_at=tuple(freeze_at),
            lora_ranks=tuple(lora_ranks),
            weight_decays=tuple(weight_decays),
            eval_every=eval_every,
            modulation_init=modulation_init,
        )
    experience_steps = experience_steps or 50
    splits = MnistSplits(data)
    if quick:
        preset, pretrain_steps, experience_steps = "tiny", 4, 4
    pretrain_steps = pretrain_steps or TRAINING_DEFAULTS["max_steps"]
    make_config = getattr(EpmJepaConfig, preset)
    base_config = make_config(track="vanilla")
    track_c_init = {} if modulation_init is None else {"modulation_init": modulation_init}
    data_args = EpmJepaDataArguments(data=data, eval_sequences=16 if quick else 256)
    eval_pixels = build_eval_pixels(splits, data_args, base_config.image_size)
    runs, histories, first_seed_runs = [], {}, []
    for seed in progress(seeds, "EPM-JEPA reproduction seeds"):
        base_dir = output_dir / f"seed{seed}" / "base"
        logger.info("Seed %d: pretraining the shared vanilla base (%d steps, g = 0)", seed, pretrain_steps)
        settings = {**TRAINING_DEFAULTS, "max_steps": pretrain_steps, "logging_steps": max(1, pretrain_steps // 10)}
        recipe = EpmJepaRecipe(base_config, data_args, seed=seed, splits=splits, eval_pixels=eval_pixels)
        metrics = (
            JepaTrainer(
                recipe, TrainingArguments(output_dir=str(base_dir), seed=seed, overwrite_output_dir=True, **settings)
            )
            .train()
            .metrics
        )
        runs.append({**metrics, "track": "base", "seed": seed})
        for track in tracks:
            adapt_args = EpmJepaDataArguments(
                **{**asdict(data_args), "stage": "adapt", "init_from": str(base_dir), "eval_every": 1 if quick else 10}
            )
            config = make_config(track=track, **track_c_init)
            settings = {
                **ADAPT_DEFAULTS,
                "max_steps": experience_steps,
                "logging_steps": 1 if quick else ADAPT_DEFAULTS["logging_steps"],
            }
            recipe = EpmJepaRecipe(config, adapt_args, seed=seed, splits=splits, eval_pixels=eval_pixels)
            run_dir = output_dir / f"seed{seed}" / track
            logger.info(
                "Seed %d, track %s: %d experience steps on the shifted distribution", seed, track, experience_steps
            )
            training_args = TrainingArguments(output_dir=str(run_dir), seed=seed, overwrite_output_dir=True, **settings)
            metrics = JepaTrainer(recipe, training_args).train().metrics
            runs.append({**metrics, "track": track, "seed": seed, "model_dir": str(run_dir)})
            histories.setdefault(track, []).append(recipe.history)
            if seed == seeds[0]:
                first_seed_runs.append((run_dir, metrics, training_args, adapt_args))
    summary = summarize_runs(runs)
    summary.update(
        experience_steps=experience_steps,
        pretrain_steps=pretrain_steps,
        seeds=list(seeds),
        preset=preset,
        modulation_init=make_config(track="epm", **track_c_init).modulation_init,
        data_source=splits.source,
        quick=quick,
    )
    result = ReproductionResult(FAMILY, summary, format_results_table(summary), output_dir)
    result.save(extra={"runs": runs})
    plot_world_model_diagnostics(
        {TRACK_NAMES[t]: mean_history(h) for t, h in histories.items()},
        output_dir / "diagnostics.png",
        title=f"EPM-JEPA experience phase (mean over {len(seeds)} seeds)",
    )
    # The first seed's model of each track ships with the whole comparison on its card.
    for run_dir, metrics, training_args, adapt_args in first_seed_runs:
        config = EpmJepaConfig.from_pretrained(run_dir)
        card = render_card(
            config,
            metrics,
            training_args=training_args,
            data_args=adapt_args,
            reproduction=result,
            base_model=adapt_args.init_from,
        )
        card.save(str(run_dir / "README.md"))
    return result


__all__ = [
    "format_results_table",
    "preregistered_outcome",
    "relative_improvement",
    "reproduce_epm_jepa",
    "summarize_runs",
]
