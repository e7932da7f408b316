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


def warmup_cosine_lambda(warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0, progress=None):
    """The LR multiplier as a function of the step: linear warm-up from 0 to 1 over `warmup_steps`, then cosine down to `min_lr_ratio`
    over the steps after the warm-up, or, given `progress` (a callable returning the fraction of a time budget spent
    so far, 0 to 1; `total_steps` is then unused), cosine in that fraction."""

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(warmup_steps, 1)
        if progress is None:
            fraction = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
        else:
            fraction = progress()
        fraction = min(fraction, 1.0)
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * fraction))

    return multiplier


FUSED_ADAMW_DEVICES = ("cpu", "cuda")


def _fused_supported(parameters: list[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW kernel takes every parameter: plain floating tensors on a CPU or CUDA device
    (sharded DTensor parameters keep the default implementation)."""
    return bool(parameters) and all(
        type(p.data) is torch.Tensor and p.is_floating_point() and p.device.type in FUSED_ADAMW_DEVICES
        for p in parameters
    )


def build_optimizer(model: nn.Module, learning_rate: float, weight_decay: float, betas=(0.9, 0.999)):
    """AdamW over `parameter_groups`. The fused kernel where it applies: on a CPU, torch's default is a Python loop
    over the tensors, and one fused call makes the optimiser step ~2.8x faster (cpu_fast BRo-JEPA: 2.65 -> 0.94 ms)."""
    groups = parameter_groups(model, weight_decay)
    fused = _fused_supported([p for group in groups for p in group["params"]])
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=fused or None)
