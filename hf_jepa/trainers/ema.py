"""EMA target encoders: the I-JEPA momentum schedule and a fused in-place update."""

import torch
from torch import nn


def ema_momentum(step: int, total_steps: int, start: float = 0.996, end: float = 1.0) -> float:
    """Momentum at optimiser step `step`: linear from `start` to `end` over `total_steps` (I-JEPA's schedule)."""
    if total_steps <= 0:
        return end
    progress = min(max(step / total_steps, 0.0), 1.0)
    return start + (end - start) * progress


@torch.no_grad()
def ema_update_(target: nn.Module, online: nn.Module, momentum: float, buffer_momentum: float | None = None) -> None:
    """`target = momentum * target + (1 - momentum) * online` for parameters, with `torch._foreach_*` kernels.

    Buffers are left to the target by default: a BRo-JEPA target encoder tracks its own BatchNorm running statistics
    from its own activations (see `BroJepaModel`). Averaging them from the online module at the parameters' slow
    momentum is a trap: running statistics start as placeholders (mean 0, var 1), so the target would normalise with
    statistics that fit neither network for hundreds of steps, and its eval-mode outputs collapse (seen in practice).
    Pass `buffer_momentum` (0.0 = copy) to average floating buffers anyway; integer buffers are then copied.
    """
    target_parameters = [p.data for p in target.parameters()]
    online_parameters = [p.data for p in online.parameters()]
    if len(target_parameters) != len(online_parameters):
        raise ValueError("EMA target and online modules have different parameters")
    torch._foreach_mul_(target_parameters, momentum)
    torch._foreach_add_(target_parameters, online_parameters, alpha=1.0 - momentum)
    if buffer_momentum is None:
        return
    for target_buffer, online_buffer in zip(target.buffers(), online.buffers()):
        if target_buffer.is_floating_point():
            target_buffer.mul_(buffer_momentum).add_(online_buffer, alpha=1.0 - buffer_momentum)
        else:
            target_buffer.copy_(online_buffer)
