"""EPM-JEPA recipe: Moving-MNIST world models under a gravity shift, the experience phase, and the pre-registered
three-track comparison.

Protocol (the same data for every track; see docs in README "EPM-JEPA"):

1. `stage="pretrain"`: a model learns the world without gravity (g = 0, MNIST train digits). The reproduction
   pretrains one vanilla base per seed and starts all three tracks from it, so they share encoder, EMA target,
   predictor base and the gate's surprisal statistics exactly, and differ only in how they use experience.
2. `stage="adapt"`, the experience phase: n optimiser steps on shifted sequences (g ~ U(0, 0.5], MNIST train digits,
   identical batches for every track), with a linearly decaying learning rate. The context encoder trains in every
   track (`adapt_encoder`) and the EMA target keeps following it. Track A trains its predictor; tracks B and C keep
   the predictor base frozen and train their memory (B: encoder, aggregator, injection; C: the same plus the
   hypernetwork and LoRA `U`/`V`). The surprisal gate keeps running and fills the buffer.
3. D_shift(n) is the normalised error (`hf_jepa.metrics.world_model`) of one-step predictions on held-out shifted
   sequences (MNIST test digits, a fixed evaluation seed) after n experience steps, with the buffer frozen.
"""

import copy
import json
import logging
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..data import MnistSplits
from ..data.moving_mnist import SHIFT_GRAVITY, TRAIN_GRAVITY, MovingMnist
from ..metrics.world_model import evaluate_world_model, parameter_drift, plot_world_model_diagnostics
from ..modeling.epm_jepa import EpmJepaConfig, EpmJepaModel
from ..modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES


logger = logging.getLogger(__name__)

STAGES = ("pretrain", "adapt")
# Config fields a track may set on top of a base it adapts from (everything else must match the base).
EXPERIENCE_FIELDS = (
    "track", "buffer_capacity", "buffer_entry", "write_per_event", "surprisal_threshold_std", "gate_warmup_updates",
    "memory_dim", "memory_num_layers", "memory_num_heads", "lora_rank", "lora_alpha", "lora_target_modules",
    "hypernetwork_hidden_size",
)
EVAL_SEED = 10_007


@dataclass
class EpmJepaDataArguments:
    """Data and protocol settings of the EPM-JEPA recipe (YAML keys / `--set` names)."""

    data: str | None = None
    stage: str = "pretrain"
    init_from: str | None = None
    sequence_length: int = 8
    num_digits: int = 2
    train_gravity: float = TRAIN_GRAVITY
    shift_gravity_min: float = SHIFT_GRAVITY[0]
    shift_gravity_max: float = SHIFT_GRAVITY[1]
    adapt_encoder: bool = True
    eval_sequences: int = 256
    eval_sequence_length: int = 16
    eval_every: int = 10
    plot: bool = True

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {self.stage!r}")
        if self.stage == "adapt" and not self.init_from:
            raise ValueError("stage='adapt' needs init_from: the pretrained base model (a directory or Hub id)")
        if self.eval_sequences < 2 or self.eval_every < 0:
            raise ValueError("eval_sequences must be >= 2 and eval_every >= 0")

    @property
    def shift_gravity(self) -> tuple[float, float]:
        return (self.shift_gravity_min, self.shift_gravity_max)


def set_trainable_parts(model: EpmJepaModel, stage: str, adapt_encoder: bool = True) -> list[str]:
    """Freeze/unfreeze parameters for a stage; returns the names of the trainable parts.

    pretrain: everything but the EMA target. adapt: the context encoder (if `adapt_encoder`) plus, by track, the
    predictor (A) or the memory pathway with the predictor base frozen (B: memory + injection; C: memory +
    hypernetwork + LoRA `U`/`V`)."""
    track = model.config.track
    if stage == "pretrain":
        parts = {"context_encoder", "predictor", "experience_encoder", "experience_injection", "hypernetwork"}
    else:
        parts = {"vanilla": {"predictor"}, "ei": {"experience_encoder", "experience_injection"},
                 "epm": {"experience_encoder", "hypernetwork"}}[track]
        parts = parts | ({"context_encoder"} if adapt_encoder else set())
    trainable = set()
    for name, parameter in model.named_parameters():
        top = name.split(".")[0]
        is_lora = ".lora_A." in name or ".lora_B." in name
        wanted = top in parts or (is_lora and track == "epm")
        parameter.requires_grad_(wanted)
        if wanted:
            trainable.add("predictor LoRA" if is_lora else top)
    model.freeze_target_encoder()
    return sorted(trainable)


class EpmJepaRecipe:
    name = "epm-jepa"

    def __init__(self, config: EpmJepaConfig, data_args: EpmJepaDataArguments | None = None, seed: int = 0,
                 splits: MnistSplits | None = None, eval_pixels: dict[str, torch.Tensor] | None = None):
        self.config = config
        self.data_args = args = data_args or EpmJepaDataArguments()
        self.splits = splits or MnistSplits(args.data)
        gravity = args.train_gravity if args.stage == "pretrain" else args.shift_gravity
        self.world = MovingMnist(
            images=self.splits.train_images, labels=self.splits.train_labels, sequence_length=args.sequence_length,
            num_digits=args.num_digits, gravity=gravity, canvas_size=config.image_size, seed=seed,
        )
        self._eval_pixels = eval_pixels
        self._built = False
        self.history: list[dict] = []
        self._target_snapshot: list[torch.Tensor] | None = None
        logger.info("EPM-JEPA %s stage, track %s: training sequences with gravity %s from %s", args.stage,
                    config.track, gravity, self.splits.source)

    # ------------------------------------------------------------------ evaluation data

    def eval_pixels(self) -> dict[str, torch.Tensor]:
        """Held-out sequences from MNIST test digits, the same for every run: `shift` (g in (0, 0.5]) and `train` (g=0)."""
        if self._eval_pixels is None:
            self._eval_pixels = build_eval_pixels(self.splits, self.data_args, self.config.image_size)
        return self._eval_pixels

    # ------------------------------------------------------------------ Recipe protocol

    def build_model(self) -> EpmJepaModel:
        args = self.data_args
        if args.stage == "pretrain":
            model = EpmJepaModel(self.config)
        else:
            overrides = {field: getattr(self.config, field) for field in EXPERIENCE_FIELDS}
            model = EpmJepaModel.from_base(args.init_from, **overrides)
            self.config = model.config
        self._built = True
        parts = set_trainable_parts(model, args.stage, args.adapt_encoder)
        logger.info("Trainable parts: %s", ", ".join(parts))
        self._target_snapshot = [p.detach().clone() for p in model.target_encoder.parameters()]
        if args.stage == "adapt" and args.eval_every:
            self.history.append({"step": 0, **self._diagnostics(model, with_eval=True)})
        return model

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        return {"pixel_values": self.world.sample_batch(batch_size, step=step, rank=rank)["pixel_values"]}

    def ema_pairs(self, model: EpmJepaModel):
        return [(model.context_encoder, model.target_encoder)]

    def ema_schedule(self, model: EpmJepaModel) -> tuple[float, float]:
        return model.config.ema_momentum, model.config.ema_momentum_end

    def finalize(self, model: EpmJepaModel) -> None:
        pass

    def _diagnostics(self, model: EpmJepaModel, with_eval: bool) -> dict[str, float]:
        current = [p.detach() for p in model.target_encoder.parameters()]
        values = {"ema_target_drift": parameter_drift(current, self._target_snapshot)}
        self._target_snapshot = [p.clone() for p in current]
        if with_eval:
            values["d_shift"] = evaluate_world_model(model, self.eval_pixels()["shift"])["normalized_error"]
        return values

    def on_log(self, model: EpmJepaModel, step: int, record: dict) -> dict[str, float]:
        every = self.data_args.eval_every
        values = self._diagnostics(model, with_eval=bool(every) and self.data_args.stage == "adapt" and step % every == 0)
        self.history.append({**record, **values, "step": step})
        return values

    def evaluate(self, model: EpmJepaModel, output_dir: str | None = None) -> dict[str, Any]:
        pixels = self.eval_pixels()
        shift = evaluate_world_model(model, pixels["shift"])
        train = evaluate_world_model(model, pixels["train"])
        metrics: dict[str, Any] = {
            "track": model.config.track,
            "d_shift": shift["normalized_error"],
            "d_shift_copy_last": shift["copy_last_error"],
            "d_train": train["normalized_error"],
            "d_train_copy_last": train["copy_last_error"],
            "gate_fire_rate_shift": shift["gate_fire_rate"],
            "gate_fire_rate_train": train["gate_fire_rate"],
            "sigma_embed_shift": shift["sigma_embed"],
            "eval_predictions": shift["num_predictions"],
            "data_source": self.splits.source,
        }
        if self._built:  # a training run of this recipe (not `hf-jepa eval` of a saved model, whose stage is unknown)
            metrics["stage"] = self.data_args.stage
        if model.experience_buffer is not None:
            metrics["buffer_occupancy"] = model.experience_buffer.occupancy / model.experience_buffer.capacity
            metrics["buffer_turnover"] = int(model.experience_buffer.num_writes) / model.experience_buffer.capacity
        if output_dir and self.data_args.plot and self.history:
            path = Path(output_dir) / "diagnostics.png"
            plot_world_model_diagnostics({TRACK_NAMES[model.config.track]: self.history}, path)
            metrics["diagnostics_plot"] = path.name
        return metrics

    def save_artifacts(self, model: EpmJepaModel, output_dir: str, metrics: dict, args) -> None:
        from ..hub import render_epm_jepa_card

        if model.config.track == "epm":
            model.save_experience_adapter(str(Path(output_dir) / "experience_adapter"))
        with open(Path(output_dir) / "diagnostics.jsonl", "w") as handle:
            for record in self.history:
                handle.write(json.dumps(record) + "\n")
        card = render_epm_jepa_card(model.config, metrics, training_args=args, data_args=self.data_args)
        card.save(str(Path(output_dir) / "README.md"))


def build_eval_pixels(splits: MnistSplits, data_args: EpmJepaDataArguments, image_size: int) -> dict[str, torch.Tensor]:
    """The fixed evaluation sets: sequences of MNIST test digits with the shifted and the training gravity."""
    sets = {}
    for name, gravity in (("shift", data_args.shift_gravity), ("train", data_args.train_gravity)):
        world = MovingMnist(
            images=splits.test_images, labels=splits.test_labels, sequence_length=data_args.eval_sequence_length,
            num_digits=data_args.num_digits, gravity=gravity, canvas_size=image_size, seed=EVAL_SEED,
        )
        sets[name] = world.sample_batch(data_args.eval_sequences)["pixel_values"]
    return sets


# ------------------------------------------------------------------------------------------------ reproduction

# Shared by every run of the reproduction; `hf-jepa train epm-jepa` uses the pretraining values by default.
TRAINING_DEFAULTS = dict(max_steps=2000, per_device_batch_size=32, learning_rate=2e-3, weight_decay=0.05,
                         warmup_steps=50, mixed_precision="bf16", logging_steps=50)
ADAPT_DEFAULTS = dict(per_device_batch_size=32, learning_rate=1e-3, weight_decay=0.0, warmup_steps=0,
                      mixed_precision="bf16", logging_steps=5)
TRACKS_IN_ORDER = ("vanilla", "ei", "epm")
PAPER_D_SHIFT = {"vanilla": 0.8000, "ei": 0.8238, "epm": 0.7848}
PAPER_D_SHIFT_STD = {"epm": 0.0078}
OUTCOME_THRESHOLD_PERCENT = 5.0
# `full` is the configuration's defaults (the GPU-size model).
PRESETS = {"tiny": EpmJepaConfig.tiny, "cpu_fast": EpmJepaConfig.cpu_fast, "full": EpmJepaConfig}


def relative_improvement(ours: float, theirs: float) -> float:
    """How much lower (better) `ours` is than `theirs`, in percent of `theirs`."""
    return 100.0 * (theirs - ours) / theirs


def preregistered_outcome(delta_c_vs_b: float, threshold: float = OUTCOME_THRESHOLD_PERCENT) -> str:
    """The paper's pre-registered classes for C vs B: A (C better by > 5%), B (C worse by > 5%), C (null)."""
    if delta_c_vs_b > threshold:
        return "A (EPM better than EI by > 5%)"
    if delta_c_vs_b < -threshold:
        return "B (EPM worse than EI by > 5%)"
    return "C (null: abs(delta) < 5%)"


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize_runs(runs: list[dict]) -> dict[str, Any]:
    """Per-track D_shift mean and sample std over seeds, the deltas and the outcome class."""
    per_track = {}
    for track in TRACKS_IN_ORDER:
        values = [r["d_shift"] for r in runs if r["track"] == track]
        if values:
            mean, std = _mean_std(values)
            per_track[track] = {"d_shift_mean": mean, "d_shift_std": std, "seeds": len(values),
                                "d_shift_per_seed": values}
    summary: dict[str, Any] = {"tracks": per_track}
    if {"ei", "epm"} <= per_track.keys():
        summary["delta_c_vs_b_percent"] = relative_improvement(per_track["epm"]["d_shift_mean"], per_track["ei"]["d_shift_mean"])
        summary["outcome"] = preregistered_outcome(summary["delta_c_vs_b_percent"])
    if {"vanilla", "epm"} <= per_track.keys():
        summary["delta_c_vs_a_percent"] = relative_improvement(per_track["epm"]["d_shift_mean"], per_track["vanilla"]["d_shift_mean"])
    if {"vanilla", "ei"} <= per_track.keys():
        summary["delta_b_vs_a_percent"] = relative_improvement(per_track["ei"]["d_shift_mean"], per_track["vanilla"]["d_shift_mean"])
    bases = [r for r in runs if r["track"] == "base"]
    if bases:
        for key in ("d_shift", "d_shift_copy_last", "d_train", "gate_fire_rate_shift", "gate_fire_rate_train"):
            summary[f"base_{key}"] = _mean_std([r[key] for r in bases])
    return summary


def format_results_table(summary: dict[str, Any]) -> str:
    """Markdown: D_shift per track (ours mean +- std over seeds, the paper's beside), deltas, outcome, references."""
    n = summary.get("experience_steps", 50)
    lines = [f"| Track | D_shift(n={n}), ours | per seed | paper (n=50) |", "|---|---:|---|---:|"]
    for track, stats in summary["tracks"].items():
        paper = PAPER_D_SHIFT[track]
        paper_text = f"{paper:.4f}" + (f" +- {PAPER_D_SHIFT_STD[track]:.4f}" if track in PAPER_D_SHIFT_STD else "")
        seeds = ", ".join(f"{v:.4f}" for v in stats["d_shift_per_seed"])
        lines.append(f"| {TRACK_NAMES[track]} | {stats['d_shift_mean']:.4f} +- {stats['d_shift_std']:.4f} | {seeds} | {paper_text} |")
    lines += ["", "| Comparison | ours | paper |", "|---|---:|---:|"]
    if "delta_c_vs_b_percent" in summary:
        lines.append(f"| C vs B (EPM better than EI by) | {summary['delta_c_vs_b_percent']:+.2f}% | 4.74% |")
        lines.append(f"| Pre-registered outcome | {summary['outcome']} | C (null) |")
    if "delta_c_vs_a_percent" in summary:
        lines.append(f"| C vs A (EPM better than vanilla by) | {summary['delta_c_vs_a_percent']:+.2f}% | 1.90% |")
    if "delta_b_vs_a_percent" in summary:
        lines.append(f"| B vs A (EI better than vanilla by) | {summary['delta_b_vs_a_percent']:+.2f}% | "
                     f"{relative_improvement(PAPER_D_SHIFT['ei'], PAPER_D_SHIFT['vanilla']):.2f}% |")
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
    experience_steps: int = 50,
    preset: str = "cpu_fast",
    tracks: tuple[str, ...] = TRACKS_IN_ORDER,
) -> dict[str, Any]:
    """The pre-registered comparison: per seed, pretrain a vanilla base on g = 0, then run the experience phase
    (`experience_steps` = n) for each track from that base and measure D_shift(n). `quick=True` is a smoke run
    (tiny model, a few steps: not a result). Writes `results.json`, `results.md` and `diagnostics.png`."""
    from .trainer import JepaTrainer, TrainingArguments

    output_dir = Path(output_dir or "outputs/reproduce-epm-jepa")
    splits = MnistSplits(data)
    if quick:
        preset, pretrain_steps, experience_steps = "tiny", 4, 4
    pretrain_steps = pretrain_steps or TRAINING_DEFAULTS["max_steps"]
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    make_config = PRESETS[preset]
    base_config = make_config(track="vanilla")
    data_args = EpmJepaDataArguments(data=data, eval_sequences=16 if quick else 256)
    eval_pixels = build_eval_pixels(splits, data_args, base_config.image_size)
    runs, histories, first_seed_runs = [], {}, []
    for seed in seeds:
        base_dir = output_dir / f"seed{seed}" / "base"
        logger.info("Seed %d: pretraining the shared vanilla base (%d steps, g = 0)", seed, pretrain_steps)
        settings = {**TRAINING_DEFAULTS, "max_steps": pretrain_steps, "logging_steps": max(1, pretrain_steps // 10)}
        recipe = EpmJepaRecipe(base_config, data_args, seed=seed, splits=splits, eval_pixels=eval_pixels)
        metrics = JepaTrainer(recipe, TrainingArguments(output_dir=str(base_dir), seed=seed, **settings)).train().metrics
        runs.append({**metrics, "track": "base", "seed": seed})
        for track in tracks:
            adapt_args = EpmJepaDataArguments(**{**asdict(data_args), "stage": "adapt", "init_from": str(base_dir),
                                                 "eval_every": 1 if quick else 10})
            config = make_config(track=track)
            settings = {**ADAPT_DEFAULTS, "max_steps": experience_steps,
                        "logging_steps": 1 if quick else ADAPT_DEFAULTS["logging_steps"]}
            recipe = EpmJepaRecipe(config, adapt_args, seed=seed, splits=splits, eval_pixels=eval_pixels)
            run_dir = output_dir / f"seed{seed}" / track
            logger.info("Seed %d, track %s: %d experience steps on the shifted distribution", seed, track, experience_steps)
            training_args = TrainingArguments(output_dir=str(run_dir), seed=seed, **settings)
            metrics = JepaTrainer(recipe, training_args).train().metrics
            runs.append({**metrics, "track": track, "seed": seed, "model_dir": str(run_dir)})
            histories.setdefault(track, []).append(recipe.history)
            if seed == seeds[0]:
                first_seed_runs.append((run_dir, metrics, training_args, adapt_args))
    summary = summarize_runs(runs)
    summary.update(experience_steps=experience_steps, pretrain_steps=pretrain_steps, seeds=list(seeds), preset=preset,
                   data_source=splits.source, quick=quick)
    output_dir.mkdir(parents=True, exist_ok=True)
    plot_world_model_diagnostics({TRACK_NAMES[t]: _mean_history(h) for t, h in histories.items()},
                                 output_dir / "diagnostics.png",
                                 title=f"EPM-JEPA experience phase (mean over {len(seeds)} seeds)")
    (output_dir / "results.json").write_text(json.dumps({"summary": summary, "runs": runs}, indent=2, default=str))
    (output_dir / "results.md").write_text(format_results_table(summary) + "\n")
    # The first seed's model of each track ships with the whole comparison on its card.
    from ..hub import render_epm_jepa_card

    for run_dir, metrics, training_args, adapt_args in first_seed_runs:
        config = EpmJepaConfig.from_pretrained(run_dir)
        card = render_epm_jepa_card(config, metrics, training_args=training_args, data_args=adapt_args,
                                    reproduction=summary)
        card.save(str(run_dir / "README.md"))
    return summary


def _mean_history(histories: list[list[dict]]) -> list[dict]:
    """Average log records of several seeds step by step (keys present in all of them)."""
    by_step: dict[int, list[dict]] = {}
    for history in histories:
        for record in history:
            by_step.setdefault(record["step"], []).append(record)
    merged = []
    for step in sorted(by_step):
        records = by_step[step]
        keys = set.intersection(*(set(r) for r in records)) - {"step"}
        merged.append({"step": step, **{k: statistics.fmean(float(r[k]) for r in records) for k in keys
                                        if all(isinstance(r[k], (int, float)) and math.isfinite(r[k]) for r in records)}})
    return merged


__all__ = [
    "EpmJepaDataArguments",
    "EpmJepaRecipe",
    "TRAINING_DEFAULTS",
    "build_eval_pixels",
    "format_results_table",
    "preregistered_outcome",
    "relative_improvement",
    "reproduce_epm_jepa",
    "set_trainable_parts",
    "summarize_runs",
]
