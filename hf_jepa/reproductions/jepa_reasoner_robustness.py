"""JEPA-Reasoner CFG robustness over seeds (`hf-jepa reproduce jepa-reasoner --set protocol=robustness
seeds=[0,1,2]`; research/jepa_reasoner/robustness/README.md): for each seed, the CFG systems of `protocol=tables` are trained
again (same presets, steps and training settings; the seed also draws the task's data) and measured under the three
perturbations of `hf_jepa.metrics.reasoning_robustness` (token replacement, noise on each system's latent, noise on
every block's residual stream); results are the mean +- sample std over seeds."""

import logging
import statistics
import time
from pathlib import Path
from typing import Any

from ..data.reasoning import ReasoningData
from ..metrics.reasoning import CoconutSystem, CoupledSystem, DecoupledSystem
from ..metrics.reasoning_plots import plot_cfg_robustness_seeds
from ..metrics.reasoning_robustness import ROBUSTNESS_KINDS, check_seeds, robustness_over_seeds
from ..modeling.jepa_reasoner import JepaReasonerWithTalker
from ..progress import progress_bars_enabled
from ..recipes.jepa_reasoner import (
    TRAINING_DEFAULTS,
    CoconutRecipe,
    CoupledRecipe,
    JepaReasonerDataArguments,
    JepaReasonerRecipe,
    TalkerRecipe,
)
from ..trainers import JepaTrainer, TrainingArguments
from .formatting import percent
from .result import ReproductionResult

logger = logging.getLogger(__name__)

ROBUSTNESS_SEEDS = (0, 1, 2)
# Relative std of the noise on every block's output. It hits every block (6 to 9 of them here) at every position, so
# the levels stop below the per-latent curve's (0.25-1.0).
RESIDUAL_NOISE_STDS = (0.0, 0.1, 0.25, 0.5)
REASONER_LABEL = "JEPA-Reasoner + Mono-Talker"
BASELINE_LABELS = ("coupled transformer", "COCONUT")
PAPER_CLAIM = (
    "The paper claims the reasoner is more robust than the coupled transformer and COCONUT on CFG under 0-30% input "
    "token replacement and under latent Gaussian noise. Its token-replacement claim corresponds to the replacement "
    "table (like-for-like already: every system reads the same corrupted prompts). Its latent-noise claim corresponds "
    "to the per-latent noise table: noise on the one vector each system exposes (the reasoner's fed-back latent, "
    "COCONUT's thoughts, the coupled transformer's final hidden state before its LM head), which are different kinds "
    "of state. The residual-noise table is the like-for-like test the paper does not make: the same relative noise "
    "on the residual stream of every block of every system at every position (the reasoner's encoder blocks, if any, "
    "its reasoning blocks and its Talker; COCONUT's and the coupled transformer's blocks), i.e. on every state each "
    "system feeds back. The reasoner + Talker has more blocks (cpu_fast: 6 reasoning + 3 Talker blocks) than each "
    "baseline (6), so it receives more noise draws per generated token there."
)
KIND_TITLES = {
    "replacement": "input tokens replaced (fraction)",
    "noise": "noise on each system's latent (std / RMS) [paper's latent-noise comparison]",
    "residual_noise": "noise on every block's residual stream (std / RMS) [like-for-like]",
}


def train_stage(recipe, run_dir: Path, steps: int, seed: int, quick: bool, steps_scale: float):
    """One stage with the reproduction's training settings (`TRAINING_DEFAULTS`, `steps` x `steps_scale`; the quick
    smoke run: 4 fp32 steps at batch 8), saved under `run_dir`: the tables' stages and the robustness seeds use it.
    Returns the trainer's result and the stage's timing."""
    steps = max(2, int(round(steps * steps_scale))) if not quick else 4
    settings = {**TRAINING_DEFAULTS, "max_steps": steps, "logging_steps": max(1, steps // 8)}
    settings["disable_progress_bar"] = not progress_bars_enabled()  # `--no-progress` covers the stages' bars too
    if quick:
        settings.update(per_device_batch_size=8, warmup_steps=0, mixed_precision="no")
    args = TrainingArguments(output_dir=str(run_dir), seed=seed, overwrite_output_dir=True, **settings)
    logger.info("JEPA-Reasoner reproduction: %s, %d steps", run_dir, steps)
    started = time.perf_counter()
    result = JepaTrainer(recipe, args).train()
    timing = {
        "steps": steps,
        "train_time_s": round(result.train_time_s, 2),
        "stage_wall_s": round(time.perf_counter() - started, 2),
    }
    return result, timing


def check_robustness_options(tasks, seed: int, changed_tables_or_curve_options: list[str]) -> None:
    """Options of the other protocols do not apply: `ValueError` naming them."""
    if tuple(tasks) not in (("tree_search", "cfg", "arithmetic"), ("cfg",)):
        raise ValueError(f"tasks: protocol=robustness runs the cfg task only, got {list(tasks)!r}")
    if seed != 0:
        raise ValueError(f"seed: protocol=robustness takes seeds=[...] (got seed={seed!r})")
    if changed_tables_or_curve_options:
        raise ValueError(f"{changed_tables_or_curve_options}: options of protocol=curves only")


def reproduce_robustness(
    output_dir: Path,
    quick: bool,
    seeds,
    steps_scale: float,
    num_train_examples: int,
    num_eval_examples: int,
    tables: dict[str, Any],
) -> ReproductionResult:
    """Train the CFG systems of the tables for each seed of `seeds` and measure the three robustness curves.

    `tables` carries the tables protocol's settings (`reproduce_jepa_reasoner` passes them, so they live in one
    place): `build_configs(data, quick)`, `steps` (optimiser steps per stage, times `steps_scale`), `data` (task
    settings), `talker` ("mono"), `replacement_rates` and `noise_stds`. Writes `results.json` (per-seed curves,
    mean +- std, clean accuracies and timings per seed), `results.md` and `cfg_robustness_seeds.png`."""
    seeds = check_seeds(seeds)
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    per_seed_info: dict[int, dict[str, Any]] = {}

    def build_systems(seed: int):
        info: dict[str, Any] = {"timings": {}, "build_started": time.perf_counter()}
        per_seed_info[seed] = info
        settings = dict(tables["data"])
        settings["num_train_examples"] = (
            64 if quick else min(num_train_examples, settings.get("num_train_examples", num_train_examples))
        )
        data_args = JepaReasonerDataArguments(
            task="cfg", task_seed=seed, num_eval_examples=8 if quick else num_eval_examples, **settings
        )
        data = ReasoningData(data_args)
        configs, steps, talker_kind = tables["build_configs"](data, quick), tables["steps"], tables["talker"]
        run = output_dir / f"seed-{seed}" / "cfg"

        def stage(recipe, folder: str, system: str):
            trained, info["timings"][system] = train_stage(
                recipe, run / folder, steps[system], seed, quick, steps_scale
            )
            return trained

        # The tables' order: the reasoner, then its Talker (trained on its chains), then the coupled baselines.
        reasoner = stage(JepaReasonerRecipe(configs["reasoner"], data_args, seed, data), "reasoner", "reasoner")
        talker = stage(
            TalkerRecipe(configs[talker_kind], data_args, seed, data, reasoner=reasoner.model),
            f"{talker_kind}-talker",
            "talker",
        )
        coupled = stage(CoupledRecipe(configs["coupled"], data_args, seed, data), "coupled", "coupled")
        coconut = stage(CoconutRecipe(configs["coconut"], data_args, seed, data), "coconut", "coconut")
        info["clean_accuracy"] = {
            REASONER_LABEL: talker.metrics.get("accuracy"),
            "coupled transformer": coupled.metrics.get("accuracy"),
            "COCONUT": coconut.metrics.get("accuracy"),
        }
        info["eval_examples"] = len(data.eval_examples)
        info["data_source"] = data.source
        info["curves_started"] = time.perf_counter()
        pair = JepaReasonerWithTalker.from_components(reasoner.model, talker.model)
        systems = {
            REASONER_LABEL: DecoupledSystem(pair, data),
            "coupled transformer": CoupledSystem(coupled.model, data),
            "COCONUT": CoconutSystem(coconut.model, data),
        }
        return systems, data

    measured = robustness_over_seeds(
        build_systems,
        seeds=seeds,
        replacement_rates=tables["replacement_rates"],
        noise_stds=tables["noise_stds"],
        residual_noise_stds=RESIDUAL_NOISE_STDS,
    )
    # A seed's curves run from the end of its training to the start of the next seed's (or to here, for the last).
    ends = [per_seed_info[s].pop("build_started") for s in seeds[1:]] + [time.perf_counter()]
    per_seed_info[seeds[0]].pop("build_started")
    for seed, end in zip(seeds, ends):
        info = per_seed_info[seed]
        info["timings"]["curves_wall_s"] = round(end - info.pop("curves_started"), 2)
    results: dict[str, Any] = {
        "protocol": "robustness",
        "quick": quick,
        "seeds": list(seeds),
        "levels": {
            "replacement": list(tables["replacement_rates"]),
            "noise": list(tables["noise_stds"]),
            "residual_noise": list(RESIDUAL_NOISE_STDS),
        },
        "per_seed": {str(s): {"curves": measured["per_seed"][s], **per_seed_info[s]} for s in seeds},
        "aggregate": measured["aggregate"],
        "paper_claim": PAPER_CLAIM,
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    plot_cfg_robustness_seeds(
        measured["aggregate"], output_dir / "cfg_robustness_seeds.png", title=f"CFG robustness, seeds {list(seeds)}"
    )
    results["plot"] = "cfg_robustness_seeds.png"
    result = ReproductionResult("jepa-reasoner", results, format_robustness_tables(results), output_dir)
    result.save()
    return result


def format_robustness_tables(results: dict[str, Any]) -> str:
    """Markdown of a `reproduce_robustness` summary: one table per curve kind (mean +- std over seeds, in % valid
    under the grammar), the paired difference reasoner - baseline per seed, and which table the paper's claim is."""
    aggregate, seeds = results["aggregate"], results["seeds"]
    lines = [
        f"JEPA-Reasoner CFG robustness over seeds {seeds} (wall time {results.get('wall_time_s')} s); cells: % valid "
        "under the grammar, mean +- sample std over seeds",
    ]
    for kind in ROBUSTNESS_KINDS:
        levels = sorted({float(x) for curves in aggregate.values() for x in curves.get(kind, {})})
        if not levels:
            continue
        lines += ["", f"| {KIND_TITLES[kind]} | " + " | ".join(f"{x:g}" for x in levels) + " |"]
        lines.append("|---|" + "---:|" * len(levels))
        for name, curves in aggregate.items():
            points = {float(x): p for x, p in curves[kind].items()}
            # The header says the cells are in %.
            cells = [f"{percent(points[x]['mean'], unit='')} +- {percent(points[x]['std'], unit='')}" for x in levels]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        for baseline in BASELINE_LABELS:
            if REASONER_LABEL not in aggregate or baseline not in aggregate:
                continue
            cells = []
            for x in levels:
                ours = aggregate[REASONER_LABEL][kind][_key(aggregate[REASONER_LABEL][kind], x)]["values"]
                theirs = aggregate[baseline][kind][_key(aggregate[baseline][kind], x)]["values"]
                differences = [a - b for a, b in zip(ours, theirs)]
                spread = statistics.stdev(differences) if len(differences) > 1 else 0.0
                cells.append(f"{100 * statistics.fmean(differences):+.1f} +- {100 * spread:.1f}")
            lines.append(f"| reasoner - {baseline} (points, paired by seed) | " + " | ".join(cells) + " |")
    lines += ["", "Which comparison is the paper's claim: " + PAPER_CLAIM]
    return "\n".join(lines)


def _key(curve: dict, level: float):
    return next(k for k in curve if float(k) == level)
