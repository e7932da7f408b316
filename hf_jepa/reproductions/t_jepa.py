"""T-JEPA reproduction: "The JEPA paradox in language" at CPU scale (diagnostics of T-JEPA vs I-JEPA over training,
downstream probes against joint-embedding and MLM baselines, and the ambiguity sweep)."""

import logging
import math
from pathlib import Path
from typing import Any

import torch

from ..data import MnistSplits
from ..data.text import TextData
from ..metrics.collapse import plot_failure_signature, plot_seed_bands
from ..modeling.i_jepa import IJepaConfig
from ..modeling.t_jepa import TJepaConfig, TJepaModel
from ..paper_figures import T_JEPA_COLLAPSED_VAL_RANK, T_JEPA_DIVERGENCE_STEP, T_JEPA_MI_CEILING_NATS
from ..progress import progress
from ..recipes.i_jepa import TRAINING_DEFAULTS as I_JEPA_TRAINING_DEFAULTS
from ..recipes.i_jepa import IJepaDataArguments, IJepaRecipe
from ..recipes.t_jepa import TRAINING_DEFAULTS, TJepaDataArguments, TJepaRecipe
from ..trainers import JepaTrainer, TrainingArguments
from .result import ReproductionResult, mean_and_std

logger = logging.getLogger(__name__)

FAMILY = "t-jepa"
BASELINE_OBJECTIVES = ("mlm", "vicreg", "barlow_twins", "byol")


def _fmt(pair, digits=3, percent=False):
    if pair is None:
        return "n/a"
    mean, std = pair
    scale = 100 if percent else 1
    suffix = "%" if percent else ""
    return f"{scale * mean:.{digits}f}{suffix} +- {scale * std:.{digits}f}{suffix}"


def reproduce_t_jepa(
    data: str | None = None,
    output_dir: str | None = None,
    quick: bool = False,
    seeds: tuple[int, ...] = (0,),
    steps: int | None = None,
    image_steps: int | None = None,
    ambiguities: tuple[int, ...] = (1, 4, 16, 64),
    objectives: tuple[str, ...] = BASELINE_OBJECTIVES,
    mnist: str | None = None,
) -> ReproductionResult:
    """The paper's three experiments at CPU scale, for each data seed in `seeds` (the paper uses 5):

    1. T-JEPA (text, embedded corpus) vs I-JEPA (MNIST) diagnostics over training, and their failure signatures;
    2. downstream linear probe (topic classification) and next-sentence retrieval of T-JEPA vs MLM, VICReg,
       Barlow Twins and BYOL (and an untrained encoder), all on the same backbone, data and steps;
    3. the ambiguity sweep: T-JEPA on the synthetic corpus with 1..K valid completions per masked span.

    `data`: the text source (default embedded); `mnist`: the MNIST source of I-JEPA. `steps`: the text runs' steps
    (T-JEPA, baselines, ambiguity sweep; default `hf-jepa train t-jepa`'s); `image_steps`: I-JEPA's (default
    `hf-jepa train i-jepa`'s: it needs ~4x more steps than the text runs to leave its early near-collapse).
    `objectives=()` skips the baselines. `quick=True`: tiny models, a few steps (a smoke run, not a result). Writes
    `results.json`, `results.md`, `failure_signature.png` (first seed, with the detected events),
    `failure_signature_seeds.png` and `ambiguity_sweep.png` (mean +- std across seeds) under `output_dir`.
    """
    output_dir = Path(output_dir or "outputs/reproduce-t-jepa")
    max_steps = 6 if quick else (steps or TRAINING_DEFAULTS["max_steps"])
    max_image_steps = 6 if quick else (image_steps or I_JEPA_TRAINING_DEFAULTS["max_steps"])
    text_preset = TJepaConfig.tiny if quick else TJepaConfig.cpu_fast
    image_preset = IJepaConfig.tiny if quick else IJepaConfig.cpu_fast
    vocab = text_preset().backbone_config.vocab_size
    text = TextData(data, vocab_size=vocab)
    splits = MnistSplits(mnist)
    rows: dict[str, list[dict]] = {}
    records: dict[str, list[list[dict]]] = {}  # run name -> one list of log records per seed

    def run(recipe, name, seed, defaults, run_steps=max_steps, logs_per_run=10):
        settings = {**defaults, "max_steps": run_steps, "logging_steps": max(1, run_steps // logs_per_run)}
        if quick:
            settings.update(per_device_batch_size=8, warmup_steps=0, mixed_precision="no")
        args = TrainingArguments(
            output_dir=str(output_dir / f"seed{seed}" / name), seed=seed, overwrite_output_dir=True, **settings
        )
        logger.info("T-JEPA reproduction, seed %d: %s (%d steps)", seed, name, run_steps)
        result = JepaTrainer(recipe, args).train()
        rows.setdefault(name, []).append({**result.metrics, "seed": seed})
        records.setdefault(name, []).append(recipe.records)
        return result

    for seed in progress(seeds, "T-JEPA reproduction seeds"):
        data_args = TJepaDataArguments(data=data, diagnostics_sentences=32 if quick else 128)
        run(TJepaRecipe(text_preset(), data_args, seed=seed, text=text), "t-jepa", seed, TRAINING_DEFAULTS)
        image_args = IJepaDataArguments(
            data=mnist, diagnostics_images=64 if quick else 256, probe_images=500 if quick else 5000
        )
        run(
            IJepaRecipe(image_preset(), image_args, seed=seed, splits=splits),
            "i-jepa",
            seed,
            I_JEPA_TRAINING_DEFAULTS,
            run_steps=max_image_steps,
            logs_per_run=16,
        )
        for objective in objectives:
            run(
                TJepaRecipe(text_preset(objective=objective), data_args, seed=seed, text=text),
                objective,
                seed,
                TRAINING_DEFAULTS,
            )
        untrained = TJepaRecipe(text_preset(), data_args, seed=seed, text=text)
        torch.manual_seed(seed)
        rows.setdefault("untrained encoder", []).append(
            {**untrained.downstream(TJepaModel(text_preset())), "seed": seed}
        )
        for ambiguity in ambiguities:
            args = TJepaDataArguments(
                corpus="ambiguity", ambiguity=ambiguity, diagnostics_sentences=32 if quick else 128, downstream=False
            )
            run(
                TJepaRecipe(text_preset(), args, seed=seed, text=None),
                f"ambiguity-{ambiguity}",
                seed,
                TRAINING_DEFAULTS,
            )

    summary = summarize_t_jepa(
        rows,
        seeds=list(seeds),
        steps=max_steps,
        image_steps=max_image_steps,
        quick=quick,
        text_source=text.source,
        image_source=splits.source,
        ambiguities=list(ambiguities),
        objectives=list(objectives),
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    plot_failure_signature(
        {"T-JEPA (text)": records["t-jepa"][0], "I-JEPA (MNIST)": records["i-jepa"][0]},
        output_dir / "failure_signature.png",
        title=f"T-JEPA vs I-JEPA diagnostics over training (seed {seeds[0]})",
    )
    plot_seed_bands(
        {"T-JEPA (text)": records["t-jepa"], "I-JEPA (MNIST)": records["i-jepa"]},
        output_dir / "failure_signature_seeds.png",
        title=f"T-JEPA ({max_steps} steps) vs I-JEPA ({max_image_steps} steps), seeds {list(seeds)}",
        one_column_per_run=True,
    )
    if ambiguities:
        plot_seed_bands(
            {f"K = {k}": records[f"ambiguity-{k}"] for k in ambiguities},
            output_dir / "ambiguity_sweep.png",
            title=f"T-JEPA on the synthetic ambiguity corpus ({max_steps} steps), seeds {list(seeds)}",
        )
    result = ReproductionResult(FAMILY, summary, format_t_jepa_tables(summary), output_dir)
    result.save(extra={"runs": rows, "records": records})
    return result


def summarize_t_jepa(rows: dict[str, list[dict]], **info) -> dict[str, Any]:
    """Mean +- std over seeds of every numeric metric of every run name."""
    summary: dict[str, Any] = {"runs": {}, **info}
    for name, runs in rows.items():
        keys = {k for r in runs for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        summary["runs"][name] = {k: mean_and_std([r.get(k) for r in runs]) for k in sorted(keys) if k != "seed"}
        for key in ("mi_saturation_step", "divergence_step", "rank_collapse_step"):
            summary["runs"][name][f"{key}_per_seed"] = [r.get(key) for r in runs]
    return summary


def format_t_jepa_tables(summary: dict[str, Any]) -> str:
    """Markdown tables: diagnostics (T-JEPA vs I-JEPA), downstream, ambiguity sweep."""
    runs = summary["runs"]
    n = len(summary.get("seeds", [])) or 1

    def get(name, key, **kw):
        return _fmt(runs.get(name, {}).get(key), **kw)

    def steps(name, key):
        values = runs.get(name, {}).get(f"{key}_per_seed") or []
        return ", ".join("none" if v is None else str(v) for v in values) or "n/a"

    lines = [
        f"Diagnostics at the end of training (T-JEPA {summary.get('steps')} steps, I-JEPA "
        f"{summary.get('image_steps')} steps; mean +- std over {n} seed(s)); event steps per seed.",
        "",
        "| Model | MI proxy (nats) | max MI | val effective rank | val cosine mean | MI saturation | loss divergence | rank collapse |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for name, label in (("t-jepa", "T-JEPA (text)"), ("i-jepa", "I-JEPA (MNIST)")):
        if name in runs:
            lines.append(
                f"| {label} | {get(name, 'mi_proxy')} | {get(name, 'mi_max')} | {get(name, 'effective_rank', digits=2)} | "
                f"{get(name, 'cosine_mean')} | {steps(name, 'mi_saturation_step')} | "
                f"{steps(name, 'divergence_step')} | {steps(name, 'rank_collapse_step')} |"
            )
    if "i-jepa" in runs and runs["i-jepa"].get("probe_accuracy"):
        lines += [
            "",
            f"I-JEPA linear probe on MNIST: {get('i-jepa', 'probe_accuracy', percent=True, digits=1)} trained vs "
            f"{get('i-jepa', 'probe_accuracy_untrained', percent=True, digits=1)} for the same encoder untrained.",
        ]
    lines += [
        "",
        "| Encoder (same backbone, data, steps) | topic probe accuracy | retrieval R@1 | retrieval R@10 | val effective rank |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ["t-jepa", *summary.get("objectives", []), "untrained encoder"]:
        if name in runs:
            lines.append(
                f"| {name} | {get(name, 'probe_accuracy', percent=True, digits=1)} | "
                f"{get(name, 'retrieval_recall_at_1', percent=True, digits=1)} | "
                f"{get(name, 'retrieval_recall_at_10', percent=True, digits=1)} | {get(name, 'effective_rank', digits=2)} |"
            )
    if "t-jepa" in runs and runs["t-jepa"].get("probe_majority_baseline"):
        lines.append(f"| (majority class) | {get('t-jepa', 'probe_majority_baseline', percent=True, digits=1)} | | | |")
    lines += [
        "",
        "| Ambiguity (valid completions) | conditional entropy (nats) | MI proxy | val effective rank | irreducible variance | val loss |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for k in summary.get("ambiguities", []):
        name = f"ambiguity-{k}"
        if name in runs:
            lines.append(
                f"| {k} | {math.log(k):.2f} | {get(name, 'mi_proxy')} | {get(name, 'effective_rank', digits=2)} | "
                f"{get(name, 'irreducible_variance')} | {get(name, 'val_loss')} |"
            )
    lines += [
        "",
        f"Paper (C4 / BERT-Large, ImageNet / ViT-H): T-JEPA MI proxy below {T_JEPA_MI_CEILING_NATS} nats, "
        f"divergence ~step {T_JEPA_DIVERGENCE_STEP:,}, validation effective rank ~{T_JEPA_COLLAPSED_VAL_RANK}; "
        "I-JEPA MI keeps rising; T-JEPA downstream at chance, MLM/VICReg/Barlow Twins/BYOL useful.",
    ]
    return "\n".join(lines)


__all__ = ["BASELINE_OBJECTIVES", "format_t_jepa_tables", "reproduce_t_jepa", "summarize_t_jepa"]
