"""Fine-tuning helpers for `transformers.Trainer`: an exponential moving average (EMA) of the weights.

`EmaWeightsCallback(momentum=0.999)` keeps a float32 shadow of the trainable parameters, updates it after every
optimizer step (`shadow = momentum * shadow + (1 - momentum) * weight`), and at the end of training copies the
shadow into the model, so what `Trainer` then saves or evaluates is the EMA model. With `swap_for_evaluation=True`
evaluations during training also run on the EMA weights (swapped in before, the training weights swapped back after).
Momentum 0 makes the shadow the plain weights.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module under DDP / accelerate wrappers (`.module`), or `model` itself."""
    while hasattr(model, "module") and isinstance(model.module, torch.nn.Module):
        model = model.module
    return model


class EmaWeightsCallback(TrainerCallback):
    """EMA of the trainable weights for `transformers.Trainer` (see the module docstring)."""

    def __init__(self, momentum: float = 0.999, swap_for_evaluation: bool = False, apply_at_end: bool = True):
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum < 1:
            raise ValueError(f"momentum must be a number with 0 <= momentum < 1, got {momentum!r}")
        self.momentum = float(momentum)
        self.swap_for_evaluation = swap_for_evaluation
        self.apply_at_end = apply_at_end
        self.shadow: dict[str, torch.Tensor] = {}
        self._backup: dict[str, torch.Tensor] | None = None

    def _parameters(self, model) -> dict[str, torch.nn.Parameter]:
        return {name: p for name, p in _unwrap(model).named_parameters() if p.requires_grad}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.shadow = {name: p.detach().float().clone() for name, p in self._parameters(model).items()}

    @torch.no_grad()
    def on_step_end(self, args, state, control, model=None, **kwargs):
        for name, parameter in self._parameters(model).items():
            self.shadow[name].mul_(self.momentum).add_(parameter.detach().float(), alpha=1 - self.momentum)
        self._swap_in_for_evaluation(model, control)

    def _swap_in_for_evaluation(self, model, control):
        # Trainer's flow callback (registered before this one) has just decided whether an evaluation follows
        if self.swap_for_evaluation and control.should_evaluate and self._backup is None:
            self._backup = self.copy_to(model)

    @torch.no_grad()
    def copy_to(self, model) -> dict[str, torch.Tensor]:
        """Copy the EMA weights into `model`; returns the weights they replaced (for `restore`)."""
        parameters = self._parameters(model)
        backup = {name: parameters[name].detach().clone() for name in self.shadow}
        for name, value in self.shadow.items():
            parameters[name].copy_(value.to(parameters[name].dtype))
        return backup

    @torch.no_grad()
    def restore(self, model, backup: dict[str, torch.Tensor]) -> None:
        """Put back the weights `copy_to` returned. Returns None."""
        parameters = self._parameters(model)
        for name, value in backup.items():
            parameters[name].copy_(value)

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        if self._backup is not None:  # the evaluation ran on the EMA weights: back to training weights
            self.restore(model, self._backup)
            self._backup = None

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self.apply_at_end and self.shadow:
            self.copy_to(model)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        self._swap_in_for_evaluation(model, control)


__all__ = ["EmaWeightsCallback"]
