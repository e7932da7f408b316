"""BRo-JEPA recipe: MNIST modular arithmetic for the shared trainer, its evaluation and its model card."""

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..cards.bro_jepa import render_card, result_rows
from ..data import MnistSplits, ModularArithmeticTask, normalize_images
from ..data.images import load_image_splits
from ..data.modular_arithmetic import TRAIN_OPERATIONS
from ..metrics import (
    evaluate_modular_arithmetic,
    plot_latent_pca,
    prototype_off_diagonal_cosine,
    zero_shot_under_perturbations,
)
from ..modeling.bro_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel
from ..trainers import Recipe
from ._checks import check_count, check_types
from ._saved import write_settings_and_card
from .family import Family

logger = logging.getLogger(__name__)


@dataclass
class BroJepaDataArguments:
    """Data settings of the BRo-JEPA recipe (YAML keys / `--set` names).

    max_shift: random translation of the training images, in pixels (0 = none). The default 1 reaches 99% clean
    zero-shot accuracy as fast as no shift (11-12 s on 2 cores, 3 seeds) and lifts it on test digits moved by 2 px from
    ~91% to ~97%; 2 gives ~98% there but missed 99% clean in 1 of 3 seeds at 600 steps
    (research/speed/time_to_accuracy/README.md). prototype_images, eval_images: how many
    training images build the class prototypes and how many test images are evaluated (0 = all of them).
    data: MNIST (default) or your labelled images (a Hub dataset id, a local imagefolder, parquet/arrow files or a
    save_to_disk folder); image_column, label_column: their columns (the labels must be the classes 0..modulus-1, or
    class names, indexed in sorted order). The images are decoded into memory: each context image is paired with a
    random image of its target class, which needs random access, so this family does not stream."""

    data: str | None = None
    image_column: str = "image"
    label_column: str = "label"
    max_shift: int = 1
    prototype_images: int = 0
    eval_images: int = 0
    plot: bool = True

    def __post_init__(self):
        check_types(self)
        check_count(self, "max_shift", minimum=0)
        check_count(self, "prototype_images", zero_means="all training images")
        check_count(self, "eval_images", zero_means="all test images")


def _first_harmonic_block(model: BroJepaModel) -> int | None:
    """The rotation block turning at the base angle whose prototypes spread most (the clearest circle), if any."""
    if model.config.predictor_type != "block_rotation":
        return None
    angles = model.predictor.angles.detach().float().cpu()
    candidates = (
        torch.arange(model.config.num_blocks)
        if angles.numel() == 1
        else torch.nonzero((angles - angles.min()).abs() < 1e-3 * angles.abs().max().clamp_min(1e-8)).flatten()
    )
    pairs = model.class_prototypes.float().cpu().reshape(model.config.modulus, -1, 2)
    spread = pairs.var(0).sum(-1)[candidates]
    return int(candidates[spread.argmax()])


class BroJepaRecipe(Recipe):
    name = "bro-jepa"

    def __init__(
        self,
        config: BroJepaConfig,
        data_args: BroJepaDataArguments | None = None,
        seed: int = 0,
        splits: MnistSplits | None = None,
    ):
        self.config = config
        self.data_args = data_args or BroJepaDataArguments()
        args = self.data_args
        self.splits = splits or load_image_splits(
            args.data, args.image_column, args.label_column, image_size=config.image_size
        )
        self.task = ModularArithmeticTask(
            self.splits.train_images,
            self.splits.train_labels,
            operations=TRAIN_OPERATIONS,
            modulus=config.modulus,
            seed=seed,
            max_shift=self.data_args.max_shift,
            pixel_mean=config.pixel_mean,
            pixel_std=config.pixel_std,
        )

    def build_model(self) -> BroJepaModel:
        return BroJepaModel(self.config)

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        return self.task.sample_batch(batch_size, step=step, rank=rank)

    def _pixels(self, images: torch.Tensor) -> torch.Tensor:
        return normalize_images(images, self.config.pixel_mean, self.config.pixel_std)

    @staticmethod
    def _head(images, labels, count):
        return (images[:count], labels[:count]) if count else (images, labels)

    def finalize(self, model: BroJepaModel) -> None:
        images, labels = self._head(self.splits.train_images, self.splits.train_labels, self.data_args.prototype_images)
        model.fill_class_prototypes(self._pixels(images), labels)

    def evaluate(self, model: BroJepaModel, output_dir: str | None = None) -> dict[str, Any]:
        images, labels = self._head(self.splits.test_images, self.splits.test_labels, self.data_args.eval_images)
        pixels = self._pixels(images).to(model.class_prototypes.device)
        metrics = evaluate_modular_arithmetic(model, pixels, labels)
        metrics.update(zero_shot_under_perturbations(model, images, labels, self._pixels))
        metrics["prototype_off_diagonal_cosine"] = prototype_off_diagonal_cosine(model.class_prototypes)
        metrics["data_source"] = self.splits.source
        metrics["eval_images"] = len(labels)
        if output_dir and self.data_args.plot:
            with torch.no_grad():
                latents = model.encode(pixels[:2000], use_target_encoder=True)
            metrics["pca_plot"] = Path(
                plot_latent_pca(
                    model.class_prototypes,
                    latents,
                    labels[:2000],
                    Path(output_dir) / "latent_pca.png",
                    rotation_block=_first_harmonic_block(model),
                )
            ).name
        return metrics

    def save_artifacts(self, model, output_dir: str, metrics: dict, args) -> None:
        # The image processor makes the directory usable by `pipeline("modular-arithmetic", model=dir)` with batching.
        BroJepaImageProcessor().save_pretrained(output_dir)
        write_settings_and_card(output_dir, self.data_args, render_card, model.config, metrics, args)


# The defaults of `hf-jepa train bro-jepa` and of every reproduction row (bf16 autocast trains ~1.7x faster on this
# CPU, see `make benchmark`; losses, EMA and prototypes stay in fp32). With the cpu_fast preset, 600 steps at lr 4e-3
# reach 99.0-99.1% zero-shot (2e-3: 98.9%); see `benchmarks/time_to_accuracy.py` and docs/results/speed.md.
TRAINING_DEFAULTS = dict(
    max_steps=600,
    per_device_batch_size=256,
    learning_rate=4e-3,
    weight_decay=0.05,
    warmup_steps=50,
    mixed_precision="bf16",
)


def per_operation_table(metrics) -> str:
    """Markdown: direct and rollout accuracy for every operation k the metrics hold ("" if none)."""
    direct = {int(k): v for k, v in (metrics.get("accuracy_per_operation") or {}).items()}
    rolled = {int(k): v for k, v in (metrics.get("rollout_accuracy_per_operation") or {}).items()}
    if not direct:
        return ""

    def pct(value):
        return f"{100 * value:.2f}%" if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"

    lines = ["| k | direct | rollout |", "|---|---|---|"]
    lines += [
        f"| {k:+d} | {pct(direct.get(k))} | {pct(rolled.get(k))} |" for k in sorted(direct.keys() | rolled.keys())
    ]
    return "\n".join(lines)


FAMILIES = (
    Family(
        name="bro-jepa",
        config_class=BroJepaConfig,
        data_args_class=BroJepaDataArguments,
        recipe_class=BroJepaRecipe,
        training_defaults=TRAINING_DEFAULTS,
        result_rows=result_rows,
        extra_table=per_operation_table,
    ),
)
