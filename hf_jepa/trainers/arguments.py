"""`TrainingArguments`: the trainer settings shared by all families, validated by type and range on construction."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .tracking import parse_log_with

NAN_POLICIES = ("stop", "skip")
MIXED_PRECISIONS = ("no", "bf16", "fp16")
FSDP_MODES = ("fully_shard",)


@dataclass
class TrainingArguments:
    """Trainer settings shared by all families (YAML keys / `--set` names of `hf-jepa train`).

    Length and schedules:
        max_train_seconds: a time budget: the run ends at the first optimiser step that brings its training time to
            this many seconds (or at `max_steps`, whichever comes first: raise `max_steps` for a run that should end
            by time), and the learning-rate cosine and the EMA momentum follow the fraction of the budget spent
            instead of the fraction of `max_steps` (the warm-up still counts `warmup_steps` steps). Training time is
            the sum of the optimiser steps' durations (batch, forward, backward, update, EMA; on CUDA measured between
            synchronisations): logging, checkpoints and whatever a caller of `JepaTrainer.steps()` does between steps
            (an evaluation) are off the clock, and a resumed run continues from the checkpoint's time. Under several
            processes every rank takes rank 0's step durations, so all stop at the same step. Default: None (the run
            is `max_steps` long).

    Output folder and resume (see docs/reliability.md):
        overwrite_output_dir: a non-empty `output_dir` is refused unless this is set (the folder is then cleared
            first) or a resume is asked for.
        resume_from_checkpoint: `"latest"` (the highest complete checkpoint under `output_dir/checkpoints`) or the
            path of a checkpoint folder.
        resume_allow_changes: settings that may differ from the checkpoint's run when resuming: a list of names
            (`learning_rate`, or `train.`/`model.`/`data.`-prefixed), or `True` for any. Default: none, so a resume
            with changed settings is refused with the list of differences.
        allow_pickle_checkpoints: UNSAFE. Resume from a checkpoint that holds pickle files (`*.pkl`, `*.bin`,
            `*.pt`: accelerate's `save_state` format). Unpickling runs whatever code the file holds: only for
            checkpoints you wrote yourself.
        nan_policy: on a non-finite loss, `"stop"` (raise, naming the step) or `"skip"` (skip the optimiser step and
            the EMA update, restore the model's buffers, count it in the log's `skipped_steps`).

    Scaling (see `sharding.py` and docs/guides/training.md):
        gradient_checkpointing: recompute each transformer block's activations in the backward pass
            (transformers' `activation_checkpointing_enable`); refused for a model class without support.
        fsdp: `"fully_shard"` applies torch's native FSDP2 (`torch.distributed.fsdp.fully_shard`) to each of the
            model's `_no_split_modules` blocks and to the root before the optimiser is built (needs a distributed
            launch: torchrun / `accelerate launch` with the DDP or CPU config, not accelerate's FSDP config). Works on
            CPU (gloo) and GPU (nccl). Default: None (accelerate's own wrapping: DDP, or its FSDP/DeepSpeed plugins).

    Speed:
        torch_compile: compile the model's forward with `torch.compile` (inductor backend, through accelerate's
            dynamo plugin when the model is prepared). Off by default: the first steps pay the compilation (tens of
            seconds on CPU, and it needs a C++ compiler there); `benchmarks/compute_efficiency.py` measures the step
            time compiled vs eager. Not combined with `fsdp` (refused).
    """

    output_dir: str = "outputs/run"
    max_steps: int = 1000
    max_train_seconds: float | None = None
    per_device_batch_size: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 50
    min_lr_ratio: float = 0.0
    gradient_accumulation_steps: int = 1
    max_grad_norm: float | None = None
    mixed_precision: str = "no"
    seed: int = 0
    logging_steps: int = 50
    save_steps: int = 0
    save_total_limit: int | None = 2
    resume_from_checkpoint: str | None = None
    log_with: str | None = None
    cpu: bool = False
    disable_progress_bar: bool = False
    save_model: bool = True
    overwrite_output_dir: bool = False
    resume_allow_changes: bool | list[str] | None = None
    allow_pickle_checkpoints: bool = False
    nan_policy: str = "stop"
    gradient_checkpointing: bool = False
    fsdp: str | None = None
    torch_compile: bool = False

    def __post_init__(self):
        _check_str("output_dir", self.output_dir)
        _check_int("max_steps", self.max_steps, minimum=1)
        if self.max_train_seconds is not None:
            _check_float("max_train_seconds", self.max_train_seconds, 0.0, inclusive=False, none_ok=True)
        _check_int(
            "per_device_batch_size", self.per_device_batch_size, minimum=2, why=" (VICReg statistics need a batch)"
        )
        _check_float("learning_rate", self.learning_rate, minimum=0.0, inclusive=False)
        _check_float("weight_decay", self.weight_decay, minimum=0.0)
        _check_int("warmup_steps", self.warmup_steps, minimum=0)
        _check_float("min_lr_ratio", self.min_lr_ratio, minimum=0.0, maximum=1.0)
        _check_int("gradient_accumulation_steps", self.gradient_accumulation_steps, minimum=1)
        if self.max_grad_norm is not None:
            _check_float("max_grad_norm", self.max_grad_norm, minimum=0.0, inclusive=False, none_ok=True)
        _check_choice("mixed_precision", self.mixed_precision, MIXED_PRECISIONS)
        _check_int("seed", self.seed, minimum=0)
        _check_int("logging_steps", self.logging_steps, minimum=1)
        _check_int("save_steps", self.save_steps, minimum=0)
        if self.save_total_limit is not None:
            _check_int("save_total_limit", self.save_total_limit, minimum=1, none_ok=True)
        for name in ("resume_from_checkpoint", "log_with"):
            if getattr(self, name) is not None:
                _check_str(name, getattr(self, name))
        if self.log_with is not None:
            parse_log_with(self.log_with)
        if self.fsdp is not None:
            _check_choice("fsdp", self.fsdp, FSDP_MODES)
        flags = ("cpu", "disable_progress_bar", "save_model", "overwrite_output_dir", "allow_pickle_checkpoints")
        for name in (*flags, "gradient_checkpointing", "torch_compile"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        _check_choice("nan_policy", self.nan_policy, NAN_POLICIES)
        if self.torch_compile and self.fsdp is not None:
            raise ValueError(
                f"torch_compile cannot be combined with fsdp={self.fsdp!r} (the fully_shard path is not prepared by "
                "accelerate, which applies the compilation): set one of them"
            )
        self.resume_allow_changes = _allowed_changes(self.resume_allow_changes)
        if self.overwrite_output_dir and self.resume_from_checkpoint:
            raise ValueError(
                "overwrite_output_dir clears output_dir, and resume_from_checkpoint continues a run: set only one"
            )


def _check_str(name: str, value) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


def _check_int(name: str, value, minimum: int, why: str = "", none_ok: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an integer" + (" or null" if none_ok else "")
        raise ValueError(f"{name} must be {kind} >= {minimum}{why}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}{why}, got {value}")


def _check_float(name, value, minimum, maximum=None, inclusive=True, none_ok=False) -> None:
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool)
    low_ok = ok_type and (value >= minimum if inclusive else value > minimum)
    if not ok_type or not math.isfinite(value) or not low_ok or (maximum is not None and value > maximum):
        bound = f"in [{minimum}, {maximum}]" if maximum is not None else f"{'>=' if inclusive else '>'} {minimum}"
        kind = "a finite number" + (" (or null)" if none_ok else "")
        raise ValueError(f"{name} must be {kind} {bound}, got {value!r}")


def _check_choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")


def _allowed_changes(value) -> bool | list[str] | None:
    """`resume_allow_changes` as None, True/False or a list of setting names (a comma-separated string is split)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"resume_allow_changes must be true/false or a list of setting names, got {value!r}")
    return list(value)
