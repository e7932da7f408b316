"""Like-for-like CFG robustness (issue 15, point 4): `residual_noise` reaches every block of every system at every
position and leaves nothing behind, the three curve kinds over seeds with hand-checked mean/std, the plot, the
`protocol=robustness` reproduction through the CLI, and clear errors for bad input."""

import json
import math

import pytest
import torch

from hf_jepa.cli import main
from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.metrics.reasoning import CoconutSystem, CoupledSystem, DecoupledSystem
from hf_jepa.metrics.reasoning_plots import plot_cfg_robustness_seeds
from hf_jepa.metrics.reasoning_robustness import (
    aggregate_seeds,
    cfg_robustness_curves,
    residual_noise_robustness,
    robustness_over_seeds,
)
from hf_jepa.modeling.jepa_reasoner import (
    CoconutConfig,
    CoconutLM,
    CoupledTransformerConfig,
    CoupledTransformerLM,
    JepaReasonerConfig,
    JepaReasonerModel,
    JepaReasonerWithTalker,
    MonoTalkerConfig,
    MonoTalkerModel,
    residual_noise,
)
from hf_jepa.modeling.jepa_reasoner.modeling_jepa_reasoner_blocks import JepaBlock
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments
from hf_jepa.reproductions.jepa_reasoner import reproduce_jepa_reasoner
from hf_jepa.reproductions.jepa_reasoner_robustness import PAPER_CLAIM


@pytest.fixture(scope="module")
def cfg_systems():
    """Untrained tiny systems on a small CFG eval set: every path runs, nothing needs to have learned."""
    args = JepaReasonerDataArguments(task="cfg", num_train_examples=16, num_eval_examples=6, plot=False)
    data = ReasoningData(args)
    length = data.max_prompt_length + 1 + data.max_answer_length + 8
    vocab = data.vocab_size
    torch.manual_seed(0)
    reasoner = JepaReasonerModel(
        JepaReasonerConfig.tiny(
            vocab_size=vocab, max_position_embeddings=length, num_reasoning_steps=data.max_answer_length
        )
    )
    talker = MonoTalkerModel(MonoTalkerConfig.tiny(vocab_size=vocab, max_position_embeddings=2 * length))
    coupled = CoupledTransformerLM(CoupledTransformerConfig.tiny(vocab_size=vocab, max_position_embeddings=length))
    coconut = CoconutLM(CoconutConfig.tiny(vocab_size=vocab, max_position_embeddings=length + 8))
    systems = {
        "reasoner": DecoupledSystem(JepaReasonerWithTalker.from_components(reasoner, talker).eval(), data),
        "coupled": CoupledSystem(coupled.eval(), data),
        "coconut": CoconutSystem(coconut.eval(), data),
    }
    return systems, data


def _no_hooks_left(model) -> bool:
    return all(not module._forward_hooks for module in model.modules())


def test_zero_noise_is_bit_identical_and_hooks_are_removed(cfg_systems):
    systems, data = cfg_systems
    ids, mask = data.eval["prompt_ids"], data.eval["prompt_mask"]
    for name, system in systems.items():
        clean = system.complete(ids, mask)
        with residual_noise(system.model, 0.0, torch.Generator().manual_seed(0)) as blocks:
            assert blocks and all(module._forward_hooks for module in blocks), name
            assert system.complete(ids, mask) == clean, name
        assert _no_hooks_left(system.model), name
        with residual_noise(system.model, 1.0, torch.Generator().manual_seed(0)):
            noisy = system.complete(ids, mask)
        assert noisy != clean, name  # relative std 1 on every block changes some completion of each system
        assert _no_hooks_left(system.model), name
    reasoner = systems["reasoner"].model.reasoner
    chain = reasoner.generate_latents(ids, mask, num_steps=4)
    with residual_noise(reasoner, 0.0):
        assert torch.equal(reasoner.generate_latents(ids, mask, num_steps=4), chain)
    with pytest.raises(RuntimeError, match="boom"), residual_noise(reasoner, 0.5):
        raise RuntimeError("boom")
    assert _no_hooks_left(reasoner)  # removed when the block raises too


def test_noise_is_relative_to_each_vector_and_reaches_every_position_of_every_block(cfg_systems):
    """Block 0 of the coupled model sees the same input with or without noise, so its noisy output must be exactly
    clean + std * RMS(clean vector) * (the generator's first draw); every later block and position differs too."""
    systems, data = cfg_systems
    model = systems["coupled"].model
    ids, mask = data.eval["prompt_ids"][:3], data.eval["prompt_mask"][:3]

    def outputs(std):
        seen = []
        with residual_noise(model, std, torch.Generator().manual_seed(7)):
            # registered after the noise hooks, so these see what the next block reads
            handles = [b.register_forward_hook(lambda m, i, o: seen.append(o.clone())) for b in model.layers]
            try:
                model(ids, mask)
            finally:
                for handle in handles:
                    handle.remove()
        return seen

    clean, noisy = outputs(0.0), outputs(0.3)
    assert len(clean) == len(noisy) == len(model.layers) == 3
    draw = torch.randn(clean[0].shape, generator=torch.Generator().manual_seed(7))
    rms = clean[0].pow(2).mean(-1, keepdim=True).sqrt()
    assert torch.equal(noisy[0], clean[0] + 0.3 * rms * draw)
    for layer, (a, b) in enumerate(zip(clean, noisy)):
        assert bool((a != b).any(-1).all()), f"block {layer}: some position kept its clean residual stream"
    assert _no_hooks_left(model)


def test_every_system_stack_is_hooked_and_generation_noises_each_position_once(cfg_systems):
    """The decoupled pair's reasoner encoder, reasoning blocks and Talker, COCONUT's blocks (so its thoughts) and the
    coupled model's blocks are all perturbed; with the KV cache each new position passes every block once."""
    systems, data = cfg_systems
    pair = systems["reasoner"].model
    with residual_noise(pair, 0.1) as blocks:
        hooked = {id(b) for b in blocks}
    for stack in (pair.reasoner.encoder.layers, pair.reasoner.layers, pair.talker.layers):
        assert all(id(block) in hooked for block in stack)
    assert len(blocks) == sum(isinstance(m, JepaBlock) for m in pair.modules())
    ids, mask = data.eval["prompt_ids"][:2], data.eval["prompt_mask"][:2]
    coconut = systems["coconut"].model
    bos = torch.full((2, 1), coconut.config.bos_token_id)
    clean = coconut(input_ids=bos, prompt_ids=ids, prompt_mask=mask).thoughts
    with residual_noise(coconut, 0.2, torch.Generator().manual_seed(1)):
        noisy = coconut(input_ids=bos, prompt_ids=ids, prompt_mask=mask).thoughts
    assert clean.shape == noisy.shape and bool((clean != noisy).any(-1).all())
    coupled = systems["coupled"].model
    query_lengths = []
    with residual_noise(coupled, 0.2, torch.Generator().manual_seed(1)):
        handle = coupled.layers[0].register_forward_hook(lambda m, i, o: query_lengths.append(o.shape[1]))
        try:
            systems["coupled"].complete(ids, mask)
        finally:
            handle.remove()
    assert query_lengths[0] == ids.shape[1] + 1 and set(query_lengths[1:]) == {1}, query_lengths


def test_curves_over_seeds_reproducible_and_clean_points_agree(cfg_systems, tmp_path):
    systems, data = cfg_systems
    first = residual_noise_robustness(systems, data, noise_stds=(0.0, 0.5), seed=3)
    assert first == residual_noise_robustness(systems, data, noise_stds=(0.0, 0.5), seed=3)
    measured = robustness_over_seeds(
        lambda seed: (systems, data),
        seeds=[0, 1],
        replacement_rates=(0.0, 0.3),
        noise_stds=(0.0, 1.0),
        residual_noise_stds=(0.0, 0.5),
    )
    assert measured["seeds"] == [0, 1] and set(measured["per_seed"]) == {0, 1}
    for seed, results in measured["per_seed"].items():
        for name, curves in results.items():
            assert set(curves) == {"replacement", "noise", "residual_noise"}
            clean = curves["replacement"][0.0]
            assert curves["noise"][0.0] == curves["residual_noise"][0.0] == clean, (seed, name)
    point = measured["aggregate"]["coupled"]["residual_noise"][0.5]
    values = [measured["per_seed"][s]["coupled"]["residual_noise"][0.5] for s in (0, 1)]
    assert point["values"] == values and point["mean"] == pytest.approx(sum(values) / 2)
    assert point["std"] == pytest.approx(abs(values[0] - values[1]) / math.sqrt(2))
    path = plot_cfg_robustness_seeds(measured["aggregate"], tmp_path / "robustness.png")
    assert (tmp_path / "robustness.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.endswith(".png")


def test_aggregate_seeds_by_hand():
    per_seed = [
        {"a": {"noise": {0.0: 0.5, 0.5: 0.2}}},
        {"a": {"noise": {"0.0": 0.7, "0.5": 0.4}}},  # levels as JSON writes them
        {"a": {"noise": {0.0: 0.9, 0.5: 0.3}}},
    ]
    aggregate = aggregate_seeds(per_seed)["a"]["noise"]
    assert aggregate[0.0]["mean"] == pytest.approx(0.7) and aggregate[0.0]["std"] == pytest.approx(0.2)
    assert aggregate[0.5]["mean"] == pytest.approx(0.3) and aggregate[0.5]["std"] == pytest.approx(0.1)
    assert aggregate[0.5]["values"] == [0.2, 0.4, 0.3]
    assert aggregate_seeds(per_seed[:1])["a"]["noise"][0.5] == {"mean": 0.2, "std": 0.0, "values": [0.2]}
    with pytest.raises(ValueError, match=r"per_seed\[1\] has systems/kinds/levels"):
        aggregate_seeds([per_seed[0], {"a": {"noise": {0.0: 0.5}}}])


def test_bad_input_names_the_argument(cfg_systems):
    systems, data = cfg_systems
    model = systems["coupled"].model
    with pytest.raises(ValueError, match=r"^residual_noise_std must be a finite number >= 0, got -0.1"):
        with residual_noise(model, -0.1):
            pass
    with pytest.raises(ValueError, match="has no JepaBlock"):
        with residual_noise(torch.nn.Linear(2, 2), 0.1):
            pass
    assert _no_hooks_left(model)
    with pytest.raises(ValueError, match=r"^seeds must be a non-empty list"):
        robustness_over_seeds(lambda seed: (systems, data), seeds=[])
    with pytest.raises(ValueError, match=r"^seeds must be distinct integers >= 0"):
        robustness_over_seeds(lambda seed: (systems, data), seeds=[0, 0])
    with pytest.raises(ValueError, match=r"^residual_noise_stds must be a finite number >= 0"):
        cfg_robustness_curves(systems, data, residual_noise_stds=(0.0, -1.0))
    with pytest.raises(ValueError, match=r"^replacement_rates must lie in \[0, 1\]"):
        cfg_robustness_curves(systems, data, replacement_rates=(0.0, 1.5))
    with pytest.raises(ValueError, match=r"^noise_stds must be a non-empty list"):
        cfg_robustness_curves(systems, data, noise_stds=())
    with pytest.raises(ValueError, match=r"^per_seed must be a non-empty list"):
        aggregate_seeds([])
    with pytest.raises(ValueError, match=r"^seeds must be a non-empty list"):
        reproduce_jepa_reasoner(quick=True, protocol="robustness", seeds=())
    with pytest.raises(ValueError, match=r"^seeds: an option of protocol=robustness"):
        reproduce_jepa_reasoner(quick=True, seeds=(4,))
    with pytest.raises(ValueError, match=r"^seed: protocol=robustness takes seeds="):
        reproduce_jepa_reasoner(quick=True, protocol="robustness", seed=2)
    with pytest.raises(ValueError, match=r"protocol must be 'tables', 'curves', 'robustness' or 'gsm8k'"):
        reproduce_jepa_reasoner(quick=True, protocol="robust")


def test_cli_runs_the_robustness_protocol(tmp_path, capsys):
    code = main(
        [
            "reproduce",
            "jepa-reasoner",
            "--quick",
            "--no-progress",
            "--output-dir",
            str(tmp_path),
            "--set",
            "protocol=robustness",
            "seeds=[0,1]",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    table = captured.out
    assert "+-" in table and PAPER_CLAIM in table
    assert "train jepa-reasoner" not in captured.err  # --no-progress also silences each stage's training bar
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["seeds"] == [0, 1] and set(results["per_seed"]) == {"0", "1"}
    assert (tmp_path / "results.md").read_text() == table
    assert (tmp_path / "cfg_robustness_seeds.png").is_file()
    for seed in ("0", "1"):
        assert set(results["per_seed"][seed]["timings"]) == {
            "reasoner",
            "talker",
            "coupled",
            "coconut",
            "curves_wall_s",
        }
        assert (tmp_path / f"seed-{seed}" / "cfg" / "mono-talker" / "pair" / "config.json").is_file()
    for name, kinds in results["aggregate"].items():
        assert set(kinds) == {"replacement", "noise", "residual_noise"}, name
        clean = kinds["replacement"]["0.0"]
        per_seed = [results["per_seed"][s]["curves"][name]["replacement"]["0.0"] for s in ("0", "1")]
        assert clean["values"] == per_seed and clean["mean"] == pytest.approx(sum(per_seed) / 2)
