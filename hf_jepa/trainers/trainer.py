"""One Accelerate training loop for every JEPA family.

A family plugs in through a `Recipe` (`recipe.py`: how to build its model, draw batch `step` for a rank, which modules are EMA
targets, how to finish and evaluate the model, what goes on its card); the loop itself holds no family-specific code.
It runs unchanged in one process, under `accelerate launch` and under `torchrun`. The output folder rules are in
`output_dir.py`, the checkpoint format and safe loading in `checkpointing.py`, the settings in `arguments.py`.
"""

import json
import logging
import os
import time
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import ProjectConfiguration, broadcast, broadcast_object_list, set_seed
from safetensors.torch import load_file
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from .arguments import TrainingArguments
from .checkpointing import (
    apply_hyperparameters,
    begin_checkpoint,
    complete_checkpoints,
    describe_changes,
    disallowed,
    finish_checkpoint,
    format_differences,
    load_state_files,
    resolve_checkpoint,
    rng_state,
    run_settings,
    save_state_files,
    set_rng_state,
    settings_differences,
    write_main_files,
)
from .custom_pipelines import declare_image_processor_in_config, write_custom_pipelines
from .ema import ema_update_
from .optim import build_optimizer, warmup_cosine_lambda
from .output_dir import prepare_output_dir
from .recipe import Recipe
from .sharding import (
    apply_fully_shard,
    enable_gradient_checkpointing,
    full_model_from_state,
    gather_full_state_dict,
    holds_sharded_parameters,
    peak_memory_gib,
    quiet_non_main_logging,
    reduce_mean,
    refuse_sharded_checkpoints,
    reset_peak_memory,
    set_deepspeed_batch_size,
)
from .tracking import tracker_setup

logger = logging.getLogger(__name__)

# The clock of `step_time_s` (the time budget), `train_time_s` and the log's `elapsed_s`; a test may put a fake here.
clock = time.perf_counter


@dataclass
class TrainerState:
    """Where a run stands (`JepaTrainer.state`; what `JepaTrainer.steps()` yields after each optimiser step), carried
    across a crash by the checkpoints: steps done, training time, skipped steps, the log, earlier resumes.

    `step_time_s` is the time budget's clock (`TrainingArguments.max_train_seconds`): the summed durations of the
    optimiser steps. `train_time_s` is the loop's wall time, logging and checkpoints included (not the time a caller
    of `steps()` spends between steps)."""

    max_steps: int = 0
    max_train_seconds: float | None = None
    step: int = 0
    step_time_s: float = 0.0
    train_time_s: float = 0.0
    skipped_steps: int = 0
    log_history: list[dict] = field(default_factory=list)
    resumes: list[dict] = field(default_factory=list)

    @property
    def progress(self) -> float:
        """The schedules' clock, 0 to 1: the fraction of `max_train_seconds` spent when the run has a time budget,
        else the fraction of `max_steps` done."""
        if self.max_train_seconds is not None:
            return min(1.0, self.step_time_s / self.max_train_seconds)
        return min(1.0, self.step / self.max_steps) if self.max_steps > 0 else 1.0

    @property
    def done(self) -> bool:
        """Whether the run has reached `max_steps` or spent its time budget."""
        out_of_time = self.max_train_seconds is not None and self.step_time_s >= self.max_train_seconds
        return self.step >= self.max_steps or out_of_time

    # accelerate's `register_for_checkpointing` protocol: only for loading legacy (pickle) checkpoints.
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


def _on_main(accelerator: Accelerator, fn, share: bool = True):
    """Run `fn` on the main process only; every process gets its result (`share`) or raises its error, so a refused
    start fails on every rank instead of leaving the others waiting."""
    result, error = None, None
    if accelerator.is_main_process:
        try:
            result = fn()
        except Exception as caught:  # noqa: BLE001 - re-raised below, on every rank
            error = caught
    if accelerator.num_processes > 1:
        payload = [result if share else None, None if error is None else str(error)]
        broadcast_object_list(payload)
        if error is None and payload[1] is not None:
            raise ValueError(payload[1])
        if share:
            result = payload[0]
    if error is not None:
        raise error
    return result


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":  # kernels run asynchronously: a step's duration ends when its kernels have
        torch.cuda.synchronize(device)


def _rank0_seconds(accelerator: Accelerator, seconds: float) -> float:
    """Rank 0's `seconds` on every process: a time budget must end every rank's run at the same step."""
    if accelerator.num_processes == 1:
        return seconds
    value = torch.tensor([seconds], dtype=torch.float64, device=accelerator.device)
    return float(broadcast(value, from_process=0).item())


def _finite_everywhere(accelerator: Accelerator, loss: torch.Tensor) -> bool:
    finite = bool(torch.isfinite(loss.detach()).all())
    if accelerator.num_processes > 1:  # every rank must take the same decision (DDP all-reduces in backward)
        flag = torch.tensor([0.0 if finite else 1.0], device=accelerator.device)
        finite = accelerator.reduce(flag, reduction="sum").item() == 0
    return finite


class JepaTrainer:
    """Train a recipe's model with AdamW (no decay on biases/norms), warm-up + cosine LR, EMA targets, gradient
    accumulation, mixed precision, trackers, atomic safetensors checkpoints with exact resume, and a final
    `save_pretrained` with the model card. The run is `max_steps` long, or has a time budget
    (`TrainingArguments.max_train_seconds`); `train()` runs it to the end, `steps()` one optimiser step at a time."""

    def __init__(self, recipe: Recipe, args: TrainingArguments):
        self.recipe = recipe
        self.args = args
        self.state = TrainerState(args.max_steps, args.max_train_seconds)
        self.model: PreTrainedModel | None = None  # the model being trained (unwrapped), once a run has started

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
        trackers, self._tracker_init_kwargs = tracker_setup(args.log_with, args.output_dir)
        project = ProjectConfiguration(project_dir=args.output_dir, logging_dir=os.path.join(args.output_dir, "logs"))
        return Accelerator(
            cpu=args.cpu or None,
            mixed_precision=args.mixed_precision,
            gradient_accumulation_steps=args.gradient_accumulation_steps,
            log_with=trackers or None,
            project_config=project,
            # `prepare` wraps the model in torch.compile; None keeps accelerate's default (its env/config setting).
            dynamo_backend="inductor" if args.torch_compile else None,
        )

    def train(self) -> TrainResult:
        """Train to the end (`max_steps` or the time budget), evaluate and save (`save_model`): the trained model, its
        metrics and the log."""
        run = self.steps()
        while True:
            try:
                next(run)
            except StopIteration as finished:
                return finished.value

    def steps(self) -> Generator[TrainerState, None, TrainResult]:
        """The run one optimiser step at a time: a generator yielding `self.state` after each step; when the run ends
        it evaluates and saves as `train()` does and returns the `TrainResult` (the `StopIteration` value).

        What the caller does between two steps (an evaluation of `self.model` at a wall-clock checkpoint, say) is not
        training time: it counts neither towards `max_train_seconds` nor in `train_time_s`, and the next step sets the
        model back to training mode. Several runs may be stepped in turn in one process (e.g. two models sharing a
        time budget): accelerate's state is process-wide, so give them the same `mixed_precision` and
        `gradient_accumulation_steps`. Closing the generator before the end stops the run without evaluating or
        saving."""
        accelerator = self._make_accelerator()
        _configure_cpu_threads(accelerator)
        quieted = quiet_non_main_logging(accelerator)
        try:
            return (yield from self._train_in_folder(accelerator))
        finally:
            if quieted is not None:
                quieted[0].setLevel(quieted[1])

    def _train_in_folder(self, accelerator: Accelerator) -> Generator[TrainerState, None, TrainResult]:
        args = self.args
        resuming = bool(args.resume_from_checkpoint)
        lock = _on_main(
            accelerator,
            lambda: prepare_output_dir(args.output_dir, resuming=resuming, overwrite=args.overwrite_output_dir),
            share=False,
        )
        accelerator.wait_for_everyone()
        try:
            checkpoint = None
            if resuming:
                checkpoint = _on_main(
                    accelerator,
                    lambda: resolve_checkpoint(
                        args.resume_from_checkpoint, args.output_dir, args.allow_pickle_checkpoints
                    ),
                )
            return (yield from self._train(accelerator, checkpoint))
        finally:
            if lock is not None:
                lock.release()

    def _train(
        self, accelerator: Accelerator, checkpoint: tuple[Path, bool] | None
    ) -> Generator[TrainerState, None, TrainResult]:
        args, recipe = self.args, self.recipe
        self.state = run = TrainerState(args.max_steps, args.max_train_seconds)
        timed = args.max_train_seconds is not None
        set_seed(args.seed)
        logger.info(
            "Training %s on %s x %d process(es), mixed precision %s",
            recipe.name,
            accelerator.device,
            accelerator.num_processes,
            accelerator.mixed_precision,
        )
        reset_peak_memory(accelerator.device)
        model = recipe.build_model()
        if args.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        if args.fsdp == "fully_shard":  # torch-native FSDP2: shards in place; accelerate must not wrap it in DDP
            model = apply_fully_shard(model.to(accelerator.device), accelerator.device)
        optimizer = build_optimizer(model, args.learning_rate, args.weight_decay)
        # With a time budget the cosine follows the fraction of it spent (read when the scheduler steps).
        spent = (lambda: run.progress) if timed else None
        lr_lambda = warmup_cosine_lambda(args.warmup_steps, args.max_steps, args.min_lr_ratio, progress=spent)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
        set_deepspeed_batch_size(accelerator, args.per_device_batch_size, args.max_grad_norm)
        if args.fsdp == "fully_shard":
            optimizer = accelerator.prepare(optimizer)
        else:
            model, optimizer = accelerator.prepare(model, optimizer)
        refuse_sharded_checkpoints(args, accelerator, model)
        sharded = holds_sharded_parameters(accelerator, model)
        # The scheduler is stepped by hand once per optimiser step (a prepared one steps once per process).
        self.model = unwrapped = accelerator.unwrap_model(model)
        objects = SimpleNamespace(model=unwrapped, optimizer=optimizer, scheduler=scheduler)
        objects.settings = run_settings(asdict(args), unwrapped.config, recipe.data_settings())
        if checkpoint is not None:
            self._resume(accelerator, checkpoint, objects, run)
        if args.log_with:
            accelerator.init_trackers(
                recipe.name.replace("-", "_"), config=_flat_config(args, model), init_kwargs=self._tracker_init_kwargs
            )

        ema_pairs = recipe.ema_pairs(unwrapped)
        momentum_start, momentum_end = recipe.ema_schedule(unwrapped)
        history = run.log_history
        progress = tqdm(  # with a time budget, the bar counts its seconds
            total=args.max_train_seconds if timed else args.max_steps,
            initial=run.step_time_s if timed else run.step,
            unit="s" if timed else "it",
            desc=f"train {recipe.name}",
            disable=args.disable_progress_bar or not accelerator.is_local_main_process,
        )
        time_before, start_time = run.train_time_s, clock()
        running: dict[str, float] = {}
        running_count = 0
        accumulation = args.gradient_accumulation_steps
        # A streamed source hands over batches in order from DataLoader workers; its position is the step.
        stream = recipe.train_stream(
            accelerator.process_index, accelerator.num_processes, args.per_device_batch_size, run.step * accumulation
        )
        while not run.done:
            if timed:
                _synchronize(accelerator.device)
            step_started = clock()
            model.train()  # a caller of `steps()` may have evaluated since the last step
            snapshot = [b.detach().clone() for b in unwrapped.buffers()] if args.nan_policy == "skip" else None
            finite, window = True, {}
            for micro in range(accumulation):
                with accelerator.accumulate(model):
                    index = run.step * accumulation + micro
                    if finite:
                        batch = _next_batch(recipe, stream, index, accelerator.process_index, args)
                        batch = {k: v.to(accelerator.device) for k, v in batch.items()}
                        with accelerator.autocast():
                            outputs = model(**batch)
                        finite = _finite_everywhere(accelerator, outputs.loss)
                        if finite:
                            accelerator.backward(outputs.loss)
                            if args.max_grad_norm and accelerator.sync_gradients:
                                accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                            optimizer.step()
                            for key, value in _scalar_outputs(outputs).items():
                                window[key] = window.get(key, 0.0) + value / accumulation
                        elif args.nan_policy == "stop":
                            raise FloatingPointError(
                                f"non-finite loss ({outputs.loss.item()} on process {accelerator.process_index}, "
                                f"non-finite on at least one) at optimiser step {run.step + 1}, micro-batch {micro}: "
                                "training stopped; this step was not applied or saved (the last complete checkpoint "
                                "is intact). Set nan_policy='skip' to skip such steps."
                            )
                    elif stream is not None:  # a skipped micro-batch still uses up its place in the stream
                        _next_batch(recipe, stream, index, accelerator.process_index, args)
                    optimizer.zero_grad(set_to_none=True)

            momentum = momentum_start + (momentum_end - momentum_start) * run.progress  # linear over the run
            if finite:
                for key, value in window.items():
                    running[key] = running.get(key, 0.0) + value
                running_count += 1
                for online, target in ema_pairs:
                    ema_update_(target, online, momentum)
            else:  # nan_policy="skip": no optimiser step, no EMA update, the buffers as before the forward passes
                with torch.no_grad():
                    for buffer, saved in zip(unwrapped.buffers(), snapshot):
                        buffer.copy_(saved)
                run.skipped_steps += 1
                logger.warning("Non-finite loss at optimiser step %d: step skipped (nan_policy='skip')", run.step + 1)
            if timed:
                _synchronize(accelerator.device)
            step_seconds = clock() - step_started
            run.step_time_s += _rank0_seconds(accelerator, step_seconds) if timed else step_seconds
            scheduler.step()
            run.step += 1
            progress.update(step_seconds if timed else 1)

            if run.step % args.logging_steps == 0 or run.done:
                record = {k: v / running_count for k, v in running.items()} if running_count else {}
                record = reduce_mean(accelerator, record)  # the mean over ranks of each rank's mean
                record.update(step=run.step, lr=scheduler.get_last_lr()[0], ema_momentum=momentum)
                record["elapsed_s"] = time_before + clock() - start_time
                if timed:
                    record["step_time_s"] = run.step_time_s
                if args.nan_policy == "skip":
                    record["skipped_steps"] = run.skipped_steps
                if accelerator.is_main_process or sharded:  # a sharded forward is a collective: every rank runs it
                    extra = recipe.on_log(unwrapped, run.step, record)
                    if accelerator.is_main_process:
                        record.update(extra)
                history.append(record)
                accelerator.log({k: v for k, v in record.items() if k != "step"}, step=run.step)
                progress.set_postfix(loss=f"{record.get('loss', float('nan')):.4f}")
                running, running_count = {}, 0
            if args.save_steps and run.step % args.save_steps == 0 and not run.done:
                run.train_time_s = time_before + clock() - start_time
                self._save_checkpoint(accelerator, objects, run)
            paused = clock()
            yield run
            start_time += clock() - paused  # the caller's time between steps is not the loop's
        progress.close()
        del stream  # stops the DataLoader workers of a streamed source
        run.train_time_s = train_time = time_before + clock() - start_time
        if timed and run.step_time_s < args.max_train_seconds:
            logger.warning(
                "Stopped at max_steps=%d after %.1f s of the max_train_seconds=%g budget: the schedules did not reach "
                "their end (raise max_steps for a run that ends by time)",
                args.max_steps,
                run.step_time_s,
                args.max_train_seconds,
            )
        accelerator.wait_for_everyone()

        unwrapped = accelerator.unwrap_model(model)
        if sharded:
            # Every rank gathers; the main process evaluates and saves a fresh unsharded model (see sharding.py).
            state = gather_full_state_dict(accelerator, model)
            if accelerator.is_main_process:
                unwrapped = full_model_from_state(recipe, state, accelerator.device)
            del state
        unwrapped.eval()
        metrics: dict[str, Any] = {}
        if accelerator.is_main_process:
            recipe.finalize(unwrapped)
            metrics = recipe.evaluate(unwrapped, args.output_dir)
            metrics["train_time_s"] = round(train_time, 2)
            metrics["train_steps"] = run.step
            if timed:
                metrics["step_time_s"] = round(run.step_time_s, 2)
            metrics["num_processes"] = accelerator.num_processes
            metrics["device"] = str(accelerator.device)
            peak = peak_memory_gib(accelerator.device)
            if peak is not None:
                metrics["peak_memory_gib"] = peak
            if run.skipped_steps:
                metrics["skipped_steps"] = run.skipped_steps
            changes = describe_changes(run.resumes)
            if changes:
                metrics["settings_changed_on_resume"] = changes
            if args.save_model:
                self._save(unwrapped, metrics, history, run.resumes)
        accelerator.wait_for_everyone()
        if args.log_with:
            accelerator.end_training()
        return TrainResult(model=unwrapped, metrics=metrics, history=history, train_time_s=train_time)

    # ------------------------------------------------------------------------------------------ checkpoints

    def _save_checkpoint(self, accelerator: Accelerator, objects: SimpleNamespace, run: TrainerState) -> None:
        """Write `checkpoints/checkpoint-<step>` through a temporary folder (see `checkpointing.py`)."""
        args = self.args
        accelerator.wait_for_everyone()
        folder = Path(_on_main(accelerator, lambda: str(begin_checkpoint(args.output_dir, run.step))))
        save_state_files(folder, f"rng_state_{accelerator.process_index}", rng_state())
        accelerator.wait_for_everyone()

        def write_and_finish():
            trainer_state = {
                "step": run.step,
                "train_time_s": run.train_time_s,
                "step_time_s": run.step_time_s,
                "skipped_steps": run.skipped_steps,
                "log_history": json.loads(json.dumps(run.log_history, default=float)),
                "resumes": run.resumes,
                "scheduler": objects.scheduler.state_dict(),
            }
            if accelerator.scaler is not None:
                trainer_state["scaler"] = accelerator.scaler.state_dict()
            recipe_state = self.recipe.checkpoint_state(objects.model)
            write_main_files(
                folder, objects.model, objects.optimizer.state_dict(), trainer_state, recipe_state, objects.settings
            )
            final = finish_checkpoint(folder, run.step, objects.settings, args.save_total_limit)
            logger.info("Saved checkpoint %s", final)

        _on_main(accelerator, write_and_finish, share=False)

    def _resume(self, accelerator: Accelerator, checkpoint: tuple[Path, bool], objects: SimpleNamespace, run) -> None:
        args = self.args
        folder, legacy = Path(checkpoint[0]), checkpoint[1]
        if legacy:  # allow_pickle_checkpoints=True: accelerate's own (pickle) format, no settings to compare
            accelerator.register_for_checkpointing(objects.scheduler, run)
            accelerator.load_state(str(folder))
            run.resumes.append({"step": run.step, "checkpoint": str(folder), "changes": {}})
            logger.info("Resumed from the pickle checkpoint %s at step %d", folder, run.step)
            return
        saved = json.loads((folder / "settings.json").read_text())
        differences = settings_differences(saved, objects.settings)
        refused = disallowed(differences, args.resume_allow_changes)
        if refused:
            names = ", ".join(key.split(".", 1)[1] for key in refused)
            raise ValueError(
                f"resume_from_checkpoint {folder}: these settings differ from the run that wrote it:\n"
                f"{format_differences(differences, refused)}\n"
                f"Resume with the checkpoint's settings, or allow the change with resume_allow_changes=[{names}] "
                "(it is then recorded in training_args.json and on the card)."
            )
        state = load_state_files(folder, "trainer_state")
        if state["step"] > args.max_steps:
            raise ValueError(
                f"resume_from_checkpoint {folder} is at step {state['step']}, past max_steps={args.max_steps}: "
                f"set max_steps >= {state['step']}"
            )
        if differences:
            logger.warning("Resuming with changed settings (allowed):\n%s", format_differences(differences))
        fresh_groups = [{k: v for k, v in g.items() if k != "params"} for g in objects.optimizer.param_groups]
        try:
            from safetensors.torch import load_model

            load_model(objects.model, str(folder / "model.safetensors"))
            objects.optimizer.load_state_dict(load_state_files(folder, "optimizer"))
        except (RuntimeError, ValueError, KeyError) as error:
            raise ValueError(f"resume_from_checkpoint {folder}: its state does not fit this model ({error})") from error
        objects.scheduler.load_state_dict(state["scheduler"])
        if differences:  # the allowed new optimiser settings apply from here on
            apply_hyperparameters(objects.optimizer, objects.scheduler, fresh_groups)
        if "scaler" in state and accelerator.scaler is not None:
            accelerator.scaler.load_state_dict(state["scaler"])
        recipe_file = folder / "recipe_state.safetensors"
        recipe_state = load_file(str(recipe_file)) if recipe_file.exists() else {}
        self.recipe.load_checkpoint_state(objects.model, recipe_state)
        rng_name = f"rng_state_{accelerator.process_index}"
        if (folder / f"{rng_name}.json").exists():
            set_rng_state(load_state_files(folder, rng_name))
        else:
            logger.warning(
                "%s has no random state for process %d: resume may not be exact", folder, accelerator.process_index
            )
        run.step, run.train_time_s, run.skipped_steps = state["step"], state["train_time_s"], state["skipped_steps"]
        # A checkpoint written before the time budget existed: its loop time is the closest measure.
        run.step_time_s = state.get("step_time_s", state["train_time_s"])
        run.log_history = list(state["log_history"])
        run.resumes = list(state["resumes"]) + [{"step": run.step, "checkpoint": str(folder), "changes": differences}]
        later = [p for s, p in complete_checkpoints(args.output_dir) if s > run.step]
        if later and accelerator.is_main_process:
            # They belong to the run being abandoned: `latest` must never pick them up after a later crash.
            for path in later:
                path.rename(path.with_name(f".abandoned-{path.name}-{int(time.time())}"))
            logger.warning("Checkpoints after step %d set aside as .abandoned-*: %s", run.step, [p.name for p in later])
        accelerator.wait_for_everyone()
        logger.info("Resumed from %s at step %d", folder, run.step)

    def _save(self, model: PreTrainedModel, metrics: dict, history: list[dict], resumes: list[dict]) -> None:
        output_dir = Path(self.args.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(output_dir)
        (output_dir / "eval_results.json").write_text(json.dumps(metrics, indent=2, default=float))
        record = asdict(self.args)
        if resumes:  # what actually ran: the resumes, and the settings changed at each
            record["resumes"] = resumes
        (output_dir / "training_args.json").write_text(json.dumps(record, indent=2, default=str))
        with open(output_dir / "training_log.jsonl", "w") as handle:
            for entry in history:
                handle.write(json.dumps(entry, default=float) + "\n")
        self.recipe.save_artifacts(model, str(output_dir), metrics, self.args)
        # The folder's own hf-jepa pipeline task(s) and their code: `pipeline(task, model=dir, trust_remote_code=True)`
        # then works without hf_jepa (as after `pipe.save_pretrained`).
        write_custom_pipelines(output_dir)
        # No "run the custom code?" question from the video-processor lookup of every pipeline (see the function).
        declare_image_processor_in_config(output_dir, model.config)
        # The returned model's own save_pretrained / push_to_hub now carry this folder's card, processor or tokenizer,
        # pipeline code and results (hf_jepa.saving reads them from `name_or_path`).
        model.name_or_path = model.config.name_or_path = str(output_dir.resolve())
        logger.info("Saved model, metrics and card to %s", output_dir)


def _next_batch(recipe: Recipe, stream, index: int, rank: int, args: TrainingArguments) -> dict[str, torch.Tensor]:
    """Batch `index` of process `rank`: from the recipe's stream when it has one, else `recipe.train_batch`."""
    if stream is None:
        return recipe.train_batch(index, rank, args.per_device_batch_size)
    got, batch = next(stream)
    if got != index:  # the stream and the loop disagree on the position: resume would not be exact
        raise RuntimeError(f"the training stream gave batch {got} where the loop expected batch {index}")
    return batch


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
