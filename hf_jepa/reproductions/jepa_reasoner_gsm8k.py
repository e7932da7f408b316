"""JEPA-Reasoner on GSM8K, k-shot (`hf-jepa reproduce jepa-reasoner --set protocol=gsm8k ...`): the reasoner +
Dual-Talker against the coupled transformer, both trained on the same GSM8K train split (or loaded from saved
folders), evaluated greedy with 5- and 8-shot prompts on the test split (exact match of the number after `####`).
The paper: 0.9B reasoner + 198M Talker 51.9% vs 20.8% for the coupled 0.9B transformer at 8 shots, and in-context
scaling from 5 to 8 shots for the reasoner only. research/jepa_reasoner/gsm8k/README.md says what is and is not verified.

Presets: `full` (the paper's sizes: `JepaReasonerConfig.full`, `DualTalkerConfig.full`, `CoupledTransformerConfig.full`,
50,304-row embeddings, 2,048 positions; a GPU run), `cpu_fast` and `tiny` (the house presets, positions sized to the
prompts). Data: `synthetic` (`ArithmeticWordProblems`, offline), `gsm8k` (the Hub, online) or a local GSM8K folder.
Tokenizer and prompt format: `hf_jepa.data.reasoning.gsm8k`.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from ..data.reasoning import Gsm8kFewShotData, load_gsm8k_pairs, synthetic_gsm8k_pairs
from ..metrics.reasoning import CoupledSystem, DecoupledSystem
from ..metrics.reasoning_plots import plot_accuracy_vs_shots
from ..modeling.jepa_reasoner import (
    CoupledTransformerConfig,
    CoupledTransformerLM,
    DualTalkerConfig,
    JepaReasonerConfig,
    JepaReasonerModel,
    JepaReasonerWithTalker,
    JepaReasonerWithTalkerConfig,
)
from ..modeling.jepa_reasoner.configuration_jepa_reasoner import PAPER_VOCAB_SIZE
from ..paper_figures import (
    JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN,
    JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN_COUPLED,
    JEPA_REASONER_GSM8K_8SHOT,
    JEPA_REASONER_GSM8K_8SHOT_COUPLED,
)
from ..recipes._checks import check_model_folder
from ..recipes.jepa_reasoner import (
    TRAINING_DEFAULTS,
    CoupledRecipe,
    JepaReasonerDataArguments,
    JepaReasonerRecipe,
    TalkerRecipe,
)
from ..trainers import JepaTrainer, TrainingArguments
from .formatting import percent
from .result import ReproductionResult

logger = logging.getLogger(__name__)

GSM8K_PRESETS = ("tiny", "cpu_fast", "full")
PAIR_LABEL = "JEPA-Reasoner + Dual-Talker"
COUPLED_LABEL = "coupled transformer"
# The options of protocol=gsm8k (`reproduce_jepa_reasoner` repeats them in its signature for the CLI).
GSM8K_DEFAULTS = dict(
    preset="cpu_fast",
    shots=(5, 8),
    reasoner=None,
    talker=None,
    coupled=None,
    allow_full_on_cpu=False,
    test_examples=None,
)
# Per preset: optimiser steps per model (times steps_scale), batch size, gradient checkpointing, prompts per batch
# when evaluating and when computing the Talker's training chains (fp32, so its key/value cache is the larger), and
# the synthetic stand-in's size (train / test problems, operations).
# The full preset's steps (~3 epochs of GSM8K's 7,473 problems at batch 16) are this library's choice: the paper's
# training recipe for GSM8K is not in its summary.
PRESET_SETTINGS = {
    "tiny": dict(
        steps={"reasoner": 4, "talker": 4, "coupled": 4},
        batch_size=8,
        checkpointing=False,
        eval_batch_size=64,
        chain_batch_size=64,
        synthetic=dict(num_train=48, num_test=12, min_steps=1, max_steps=1),
    ),
    "cpu_fast": dict(
        steps={"reasoner": 400, "talker": 300, "coupled": 400},
        batch_size=32,
        checkpointing=False,
        eval_batch_size=64,
        chain_batch_size=64,
        synthetic=dict(num_train=4000, num_test=300, min_steps=1, max_steps=2),
    ),
    "full": dict(
        steps={"reasoner": 1500, "talker": 1000, "coupled": 1500},
        batch_size=16,
        checkpointing=True,
        eval_batch_size=64,
        chain_batch_size=32,
        synthetic=dict(num_train=7473, num_test=1319, min_steps=2, max_steps=4),
    ),
}
# Real GSM8K text (word-level tokens, numbers and annotations spelled digit by digit; tokens per word on the fixture
# items: research/jepa_reasoner/gsm8k/README.md): answers longer than MAX_ANSWER_TOKENS are dropped from training and
# the generation budget stops there (the run records how many); exemplars have at most MAX_SHOT_TOKENS tokens, so 8 of
# them and a test question fit the paper's FULL_CONTEXT-token context with the answer budget (the arithmetic is in
# that README); longer prompts lose their oldest tokens (counted).
MAX_ANSWER_TOKENS = 256
MAX_SHOT_TOKENS = 160
FULL_CONTEXT = 2048
PAPER = {
    PAIR_LABEL: {
        8: JEPA_REASONER_GSM8K_8SHOT,
        5: JEPA_REASONER_GSM8K_8SHOT / (1 + JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN),
    },
    COUPLED_LABEL: {
        8: JEPA_REASONER_GSM8K_8SHOT_COUPLED,
        5: JEPA_REASONER_GSM8K_8SHOT_COUPLED / (1 + JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN_COUPLED),
    },
}
PAPER_DERIVED_SHOTS = (5,)  # the 5-shot figures are derived from the 8-shot ones and the stated gains


def _check_options(data, options: dict) -> dict:
    """The protocol's options, validated (ValueError naming the option), with `shots` as a sorted tuple."""
    preset = options["preset"]
    if preset not in GSM8K_PRESETS:
        raise ValueError(f"preset must be one of {GSM8K_PRESETS}, got {preset!r}")
    shots = options["shots"]
    shots = tuple(shots) if isinstance(shots, (list, tuple)) else (shots,)
    if not shots or any(isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 32 for k in shots):
        raise ValueError(
            f"shots must be a non-empty list of integers in 0 .. 32, e.g. [5, 8], got {options['shots']!r}"
        )
    if data is not None and not isinstance(data, str):
        raise ValueError(f"data must be 'synthetic', 'gsm8k' or a local GSM8K folder, got {data!r}")
    if not isinstance(options["allow_full_on_cpu"], bool):
        raise ValueError(f"allow_full_on_cpu must be true or false, got {options['allow_full_on_cpu']!r}")
    limit = options["test_examples"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"test_examples must be an integer >= 1 or None (the whole test split), got {limit!r}")
    folders = _folder_options(options)
    check_model_folder(folders, "reasoner", JepaReasonerConfig.model_type, "the reasoner/ folder of an earlier run")
    check_model_folder(folders, "coupled", CoupledTransformerConfig.model_type, "the coupled/ folder of an earlier run")
    talker = options["talker"]
    if talker is not None:
        if options["reasoner"] is not None:
            raise ValueError("reasoner and talker: give one (a talker folder holds its reasoner in pair/), not both")
        pair = Path(talker).expanduser()
        pair = pair / "pair" if (pair / "pair" / "config.json").is_file() else pair
        check_model_folder(
            _folder_options({**options, "talker": str(pair)}),
            "talker",
            JepaReasonerWithTalkerConfig.model_type,
            "the dual-talker/ folder of an earlier run (or its pair/ sub-folder)",
        )
        options = {**options, "talker": str(pair)}
    return {**options, "shots": tuple(sorted(set(shots)))}


def _folder_options(options: dict):
    """The folder options as attributes, for `check_model_folder`."""
    return type("Folders", (), {k: options[k] for k in ("reasoner", "talker", "coupled")})()


def _load_pairs(data: str, preset: str, seed: int, num_train: int, test_limit: int | None):
    if data == "synthetic":
        sizes = PRESET_SETTINGS[preset]["synthetic"]
        train, test = synthetic_gsm8k_pairs(
            min(num_train, sizes["num_train"]), sizes["num_test"], seed, sizes["min_steps"], sizes["max_steps"]
        )
        source = (
            f"synthetic GSM8K-format problems (ArithmeticWordProblems, {sizes['min_steps']}-{sizes['max_steps']} "
            f"operations, seed {seed})"
        )
    else:
        train, test = load_gsm8k_pairs(data, "train")[:num_train], load_gsm8k_pairs(data, "test")
        source = "GSM8K (openai/gsm8k, the Hub)" if data == "gsm8k" else f"GSM8K (local copy: {data})"
    return train, test[:test_limit] if test_limit else test, source


def _configs(preset: str, data: Gsm8kFewShotData) -> dict[str, Any]:
    """The reasoner, Dual-Talker and coupled configs of `preset` for `data` (vocabulary, positions, chain length)."""
    vocab, prompt, answer = data.vocab_size, data.max_prompt_length, data.max_answer_length
    # The Dual-Talker reads [encoded prompt; latent chain; tokens]; positions are rotary, so this is a limit only.
    talker_positions = prompt + 2 * answer + 8
    if preset == "full":
        return {
            "reasoner": JepaReasonerConfig.full(
                vocab_size=vocab, max_position_embeddings=FULL_CONTEXT, num_reasoning_steps=answer
            ),
            "dual": DualTalkerConfig.full(
                vocab_size=vocab, max_position_embeddings=max(FULL_CONTEXT, talker_positions)
            ),
            "coupled": CoupledTransformerConfig.full(vocab_size=vocab, max_position_embeddings=FULL_CONTEXT),
        }
    length = prompt + 1 + answer + 8
    build = {"tiny": "tiny", "cpu_fast": "cpu_fast"}[preset]
    return {
        "reasoner": getattr(JepaReasonerConfig, build)(
            vocab_size=vocab, max_position_embeddings=length, num_reasoning_steps=answer
        ),
        "dual": getattr(DualTalkerConfig, build)(vocab_size=vocab, max_position_embeddings=talker_positions),
        "coupled": getattr(CoupledTransformerConfig, build)(vocab_size=vocab, max_position_embeddings=length),
    }


def _check_loaded(name: str, folder: str, model, data: Gsm8kFewShotData) -> None:
    """A loaded model must share the run's vocabulary: same size and, where the folder saved one, same tokenizer."""
    config = getattr(model.config, "reasoner_config", model.config)
    if config.vocab_size != data.vocab_size:
        raise ValueError(
            f"{name}: the model in {folder} has a {config.vocab_size}-token vocabulary, this run's tokenizer "
            f"{data.vocab_size}: it was trained on other data or another preset"
        )
    if (Path(folder) / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        saved = AutoTokenizer.from_pretrained(folder).get_vocab()
        if saved != data.tokenizer.get_vocab():
            raise ValueError(f"{name}: the tokenizer saved in {folder} differs from this run's (other training data)")


def _device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _parameters(model) -> int:
    return sum(p.numel() for name, p in model.named_parameters() if not name.startswith("target_encoder."))


def reproduce_gsm8k(
    output_dir: Path,
    data: str | None,
    quick: bool,
    seed: int,
    steps_scale: float,
    num_train_examples: int,
    options: dict,
) -> ReproductionResult:
    """Train (or load) the reasoner + Dual-Talker and the coupled transformer, evaluate k-shot for every `shots`,
    write results.json, results.md and accuracy_vs_shots.png under `output_dir`. See the module docstring."""
    options = {**GSM8K_DEFAULTS, **options}
    if quick and options["preset"] == GSM8K_DEFAULTS["preset"]:
        options["preset"] = "tiny"
    options = _check_options(data, options)
    data = data or "synthetic"
    preset, shots = options["preset"], options["shots"]
    if not isinstance(steps_scale, (int, float)) or isinstance(steps_scale, bool) or not steps_scale > 0:
        raise ValueError(f"steps_scale must be a positive number, got {steps_scale!r}")
    device = _device()
    if preset == "full" and device.type == "cpu" and not options["allow_full_on_cpu"]:
        raise ValueError(
            "preset=full (0.9B reasoner + 198M Talker + 0.9B coupled transformer) needs a GPU: on this CPU it would "
            "take days; use preset=cpu_fast or tiny, or add allow_full_on_cpu=true"
        )
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 chain computation and loading at TF32 speed
    started = time.perf_counter()
    train_pairs, test_pairs, source = _load_pairs(data, preset, seed, num_train_examples, options["test_examples"])
    real = data != "synthetic"
    gsm8k = Gsm8kFewShotData(
        train_pairs,
        test_pairs,
        max(shots),
        max_answer_tokens=MAX_ANSWER_TOKENS if real else None,
        max_shot_tokens=MAX_SHOT_TOKENS if real else None,
        context_length=FULL_CONTEXT if preset == "full" else None,
        vocab_size=PAPER_VOCAB_SIZE if preset == "full" else None,
        seed=seed,
        source=source,
    )
    configs = _configs(preset, gsm8k)
    settings = PRESET_SETTINGS[preset]
    data_args = JepaReasonerDataArguments(
        task="arithmetic",
        num_train_examples=max(2, len(gsm8k.train_examples)),
        num_eval_examples=len(gsm8k.eval_examples),
        task_seed=seed,
        plot=False,
    )

    def train(recipe, name: str, folder: str | None = None):
        folder = folder or name
        steps = settings["steps"][name] if preset == "tiny" else max(2, round(settings["steps"][name] * steps_scale))
        args = TrainingArguments(
            output_dir=str(output_dir / folder),
            seed=seed,
            overwrite_output_dir=True,
            **{
                **TRAINING_DEFAULTS,
                "max_steps": steps,
                "per_device_batch_size": settings["batch_size"],
                "warmup_steps": min(TRAINING_DEFAULTS["warmup_steps"], steps // 4),
                "logging_steps": max(1, steps // 10),
                "mixed_precision": "bf16" if device.type == "cuda" or preset == "cpu_fast" else "no",
                "gradient_checkpointing": settings["checkpointing"],
            },
        )
        logger.info("JEPA-Reasoner GSM8K: training %s, %d steps", name, steps)
        trained = JepaTrainer(recipe, args).train()
        # The folder's data_args.json and card describe the recipe's task settings; this file says what it really read.
        (output_dir / folder / "gsm8k_data.json").write_text(
            json.dumps({"data": source, "shots": list(shots), "preset": preset, **gsm8k.stats}, indent=2) + "\n"
        )
        return trained

    runs: dict[str, Any] = {}
    if options["talker"]:
        pair = JepaReasonerWithTalker.from_pretrained(options["talker"]).to(device)
        if not pair.config.is_dual:
            raise ValueError(f"talker: {options['talker']} holds a Mono-Talker; the GSM8K protocol uses a Dual-Talker")
        _check_loaded("talker", options["talker"], pair, gsm8k)
        runs["jepa_reasoner"] = {"loaded_from": options["talker"]}
    else:
        if options["reasoner"]:
            reasoner = JepaReasonerModel.from_pretrained(options["reasoner"]).to(device)
            _check_loaded("reasoner", options["reasoner"], reasoner, gsm8k)
            runs["reasoner"] = {"loaded_from": options["reasoner"]}
        else:
            result = train(JepaReasonerRecipe(configs["reasoner"], data_args, seed, gsm8k), "reasoner")
            reasoner, runs["reasoner"] = result.model, result.metrics
        talker_recipe = TalkerRecipe(configs["dual"], data_args, seed, gsm8k, reasoner=reasoner)
        talker_recipe.chain_batch_size = settings["chain_batch_size"]
        result = train(talker_recipe, "talker", "dual-talker")
        pair, runs["jepa_reasoner"] = talker_recipe.pair(result.model), result.metrics
    if options["coupled"]:
        coupled = CoupledTransformerLM.from_pretrained(options["coupled"]).to(device)
        _check_loaded("coupled", options["coupled"], coupled, gsm8k)
        runs["coupled"] = {"loaded_from": options["coupled"]}
    else:
        result = train(CoupledRecipe(configs["coupled"], data_args, seed, gsm8k), "coupled")
        coupled, runs["coupled"] = result.model, result.metrics

    pair.eval().to(device)
    coupled.eval().to(device)
    systems = {
        PAIR_LABEL: DecoupledSystem(pair, gsm8k, batch_size=settings["eval_batch_size"]),
        COUPLED_LABEL: CoupledSystem(coupled, gsm8k, batch_size=settings["eval_batch_size"]),
    }
    accuracy: dict[str, dict[int, float]] = {name: {} for name in systems}
    details: dict[str, dict[str, Any]] = {name: {} for name in systems}
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    for k in shots:
        prompt_ids, prompt_mask, cut = gsm8k.test_prompts(k)
        for name, system in systems.items():
            began = time.perf_counter()
            with autocast:
                answers = system.complete(prompt_ids, prompt_mask)
            correct = [gsm8k.score(gold, answer) for (_, gold), answer in zip(gsm8k.test_pairs, answers)]
            accuracy[name][k] = sum(correct) / len(correct)
            details[name][str(k)] = {
                "accuracy": accuracy[name][k],
                "correct": sum(correct),
                "examples": len(correct),
                "prompts_truncated": cut,
                "no_final_answer": sum("####" not in answer for answer in answers),
                "eval_time_s": round(time.perf_counter() - began, 1),
                "first_answers": answers[:3],
            }
    output_dir.mkdir(parents=True, exist_ok=True)
    plot_accuracy_vs_shots(accuracy, output_dir / "accuracy_vs_shots.png", paper=PAPER if not quick else None)
    summary = {
        "protocol": "gsm8k",
        "preset": preset,
        "data": source,
        "seed": seed,
        "shots": list(shots),
        "device": str(device),
        "parameters": {
            "reasoner": _parameters(pair.reasoner),  # the EMA target encoder (frozen) not counted
            "dual_talker": _parameters(pair.talker),
            "coupled": _parameters(coupled),
        },
        "data_stats": gsm8k.stats,
        "accuracy": {name: {str(k): v for k, v in by_k.items()} for name, by_k in accuracy.items()},
        "details": details,
        "runs": runs,
        "paper": {name: {str(k): v for k, v in by_k.items()} for name, by_k in PAPER.items()},
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    result = ReproductionResult("jepa-reasoner", summary, format_gsm8k_table(summary), output_dir)
    result.save()
    return result


def _count_label(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 1e6 else f"{count / 1e3:.1f}k"


def format_gsm8k_table(summary: dict[str, Any]) -> str:
    """The markdown of a GSM8K run: system x shots accuracy, the paper's figures beside, and what the run was."""
    shots = summary["shots"]
    params = summary["parameters"]
    stats = summary["data_stats"]
    sizes = {
        PAIR_LABEL: f"{_count_label(params['reasoner'])} + {_count_label(params['dual_talker'])}",
        COUPLED_LABEL: _count_label(params["coupled"]),
    }
    paper_shots = [k for k in shots if any(str(k) in row for row in summary["paper"].values())]
    header = ["system", "parameters", *(f"{k}-shot" for k in shots), *(f"paper {k}-shot" for k in paper_shots)]
    lines = [
        f"JEPA-Reasoner GSM8K k-shot (preset {summary['preset']}, seed {summary['seed']}, {summary['device']}, "
        f"wall time {summary['wall_time_s']} s)",
        "",
        f"Data: {summary['data']}; {stats['test_problems']} test problems, exact match of the number after ####, "
        "greedy decoding.",
        "",
        "| " + " | ".join(header) + " |",
        "|---|---|" + "---:|" * (len(header) - 2),
    ]
    for name, by_k in summary["accuracy"].items():
        paper = summary["paper"].get(name, {})
        cells = [name, sizes.get(name, "")]
        cells += [percent(by_k.get(str(k))) for k in shots]
        cells += [
            (f"~{percent(paper[str(k)])} (derived)" if k in PAPER_DERIVED_SHOTS else percent(paper[str(k)]))
            if str(k) in paper
            else "-"
            for k in paper_shots
        ]
        lines.append("| " + " | ".join(cells) + " |")
    truncated = {k: summary["details"][PAIR_LABEL][str(k)]["prompts_truncated"] for k in shots}
    lines += [
        "",
        f"Paper: 0.9B reasoner + 198M Talker vs a 0.9B coupled transformer, 8-shot; the 5-shot figures are derived "
        f"from the stated 5 -> 8-shot gains (+{100 * JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN:.1f}% and "
        f"+{100 * JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN_COUPLED:.1f}%).",
        f"Tokens: word-level tokenizer of the train split ({stats['tokenizer_size']} tokens, embeddings of "
        f"{stats['vocab_size']}; {100 * stats['test_unknown_token_fraction']:.2f}% of test-question tokens unknown); "
        f"prompt width {stats['prompt_width']} (needed {stats['prompt_tokens_needed']}), answers up to "
        f"{stats['max_answer_tokens']} tokens; prompts cut at the left: "
        + ", ".join(f"{k}-shot {n}" for k, n in truncated.items())
        + f"; training examples {stats['train_examples']} ({stats['train_dropped_long_answer']} dropped: answer too "
        "long).",
    ]
    return "\n".join(lines)
