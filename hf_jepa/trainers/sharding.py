"""Sharded training paths of the trainer: gradient checkpointing, torch-native FSDP2, gathering a full state dict,
and the checks that keep sharded runs from writing something wrong.

Which path shards what:

| path | how it is chosen | parameters on each rank | tested on CPU |
|---|---|---|---|
| DDP (accelerate) | `accelerate launch` with `multi_gpu_ddp.yaml` / `cpu_2proc.yaml` | full copies | yes (gloo) |
| FSDP2, torch-native | `TrainingArguments(fsdp="fully_shard")` under any distributed launch | DTensor shards | yes (gloo) |
| FSDP2, accelerate | `accelerate launch --config_file fsdp2.yaml` | DTensor shards | no: accelerate turns it into DDP on CPU |
| DeepSpeed ZeRO-3 | `accelerate launch --config_file deepspeed_zero3.yaml` | partitioned (`ds_id`) | no: needs a GPU |

Final evaluation and saving with sharded parameters: every rank takes part in gathering the full state dict
(`gather_full_state_dict`, a collective); the main process loads it into a fresh, unsharded model built by the recipe
and runs `finalize`, `evaluate` and `save_pretrained` on that model; the other ranks wait. Periodic checkpoints with
sharded parameters are refused (`refuse_sharded_checkpoints`): the checkpoint format holds one full model and one
optimiser state, and writing rank 0's shards into it would be a wrong checkpoint.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)

# accelerate's distributed types whose prepared model holds sharded or partitioned parameters.
_SHARDING_TYPES = ("FSDP", "DEEPSPEED")


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Turn on transformers' activation checkpointing of every `GradientCheckpointingLayer` block (non-reentrant:
    safe with DDP, FSDP2 and frozen EMA targets). Refuses a model class without support."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(
            f"gradient_checkpointing=True: {type(model).__name__} does not support gradient checkpointing "
            "(its class does not set supports_gradient_checkpointing); set gradient_checkpointing=false"
        )
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    kwargs_name = (
        "activation_checkpointing_kwargs"
        if hasattr(model, "activation_checkpointing_enable")
        else "gradient_checkpointing_kwargs"
    )
    enable(**{kwargs_name: {"use_reentrant": False}})


def apply_fully_shard(model: nn.Module, device: torch.device) -> nn.Module:
    """torch-native FSDP2: `fully_shard` each of the model's `_no_split_modules` blocks, then the root, on a 1-D
    mesh over all ranks. Call before the optimiser is built (parameters become DTensors)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "fsdp='fully_shard' needs a distributed launch (torchrun, or accelerate launch with the DDP or "
            "2-process CPU config); this process has no process group"
        )
    block_names = set(getattr(model, "_no_split_modules", None) or [])
    if not block_names:
        raise ValueError(
            f"fsdp='fully_shard': {type(model).__name__} declares no _no_split_modules (its transformer blocks), "
            "so there is nothing to shard block by block; train it with DDP (fsdp unset)"
        )
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    blocks = [m for m in model.modules() if type(m).__name__ in block_names and m is not model]
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    logger.info("fully_shard: %d blocks (%s) and the root over %d ranks", len(blocks), sorted(block_names), mesh.size())
    return model


def is_fully_sharded(model: nn.Module) -> bool:
    """Whether `model` went through torch's `fully_shard` (its parameters are DTensors)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def holds_sharded_parameters(accelerator, model: nn.Module) -> bool:
    """True when no rank holds the full parameters: torch-native FSDP2, or accelerate's FSDP/DeepSpeed plugins."""
    return is_fully_sharded(model) or accelerator.distributed_type.value in _SHARDING_TYPES


def gather_full_state_dict(accelerator, model: nn.Module) -> dict[str, torch.Tensor]:
    """The full (unsharded) state dict on the main process, on CPU; `{}` elsewhere. A collective: call it on every
    rank. torch-native FSDP2 through `torch.distributed.checkpoint.state_dict`; everything else through
    `accelerator.get_state_dict` (accelerate's FSDP and DeepSpeed ZeRO-3 gathering; not runnable without a GPU)."""
    if is_fully_sharded(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(model, options=options)
        return state if accelerator.is_main_process else {}
    state = accelerator.get_state_dict(model, unwrap=True)
    if not accelerator.is_main_process:
        return {}
    return {k: v.detach().cpu() for k, v in state.items()}


def full_model_from_state(recipe, state: dict[str, torch.Tensor], device: torch.device) -> nn.Module:
    """(Main process) a fresh, unsharded model from the recipe holding the gathered `state`, on `device`."""
    model = recipe.build_model()
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Non-persistent buffers are not in a state dict; anything else missing or unexpected is a gathering error.
    if missing or unexpected:
        raise RuntimeError(
            f"the gathered state dict does not fit a fresh {type(model).__name__}: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    return model.to(device)


def set_deepspeed_batch_size(accelerator, per_device_batch_size: int, max_grad_norm: float | None) -> None:
    """DeepSpeed's `prepare` reads the micro-batch size from a prepared dataloader, which this trainer does not use:
    set it from `per_device_batch_size`. DeepSpeed also clips gradients itself (accelerate fills `auto` with 1.0 and
    its `clip_grad_norm_` only reports the norm): set the clipping from `max_grad_norm` (0 = none). Needs a GPU;
    untested here."""
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    if plugin is not None and accelerator.distributed_type.value == "DEEPSPEED":  # pragma: no cover - GPU only
        plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = per_device_batch_size
        plugin.deepspeed_config["gradient_clipping"] = max_grad_norm or 0.0


def refuse_sharded_checkpoints(args, accelerator, model: nn.Module) -> None:
    """Periodic checkpoints and resume hold one full model and optimiser state: with sharded parameters they would
    save or load rank 0's shards only. Refused with what to do, before any step is trained."""
    if not holds_sharded_parameters(accelerator, model):
        return
    what = "fsdp='fully_shard'" if is_fully_sharded(model) else f"accelerate's {accelerator.distributed_type.value}"
    if args.save_steps:
        raise ValueError(
            f"save_steps={args.save_steps} with {what}: periodic checkpoints of sharded parameters are not "
            "supported yet (the checkpoint format holds a full model and optimiser state; writing one rank's shards "
            "would be a wrong checkpoint). Set save_steps=0 (the final model is still gathered and saved), or train "
            "with DDP."
        )
    if args.resume_from_checkpoint:
        raise ValueError(
            f"resume_from_checkpoint with {what}: resuming sharded parameters is not supported yet; resume with DDP"
        )


def refuse_dtensors(state: dict, what: str) -> None:
    """Refuse to write `state` when it holds DTensor shards (a checkpoint of one rank's shards would look complete
    and be wrong)."""
    from torch.distributed.tensor import DTensor

    def walk(value, key):
        if isinstance(value, DTensor):
            yield key
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, f"{key}.{k}" if key else str(k))

    sharded = list(walk(state, ""))
    if sharded:
        raise ValueError(f"{what}: {len(sharded)} tensors are DTensor shards (e.g. {sharded[0]}); gather them first")


def quiet_non_main_logging(accelerator) -> tuple[logging.Logger, int] | None:
    """Non-main ranks log warnings and errors only (one line per event, from the main process). Returns what to
    restore."""
    if accelerator.is_main_process:
        return None
    root = logging.getLogger("hf_jepa")
    previous = root.level
    root.setLevel(logging.WARNING)
    return root, previous


def reduce_mean(accelerator, values: dict[str, float]) -> dict[str, float]:
    """The mean over ranks of each logged value (every rank must call it with the same keys)."""
    if accelerator.num_processes == 1 or not values:
        return values
    keys = sorted(values)
    tensor = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=accelerator.device)
    reduced = accelerator.reduce(tensor, reduction="mean")
    return {k: float(v) for k, v in zip(keys, reduced.tolist())}


def peak_memory_gib(device: torch.device) -> float | None:
    """Peak allocated memory on a CUDA device since the run started (GiB); None elsewhere."""
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 3)


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
