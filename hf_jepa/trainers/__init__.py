"""Training: one Accelerate loop for all families (`JepaTrainer`) and the `Recipe` contract a family implements
(the recipes themselves are in `hf_jepa.recipes`), and `JepaEmaCallback` for `transformers.Trainer`."""

from .arguments import TrainingArguments
from .callbacks import JepaEmaCallback
from .ema import ema_momentum, ema_update_
from .optim import build_optimizer, parameter_groups, warmup_cosine_lambda
from .recipe import Recipe, seeded_generator
from .trainer import JepaTrainer, TrainerState, TrainResult

__all__ = [
    "JepaEmaCallback",
    "JepaTrainer",
    "Recipe",
    "TrainResult",
    "TrainerState",
    "TrainingArguments",
    "build_optimizer",
    "ema_momentum",
    "ema_update_",
    "parameter_groups",
    "seeded_generator",
    "warmup_cosine_lambda",
]
