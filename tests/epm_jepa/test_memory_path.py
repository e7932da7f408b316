"""EPM-JEPA's memory path can be trained: the diagnosis of research/epm_jepa/memory_diagnosis/README.md as tests on the tiny preset.

With `modulation_init="unit"` (d = 1, U = 0) no gradient reaches the hypernetwork, the aggregator or the memory
encoder at the first step, so after a step the generated delta is still the same for every buffer. With `"zero"`
(d = 0, U random) the delta starts at exactly zero (the base predictor) and one step makes it depend on the buffer."""

import pytest
import torch

from hf_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.data import GravityEpisodes, MovingMnist
from hf_jepa.metrics.epm_memory import memory_path_diagnostics
from hf_jepa.recipes.epm_jepa import set_trainable_parts

MEMORY_PARTS = ("hypernetwork.", "experience_encoder.")


@pytest.fixture(scope="module")
def episodes(embedded_splits):
    """Two tiny episodes of different gravity: query sequences and support (buffer) sequences."""
    world = MovingMnist(
        images=embedded_splits.train_images,
        labels=embedded_splits.train_labels,
        sequence_length=6,
        canvas_size=EpmJepaConfig.tiny().image_size,
        seed=0,
    )
    source = GravityEpisodes(world, (0.0, 0.5), support_size=3)
    return [
        {"pixel_values": world.sample_batch(4, step=1, gravity=g)["pixel_values"], "support": source.support(1, g)}
        for g in (0.0, 0.5)
    ]


def _model(modulation_init: str) -> EpmJepaModel:
    torch.manual_seed(0)
    model = EpmJepaModel(EpmJepaConfig.tiny(track="epm", modulation_init=modulation_init))
    set_trainable_parts(model, "adapt")
    return model


def _memory_gradient_norm(model: EpmJepaModel, episode: dict) -> float:
    model.train()
    model.zero_grad()
    model(episode["pixel_values"], experience_pixel_values=episode["support"]).loss.backward()
    return sum(
        float(p.grad.norm()) for n, p in model.named_parameters() if n.startswith(MEMORY_PARTS) and p.grad is not None
    )


def _one_step(model: EpmJepaModel, episode: dict) -> None:
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    _memory_gradient_norm(model, episode)
    optimizer.step()


@pytest.mark.parametrize("modulation_init, reaches", [("unit", False), ("zero", True)])
def test_gradient_reaches_the_memory_path_at_the_first_step_only_with_zero_init(episodes, modulation_init, reaches):
    norm = _memory_gradient_norm(_model(modulation_init), episodes[0])
    assert (norm > 0) == reaches, norm


def test_zero_init_starts_at_the_base_predictor_exactly(episodes):
    torch.manual_seed(0)
    base = EpmJepaModel(EpmJepaConfig.tiny(track="vanilla")).eval()
    model = EpmJepaModel.from_base(base, track="epm", modulation_init="zero").eval()
    assert all(layer.lora_B["experience"].weight.abs().sum() > 0 for layer in model._lora_layers)  # U is random
    windows = model.context_windows(model.encode(episodes[0]["pixel_values"])).flatten(0, 1)
    model.warm_experience(episodes[0]["support"])
    with torch.no_grad():
        modulation = model.lora_modulation(model.aggregate_experience(windows[:, -1]))
        assert torch.equal(modulation, torch.zeros_like(modulation))
        assert torch.equal(model.predict_next(windows, modulation), base.predict_next(windows))


@pytest.mark.parametrize("modulation_init, depends", [("unit", False), ("zero", True)])
def test_after_one_step_the_generated_delta_depends_on_the_buffer_only_with_zero_init(
    episodes, modulation_init, depends
):
    model = _model(modulation_init)
    _one_step(model, episodes[0])
    model.eval()
    diagnostics = memory_path_diagnostics(
        model, episodes[0]["pixel_values"], episodes[0]["support"], episodes[1]["support"]
    )
    assert (diagnostics["delta_change_over_buffers"] > 0) == depends, diagnostics
    assert diagnostics["delta_relative_norm"] > 0  # both inits have a delta after a step; only "zero" listens


def test_new_configs_default_to_zero_and_saved_folders_keep_their_value():
    """ "zero" is the default for every new config and preset; a folder written while "unit" was the default loads
    with "unit" (config.json and the experience adapter record the value) and computes what it computed then."""
    from pathlib import Path

    from transformers import AutoConfig

    assert EpmJepaConfig().modulation_init == "zero"
    for preset in (EpmJepaConfig.tiny, EpmJepaConfig.cpu_fast, EpmJepaConfig.full):
        assert preset(track="epm").modulation_init == "zero", preset.__name__
    earlier = Path(__file__).parents[1] / "fixtures" / "previous_version" / "c27143d" / "epm-jepa"
    assert AutoConfig.from_pretrained(earlier).modulation_init == "unit"
    loaded = EpmJepaModel.from_pretrained(earlier)
    assert loaded.config.modulation_init == "unit"
    # the initialisation "unit" chose (hypernetwork bias 1) is what the saved weights hold, not re-initialised
    assert torch.equal(loaded.hypernetwork.output.bias, torch.ones_like(loaded.hypernetwork.output.bias))
