"""EMA target encoders: the I-JEPA momentum schedule and a fused in-place update, correct on sharded parameters.

Sharded parameters (see `sharding.py`):
- torch FSDP2 (`fully_shard`, DTensor parameters): when online and target parameters are sharded the same way (same
  mesh and placements: both encoders' blocks went through `fully_shard` and have the same shapes) the update is
  elementwise, so it runs on the local shards and stays exact. A DTensor online parameter with a plain (replicated)
  target is gathered (`full_tensor`, a collective: every rank runs the EMA update); a plain online parameter with a
  DTensor target is sliced to the target's local shard.
- DeepSpeed ZeRO-3 (partitioned parameters, `ds_id`): the update runs inside `deepspeed.zero.GatheredParameters`
  (target with `modifier_rank=0`, re-partitioned on exit); without deepspeed importable it is refused. This path
  cannot run on a CPU-only machine and is untested here.
"""

import contextlib

import torch
from torch import nn


def ema_momentum(step: int, total_steps: int, start: float = 0.996, end: float = 1.0) -> float:
    """Momentum at optimiser step `step`: linear from `start` to `end` over `total_steps` (I-JEPA's schedule)."""
    if total_steps <= 0:
        return end
    progress = min(max(step / total_steps, 0.0), 1.0)
    return start + (end - start) * progress


def _local_pair(target: torch.Tensor, online: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The tensors to update elementwise: local shards when both are DTensors sharded alike."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    target_dt, online_dt = isinstance(target, DTensor), isinstance(online, DTensor)
    if not target_dt and not online_dt:
        return target, online
    if target_dt and online_dt:
        if target.device_mesh != online.device_mesh or target.placements != online.placements:
            online = online.redistribute(target.device_mesh, target.placements)
        return target.to_local(), online.to_local()
    if online_dt:  # sharded online, full target: gather the online parameter (collective)
        return target, online.full_tensor()
    # full online, sharded target: this rank's slice of the (identical on every rank) online parameter
    return target.to_local(), distribute_tensor(
        online, target.device_mesh, target.placements, src_data_rank=None
    ).to_local()


def _zero3_gathered(target: nn.Module, online: nn.Module):
    """A context that gathers ZeRO-3 partitioned parameters of both modules (target re-partitioned from rank 0's
    update on exit), or a null context when nothing is partitioned."""
    partitioned = any(hasattr(p, "ds_id") for p in list(target.parameters()) + list(online.parameters()))
    if not partitioned:
        return contextlib.nullcontext()
    try:
        import deepspeed
    except ImportError as error:  # pragma: no cover - ZeRO-3 parameters without deepspeed cannot happen in practice
        raise RuntimeError("EMA update on ZeRO-3 partitioned parameters needs deepspeed importable") from error
    stack = contextlib.ExitStack()  # pragma: no cover - needs a GPU and deepspeed
    stack.enter_context(deepspeed.zero.GatheredParameters(list(online.parameters()), modifier_rank=None))
    stack.enter_context(deepspeed.zero.GatheredParameters(list(target.parameters()), modifier_rank=0))
    return stack


@torch.no_grad()
def ema_update_(target: nn.Module, online: nn.Module, momentum: float, buffer_momentum: float | None = None) -> None:
    """`target = momentum * target + (1 - momentum) * online` for parameters, with `torch._foreach_*` kernels.

    Buffers are left to the target by default: a BRo-JEPA target encoder tracks its own BatchNorm running statistics
    from its own activations (see `BroJepaModel`). Averaging them from the online module at the parameters' slow
    momentum is a trap: running statistics start as placeholders (mean 0, var 1), so the target would normalise with
    statistics that fit neither network for hundreds of steps, and its eval-mode outputs collapse (seen in practice).
    Pass `buffer_momentum` (0.0 = copy) to average floating buffers anyway; integer buffers are then copied.
    Sharded parameters (FSDP2 DTensors, ZeRO-3): see the module docstring.
    """
    with _zero3_gathered(target, online):
        target_all, online_all = list(target.parameters()), list(online.parameters())
        if len(target_all) != len(online_all):
            raise ValueError("EMA target and online modules have different parameters")
        pairs = [_local_pair(t.data, o.data) for t, o in zip(target_all, online_all)]
        target_parameters = [t for t, _ in pairs]
        online_parameters = [o for _, o in pairs]
        torch._foreach_mul_(target_parameters, momentum)
        torch._foreach_add_(target_parameters, online_parameters, alpha=1.0 - momentum)
    if buffer_momentum is None:
        return
    for target_buffer, online_buffer in zip(target.buffers(), online.buffers()):
        if target_buffer.is_floating_point():
            target_buffer.mul_(buffer_momentum).add_(online_buffer, alpha=1.0 - buffer_momentum)
        else:
            target_buffer.copy_(online_buffer)
