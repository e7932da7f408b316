"""EPM-JEPA recipe: Moving-MNIST world models under a gravity shift, pretraining and the experience phase (the
pre-registered three-track comparison built on it is in `hf_jepa.reproductions.epm_jepa`).

Protocol (the same data for every track; see docs/families/epm-jepa.md):

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

`protocol="episodic"` gives memory a job (the "current" protocol above draws a fresh g for every sequence and one
global FIFO, so the buffer can hardly tell the model the current sequence's g). Each experience step is one episode
(`hf_jepa.data.GravityEpisodes`): one gravity from `EPISODIC_TRAIN_GRAVITIES` (by default) for all its sequences; tracks B and C
reset the buffer and fill it from `episode_support` other sequences of the same episode before predicting (the
gate does not write). D_shift(n) is then the mean over `EPISODIC_EVAL_GRAVITIES` (two seen in training, two never
seen) of D on that gravity's query sequences with the buffer filled from that gravity's support sequences
(`hf_jepa.metrics.epm_memory.episodic_error`). Track A sees the same query sequences and no support. The
gravities are data arguments (`episode_gravities`, `episode_eval_gravities`; default the constants above).

`EpmJepaConfig.rollout_loss_steps = K > 1` trains any stage on the K-step latent rollout loss
(`EpmJepaModel.rollout_loss`) instead of the one-step loss; the sequences then need `context_length + K` frames
(checked here, naming `sequence_length` / `eval_sequence_length`). An experience run takes it from the config given
to the recipe, not from the base (`ADAPT_OBJECTIVE_FIELDS`).
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..cards.epm_jepa import ADAPTER_FOLDER, render_card, result_rows
from ..data import MnistSplits
from ..data.moving_mnist import (
    EPISODIC_EVAL_GRAVITIES,
    EPISODIC_TRAIN_GRAVITIES,
    EVAL_SEED,
    EVAL_SEQUENCE_LENGTH,
    EVAL_SEQUENCES,
    NUM_DIGITS,
    SEQUENCE_LENGTH,
    SHIFT_GRAVITY,
    TRAIN_GRAVITY,
    GravityEpisodes,
    MovingMnist,
    check_gravity_list,
    check_gravity_settings,
)
from ..metrics.epm_memory import mean_episodic_error
from ..metrics.world_model import evaluate_world_model, parameter_drift, plot_world_model_diagnostics
from ..modeling.epm_jepa import EpmJepaConfig, EpmJepaImageProcessor, EpmJepaModel
from ..modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES
from ..modeling.epm_jepa.modeling_epm_jepa import EXPERIENCE_ADAPTER_FIELDS
from ..trainers import Recipe
from ._checks import check_choice, check_count, check_model_folder, check_types
from ._saved import write_settings_and_card
from .family import Family

logger = logging.getLogger(__name__)

STAGES = ("pretrain", "adapt")
PROTOCOLS = ("current", "episodic")
# Objective fields an experience run sets on top of the base it starts from (not memory fields, so not recorded with
# the experience adapter): the experience phase may train on a multi-step rollout loss the base never saw.
ADAPT_OBJECTIVE_FIELDS = ("rollout_loss_steps",)


@dataclass
class EpmJepaDataArguments:
    """Data and protocol settings of the EPM-JEPA recipe (YAML keys / `--set` names). The Moving MNIST fields and
    their defaults are those of the shared `moving-mnist-gravity` dataset (`hf_jepa.data.moving_mnist`'s constants,
    checked by its `check_gravity_settings`)."""

    data: str | None = None
    stage: str = "pretrain"
    init_from: str | None = None
    sequence_length: int = SEQUENCE_LENGTH
    num_digits: int = NUM_DIGITS
    train_gravity: float = TRAIN_GRAVITY
    shift_gravity_min: float = SHIFT_GRAVITY[0]
    shift_gravity_max: float = SHIFT_GRAVITY[1]
    adapt_encoder: bool = True
    eval_sequences: int = EVAL_SEQUENCES
    eval_sequence_length: int = EVAL_SEQUENCE_LENGTH
    eval_every: int = 10
    plot: bool = True
    protocol: str = "current"
    episode_support: int = 8
    freeze_lora_at: int = 0
    # The episodic protocol's gravities (px/frame^2); None: EPISODIC_TRAIN_GRAVITIES / EPISODIC_EVAL_GRAVITIES.
    episode_gravities: list | None = None
    episode_eval_gravities: list | None = None

    def __post_init__(self):
        check_types(self)
        check_choice(self, "stage", STAGES)
        if self.stage == "adapt" and not self.init_from:
            raise ValueError("stage='adapt' needs init_from: the pretrained base model (a directory or Hub id)")
        check_model_folder(
            self,
            "init_from",
            EpmJepaConfig.model_type,
            "the output folder of `hf-jepa train epm-jepa` (stage=pretrain)",
        )
        check_gravity_settings(self)
        check_count(self, "eval_sequences", minimum=2)
        check_count(self, "eval_every", minimum=0)
        check_choice(self, "protocol", PROTOCOLS)
        check_count(self, "episode_support", minimum=1)
        check_count(self, "freeze_lora_at", minimum=1, zero_means="never")
        for name in ("episode_gravities", "episode_eval_gravities"):
            if getattr(self, name) is not None:
                setattr(self, name, list(check_gravity_list(name, getattr(self, name))))

    @property
    def train_gravities(self) -> tuple[float, ...]:
        """The gravities training episodes draw from."""
        return tuple(self.episode_gravities or EPISODIC_TRAIN_GRAVITIES)

    @property
    def eval_gravities(self) -> tuple[float, ...]:
        """The gravities of the evaluation episodes (D_shift(n) of the episodic protocol)."""
        return tuple(self.episode_eval_gravities or EPISODIC_EVAL_GRAVITIES)

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
        parts = {
            "vanilla": {"predictor"},
            "ei": {"experience_encoder", "experience_injection"},
            "epm": {"experience_encoder", "hypernetwork"},
        }[track]
        parts = parts | ({"context_encoder"} if adapt_encoder else set())
    trainable = set()
    for name, parameter in model.named_parameters():
        top = name.split(".")[0]
        is_lora = ".lora_A." in name or ".lora_B." in name
        wanted = top in parts or (is_lora and track == "epm")
        parameter.requires_grad_(wanted)
        if wanted:
            trainable.add("predictor LoRA" if is_lora else top)
    model.freeze_targets()
    return sorted(trainable)


class EpmJepaRecipe(Recipe):
    name = "epm-jepa"

    def __init__(
        self,
        config: EpmJepaConfig,
        data_args: EpmJepaDataArguments | None = None,
        seed: int = 0,
        splits: MnistSplits | None = None,
        eval_pixels: dict[str, torch.Tensor] | None = None,
        episodic_eval: dict[float, dict[str, torch.Tensor]] | None = None,
    ):
        self.config = config
        self.data_args = args = data_args or EpmJepaDataArguments()
        self.splits = splits or MnistSplits(args.data)
        gravity = args.train_gravity if args.stage == "pretrain" else args.shift_gravity
        self.episodic = args.stage == "adapt" and args.protocol == "episodic"
        steps = config.rollout_loss_steps
        for name in ("sequence_length", "eval_sequence_length"):  # forward scores a rollout of `steps` steps
            # (One-step sequences too short for the model are left to `forward`, as before the rollout loss.)
            if steps > 1 and getattr(args, name) < config.context_length + steps:
                raise ValueError(
                    f"{name} ({getattr(args, name)}) must be >= context_length + rollout_loss_steps "
                    f"({config.context_length} + {steps}): the {steps}-step rollout loss needs that many frames"
                )
        self.world = MovingMnist(
            images=self.splits.train_images,
            labels=self.splits.train_labels,
            sequence_length=args.sequence_length,
            num_digits=args.num_digits,
            gravity=gravity,
            canvas_size=config.image_size,
            seed=seed,
        )
        self.episodes = (
            GravityEpisodes(self.world, args.train_gravities, args.episode_support) if self.episodic else None
        )
        if self.episodic:
            gravity = f"one of {args.train_gravities} per episode"
        self._eval_pixels = eval_pixels
        self._episodic_eval = episodic_eval
        self._model: EpmJepaModel | None = None
        self.state_at_freeze: dict[str, torch.Tensor] | None = None
        self._built = False
        self.history: list[dict] = []
        self._target_snapshot: list[torch.Tensor] | None = None
        logger.info(
            "EPM-JEPA %s stage, track %s: training sequences with gravity %s from %s",
            args.stage,
            config.track,
            gravity,
            self.splits.source,
        )

    # ------------------------------------------------------------------ evaluation data

    def eval_pixels(self) -> dict[str, torch.Tensor]:
        """Held-out sequences from MNIST test digits, the same for every run: `shift` (g in (0, 0.5]) and `train` (g=0)."""
        if self._eval_pixels is None:
            self._eval_pixels = build_eval_pixels(self.splits, self.data_args, self.config.image_size)
        return self._eval_pixels

    def episodic_eval(self) -> dict[float, dict[str, torch.Tensor]]:
        """The episodic evaluation episodes (MNIST test digits), gravity -> `support` and `query` sequences."""
        if self._episodic_eval is None:
            args = self.data_args
            self._episodic_eval = build_episodic_eval(self.splits, args, self.config.image_size, args.eval_gravities)
        return self._episodic_eval

    def _d_shift(self, model: EpmJepaModel) -> float:
        if self.episodic:
            return mean_episodic_error(model, self.episodic_eval())
        return evaluate_world_model(model, self.eval_pixels()["shift"])["normalized_error"]

    # ------------------------------------------------------------------ Recipe protocol

    def build_model(self) -> EpmJepaModel:
        args = self.data_args
        if args.stage == "pretrain":
            model = EpmJepaModel(self.config)
        else:
            fields = EXPERIENCE_ADAPTER_FIELDS + ADAPT_OBJECTIVE_FIELDS
            overrides = {field: getattr(self.config, field) for field in fields}
            model = EpmJepaModel.from_base(args.init_from, **overrides)
            self.config = model.config
        self._built = True
        self._model = model
        parts = set_trainable_parts(model, args.stage, args.adapt_encoder)
        logger.info("Trainable parts: %s", ", ".join(parts))
        self._target_snapshot = [p.detach().clone() for p in model.target_encoder.parameters()]
        if args.stage == "adapt" and args.eval_every:
            self.history.append({"step": 0, **self._diagnostics(model, with_eval=True)})
        return model

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        freeze_at = self.data_args.freeze_lora_at
        if freeze_at and step == freeze_at and self._model is not None:
            freeze_lora(self._model)
            # The weights at the freeze, so a run can show what stopped and what kept learning.
            self.state_at_freeze = {k: v.detach().clone() for k, v in self._model.state_dict().items()}
        if self.episodic:
            episode = self.episodes.episode(batch_size, step, rank)
            batch = {"pixel_values": episode["pixel_values"]}
            if self.config.track != "vanilla":
                batch["experience_pixel_values"] = episode["experience_pixel_values"]
            return batch
        return {"pixel_values": self.world.sample_batch(batch_size, step=step, rank=rank)["pixel_values"]}

    def _diagnostics(self, model: EpmJepaModel, with_eval: bool) -> dict[str, float]:
        current = [p.detach() for p in model.target_encoder.parameters()]
        values = {"ema_target_drift": parameter_drift(current, self._target_snapshot)}
        self._target_snapshot = [p.clone() for p in current]
        if with_eval:
            values["d_shift"] = self._d_shift(model)
        return values

    def on_log(self, model: EpmJepaModel, step: int, record: dict) -> dict[str, float]:
        every = self.data_args.eval_every
        values = self._diagnostics(
            model, with_eval=bool(every) and self.data_args.stage == "adapt" and step % every == 0
        )
        self.history.append({**record, **values, "step": step})
        return values

    def checkpoint_state(self, model: EpmJepaModel) -> dict[str, torch.Tensor]:
        """The experience buffer (non-persistent, so not in the state dict; the gate's statistics are)."""
        buffer = model.experience_buffer
        if buffer is None:
            return {}
        return {"experience_buffer.entries": buffer.entries, "experience_buffer.num_writes": buffer.num_writes}

    def load_checkpoint_state(self, model: EpmJepaModel, state: dict[str, torch.Tensor]) -> None:
        buffer = model.experience_buffer
        if buffer is None or not state:
            return
        with torch.no_grad():
            buffer.entries.copy_(state["experience_buffer.entries"])
            buffer.num_writes.copy_(state["experience_buffer.num_writes"])

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
        if self.episodic:
            metrics["protocol"] = "episodic"
            metrics["d_shift_episodic"] = mean_episodic_error(model, self.episodic_eval())
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
        if model.config.track == "epm":
            model.save_experience_adapter(str(Path(output_dir) / ADAPTER_FOLDER))
        with open(Path(output_dir) / "diagnostics.jsonl", "w") as handle:
            for record in self.history:
                handle.write(json.dumps(record) + "\n")
        # `pipeline("image-feature-extraction", model=dir)` encodes single frames with it.
        EpmJepaImageProcessor.from_model_config(model.config).save_pretrained(output_dir)
        write_settings_and_card(
            output_dir, self.data_args, render_card, model.config, metrics, args, base_model=self.data_args.init_from
        )


def _eval_world(splits: MnistSplits, data_args: EpmJepaDataArguments, image_size: int, **gravity) -> MovingMnist:
    """The evaluation world: Moving MNIST on the test digits with the fixed `EVAL_SEED`, so every evaluation set is
    drawn from the same digits and initial states; `gravity` (`gravity=...`) overrides the world's default."""
    return MovingMnist(
        images=splits.test_images,
        labels=splits.test_labels,
        sequence_length=data_args.eval_sequence_length,
        num_digits=data_args.num_digits,
        canvas_size=image_size,
        seed=EVAL_SEED,
        **gravity,
    )


def build_eval_pixels(splits: MnistSplits, data_args: EpmJepaDataArguments, image_size: int) -> dict[str, torch.Tensor]:
    """The fixed evaluation sets: sequences of MNIST test digits with the shifted and the training gravity."""
    sets = {}
    for name, gravity in (("shift", data_args.shift_gravity), ("train", data_args.train_gravity)):
        world = _eval_world(splits, data_args, image_size, gravity=gravity)
        sets[name] = world.sample_batch(data_args.eval_sequences)["pixel_values"]
    return sets


def build_episodic_eval(
    splits: MnistSplits,
    data_args: EpmJepaDataArguments,
    image_size: int,
    gravities: tuple[float, ...] = EPISODIC_EVAL_GRAVITIES,
    support_size: int | None = None,
) -> dict[float, dict[str, torch.Tensor]]:
    """Evaluation episodes from MNIST test digits: per gravity, `query` sequences (`eval_sequences` split evenly over
    the gravities, at least 2) and `support` sequences (`support_size`, default `episode_support`). Every gravity uses
    the same digits and initial states (the generator's counterfactual pairs), so swapping buffers between gravities
    changes only the dynamics the buffer saw."""
    world = _eval_world(splits, data_args, image_size)
    episodes = GravityEpisodes(world, gravities, support_size or data_args.episode_support)
    queries = max(2, data_args.eval_sequences // len(gravities))
    return {
        gravity: {
            "query": world.sample_batch(queries, step=0, gravity=gravity)["pixel_values"],
            "support": episodes.support(0, gravity),
        }
        for gravity in gravities
    }


def freeze_lora(model: EpmJepaModel) -> int:
    """Stop training the track-C LoRA `U`/`V` (the hypernetwork's `d` keeps learning): the freeze-timing experiment.
    The optimiser skips parameters without a gradient. Returns the number of tensors frozen."""
    frozen = 0
    for name, parameter in model.named_parameters():
        if (".lora_A." in name or ".lora_B." in name) and parameter.requires_grad:
            parameter.requires_grad_(False)
            frozen += 1
    logger.info("Froze %d LoRA tensors", frozen)
    return frozen


# `hf-jepa train epm-jepa` pretrains with these values by default; the reproduction's experience phase uses
# ADAPT_DEFAULTS on top of the same TrainingArguments.
TRAINING_DEFAULTS = dict(
    max_steps=2000,
    per_device_batch_size=32,
    learning_rate=2e-3,
    weight_decay=0.05,
    warmup_steps=50,
    mixed_precision="bf16",
    logging_steps=50,
)
ADAPT_DEFAULTS = dict(
    per_device_batch_size=32,
    learning_rate=1e-3,
    weight_decay=0.0,
    warmup_steps=0,
    mixed_precision="bf16",
    logging_steps=5,
)


FAMILIES = (
    Family(
        name="epm-jepa",
        config_class=EpmJepaConfig,
        data_args_class=EpmJepaDataArguments,
        recipe_class=EpmJepaRecipe,
        training_defaults=TRAINING_DEFAULTS,
        result_rows=result_rows,
        # The base an experience run adapted from, and the stage: eval needs neither (the folder is the model).
        training_only_settings=("init_from", "stage"),
    ),
)
