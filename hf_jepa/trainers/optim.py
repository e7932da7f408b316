"""AdamW with decoupled weight decay on matrices only, and a warm-up + cosine learning-rate schedule."""

import math

import torch
from torch import nn


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: weight decay on >= 2-D weights; none on biases, norm scales and other 1-D parameters."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim <= 1 or name.endswith(".bias") else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_cosine_lambda(warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0):
    """LR multiplier: linear warm-up from 0 to 1 over `warmup_steps`, then cosine down to `min_lr_ratio`."""

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(warmup_steps, 1)
        progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
        progress = min(progress, 1.0)
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return multiplier


def build_optimizer(model: nn.Module, learning_rate: float, weight_decay: float, betas=(0.9, 0.999)):
    return torch.optim.AdamW(parameter_groups(model, weight_decay), lr=learning_rate, betas=betas)
