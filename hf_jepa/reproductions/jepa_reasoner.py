"""JEPA-Reasoner reproduction: the paper's experiments at CPU scale on hf-jepa's synthetic tasks (tree search, CFG
completion with robustness curves, GSM8K-format arithmetic), the decoupled reasoner + Talker against the coupled
transformer and COCONUT."""

import logging
import time
from pathlib import Path
from typing import Any

from ..data.reasoning import ReasoningData
from ..metrics.reasoning import CoconutSystem, CoupledSystem, DecoupledSystem, cfg_robustness
from ..metrics.reasoning_plots import plot_cfg_robustness
from ..metrics.reasoning_superposition import evaluate_superposition, format_superposition
from ..modeling.jepa_reasoner import (
    CoconutConfig,
    CoupledTransformerConfig,
    DualTalkerConfig,
    JepaReasonerConfig,
    JepaReasonerWithTalker,
    MonoTalkerConfig,
)
from ..paper_figures import (
    JEPA_REASONER_GSM8K_8SHOT,
    JEPA_REASONER_GSM8K_8SHOT_COUPLED,
    JEPA_REASONER_TREE_SEARCH_ACCURACY,
)
from ..progress import progress
from ..recipes.jepa_reasoner import (
    CoconutRecipe,
    CoupledRecipe,
    JepaReasonerDataArguments,
    JepaReasonerRecipe,
    TalkerRecipe,
)
from .formatting import percent
from .jepa_reasoner_curves import CURVE_DEFAULTS, reproduce_curves
from .jepa_reasoner_gsm8k import GSM8K_DEFAULTS, reproduce_gsm8k
from .jepa_reasoner_robustness import ROBUSTNESS_SEEDS, check_robustness_options, reproduce_robustness, train_stage
from .result import ReproductionResult

logger = logging.getLogger(__name__)

FAMILY = "jepa-reasoner"

# Optimiser steps per stage at CPU scale (batch 64, AdamW lr 1e-3, bf16); `steps_scale` multiplies them all.
REPRODUCTION_STEPS = {
    "tree_search": {"reasoner": 1000, "talker": 800, "coupled": 1000},
    "cfg": {"reasoner": 500, "talker": 400, "coupled": 500, "coconut": 200},
    "arithmetic": {"reasoner": 250, "talker": 200, "coupled": 250},
}
# Task settings of the reproduction: arithmetic problems keep 1-2 operations (short answers) and 8000 training problems,
# because every Talker training example needs a free-running latent chain as long as its answer.
REPRODUCTION_DATA = {
    "tree_search": {},
    "cfg": {},
    "arithmetic": {"min_operations": 1, "max_operations": 2, "num_train_examples": 8000},
}
TALKER_FOR_TASK = {"tree_search": "dual", "cfg": "mono", "arithmetic": "dual"}
REPLACEMENT_RATES = (0.0, 0.1, 0.2, 0.3)
NOISE_STDS = (0.0, 0.25, 0.5, 1.0)
PAPER = {
    "tree_search_accuracy": JEPA_REASONER_TREE_SEARCH_ACCURACY,
    "gsm8k_8shot": JEPA_REASONER_GSM8K_8SHOT,
    "gsm8k_8shot_coupled": JEPA_REASONER_GSM8K_8SHOT_COUPLED,
}


def cpu_configs(data: ReasoningData, quick: bool = False) -> dict[str, Any]:
    """The models the reproduction trains, sized for a 2-core CPU: a 128-wide context-free reasoner (6 reasoning
    blocks), 3-block Talkers (the Dual-Talker adds 2 context blocks), and coupled baselines with as many blocks as the
    reasoner (6) at the same width. `quick=True`: the tiny test presets."""
    vocab = data.vocab_size
    length = data.max_prompt_length + 1 + data.max_answer_length + 8
    if quick:
        return {
            "reasoner": JepaReasonerConfig.tiny(
                vocab_size=vocab, max_position_embeddings=length, num_reasoning_steps=data.max_answer_length
            ),
            "mono": MonoTalkerConfig.tiny(vocab_size=vocab, max_position_embeddings=2 * length),
            "dual": DualTalkerConfig.tiny(vocab_size=vocab, max_position_embeddings=2 * length),
            "coupled": CoupledTransformerConfig.tiny(vocab_size=vocab, max_position_embeddings=length),
            "coconut": CoconutConfig.tiny(vocab_size=vocab, max_position_embeddings=length + 8),
        }
    return {
        "reasoner": JepaReasonerConfig.cpu_fast(
            vocab_size=vocab, max_position_embeddings=length, num_reasoning_steps=data.max_answer_length
        ),
        "mono": MonoTalkerConfig.cpu_fast(vocab_size=vocab, max_position_embeddings=2 * length),
        "dual": DualTalkerConfig.cpu_fast(vocab_size=vocab, max_position_embeddings=3 * length),
        "coupled": CoupledTransformerConfig.cpu_fast(vocab_size=vocab, max_position_embeddings=length),
        "coconut": CoconutConfig.cpu_fast(vocab_size=vocab, max_position_embeddings=length + 8),
    }


def reproduce_jepa_reasoner(
    data: str | None = None,
    output_dir: str | None = None,
    quick: bool = False,
    seed: int = 0,
    tasks: tuple[str, ...] = ("tree_search", "cfg", "arithmetic"),
    steps_scale: float = 1.0,
    num_train_examples: int = 20_000,
    num_eval_examples: int = 300,
    protocol: str = "tables",
    systems: tuple[str, ...] = CURVE_DEFAULTS["systems"],
    tree_nodes: tuple[int, ...] = CURVE_DEFAULTS["tree_nodes"],
    budget_minutes: float = CURVE_DEFAULTS["budget_minutes"],
    eval_every_seconds: float = CURVE_DEFAULTS["eval_every_seconds"],
    talker_share: float = CURVE_DEFAULTS["talker_share"],
    talker_schedule: str = CURVE_DEFAULTS["talker_schedule"],
    talker_chain_source: str = CURVE_DEFAULTS["talker_chain_source"],
    talker_chain_noise_std: float = CURVE_DEFAULTS["talker_chain_noise_std"],
    scheduled_sampling_prob: float = CURVE_DEFAULTS["scheduled_sampling_prob"],
    decompose: bool = CURVE_DEFAULTS["decompose"],
    config_overrides: dict | None = CURVE_DEFAULTS["config_overrides"],
    seeds: tuple[int, ...] = ROBUSTNESS_SEEDS,
    preset: str = GSM8K_DEFAULTS["preset"],
    shots: tuple[int, ...] = GSM8K_DEFAULTS["shots"],
    reasoner: str | None = GSM8K_DEFAULTS["reasoner"],
    talker: str | None = GSM8K_DEFAULTS["talker"],
    coupled: str | None = GSM8K_DEFAULTS["coupled"],
    allow_full_on_cpu: bool = GSM8K_DEFAULTS["allow_full_on_cpu"],
    test_examples: int | None = GSM8K_DEFAULTS["test_examples"],
) -> ReproductionResult:
    """`protocol="tables"` (the default): the paper's experiments at CPU scale, on hf-jepa's synthetic tasks
    (below). `protocol="curves"`: learning curves at equal wall clock on tree search
    (`hf_jepa.reproductions.jepa_reasoner_curves`; research/jepa_reasoner/curves/README.md): every system of `systems`
    ("mono", "dual": the reasoner + that Talker; "coupled"; "coconut") on every size of `tree_nodes`, trained for
    `budget_minutes` each and evaluated every `eval_every_seconds` of training; the reasoner + Talker gives
    `talker_share` of its budget to the Talker (`talker_schedule` "interleaved" or "sequential"), which trains on
    `talker_chain_source` chains ("free_running", "teacher_forced", "target") with `talker_chain_noise_std`; the
    reasoner feeds back its own predictions with a probability ramping to `scheduled_sampling_prob`; `decompose`
    adds the reasoner-alone / oracle-Talker / cosine-by-position decomposition at every checkpoint;
    `config_overrides` sets config fields over the presets, e.g. `{reasoner: {latent_norm: l2}}`. The other
    `protocol="tables"` options (`tasks`, `steps_scale`) do not apply to it, and the curve options do not apply to
    the tables. `protocol="robustness"`: the CFG systems of the tables trained for each seed of `seeds`, measured
    under token replacement, noise on each system's latent and noise on every block's residual stream, mean +- std
    over seeds (`hf_jepa.reproductions.jepa_reasoner_robustness`; research/jepa_reasoner/robustness/README.md).
    the tables. `protocol="gsm8k"`: GSM8K k-shot (`hf_jepa.reproductions.jepa_reasoner_gsm8k`;
    research/jepa_reasoner/gsm8k/README.md): the reasoner + Dual-Talker and the coupled transformer of `preset` ("full": the
    paper's 0.9B + 198M, a GPU run; "cpu_fast"; "tiny"; `quick`: tiny) trained on `data` ("synthetic" (default),
    "gsm8k" from the Hub, or a local GSM8K folder; at most `num_train_examples` problems, `steps_scale` times the
    preset's steps) or loaded from `reasoner` / `talker` / `coupled` folders of an earlier run, evaluated at every
    number of exemplars in `shots` on the test split (the first `test_examples` problems; None: all);
    `allow_full_on_cpu` lifts the refusal of preset=full without a GPU.

    The tables:

    1. binary tree search: reasoner + Dual-Talker vs the coupled transformer (exact-path accuracy);
    2. CFG completion: reasoner + Mono-Talker vs the coupled transformer vs COCONUT, accuracy (valid under the
       grammar) under 0-30% input token replacement and under Gaussian noise on the fed-back latents;
    3. multi-step arithmetic word problems (GSM8K format, generated): reasoner + Dual-Talker vs the coupled transformer
       (final-answer accuracy);
    plus the "mixed latents" PCA of the tree-search reasoner, and the same chain against contextual targets and at
    tree branches (`hf_jepa.metrics.reasoning_superposition`, research/jepa_reasoner/superposition/README.md). Writes
    `results.json`, `results.md`, `cfg_robustness.png`, `mixed_latents.png`, `contextual_mixed_latents.png`,
    `candidate_continuations.png` and `superposition.json` / `.md` under `output_dir`; every model is saved under
    `output_dir/<task>/<system>` (the Talker folders hold the reasoner+Talker pair in `pair/`).
    """
    curve_options = dict(
        systems=tuple(systems),
        tree_nodes=tuple(tree_nodes),
        budget_minutes=budget_minutes,
        eval_every_seconds=eval_every_seconds,
        talker_share=talker_share,
        talker_schedule=talker_schedule,
        talker_chain_source=talker_chain_source,
        talker_chain_noise_std=talker_chain_noise_std,
        scheduled_sampling_prob=scheduled_sampling_prob,
        decompose=decompose,
        config_overrides=config_overrides,
    )
    if protocol != "robustness" and tuple(seeds) != ROBUSTNESS_SEEDS:
        raise ValueError(f"seeds: an option of protocol=robustness (protocol={protocol!r} takes seed=...)")
    gsm8k_options = dict(
        preset=preset,
        shots=tuple(shots) if isinstance(shots, (list, tuple)) else shots,
        reasoner=reasoner,
        talker=talker,
        coupled=coupled,
        allow_full_on_cpu=allow_full_on_cpu,
        test_examples=test_examples,
    )
    if protocol == "gsm8k":
        changed = sorted(k for k, v in curve_options.items() if v != CURVE_DEFAULTS[k])
        changed += ["tasks"] if tuple(tasks) != ("tree_search", "cfg", "arithmetic") else []
        changed += ["num_eval_examples (use test_examples)"] if num_eval_examples != 300 else []
        if changed:
            raise ValueError(f"{changed}: not options of protocol=gsm8k")
        return reproduce_gsm8k(
            Path(output_dir or "outputs/reproduce-jepa-reasoner-gsm8k"),
            data,
            quick,
            seed,
            steps_scale,
            num_train_examples,
            gsm8k_options,
        )
    changed = sorted(k for k, v in gsm8k_options.items() if v != GSM8K_DEFAULTS[k])
    if changed:
        raise ValueError(f"{changed}: options of protocol=gsm8k only (add protocol=gsm8k)")
    if data is not None:
        raise ValueError(f"data: the JEPA-Reasoner tasks are generated by hf-jepa (pass tasks=...), got {data!r}")
    if protocol == "curves":
        if tuple(tasks) != ("tree_search", "cfg", "arithmetic") or steps_scale != 1.0:
            raise ValueError("tasks and steps_scale are options of protocol=tables (the curves run tree search)")
        return reproduce_curves(
            Path(output_dir or "outputs/reproduce-jepa-reasoner-curves"),
            quick,
            seed,
            num_train_examples,
            num_eval_examples,
            curve_options,
            cpu_configs,
        )
    changed = sorted(k for k, v in curve_options.items() if v != CURVE_DEFAULTS[k])
    if protocol == "robustness":
        check_robustness_options(tasks, seed, changed)
        cfg = dict(
            build_configs=cpu_configs,
            steps=REPRODUCTION_STEPS["cfg"],
            data=REPRODUCTION_DATA["cfg"],
            talker=TALKER_FOR_TASK["cfg"],
            replacement_rates=REPLACEMENT_RATES,
            noise_stds=NOISE_STDS,
        )
        output = Path(output_dir or "outputs/reproduce-jepa-reasoner-robustness")
        return reproduce_robustness(output, quick, seeds, steps_scale, num_train_examples, num_eval_examples, cfg)
    if protocol != "tables":
        raise ValueError(f"protocol must be 'tables', 'curves', 'robustness' or 'gsm8k', got {protocol!r}")
    if changed:
        raise ValueError(f"{changed}: options of protocol=curves only (add protocol=curves)")
    output_dir = Path(output_dir or "outputs/reproduce-jepa-reasoner")
    started = time.perf_counter()
    results: dict[str, Any] = {"seed": seed, "quick": quick, "tasks": {}, "paper": PAPER}

    def train(recipe, task, name, steps):
        return train_stage(recipe, output_dir / task / name, steps, seed, quick, steps_scale)[0]

    for task in progress(tasks, "JEPA-Reasoner reproduction tasks"):
        task_settings = dict(REPRODUCTION_DATA[task])
        task_settings["num_train_examples"] = (
            64 if quick else min(num_train_examples, task_settings.get("num_train_examples", num_train_examples))
        )
        data_args = JepaReasonerDataArguments(
            task=task, task_seed=seed, num_eval_examples=8 if quick else num_eval_examples, **task_settings
        )
        task_data = ReasoningData(data_args)
        configs = cpu_configs(task_data, quick)
        steps = REPRODUCTION_STEPS[task]
        row: dict[str, Any] = {"data_source": task_data.source, "eval_examples": len(task_data.eval_examples)}
        reasoner = train(
            JepaReasonerRecipe(configs["reasoner"], data_args, seed, task_data), task, "reasoner", steps["reasoner"]
        )
        row["reasoner"] = reasoner.metrics
        talker_kind = TALKER_FOR_TASK[task]
        talker = train(
            TalkerRecipe(configs[talker_kind], data_args, seed, task_data, reasoner=reasoner.model),
            task,
            f"{talker_kind}-talker",
            steps["talker"],
        )
        row["jepa_reasoner"] = {**talker.metrics, "talker": talker_kind}
        systems = {
            "JEPA-Reasoner + " + talker_kind.capitalize() + "-Talker": DecoupledSystem(
                JepaReasonerWithTalker.from_components(reasoner.model, talker.model), task_data
            )
        }
        coupled = train(
            CoupledRecipe(configs["coupled"], data_args, seed, task_data), task, "coupled", steps["coupled"]
        )
        row["coupled"] = coupled.metrics
        systems["coupled transformer"] = CoupledSystem(coupled.model, task_data)
        if "coconut" in steps:
            coconut = train(
                CoconutRecipe(configs["coconut"], data_args, seed, task_data), task, "coconut", steps["coconut"]
            )
            row["coconut"] = coconut.metrics
            systems["COCONUT"] = CoconutSystem(coconut.model, task_data)
        if task == "cfg":
            for system in systems.values():
                system.model.eval()
            robustness = cfg_robustness(systems, task_data, REPLACEMENT_RATES, NOISE_STDS, seed=seed)
            row["robustness"] = robustness
            output_dir.mkdir(parents=True, exist_ok=True)
            plot_cfg_robustness(robustness, output_dir / "cfg_robustness.png")
        if task == "tree_search" and (output_dir / task / "reasoner" / "mixed_latents.png").exists():
            output_dir.mkdir(parents=True, exist_ok=True)
            (output_dir / "mixed_latents.png").write_bytes(
                (output_dir / task / "reasoner" / "mixed_latents.png").read_bytes()
            )
        if task == "tree_search":  # issue 15 point 5: the same chain against contextual targets, and at branches
            row["superposition"] = evaluate_superposition(reasoner.model, task_data, output_dir)
        results["tasks"][task] = row
    results["wall_time_s"] = round(time.perf_counter() - started, 1)
    result = ReproductionResult(FAMILY, results, format_jepa_reasoner_tables(results), output_dir)
    result.save()
    return result


def format_jepa_reasoner_tables(results: dict[str, Any]) -> str:
    """Markdown tables of a `reproduce_jepa_reasoner` summary."""
    tasks = results.get("tasks", {})
    labels = {
        "tree_search": "binary tree search (exact path)",
        "cfg": "CFG completion (valid under the grammar)",
        "arithmetic": "arithmetic word problems (final answer)",
    }
    lines = [
        f"JEPA-Reasoner reproduction (seed {results.get('seed')}, wall time {results.get('wall_time_s')} s)",
        "",
        "| Task | JEPA-Reasoner + Talker | coupled transformer | COCONUT | paper (JEPA-Reasoner) |",
        "|---|---:|---:|---:|---:|",
    ]
    paper = {
        "tree_search": percent(PAPER["tree_search_accuracy"]),
        "cfg": "more robust than both",
        "arithmetic": f"GSM8K 8-shot {percent(PAPER['gsm8k_8shot'])} vs {percent(PAPER['gsm8k_8shot_coupled'])}",
    }
    for task, row in tasks.items():
        ours = row.get("jepa_reasoner", {})
        lines.append(
            f"| {labels.get(task, task)} | {percent(ours.get('accuracy'))} ({ours.get('talker', '')}) | "
            f"{percent(row.get('coupled', {}).get('accuracy'))} | "
            f"{percent(row['coconut']['accuracy']) if 'coconut' in row else '-'} | {paper.get(task, '')} |"
        )
    lines += [
        "",
        "| Task | reasoner eval loss | teacher-forced cosine | free-running cosine | nearest-token cosine |",
        "|---|---:|---:|---:|---:|",
    ]
    for task, row in tasks.items():
        r = row.get("reasoner", {})
        cells = [
            f"{r[k]:.4f}" if isinstance(r.get(k), float) else "n/a"
            for k in ("eval_loss", "teacher_forced_cosine", "free_running_cosine", "nearest_token_cosine")
        ]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    superposition = tasks.get("tree_search", {}).get("superposition")
    if superposition:
        lines += ["", format_superposition(superposition)]
    robustness = tasks.get("cfg", {}).get("robustness")
    if robustness:
        for kind, title in (("replacement", "input tokens replaced"), ("noise", "latent noise (std / RMS)")):
            levels = sorted({float(x) for curves in robustness.values() for x in curves[kind]})
            lines += [
                "",
                f"| CFG: {title} | " + " | ".join(f"{x:g}" for x in levels) + " |",
                "|---|" + "---:|" * len(levels),
            ]
            for name, curves in robustness.items():
                values = {float(k): v for k, v in curves[kind].items()}
                lines.append(f"| {name} | " + " | ".join(percent(values.get(x)) for x in levels) + " |")
    return "\n".join(lines)
