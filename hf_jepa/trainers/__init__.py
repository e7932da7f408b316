"""Training: one Accelerate loop for all families, plus one recipe per family."""

from .ema import ema_momentum, ema_update_
from .optim import build_optimizer, parameter_groups, warmup_cosine_lambda
from .trainer import JepaTrainer, Recipe, TrainingArguments, TrainResult


__all__ = [
    "JepaTrainer",
    "Recipe",
    "TrainResult",
    "TrainingArguments",
    "build_optimizer",
    "ema_momentum",
    "ema_update_",
    "parameter_groups",
    "warmup_cosine_lambda",
]
