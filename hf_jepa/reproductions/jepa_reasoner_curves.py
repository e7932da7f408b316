"""JEPA-Reasoner learning curves at equal wall clock (`hf-jepa reproduce jepa-reasoner --set protocol=curves`):
exact-path accuracy on tree search against seconds of training for the reasoner + Mono-/Dual-Talker, the coupled
transformer and COCONUT, every system on the same data, seed and eval set, plus where the reasoner + Talker loses
accuracy (`hf_jepa.metrics.reasoning.decompose_accuracy`) at every checkpoint.

The clock: each system gets `budget_minutes` of training, counted as the sum of the durations of its optimiser steps
(batch assembly, the Talker's chain computation, forward, backward, update, EMA); evaluations happen at the
checkpoints `eval_every_seconds, 2 * eval_every_seconds, ...` and at the budget, and never count. Every model (a
stage) trains through the one trainer (`JepaTrainer.steps()`, stepped here one optimiser step at a time) with its share
of the budget as `TrainingArguments.max_train_seconds`: learning rate (linear warm-up over `WARMUP_STEPS` steps, then
cosine to 0), EMA momentum (linear from the config's start to end value) and scheduled sampling follow the fraction of
a stage's time budget spent, not a step count, so every run ends its schedule at its budget whatever the machine's
speed. The accuracy at a checkpoint is what that run had reached then (not what a run budgeted to stop there would
reach).

The reasoner + Talker budget: the total budget counts both stages; the Talker gets `talker_share` of it and the
reasoner the rest. `talker_schedule="interleaved"` (the default) alternates single steps so that each stage's spent
time stays at its share (whichever is behind its share steps next): at every checkpoint the pair is a usable system
and its Talker has trained on the current reasoner's chains. `"sequential"` trains the reasoner for its whole share
first and then the Talker on the frozen reasoner (the paper's order); before the switch the pair's accuracy is that
of an untrained Talker. Each Talker step computes its batch's chains from the reasoner of that moment (source and
noise: `talker_chain_source`, `talker_chain_noise_std`), inside the clock.
"""

import logging
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data.reasoning import ReasoningData
from ..metrics.reasoning import CoconutSystem, CoupledSystem, DecoupledSystem, decompose_accuracy
from ..metrics.reasoning_plots import plot_decomposition, plot_learning_curves
from ..modeling.jepa_reasoner import DualTalkerModel, JepaReasonerWithTalker, MonoTalkerModel
from ..recipes.jepa_reasoner import (
    TALKER_CHAIN_SOURCES,
    TRAINING_DEFAULTS,
    CoconutRecipe,
    CoupledRecipe,
    JepaReasonerDataArguments,
    JepaReasonerRecipe,
    talker_training_chains,
)
from ..trainers import JepaTrainer, Recipe, TrainingArguments, seeded_generator
from .formatting import percent
from .result import ReproductionResult

logger = logging.getLogger(__name__)

CURVE_SYSTEMS = ("mono", "dual", "coupled", "coconut")
SYSTEM_LABELS = {
    "mono": "JEPA-Reasoner + Mono-Talker",
    "dual": "JEPA-Reasoner + Dual-Talker",
    "coupled": "coupled transformer",
    "coconut": "COCONUT",
}
# The models (config_overrides keys) each system trains.
SYSTEM_MODELS = {
    "mono": ("reasoner", "mono"),
    "dual": ("reasoner", "dual"),
    "coupled": ("coupled",),
    "coconut": ("coconut",),
}
TALKER_SCHEDULES = ("interleaved", "sequential")
TARGET_ACCURACY = 0.95  # issue 15: report every system at the budget where the coupled transformer first reaches it
WARMUP_STEPS = TRAINING_DEFAULTS["warmup_steps"]
# The defaults of the curve protocol's options (`reproduce_jepa_reasoner` repeats them in its signature for the CLI).
CURVE_DEFAULTS = dict(
    systems=CURVE_SYSTEMS,
    tree_nodes=(7, 11),
    budget_minutes=45.0,
    eval_every_seconds=150.0,
    talker_share=0.3,
    talker_schedule="interleaved",
    talker_chain_source="free_running",
    talker_chain_noise_std=0.0,
    scheduled_sampling_prob=0.0,
    decompose=True,
    config_overrides=None,
)


# A stage's run ends by time (its `max_train_seconds`), never by a step count.
_NO_STEP_LIMIT = 10**12


class _StageRecipe(Recipe):
    """One model of a curve system as the trainer's recipe: built beforehand (a system's models come from one seeded
    initialisation), batch `step` from `batch(step)`, and no evaluation of its own (the curve evaluates the whole
    system at its checkpoints). EMA targets and their schedule: the model's own (`Recipe`'s defaults)."""

    def __init__(self, name: str, model: torch.nn.Module, batch: Callable[[int], dict[str, torch.Tensor]]):
        self.name, self.model, self.batch = name, model, batch

    def build_model(self):
        return self.model

    def train_batch(self, step: int, rank: int, batch_size: int) -> dict[str, torch.Tensor]:
        return self.batch(step)


@dataclass
class _Stage:
    """One trained model of a system: a trainer run with its share of the budget (`max_train_seconds`), stepped one
    optimiser step at a time by the curve; `close()` ends it (nothing is saved)."""

    name: str
    model: torch.nn.Module
    trainer: JepaTrainer
    folder: tempfile.TemporaryDirectory
    run: Any = field(init=False)

    def __post_init__(self):
        self.run = self.trainer.steps()

    @property
    def step(self) -> int:
        return self.trainer.state.step

    @property
    def spent_s(self) -> float:
        """This stage's training time (the trainer's `step_time_s`)."""
        return self.trainer.state.step_time_s

    @property
    def fraction(self) -> float:
        """The share of this stage's budget spent (the schedules' clock)."""
        return self.trainer.state.progress

    @property
    def finished(self) -> bool:
        return self.trainer.state.done

    @property
    def skipped_steps(self) -> int:
        return self.trainer.state.skipped_steps

    def train_step(self) -> None:
        next(self.run)

    def close(self) -> None:
        self.run.close()
        self.folder.cleanup()


def _stage(name: str, model, batch: Callable[[int], dict], budget_s: float, seed: int, options: dict) -> _Stage:
    """A stage training `model` on `batch(step)` for `budget_s` seconds with the curves' training settings
    (`TRAINING_DEFAULTS`; `options`: `batch_size`, `mixed_precision`, and `learning_rate` to change the peak rate; a
    non-finite loss skips its step, counted in `skipped_steps`)."""
    folder = tempfile.TemporaryDirectory(prefix=f"hf-jepa-curve-{name}-")  # the trainer's (empty) output folder
    args = TrainingArguments(
        output_dir=folder.name,
        max_steps=_NO_STEP_LIMIT,
        max_train_seconds=budget_s,
        per_device_batch_size=options["batch_size"],
        learning_rate=options.get("learning_rate", TRAINING_DEFAULTS["learning_rate"]),
        weight_decay=TRAINING_DEFAULTS["weight_decay"],
        warmup_steps=WARMUP_STEPS,
        max_grad_norm=TRAINING_DEFAULTS["max_grad_norm"],
        mixed_precision="bf16" if options["mixed_precision"] else "no",
        seed=seed,
        logging_steps=TRAINING_DEFAULTS["logging_steps"],
        nan_policy="skip",
        save_model=False,
        disable_progress_bar=True,
    )
    return _Stage(name, model, JepaTrainer(_StageRecipe(name, model, batch), args), folder)


def _next_stage(stages: list[_Stage], schedule: str) -> _Stage:
    """The unfinished stage that steps next: the one furthest behind its share (interleaved) or the first
    (sequential)."""
    unfinished = [s for s in stages if not s.finished]
    if schedule == "sequential":
        return unfinished[0]
    return min(unfinished, key=lambda s: s.fraction)


def _train_until(stages: list[_Stage], seconds: float, schedule: str) -> None:
    """Step the stages (`_next_stage` picks each step's) until their summed training time reaches `seconds` or every
    stage has spent its budget."""
    while sum(s.spent_s for s in stages) < seconds and not all(s.finished for s in stages):
        _next_stage(stages, schedule).train_step()


def _device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _evaluate(system: str, models: dict, data: ReasoningData, decompose: bool) -> dict[str, Any]:
    """The system's exact-path accuracy on the eval split (greedy), and for a reasoner + Talker the decomposition."""
    for model in models.values():
        model.eval()
    ev = data.eval
    if system in ("coupled", "coconut"):
        system_class = CoupledSystem if system == "coupled" else CoconutSystem
        answers = system_class(models[system], data).complete(ev["prompt_ids"], ev["prompt_mask"])
        return {"accuracy": data.accuracy(data.eval_examples, answers)}
    pair = JepaReasonerWithTalker.from_components(models["reasoner"], models["talker"])
    answers = DecoupledSystem(pair, data).complete(ev["prompt_ids"], ev["prompt_mask"])
    row: dict[str, Any] = {"accuracy": data.accuracy(data.eval_examples, answers)}
    if decompose:
        row.update(decompose_accuracy(models["reasoner"], models["talker"], data, pair_answers=answers))
    return row


def _build_stages(system: str, configs: dict, data_args, data: ReasoningData, seed: int, options: dict) -> list:
    """The stages of `system` (models built under `torch.manual_seed(seed)`, so every system starts from its own
    seeded initialisation whatever ran before); `close()` each when done."""
    device = _device()
    budget_s = 60.0 * options["budget_minutes"]
    batch_size = options["batch_size"]
    torch.manual_seed(seed)
    if system in ("coupled", "coconut"):
        recipe_class = CoupledRecipe if system == "coupled" else CoconutRecipe
        recipe = recipe_class(configs[system], data_args, seed, data)
        model = recipe.build_model().to(device)
        return [_stage(system, model, lambda step: recipe.train_batch(step, 0, batch_size), budget_s, seed, options)]
    reasoner_recipe = JepaReasonerRecipe(configs["reasoner"], data_args, seed, data)
    reasoner = reasoner_recipe.build_model().to(device)
    talker_config = configs[system]
    talker_config.vocab_size = data.vocab_size  # the presets carry a placeholder; the task's tokenizer decides
    talker = (DualTalkerModel if system == "dual" else MonoTalkerModel)(talker_config).to(device)
    final_sampling_prob = options["scheduled_sampling_prob"]
    reasoner_share = 1.0 - options["talker_share"]
    stages: list[_Stage] = []

    def reasoner_batch(step):
        # Scheduled sampling ramps linearly from 0 to its final probability over the reasoner's time budget.
        reasoner.config.scheduled_sampling_prob = final_sampling_prob * stages[0].fraction
        return reasoner_recipe.train_batch(step, 0, batch_size)

    stages.append(_stage("reasoner", reasoner, reasoner_batch, budget_s * reasoner_share, seed, options))
    talker_batch = talker_batches(system, reasoner, data, seed, options)
    stages.append(_stage("talker", talker, talker_batch, budget_s * options["talker_share"], seed, options))
    return stages


def talker_batches(system: str, reasoner, data: ReasoningData, seed: int, options: dict) -> Callable[[int], dict]:
    """`step -> batch` of a `system` (`"mono"` / `"dual"`) Talker: seeded training rows with their chains from
    `reasoner` as it is at that step (`options`: `batch_size`, `talker_chain_source`, `talker_chain_noise_std`)."""
    keys = ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")
    context = ("prompt_ids", "prompt_mask") if system == "dual" else ()
    noise_generator = torch.Generator(device=reasoner.device).manual_seed(seed)
    rows = data.train["prompt_ids"].shape[0]

    def talker_batch(step: int) -> dict:
        index = torch.randint(rows, (options["batch_size"],), generator=seeded_generator(seed, step, 1))
        batch = data.batch(data.train, index, keys)
        chains = talker_training_chains(
            reasoner,
            batch,
            data.max_answer_length,
            options["talker_chain_source"],
            options["talker_chain_noise_std"],
            noise_generator,
        )
        return {
            "answer_ids": batch["answer_ids"],
            "answer_mask": batch["answer_mask"],
            **{k: batch[k] for k in context},
            "latents": chains,
        }

    return talker_batch


def _parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_curve(system: str, configs: dict, data_args, data: ReasoningData, seed: int, options: dict) -> dict:
    """Train `system` for its wall-clock budget, evaluating at every checkpoint; returns its curve and counts."""
    stages = _build_stages(system, configs, data_args, data, seed, options)
    models = {stage.name: stage.model for stage in stages}
    budget_s = 60.0 * options["budget_minutes"]
    every = options["eval_every_seconds"]
    checkpoints = [every * k for k in range(1, int(budget_s / every + 1e-9) + 1)]
    if not checkpoints or checkpoints[-1] < budget_s - 1e-6:
        checkpoints.append(budget_s)
    curve, eval_seconds = [], 0.0
    started = time.perf_counter()
    try:
        for checkpoint in checkpoints:
            _train_until(stages, checkpoint, options["talker_schedule"])
            evaluation_started = time.perf_counter()  # between two trainer steps: off every stage's clock
            row = {
                "checkpoint_minutes": checkpoint / 60.0,
                "train_minutes": sum(s.spent_s for s in stages) / 60.0,
                **{f"{s.name}_steps": s.step for s in stages},
                **{f"{s.name}_minutes": s.spent_s / 60.0 for s in stages},
                **_evaluate(system, models, data, options["decompose"]),
            }
            row["eval_seconds"] = time.perf_counter() - evaluation_started
            eval_seconds += row["eval_seconds"]
            curve.append(row)
            logger.info(
                "curves: %s at %.1f min of training: accuracy %.3f (eval %.1f s)",
                system,
                row["train_minutes"],
                row["accuracy"],
                row["eval_seconds"],
            )
    finally:
        for stage in stages:
            stage.close()
    return {
        "label": SYSTEM_LABELS[system],
        "curve": curve,
        "parameters": {name: _parameters(model) for name, model in models.items()},
        "skipped_steps": {s.name: s.skipped_steps for s in stages},
        "wall_seconds": time.perf_counter() - started,
        "eval_seconds": eval_seconds,
    }


def first_budget_reaching(curve: list[dict], target: float = TARGET_ACCURACY) -> float | None:
    """The first checkpoint (minutes) whose accuracy is >= `target`, None if none is."""
    return next((row["checkpoint_minutes"] for row in curve if row["accuracy"] >= target), None)


def at_checkpoint(curve: list[dict], minutes: float) -> dict | None:
    """The row of the last checkpoint at or before `minutes` (checkpoints are shared by every system of a run)."""
    rows = [row for row in curve if row["checkpoint_minutes"] <= minutes + 1e-9]
    return rows[-1] if rows else None


def check_curve_options(options: dict) -> None:
    """ValueError naming the first curve option that cannot run."""
    unknown = [s for s in options["systems"] if s not in CURVE_SYSTEMS]
    if not options["systems"] or unknown:
        raise ValueError(f"systems must be a non-empty list out of {CURVE_SYSTEMS}, got {list(options['systems'])}")
    nodes = options["tree_nodes"]
    if not nodes or any(isinstance(n, bool) or not isinstance(n, int) or n < 2 for n in nodes):
        raise ValueError(f"tree_nodes must be a non-empty list of integers >= 2, got {list(nodes)}")
    for name in ("budget_minutes", "eval_every_seconds"):
        value = options[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    share = options["talker_share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
        raise ValueError(f"talker_share must lie strictly between 0 and 1, got {share!r}")
    if options["talker_schedule"] not in TALKER_SCHEDULES:
        raise ValueError(f"talker_schedule must be one of {TALKER_SCHEDULES}, got {options['talker_schedule']!r}")
    if options["talker_chain_source"] not in TALKER_CHAIN_SOURCES:
        raise ValueError(
            f"talker_chain_source must be one of {TALKER_CHAIN_SOURCES}, got {options['talker_chain_source']!r}"
        )
    noise = options["talker_chain_noise_std"]
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < float("inf"):
        raise ValueError(f"talker_chain_noise_std must be a finite number >= 0, got {noise!r}")
    probability = options["scheduled_sampling_prob"]
    if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 <= probability <= 1:
        raise ValueError(f"scheduled_sampling_prob must lie in [0, 1], got {probability!r}")
    overrides = options["config_overrides"] or {}
    if not isinstance(overrides, dict) or any(not isinstance(v, dict) for v in overrides.values()):
        raise ValueError(
            "config_overrides must map a model (reasoner, mono, dual, coupled, coconut) to a dict of config fields, "
            f"e.g. {{reasoner: {{num_hidden_layers: 8}}}}, got {overrides!r}"
        )
    models = ("reasoner", "mono", "dual", "coupled", "coconut")
    unknown = [k for k in overrides if k not in models]
    if unknown:
        raise ValueError(f"config_overrides: unknown model(s) {unknown}; models: {models}")


def _configs(build_configs: Callable, data: ReasoningData, quick: bool, overrides: dict) -> dict:
    configs = build_configs(data, quick)
    for name, fields in overrides.items():
        config = configs[name]
        for key, value in fields.items():
            if not hasattr(config, key):
                raise ValueError(f"config_overrides.{name}: {type(config).__name__} has no field {key!r}")
            setattr(config, key, value)
        config.validate()
    return configs


def reproduce_curves(
    output_dir: Path,
    quick: bool,
    seed: int,
    num_train_examples: int,
    num_eval_examples: int,
    options: dict,
    build_configs: Callable[[ReasoningData, bool], dict],
) -> ReproductionResult:
    """Every system of `options["systems"]` on every tree size of `options["tree_nodes"]`, the models from
    `build_configs(data, quick)` (the tables' `cpu_configs`) with `options["config_overrides"]` set over them; writes
    `results.json` (after each system, so a long run that stops keeps what it measured), `results.md`, `curves.png`
    and, with the decomposition, `decomposition.png`."""
    # The tables' training settings: bf16 autocast and batch 64; the quick smoke run uses fp32 and batch 8 as they do.
    batch_size = 8 if quick else TRAINING_DEFAULTS["per_device_batch_size"]
    options = {**options, "mixed_precision": not quick, "batch_size": batch_size}
    options["systems"], options["tree_nodes"] = tuple(options["systems"]), tuple(options["tree_nodes"])
    check_curve_options(options)
    output_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "protocol": "curves",
        "seed": seed,
        "quick": quick,
        "options": {k: v for k, v in options.items()},
        "torch_threads": torch.get_num_threads(),
        "device": str(_device()),
        "load_average_start": os.getloadavg(),
        "trees": {},
    }
    started = time.perf_counter()
    for nodes in options["tree_nodes"]:
        data_args = JepaReasonerDataArguments(
            task="tree_search",
            num_nodes=nodes,
            task_seed=seed,
            num_train_examples=64 if quick else num_train_examples,
            num_eval_examples=8 if quick else num_eval_examples,
            plot=False,
        )
        data = ReasoningData(data_args)
        tree: dict[str, Any] = {"eval_examples": len(data.eval_examples), "systems": {}}
        results["trees"][str(nodes)] = tree
        for system in options["systems"]:
            configs = _configs(build_configs, data, quick, options["config_overrides"] or {})
            logger.info("curves: %d-node trees, %s, %.1f min", nodes, system, options["budget_minutes"])
            tree["systems"][system] = run_curve(system, configs, data_args, data, seed, options)
            _summarise_tree(tree)
            ReproductionResult("jepa-reasoner", results, format_curve_tables(results), output_dir).save()
    results["wall_time_s"] = round(time.perf_counter() - started, 1)
    results["load_average_end"] = os.getloadavg()
    return _save_with_figures(results, output_dir)


def _save_with_figures(results: dict, output_dir: Path) -> ReproductionResult:
    """Draw `curves.png` (and `decomposition.png` when there is a decomposition) and save the result."""
    output_dir.mkdir(parents=True, exist_ok=True)
    plot_learning_curves(results, output_dir / "curves.png")
    results["plot"] = "curves.png"
    if plot_decomposition(results, output_dir / "decomposition.png"):
        results["decomposition_plot"] = "decomposition.png"
    result = ReproductionResult("jepa-reasoner", results, format_curve_tables(results), output_dir)
    result.save()
    return result


def combine_curve_runs(runs: list[dict], output_dir: Path) -> ReproductionResult:
    """One result from curve runs of disjoint systems (e.g. two one-thread runs side by side, one per core): the same
    seed, tree sizes and options apart from `systems`, each run's `results.json` as a dict. Writes `results.json`,
    `results.md`, `curves.png` and `decomposition.png` under `output_dir`; the 95% budget is recomputed over all the
    systems. Raises `ValueError` when the runs are not comparable."""
    if len(runs) < 2:
        raise ValueError(f"runs: combining needs two or more curve results, got {len(runs)}")

    def settings(run: dict) -> tuple:
        options = {k: v for k, v in run.get("options", {}).items() if k not in ("systems", "config_overrides")}
        return run.get("protocol"), run.get("seed"), run.get("quick"), sorted(run.get("trees", {})), repr(options)

    if any(settings(run) != settings(runs[0]) for run in runs) or runs[0].get("protocol") != "curves":
        raise ValueError("runs: every run must be protocol=curves with the same seed, tree sizes and options")
    # Config overrides may differ between runs only for models one of them does not train (e.g. a reasoner variant
    # run beside the coupled transformer); a model both train must be the same model in both.
    trained_overrides = []  # per run: {model it trains: its overrides (empty: none)}
    for run in runs:
        given = run["options"].get("config_overrides") or {}
        models = {model for system in run["options"]["systems"] for model in SYSTEM_MODELS[system]}
        trained_overrides.append({model: given.get(model) or {} for model in models})
    overrides = {model: fields for own in trained_overrides for model, fields in own.items() if fields}
    for own in trained_overrides:
        differing = sorted(model for model, fields in own.items() if fields != overrides.get(model, {}))
        if differing:
            raise ValueError(f"runs: the {differing} config overrides differ between runs that both train it")
    combined = {key: value for key, value in runs[0].items() if key not in ("trees", "plot", "decomposition_plot")}
    combined["options"] = {
        **runs[0]["options"],
        "systems": [s for run in runs for s in run["options"]["systems"]],
        "config_overrides": overrides or None,
    }
    combined["combined_from"] = [
        {key: run.get(key) for key in ("torch_threads", "load_average_start", "load_average_end", "wall_time_s")}
        for run in runs
    ]
    combined["trees"] = {}
    for nodes in runs[0]["trees"]:
        systems: dict[str, Any] = {}
        for run in runs:
            overlap = set(systems) & set(run["trees"][nodes]["systems"])
            if overlap:
                raise ValueError(f"runs: system(s) {sorted(overlap)} appear in more than one run")
            systems.update(run["trees"][nodes]["systems"])
        tree = {"eval_examples": runs[0]["trees"][nodes]["eval_examples"], "systems": systems}
        _summarise_tree(tree)
        combined["trees"][nodes] = tree
    return _save_with_figures(combined, output_dir)


def _summarise_tree(tree: dict) -> None:
    """`target_minutes` (the first checkpoint where the coupled transformer reaches `TARGET_ACCURACY`, else the last
    checkpoint) and every system's row there (`at_target`)."""
    systems = tree["systems"]
    coupled = systems.get("coupled")
    reached = first_budget_reaching(coupled["curve"]) if coupled else None
    last = max(row["checkpoint_minutes"] for s in systems.values() for row in s["curve"])
    tree["coupled_reached_target"] = reached is not None
    tree["target_minutes"] = reached if reached is not None else last
    tree["at_target"] = {name: at_checkpoint(s["curve"], tree["target_minutes"]) for name, s in systems.items()}


def _pct(value) -> str:
    return percent(value, missing="-")


def _cos(value) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def format_curve_tables(results: dict) -> str:
    """Markdown: per tree size, every system at the coupled transformer's 95% budget and at the end, with the
    reasoner + Talker decomposition."""
    lines = [
        f"JEPA-Reasoner learning curves at equal wall clock (seed {results.get('seed')}, "
        f"{results.get('torch_threads')} torch threads, {results.get('device')}, "
        f"wall time {results.get('wall_time_s', 'running')} s)",
    ]
    for nodes, tree in results.get("trees", {}).items():
        if "target_minutes" not in tree:
            continue
        target = tree["target_minutes"]
        where = (
            f"the coupled transformer first reaches {TARGET_ACCURACY:.0%} at {target:g} min"
            if tree["coupled_reached_target"]
            else f"the coupled transformer never reaches {TARGET_ACCURACY:.0%} (or did not run): last checkpoint, "
            f"{target:g} min"
        )
        lines += [
            "",
            f"{nodes}-node trees ({tree['eval_examples']} eval examples): {where}",
            "",
            f"| System | accuracy at {target:g} min | final accuracy (min) | reasoner alone | Talker on oracle chain "
            "| cos teacher-forced | cos free-running |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, system in tree["systems"].items():
            row = tree["at_target"].get(name) or {}
            final = system["curve"][-1]
            lines.append(
                f"| {system['label']} | {_pct(row.get('accuracy'))} | {_pct(final['accuracy'])} "
                f"({final['train_minutes']:.1f}) | {_pct(row.get('reasoner_alone_accuracy'))} | "
                f"{_pct(row.get('talker_oracle_accuracy'))} | {_cos(row.get('cosine_teacher_forced_mean'))} | "
                f"{_cos(row.get('cosine_free_running_mean'))} |"
            )
    return "\n".join(lines)
