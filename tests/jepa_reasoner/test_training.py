"""JEPA-Reasoner recipes through the shared trainer: a reasoner + Dual-Talker that must learn a small tree-search task,
the CLI's reasoner -> Talker stages with cards and the loadable pair, two-process training, CFG robustness
bookkeeping and the quick reproduction."""

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard

from hf_jepa.cli import main
from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics.reasoning import CoupledSystem, DecoupledSystem, cfg_robustness
from hf_jepa.modeling.jepa_reasoner import (
    CoupledTransformerConfig,
    CoupledTransformerLM,
    DualTalkerConfig,
    JepaReasonerConfig,
    JepaReasonerModel,
    JepaReasonerWithTalker,
    MonoTalkerConfig,
    MonoTalkerModel,
)
from hf_jepa.recipes.jepa_reasoner import CoupledRecipe, JepaReasonerDataArguments, JepaReasonerRecipe, TalkerRecipe
from hf_jepa.reproductions.jepa_reasoner import format_jepa_reasoner_tables, reproduce_jepa_reasoner
from hf_jepa.testing.harness import load_rank_states, run_in_two_processes, save_rank_state, train_quickly


def _train(recipe, output_dir, **overrides):
    return train_quickly(recipe, output_dir, **{"mixed_precision": "no", **overrides})


def _small(config_class, data, **overrides):
    """64-wide test models sized to the task's vocabulary and sequence lengths."""
    length = data.max_prompt_length + 1 + data.max_answer_length + 8
    kwargs = dict(
        vocab_size=data.vocab_size,
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=3 * length,
    )
    if config_class is JepaReasonerConfig:
        kwargs.update(max_position_embeddings=length, num_reasoning_steps=data.max_answer_length)
    elif config_class in (MonoTalkerConfig, DualTalkerConfig):
        kwargs.update(latent_size=64)
    kwargs.update(overrides)
    return config_class.tiny(**kwargs)


@pytest.fixture(scope="module")
def tree_data():
    """4-node trees over 8 node labels: small enough to learn in seconds, large enough that guessing fails."""
    args = JepaReasonerDataArguments(
        task="tree_search", num_nodes=4, node_vocab_size=8, num_train_examples=4000, num_eval_examples=200, plot=False
    )
    return args, ReasoningData(args)


@pytest.fixture(scope="module")
def cfg_data():
    args = JepaReasonerDataArguments(task="cfg", num_train_examples=64, num_eval_examples=12, plot=False)
    return args, ReasoningData(args)


def test_reasoner_and_dual_talker_learn_tree_search(tree_data, tmp_path):
    """The decoupled system learns the task from self-supervised latents alone (the Talker never trains the
    reasoner), and its answers come from the chain: another example's chain gives far fewer right paths."""
    args, data = tree_data
    common = dict(per_device_batch_size=32, learning_rate=2e-3, warmup_steps=10, logging_steps=100, max_grad_norm=1.0)
    reasoner = _train(
        JepaReasonerRecipe(_small(JepaReasonerConfig, data), args, data=data),
        tmp_path / "reasoner",
        max_steps=800,
        save_model=False,
        **common,
    )
    losses = [record["loss"] for record in reasoner.history]
    assert losses[-1] < 0.5 * losses[0]
    assert reasoner.metrics["free_running_cosine"] > 0.8
    talker = _train(
        TalkerRecipe(_small(DualTalkerConfig, data), args, data=data, reasoner=reasoner.model),
        tmp_path / "talker",
        max_steps=800,
        **common,
    )
    metrics = talker.metrics
    print("tree-search (4 nodes, 8 labels) reasoner + Dual-Talker:", metrics)
    assert metrics["accuracy"] >= 0.55, metrics
    assert metrics["accuracy_shuffled_chain"] < metrics["accuracy"] - 0.2, metrics
    # The saved pair (reasoner + Talker + tokenizer) answers like the trainer's evaluation, through the pipeline.
    from transformers import pipeline

    pair_dir = tmp_path / "talker" / "pair"
    pipe = pipeline("latent-reasoning", model=str(pair_dir), trust_remote_code=True)  # the folder declares it
    generated = pipe(data.eval_examples[0].prompt, max_new_tokens=data.max_answer_length)
    assert generated["generated_text"] == metrics["example_answer"]
    card = ModelCard.load(pair_dir / "README.md")
    assert f"| task accuracy (greedy) | {100 * metrics['accuracy']:.2f}% |" in card.text


def test_cli_trains_reasoner_then_mono_talker_and_the_pair_loads(tmp_path):
    common = [
        "preset=tiny",
        "task=cfg",
        "num_train_examples=64",
        "num_eval_examples=8",
        "max_steps=2",
        "per_device_batch_size=8",
        "warmup_steps=0",
        "disable_progress_bar=true",
        "mixed_precision=no",
    ]
    reasoner_dir, talker_dir = tmp_path / "reasoner", tmp_path / "talker"
    assert main(["train", "jepa-reasoner", "--set", *common, "--output-dir", str(reasoner_dir)]) == 0
    for name in (
        "config.json",
        "model.safetensors",
        "README.md",
        "eval_results.json",
        "tokenizer_config.json",
        "mixed_latents.png",
    ):
        assert (reasoner_dir / name).is_file(), name
    metrics = json.loads((reasoner_dir / "eval_results.json").read_text())
    assert {"eval_loss", "teacher_forced_cosine", "free_running_cosine"} <= set(metrics)
    assert metrics["data_source"].startswith("synthetic cfg")
    assert "![](mixed_latents.png)" in (reasoner_dir / "README.md").read_text()

    assert (
        main(
            ["train", "jepa-mono-talker", "--set", *common, f"reasoner={reasoner_dir}", "--output-dir", str(talker_dir)]
        )
        == 0
    )
    talker_metrics = json.loads((talker_dir / "eval_results.json").read_text())
    assert "accuracy_shuffled_chain" in talker_metrics
    pair = JepaReasonerWithTalker.from_pretrained(talker_dir / "pair")
    # The saved pair, scored here on the same 8 eval examples (regenerated from the same seed), gets the reported
    # accuracy exactly.
    data = ReasoningData(JepaReasonerDataArguments(task="cfg", num_train_examples=64, num_eval_examples=8, plot=False))
    answers = DecoupledSystem(pair.eval(), data).complete(data.eval["prompt_ids"], data.eval["prompt_mask"])
    assert talker_metrics["accuracy"] == data.accuracy(data.eval_examples, answers), (talker_metrics, answers)
    reasoner = JepaReasonerModel.from_pretrained(reasoner_dir)
    for name, tensor in reasoner.state_dict().items():  # the pair holds the frozen reasoner, untouched
        assert torch.equal(pair.reasoner.state_dict()[name], tensor), name
    assert (talker_dir / "pair" / "tokenizer_config.json").is_file()


def test_talker_stage_errors(cfg_data):
    args, data = cfg_data
    with pytest.raises(ValueError, match="reasoner=<directory>"):
        TalkerRecipe(MonoTalkerConfig.tiny(), args, data=data)
    reasoner = JepaReasonerModel(_small(JepaReasonerConfig, data))
    with pytest.raises(ValueError, match="latent_size=32 does not match the reasoner's hidden_size=64"):
        TalkerRecipe(
            MonoTalkerConfig.tiny(latent_size=32, vocab_size=data.vocab_size), args, data=data, reasoner=reasoner
        )
    with pytest.raises(ValueError, match="task must be one of"):
        JepaReasonerDataArguments(task="sudoku")
    with pytest.raises(ValueError, match="tasks=..."):
        reproduce_jepa_reasoner(data="gsm8k")


def test_cfg_robustness_bookkeeping(cfg_data, tmp_path):
    """The clean condition is measured twice (0% replacement, sigma = 0) and must agree; noise changes answers."""
    args, data = cfg_data
    torch.manual_seed(0)
    reasoner = JepaReasonerModel(_small(JepaReasonerConfig, data)).eval()
    talker = MonoTalkerModel(_small(MonoTalkerConfig, data)).eval()
    coupled = CoupledTransformerLM(_small(CoupledTransformerConfig, data)).eval()
    systems = {
        "decoupled": DecoupledSystem(JepaReasonerWithTalker.from_components(reasoner, talker), data),
        "coupled": CoupledSystem(coupled, data),
    }
    results = cfg_robustness(systems, data, replacement_rates=(0.0, 0.3), noise_stds=(0.0, 1.0))
    for name, curves in results.items():
        assert set(curves["replacement"]) == {0.0, 0.3} and set(curves["noise"]) == {0.0, 1.0}
        assert curves["replacement"][0.0] == curves["noise"][0.0], name
    ev = data.eval
    for name, system in systems.items():  # the clean condition is the plain accuracy of the clean completions
        by_hand = data.accuracy(data.eval_examples, system.complete(ev["prompt_ids"], ev["prompt_mask"]))
        assert results[name]["noise"][0.0] == by_hand, (name, results[name], by_hand)
    clean = systems["decoupled"].complete(ev["prompt_ids"], ev["prompt_mask"])
    noisy = systems["decoupled"].complete(ev["prompt_ids"], ev["prompt_mask"], latent_noise_std=1.0)
    assert clean != noisy
    assert noisy == systems["decoupled"].complete(ev["prompt_ids"], ev["prompt_mask"], latent_noise_std=1.0)
    with pytest.raises(ValueError, match="needs the cfg task"):
        tree = ReasoningData(JepaReasonerDataArguments(task="tree_search", num_train_examples=8, num_eval_examples=2))
        cfg_robustness(systems, tree)


def _root_then_target(prompt: str) -> str:
    """A hand-written guess for tree search: the root (the only parent that is never a child), then the target.
    Right exactly when the target is a child of the root."""
    edges, target = prompt.split("?")
    pairs = [edge.split() for edge in edges.split(",")]
    children = {child for _, child in pairs}
    root = next(parent for parent, _ in pairs if parent not in children)
    return f"{root} {target.strip()}"


def test_coupled_recipe_learns_tree_search_beyond_a_hand_written_guess(tree_data, tmp_path):
    """1,000 steps (~10 s) of the coupled next-token baseline on 4-node trees. Measured on the 2-core dev machine:
    untrained 0.0, "root then target" guess 0.565, trained 0.795 (0.69 after 400 steps, 0.74 after 600)."""
    args, data = tree_data
    recipe = CoupledRecipe(_small(CoupledTransformerConfig, data), args, data=data)
    torch.manual_seed(0)
    untrained = recipe.evaluate(CoupledTransformerLM(recipe.config).eval())["accuracy"]
    guess = data.accuracy(data.eval_examples, [_root_then_target(e.prompt) for e in data.eval_examples])
    result = _train(
        recipe,
        tmp_path,
        max_steps=1000,
        per_device_batch_size=32,
        learning_rate=2e-3,
        warmup_steps=10,
        logging_steps=250,
        max_grad_norm=1.0,
    )
    metrics = result.metrics
    print(f"coupled tree search: untrained {untrained}, root-then-target guess {guess}, trained {metrics['accuracy']}")
    assert metrics["eval_examples"] == len(data.eval_examples) == 200
    assert untrained <= 0.05, untrained
    assert 0.5 <= guess <= 0.65, guess  # the guess is right about as often as the target hangs off the root
    assert metrics["accuracy"] >= guess + 0.1, (metrics, guess)
    losses = [record["loss"] for record in result.history]
    assert losses[-1] < 0.25 * losses[0], losses  # measured 0.85 -> 0.067
    card = (tmp_path / "README.md").read_text()
    assert "coupled" in card.lower() and (tmp_path / "tokenizer_config.json").is_file()


def test_quick_reproduction_writes_tables_and_plots(tmp_path):
    summary = reproduce_jepa_reasoner(output_dir=str(tmp_path), quick=True).summary
    assert set(summary["tasks"]) == {"tree_search", "cfg", "arithmetic"}
    assert (tmp_path / "results.md").read_text() == format_jepa_reasoner_tables(summary) + "\n"
    robustness = summary["tasks"]["cfg"]["robustness"]
    assert set(robustness) == {"JEPA-Reasoner + Mono-Talker", "coupled transformer", "COCONUT"}
    for name in ("results.json", "cfg_robustness.png", "mixed_latents.png", "contextual_mixed_latents.png"):
        assert (tmp_path / name).is_file(), name
    superposition = summary["tasks"]["tree_search"]["superposition"]
    assert superposition["contextual_mixed_latents"]["chain_source"] == "free_running"
    assert "| contextual_teacher |" in (tmp_path / "results.md").read_text()
    for folder in ("tree_search/dual-talker/pair", "cfg/mono-talker/pair", "cfg/coconut", "arithmetic/coupled"):
        assert (tmp_path / folder / "config.json").is_file(), folder
    assert json.loads((tmp_path / "results.json").read_text())["tasks"]["arithmetic"]["data_source"].startswith(
        "synthetic arithmetic"
    )


# ------------------------------------------------------------------------------------------------- two processes


def _two_process_worker(output_dir):
    import torch.distributed as dist

    rank = dist.get_rank()
    args = JepaReasonerDataArguments(task="cfg", num_train_examples=64, num_eval_examples=8, plot=False)
    data = ReasoningData(args)
    recipe = JepaReasonerRecipe(_small(JepaReasonerConfig, data), args, data=data)
    result = _train(recipe, Path(output_dir) / "run", max_steps=3, save_model=False)
    save_rank_state(result.model.state_dict(), output_dir)
    first = recipe.train_batch(0, rank, 8)
    Path(f"{output_dir}/rank{rank}.json").write_text(
        json.dumps(
            {
                "world_size": dist.get_world_size(),
                "num_processes": result.metrics.get("num_processes"),
                "first_prompt": first["prompt_ids"].tolist(),
            }
        )
    )


def test_two_process_reasoner_training_keeps_ranks_identical(tmp_path):
    """DDP over the reasoner (every trained parameter gets a gradient, the target encoder is frozen and EMA-updated
    identically on both ranks) with different data on each rank."""
    run_in_two_processes(_two_process_worker, str(tmp_path))
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert infos[0]["world_size"] == 2 and infos[0]["num_processes"] == 2
    assert infos[0]["first_prompt"] != infos[1]["first_prompt"]
    states = load_rank_states(tmp_path)
    assert any(k.startswith("target_encoder.") for k in states[0])
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key
