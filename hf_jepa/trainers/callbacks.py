"""`JepaEmaCallback`: the EMA target update for `transformers.Trainer`.

hf-jepa's own trainer updates every EMA target after each optimiser step. Under `transformers.Trainer` nothing does,
so a JEPA model trains while its target encoder never moves (silent mistraining). Add the callback:

    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator,
                      callbacks=[JepaEmaCallback()])

It updates the model's `ema_pairs()` after every optimiser step with the same schedule as `JepaTrainer`: momentum
linear from `config.ema_momentum` to `config.ema_momentum_end` over `max_steps` (or explicit `start`/`end`).
"""

from __future__ import annotations

from transformers import TrainerCallback

from .ema import ema_momentum, ema_update_


def _unwrap(model):
    while hasattr(model, "module"):  # DDP / accelerate wrappers
        model = model.module
    return model


class JepaEmaCallback(TrainerCallback):
    """Update the EMA targets of a JEPA model (`model.ema_pairs()`) after each optimiser step of
    `transformers.Trainer`; `start`/`end` override the config's `ema_momentum`/`ema_momentum_end`."""

    def __init__(self, start: float | None = None, end: float | None = None):
        for name, value in (("start", start), ("end", end)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a momentum in [0, 1], got {value!r}")
        self.start, self.end = start, end
        self.last_momentum: float | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None or not callable(getattr(_unwrap(model), "ema_pairs", None)):
            raise ValueError(
                "JepaEmaCallback needs a model with ema_pairs() (an hf-jepa model with an EMA target), got "
                f"{type(model).__name__}"
            )

    def on_step_end(self, args, state, control, model=None, **kwargs):
        model = _unwrap(model)
        config = model.config
        start = self.start if self.start is not None else getattr(config, "ema_momentum", 1.0)
        end = self.end if self.end is not None else getattr(config, "ema_momentum_end", 1.0)
        # `global_step` already counts the step just taken; JepaTrainer uses the 0-based index of that step
        self.last_momentum = ema_momentum(state.global_step - 1, state.max_steps, start, end)
        for online, target in model.ema_pairs():
            ema_update_(target, online, self.last_momentum)
        return control


__all__ = ["JepaEmaCallback"]
