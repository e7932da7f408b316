"""The contract between the shared training loop and a family: the `Recipe` base class with its default hooks.

A family's recipe (in `hf_jepa/recipes/<family>.py`) overrides what it needs: `build_model` and `train_batch` always,
`evaluate` for its metrics, `ema_schedule` when it has an EMA target (the pairs come from the model's `ema_pairs()`),
`on_log` for diagnostics over training, `finalize` for post-training state that is saved with the model,
`save_artifacts` for what ships beside the weights (card, processor, tokenizer), and `checkpoint_state` /
`load_checkpoint_state` for run-time state outside the model's state dict that an exact resume needs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel


SPEED_ONLY_DATA_SETTINGS = frozenset({"num_workers"})


def seeded_generator(seed: int, step: int, rank: int) -> torch.Generator:
    """The generator of batch `step` on process `rank`: a pure function of the three, so runs resume exactly and ranks
    draw different data."""
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 10_007 + rank)


class Recipe:
    """What a family provides to `JepaTrainer`. Subclasses set `name` and implement `build_model` and `train_batch`."""

    name: str = "recipe"

    def build_model(self) -> PreTrainedModel:
        raise NotImplementedError(f"{type(self).__name__} must implement build_model()")

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        """Batch `step` of process `rank` (the same call gives the same batch: resume is exact)."""
        raise NotImplementedError(f"{type(self).__name__} must implement train_batch()")

    def train_stream(
        self, rank: int, world_size: int, batch_size: int, start: int
    ) -> Iterator[tuple[int, dict[str, torch.Tensor]]] | None:
        """For a streamed source: an iterator of `(index, batch)` for batch indices `start, start + 1, ...` of process
        `rank` (the same index always gives the same batch, so a resumed run continues exactly). Default: None, and the
        trainer calls `train_batch` (data held in memory)."""
        return None

    def ema_pairs(self, model: PreTrainedModel) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) module pairs updated by EMA after each optimiser step. Default: the model's own
        `ema_pairs()` (every family with an EMA target has one), none for a model without it."""
        pairs = getattr(model, "ema_pairs", None)
        return list(pairs()) if callable(pairs) else []

    def ema_schedule(self, model: PreTrainedModel) -> tuple[float, float]:
        """EMA momentum at the first and the last step (linear in between). Default: the config's
        `ema_momentum`/`ema_momentum_end` when it has them."""
        config = model.config
        return getattr(config, "ema_momentum", 1.0), getattr(config, "ema_momentum_end", 1.0)

    def on_log(self, model: PreTrainedModel, step: int, record: dict[str, float]) -> dict[str, float]:
        """Extra values for the log record of optimiser step `step` (main process only), e.g. diagnostics that need
        the model's state over time. Default: none."""
        return {}

    def finalize(self, model: PreTrainedModel) -> None:
        """Post-training work that becomes part of the saved model (e.g. class prototypes). Default: nothing."""

    def evaluate(self, model: PreTrainedModel, output_dir: str | None = None) -> dict[str, Any]:
        """Metrics of the trained model (main process). Default: none."""
        return {}

    def save_artifacts(self, model: PreTrainedModel, output_dir: str, metrics: dict, args: Any) -> None:
        """Write what ships beside the weights: the model card, and a processor/tokenizer where the family has one.
        `args` is the run's `TrainingArguments`."""

    def checkpoint_state(self, model: PreTrainedModel) -> dict[str, torch.Tensor]:
        """Tensors outside `model.state_dict()` that training changes and an exact resume needs (e.g. a non-persistent
        buffer), saved with each checkpoint as safetensors (main process; they must be identical on every rank).
        Default: none."""
        return {}

    def load_checkpoint_state(self, model: PreTrainedModel, state: dict[str, torch.Tensor]) -> None:
        """Restore what `checkpoint_state` returned (on every process; `state` is empty for a checkpoint without
        any). Default: nothing."""

    def data_settings(self) -> dict[str, Any]:
        """The data arguments of the run, stored with checkpoints and compared on resume. Default: the fields of
        `self.data_args` when it is a dataclass, less those that change only speed (`SPEED_ONLY_DATA_SETTINGS`: a
        streamed source gives the same batches with any number of DataLoader workers, so a resume may change it)."""
        data_args = getattr(self, "data_args", None)
        if dataclasses.is_dataclass(data_args) and not isinstance(data_args, type):
            settings = dataclasses.asdict(data_args)
            return {k: v for k, v in settings.items() if k not in SPEED_ONLY_DATA_SETTINGS}
        return {}
