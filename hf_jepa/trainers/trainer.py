"""One Accelerate training loop for every JEPA family.

A family plugs in through a `Recipe` (`recipe.py`: how to build its model, draw batch `step` for a rank, which modules are EMA
targets, how to finish and evaluate the model, what goes on its card); the loop itself holds no family-specific code.
It runs unchanged in one process, under `accelerate launch` and under `torchrun`.
"""

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import ProjectConfiguration, set_seed
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from .ema import ema_momentum, ema_update_
from .optim import build_optimizer, warmup_cosine_lambda
from .recipe import Recipe

logger = logging.getLogger(__name__)


@dataclass
class TrainingArguments:
    """Trainer settings shared by all families (YAML keys / `--set` names of `hf-jepa train`)."""

    output_dir: str = "outputs/run"
    max_steps: int = 1000
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

    def __post_init__(self):
        if self.max_steps <= 0:
            raise ValueError(f"max_steps must be > 0, got {self.max_steps}")
        if self.per_device_batch_size <= 1:
            raise ValueError(
                f"per_device_batch_size must be > 1 (VICReg statistics need a batch), got {self.per_device_batch_size}"
            )
        if self.gradient_accumulation_steps < 1:
            raise ValueError(f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}")
        if self.mixed_precision not in ("no", "bf16", "fp16"):
            raise ValueError(f"mixed_precision must be 'no', 'bf16' or 'fp16', got {self.mixed_precision!r}")
        if self.warmup_steps < 0 or self.learning_rate <= 0:
            raise ValueError("warmup_steps must be >= 0 and learning_rate > 0")


class _LoopState:
    """Optimiser-step counter saved with `save_state` so that resumed runs continue at the right batch."""

    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = int(state["step"])


@dataclass
class TrainResult:
    model: PreTrainedModel
    metrics: dict[str, Any]
    history: list[dict[str, float]] = field(default_factory=list)
    train_time_s: float = 0.0


def _configure_cpu_threads(accelerator: Accelerator) -> None:
    # Two processes with 2 OpenMP threads each on 2 cores run ~8x slower than one thread each.
    if accelerator.device.type == "cpu" and accelerator.num_processes > 1 and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // accelerator.num_processes))


class JepaTrainer:
    """Train a recipe's model with AdamW (no decay on biases/norms), warm-up + cosine LR, EMA targets, gradient
    accumulation, mixed precision, trackers, `save_state` checkpoints with exact resume, and a final
    `save_pretrained` with the model card."""

    def __init__(self, recipe: Recipe, args: TrainingArguments):
        self.recipe = recipe
        self.args = args

    def _make_accelerator(self) -> Accelerator:
        args = self.args
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        world_size = torch.distributed.get_world_size() if distributed else int(os.environ.get("WORLD_SIZE", "1"))
        # A process state left over from an earlier run in this process (or inherited through a fork, as with
        # `debug_launcher`/`notebook_launcher` after an in-process run) that disagrees with the launch would make
        # every rank train alone, silently: rebuild it.
        stale = PartialState._shared_state.get("num_processes", world_size) != world_size
        if stale or (not distributed and world_size == 1):
            # Several runs in one process (reproduction tables) may use different precisions.
            AcceleratorState._reset_state(reset_partial_state=stale)
        project = ProjectConfiguration(
            project_dir=args.output_dir,
            logging_dir=os.path.join(args.output_dir, "logs"),
            automatic_checkpoint_naming=True,
            total_limit=args.save_total_limit,
        )
        accelerator = Accelerator(
            cpu=args.cpu or None,
            mixed_precision=args.mixed_precision,
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            log_with=args.log_with,
            project_config=project,
        )
        # Automatic checkpoint naming restarts at checkpoint_0 in every process, so a resumed run (or a rerun in the
        # same output_dir) would collide with its own earlier checkpoints: continue after the highest existing one.
        existing = [
            int(path.name.rsplit("_", 1)[1])
            for path in (Path(args.output_dir) / "checkpoints").glob("checkpoint_*")
            if path.is_dir() and path.name.rsplit("_", 1)[1].isdigit()
        ]
        if existing:
            accelerator.project_configuration.iteration = max(existing) + 1
        return accelerator

    def train(self) -> TrainResult:
        args, recipe = self.args, self.recipe
        accelerator = self._make_accelerator()
        _configure_cpu_threads(accelerator)
        set_seed(args.seed)
        logger.info(
            "Training %s on %s x %d process(es), mixed precision %s",
            recipe.name,
            accelerator.device,
            accelerator.num_processes,
            accelerator.mixed_precision,
        )
        model = recipe.build_model()
        optimizer = build_optimizer(model, args.learning_rate, args.weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, warmup_cosine_lambda(args.warmup_steps, args.max_steps, args.min_lr_ratio)
        )
        model, optimizer = accelerator.prepare(model, optimizer)
        # The scheduler is stepped by hand once per optimiser step (a prepared one steps once per process).
        loop = _LoopState()
        accelerator.register_for_checkpointing(scheduler, loop)
        if args.log_with:
            accelerator.init_trackers(recipe.name.replace("-", "_"), config=_flat_config(args, model))

        if args.resume_from_checkpoint:
            accelerator.load_state(args.resume_from_checkpoint)
            logger.info("Resumed from %s at step %d", args.resume_from_checkpoint, loop.step)

        unwrapped = accelerator.unwrap_model(model)
        ema_pairs = recipe.ema_pairs(unwrapped)
        momentum_start, momentum_end = recipe.ema_schedule(unwrapped)
        history: list[dict[str, float]] = []
        progress = tqdm(
            total=args.max_steps,
            initial=loop.step,
            desc=f"train {recipe.name}",
            disable=args.disable_progress_bar or not accelerator.is_local_main_process,
        )
        model.train()
        start_time = time.perf_counter()
        running: dict[str, float] = {}
        running_count = 0
        while loop.step < args.max_steps:
            for micro in range(args.gradient_accumulation_steps):
                batch = recipe.train_batch(
                    loop.step * args.gradient_accumulation_steps + micro,
                    accelerator.process_index,
                    args.per_device_batch_size,
                )
                batch = {k: v.to(accelerator.device) for k, v in batch.items()}
                with accelerator.accumulate(model):
                    with accelerator.autocast():
                        outputs = model(**batch)
                    loss = outputs.loss
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"non-finite loss {loss.item()} at step {loop.step}")
                    accelerator.backward(loss)
                    if args.max_grad_norm and accelerator.sync_gradients:
                        accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                for key, value in _scalar_outputs(outputs).items():
                    running[key] = running.get(key, 0.0) + value / args.gradient_accumulation_steps
            running_count += 1

            scheduler.step()
            momentum = ema_momentum(loop.step, args.max_steps, momentum_start, momentum_end)
            for online, target in ema_pairs:
                ema_update_(target, online, momentum)
            loop.step += 1
            progress.update(1)

            if loop.step % args.logging_steps == 0 or loop.step == args.max_steps:
                record = {k: v / running_count for k, v in running.items()}
                record.update(step=loop.step, lr=scheduler.get_last_lr()[0], ema_momentum=momentum)
                record["elapsed_s"] = time.perf_counter() - start_time
                if accelerator.is_main_process:
                    record.update(recipe.on_log(unwrapped, loop.step, record))
                history.append(record)
                accelerator.log({k: v for k, v in record.items() if k != "step"}, step=loop.step)
                progress.set_postfix(loss=f"{record.get('loss', float('nan')):.4f}")
                running, running_count = {}, 0
            if args.save_steps and loop.step % args.save_steps == 0 and loop.step < args.max_steps:
                accelerator.save_state()
        progress.close()
        train_time = time.perf_counter() - start_time
        accelerator.wait_for_everyone()

        unwrapped = accelerator.unwrap_model(model)
        unwrapped.eval()
        metrics: dict[str, Any] = {}
        if accelerator.is_main_process:
            recipe.finalize(unwrapped)
            metrics = recipe.evaluate(unwrapped, args.output_dir)
            metrics["train_time_s"] = round(train_time, 2)
            metrics["train_steps"] = args.max_steps
            metrics["num_processes"] = accelerator.num_processes
            metrics["device"] = str(accelerator.device)
            if args.save_model:
                self._save(unwrapped, metrics, history)
        accelerator.wait_for_everyone()
        if args.log_with:
            accelerator.end_training()
        return TrainResult(model=unwrapped, metrics=metrics, history=history, train_time_s=train_time)

    def _save(self, model: PreTrainedModel, metrics: dict, history: list[dict]) -> None:
        output_dir = Path(self.args.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(output_dir)
        (output_dir / "eval_results.json").write_text(json.dumps(metrics, indent=2, default=float))
        (output_dir / "training_args.json").write_text(json.dumps(asdict(self.args), indent=2))
        with open(output_dir / "training_log.jsonl", "w") as handle:
            for record in history:
                handle.write(json.dumps(record) + "\n")
        self.recipe.save_artifacts(model, str(output_dir), metrics, self.args)
        logger.info("Saved model, metrics and card to %s", output_dir)


def _scalar_outputs(outputs) -> dict[str, float]:
    scalars = {}
    for key, value in outputs.items():
        if isinstance(value, torch.Tensor) and value.ndim == 0:
            scalars[key] = value.detach().float().item()
    return scalars


def _flat_config(args: TrainingArguments, model) -> dict:
    config = {f"train/{k}": v for k, v in asdict(args).items() if isinstance(v, (int, float, str, bool))}
    unwrapped = getattr(model, "module", model)
    for key, value in unwrapped.config.to_dict().items():
        if isinstance(value, (int, float, str, bool)):
            config[f"model/{key}"] = value
    return config
