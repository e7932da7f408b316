"""BRo-JEPA recipe: MNIST modular arithmetic for the shared trainer, its evaluation and its model card."""

import logging
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

from ..data import ModularArithmeticTask, images_to_tensor, load_mnist, mnist_source_description, normalize_images
from ..data.modular_arithmetic import TRAIN_OPERATIONS
from ..metrics import evaluate_modular_arithmetic, plot_latent_pca, prototype_off_diagonal_cosine
from ..modeling.bro_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel


logger = logging.getLogger(__name__)


@dataclass
class BroJepaDataArguments:
    """Data settings of the BRo-JEPA recipe (YAML keys / `--set` names)."""

    data: str | None = None
    max_shift: int = 0
    prototype_images: int = 0
    eval_images: int = 0
    plot: bool = True

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}


class MnistSplits:
    """MNIST decoded once into uint8 tensors (train/test), shared by several runs of a reproduction."""

    def __init__(self, source: str | None = None):
        dataset = load_mnist(source)
        self.source = mnist_source_description(dataset)
        self.train_images, self.train_labels = images_to_tensor(dataset["train"])
        self.test_images, self.test_labels = images_to_tensor(dataset["test"])
        logger.info("MNIST from %s: %d train / %d test images", self.source, len(self.train_labels), len(self.test_labels))


class BroJepaRecipe:
    name = "bro-jepa"

    def __init__(self, config: BroJepaConfig, data_args: BroJepaDataArguments | None = None, seed: int = 0,
                 splits: MnistSplits | None = None):
        self.config = config
        self.data_args = data_args or BroJepaDataArguments()
        self.splits = splits or MnistSplits(self.data_args.data)
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

    def ema_pairs(self, model: BroJepaModel):
        return [] if model.target_encoder is None else [(model.context_encoder, model.target_encoder)]

    def ema_schedule(self, model: BroJepaModel) -> tuple[float, float]:
        return model.config.ema_momentum, model.config.ema_momentum_end

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
        metrics["prototype_off_diagonal_cosine"] = prototype_off_diagonal_cosine(model.class_prototypes)
        metrics["data_source"] = self.splits.source
        metrics["eval_images"] = len(labels)
        if output_dir and self.data_args.plot:
            with torch.no_grad():
                latents = model.encode(pixels[:2000], use_target_encoder=True)
            metrics["pca_plot"] = Path(
                plot_latent_pca(model.class_prototypes, latents, labels[:2000], Path(output_dir) / "latent_pca.png")
            ).name
        return metrics

    def save_artifacts(self, model, output_dir: str, metrics: dict, args) -> None:
        from ..hub import render_bro_jepa_card

        # The image processor makes the directory usable by `pipeline("modular-arithmetic", model=dir)` with batching.
        BroJepaImageProcessor().save_pretrained(output_dir)
        card = render_bro_jepa_card(model.config, metrics, training_args=args, data_args=self.data_args)
        card.save(str(Path(output_dir) / "README.md"))
