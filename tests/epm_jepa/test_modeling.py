"""EPM-JEPA model: the memory subsystem (FIFO buffer, surprisal gate, boundary writes), the dynamic-LoRA identities,
track initialisation from a base, the experience adapter, and the family tester (config validation, bad frames,
save/load of every track with the run-time buffer left out, remote code, the pipeline on the saved folders)."""

import copy
import json

import numpy as np
import pytest
import torch
from peft import LoraConfig
from safetensors.torch import load_file

from hf_jepa import EpmJepaConfig, EpmJepaImageProcessor, EpmJepaModel
from hf_jepa.modeling.epm_jepa.modeling_epm_jepa import (
    ADAPTER_NAME,
    EpmJepaExperienceBuffer,
    EpmJepaSurprisalGate,
    modulated_lora,
)
from hf_jepa.testing.family_tester import BadInput, FamilyTester


def frames(batch=3, length=6, seed=0, side=64):
    return torch.rand(batch, length, 1, side, side, generator=torch.Generator().manual_seed(seed))


def tiny(track="epm", **overrides):
    torch.manual_seed(0)
    return EpmJepaModel(EpmJepaConfig.tiny(track=track, **overrides))


def randomize_lora(model, seed=1):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model._lora_layers:
            weight = layer.lora_B[ADAPTER_NAME].weight
            weight.copy_(torch.randn(weight.shape, generator=generator) * 0.3)


# ------------------------------------------------------------------------------------------------ config + inputs


def test_lora_targets_outside_the_predictor_are_rejected():
    with pytest.raises(ValueError, match="lora_target_modules"):
        EpmJepaModel(EpmJepaConfig.tiny(lora_target_modules=r"context_encoder\.projection"))


def test_every_track_runs_forward_and_backward():
    for track in ("vanilla", "ei", "epm"):
        model = tiny(track)
        output = model(frames())
        assert output.predicted_latents.shape == (3, 3, 16) and output.target_latents.shape == (3, 3, 16)
        assert output.surprisal.shape == (3, 3) and torch.isfinite(output.loss)
        output.loss.backward()
        assert model.context_encoder.projection.weight.grad is not None
        assert all(p.grad is None for p in model.target_encoder.parameters())
        if track != "vanilla":
            assert output.experience.shape == (3, 3, 16)


def test_prediction_needs_context_length_frames():
    model = tiny()
    assert model.predict_next_latent(frames(length=3)).shape == (3, 16)
    with pytest.raises(ValueError, match="needs at least 3"):
        model.predict_next_latent(frames(length=2))


# ------------------------------------------------------------------------------------------------ memory subsystem


def test_buffer_is_fifo_with_fixed_capacity():
    buffer = EpmJepaExperienceBuffer(EpmJepaConfig.tiny(buffer_capacity=8, write_per_event=4))
    entries = torch.arange(13, dtype=torch.float)[:, None].expand(13, buffer.entries.shape[1])
    buffer.write(entries[:5])
    assert buffer.occupancy == 5 and torch.equal(buffer.ordered_entries(), entries[:5])
    buffer.write(entries[5:13])  # 13 writes into 8 slots: the oldest 5 are gone
    assert buffer.occupancy == 8 and int(buffer.num_writes) == 13
    assert torch.equal(buffer.ordered_entries(), entries[5:13])
    buffer.write(torch.full((20, buffer.entries.shape[1]), 7.0))  # more than the capacity: the newest 8 are kept
    assert torch.equal(buffer.ordered_entries(), torch.full((8, buffer.entries.shape[1]), 7.0))
    with pytest.raises(ValueError, match="entries must have shape"):
        buffer.write(torch.zeros(2, 3))
    buffer.reset()
    assert buffer.occupancy == 0 and buffer.valid_entries().shape[0] == 0


def test_surprisal_gate_running_statistics_and_decisions_by_hand():
    gate = EpmJepaSurprisalGate(
        EpmJepaConfig.tiny(surprisal_momentum=0.5, surprisal_threshold_std=1.0, gate_warmup_updates=1)
    )
    assert gate.observe(torch.tensor(1.0)) is False  # warm-up; mean 1, var 0
    assert gate.running_mean.item() == 1.0 and gate.running_var.item() == 0.0
    assert gate.observe(torch.tensor(3.0)) is True  # 3 > 1 + 1 * sqrt(0)
    # delta 2: mean 1 + 0.5 * 2 = 2; var 0.5 * 0 + 0.5 * 0.5 * 4 = 1
    assert gate.running_mean.item() == 2.0 and gate.running_var.item() == 1.0
    assert gate.observe(torch.tensor(2.5)) is False  # threshold 2 + 1 * 1 = 3
    assert gate.observe(torch.tensor(3.5)) is True  # mean 2.25, var 0.5 + 0.25 * 0.25 = 0.5625 -> threshold 3.0
    assert int(gate.num_updates) == 4


def test_boundary_event_writes_each_sequences_most_surprising_transition():
    model = tiny("epm", write_per_event=2)
    model.train()
    gate = model.surprisal_gate
    gate.running_mean.zero_(), gate.running_var.zero_(), gate.num_updates.fill_(10)  # any surprisal > 0 fires
    output = model(frames(batch=3))
    assert output.boundary_event.item() == 1.0 and int(model.experience_buffer.num_writes) == 2
    targets = model.encode(frames(batch=3), use_target_encoder=True)
    surprisal = output.surprisal
    step = surprisal.argmax(dim=1)
    best = surprisal[torch.arange(3), step].topk(2).indices
    expected = []
    for row in best.tolist():
        t = step[row].item()
        current, following = targets[row, t + 2], targets[row, t + 3]
        expected.append(torch.cat([current, following, following - output.predicted_latents[row, t].detach()]))
    torch.testing.assert_close(model.experience_buffer.ordered_entries(), torch.stack(expected))
    assert output.buffer_occupancy.item() == 2 / 32


def test_eval_mode_leaves_gate_and_buffer_alone():
    model = tiny("ei")
    model.eval()
    before = {k: v.clone() for k, v in model.surprisal_gate.state_dict().items()}
    for _ in range(3):
        model(frames())
    assert all(torch.equal(before[k], v) for k, v in model.surprisal_gate.state_dict().items())
    assert int(model.experience_buffer.num_writes) == 0


def test_gate_fires_on_a_surprising_batch_after_calibration():
    model = tiny("ei")
    model.train()
    calm = frames(batch=4, seed=3) * 0.0  # blank frames: every latent identical, nothing to get wrong
    for _ in range(5):
        fired = model(calm).boundary_event.item()
    assert fired == 0.0 and int(model.experience_buffer.num_writes) == 0
    assert model(frames(batch=4, seed=4)).boundary_event.item() == 1.0
    assert int(model.experience_buffer.num_writes) == 4


def test_warm_experience_and_reset():
    model = tiny("epm")
    assert model.warm_experience(frames(batch=2, length=6)) == 6  # 2 sequences x 3 transitions
    assert model.experience_buffer.occupancy == 6
    model.surprisal_gate.running_mean.fill_(1e6)
    assert model.warm_experience(frames(batch=2), gated=True) == 0
    model.reset_experience()
    assert model.experience_buffer.occupancy == 0
    with pytest.raises(ValueError, match="no experience buffer"):
        tiny("vanilla").warm_experience(frames())


# ------------------------------------------------------------------------------------------------ dynamic LoRA


def _context(n=5, seed=2):
    return torch.randn(n, 3, 16, generator=torch.Generator().manual_seed(seed))


def _base_prediction(model, context):
    for layer in model._lora_layers:
        layer.enable_adapters(False)
    try:
        return model.predict_next(context)
    finally:
        for layer in model._lora_layers:
            layer.enable_adapters(True)


def test_zero_modulation_reproduces_the_base_predictor_exactly():
    model = tiny("epm")
    randomize_lora(model)
    context = _context()
    base = _base_prediction(model, context)
    plain_lora = model.predict_next(context)
    assert not torch.allclose(base, plain_lora)  # the adapter really changes the output
    zeros = torch.zeros(5, len(model._lora_layers), model.config.lora_rank)
    assert torch.equal(model.predict_next(context, modulation=zeros), base)


def test_unit_and_constant_modulation_equal_plain_lora():
    model = tiny("epm")
    randomize_lora(model)
    context = _context()
    layers, rank = len(model._lora_layers), model.config.lora_rank
    plain = model.predict_next(context)
    assert torch.equal(model.predict_next(context, modulation=torch.ones(5, layers, rank)), plain)
    # Constant d = c: plain LoRA whose A is scaled row-wise by c.
    c = torch.tensor([0.5, -2.0])
    modulated = model.predict_next(context, modulation=c.expand(5, layers, rank))
    with torch.no_grad():
        for layer in model._lora_layers:
            layer.lora_A[ADAPTER_NAME].weight.mul_(c[:, None])
    torch.testing.assert_close(modulated, model.predict_next(context))


def test_per_sample_modulation_matches_the_dense_formula():
    """Each row computes W x + b + scaling * U diag(d_row) V^T x, with U = lora_B and V^T = lora_A."""
    model = tiny("epm")
    randomize_lora(model)
    context = _context()
    d = torch.randn(5, len(model._lora_layers), model.config.lora_rank, generator=torch.Generator().manual_seed(5))
    got = model.predict_next(context, modulation=d)
    hidden = context.flatten(1)
    for index, layer in enumerate(model._lora_layers):
        u, v_t = layer.lora_B[ADAPTER_NAME].weight, layer.lora_A[ADAPTER_NAME].weight
        delta = layer.scaling[ADAPTER_NAME] * torch.einsum("or,nr,ri->noi", u, d[:, index], v_t)  # per-sample dW
        base = layer.base_layer
        hidden = hidden @ base.weight.T + base.bias + torch.einsum("noi,ni->no", delta, hidden)
        if index < len(model._lora_layers) - 1:
            hidden = torch.nn.functional.gelu(hidden)
    torch.testing.assert_close(got, context[:, -1] + hidden, rtol=1e-5, atol=1e-5)
    # The diagnostic norm is the mean Frobenius norm of those dense deltas.
    norms = []
    for index, layer in enumerate(model._lora_layers):
        u, v_t = layer.lora_B[ADAPTER_NAME].weight, layer.lora_A[ADAPTER_NAME].weight
        dense = layer.scaling[ADAPTER_NAME] * torch.einsum("or,nr,ri->noi", u, d[:, index], v_t)
        norms.append(dense.flatten(1).norm(dim=1))
    torch.testing.assert_close(model.lora_delta_norm(d), torch.stack(norms).mean(), rtol=1e-5, atol=1e-6)


def test_modulation_hooks_are_removed_and_merged_layers_refused():
    model = tiny("epm")
    layers = model._lora_layers
    d = torch.zeros(5, len(layers), model.config.lora_rank)
    with modulated_lora(layers, d):
        assert all(layer.lora_A[ADAPTER_NAME]._forward_hooks for layer in layers)
    assert not any(layer.lora_A[ADAPTER_NAME]._forward_hooks for layer in layers)
    layers[0].merge()
    with pytest.raises(RuntimeError, match="merged LoRA layer"):
        model.predict_next(_context(), modulation=d)


@pytest.mark.parametrize("modulation_init", ["zero", "unit"])
def test_modulated_delta_starts_at_zero_under_either_init(modulation_init):
    """ "zero" (the default): d = 0 with a random U; "unit" (the earlier default): d = 1 with U = 0. Either way the
    delta U diag(d) V^T starts at exactly zero."""
    torch.manual_seed(0)
    model = EpmJepaModel(EpmJepaConfig.tiny(track="epm", modulation_init=modulation_init))
    d = model.lora_modulation(torch.randn(4, model.config.memory_dim))
    up_weights = [layer.lora_B[ADAPTER_NAME].weight for layer in model._lora_layers]
    if modulation_init == "zero":
        assert torch.equal(d, torch.zeros_like(d))
        assert all(weight.abs().sum() > 0 for weight in up_weights)
    else:
        assert torch.equal(d, torch.ones_like(d))
        assert all(weight.abs().sum() == 0 for weight in up_weights)


# ------------------------------------------------------------------------------------------------ tracks from a base


def test_memory_tracks_start_exactly_at_their_base():
    base = tiny("vanilla")
    base.train()
    base(frames())  # one step of gate statistics
    base.eval()
    expected = base(frames(seed=9)).predicted_latents
    for track in ("ei", "epm"):
        model = EpmJepaModel.from_base(base, track=track)
        model.eval()
        model.warm_experience(frames(seed=7))  # a non-empty buffer still changes nothing at initialisation
        assert torch.equal(model(frames(seed=9)).predicted_latents, expected)
        assert torch.equal(model.surprisal_gate.running_mean, base.surprisal_gate.running_mean)
        assert not model.target_encoder.projection.weight.requires_grad


def test_from_base_refuses_a_different_architecture():
    with pytest.raises(ValueError, match="shape"):
        EpmJepaModel.from_base(tiny("vanilla"), track="epm", latent_dim=32)


# ------------------------------------------------------------------------------------------------ save / load


def test_loading_another_tracks_checkpoint_is_refused(tmp_path):
    tiny("epm").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="from_base"):
        EpmJepaModel.from_pretrained(tmp_path, track="vanilla")


def test_experience_adapter_round_trip_in_peft_format(tmp_path):
    base = tiny("vanilla")
    model = EpmJepaModel.from_base(base, track="epm")
    randomize_lora(model)
    with torch.no_grad():
        model.hypernetwork.output.weight.normal_(0, 0.5)
    model.save_experience_adapter(tmp_path)
    assert LoraConfig.from_pretrained(tmp_path).r == model.config.lora_rank
    saved = load_file(tmp_path / "adapter_model.safetensors")
    assert "base_model.model.predictor.layers.0.lora_A.weight" in saved
    assert any(k.startswith("base_model.model.hypernetwork.") for k in saved)
    assert json.loads((tmp_path / "experience_adapter.json").read_text())["num_lora_layers"] == 3

    fresh = EpmJepaModel.from_base(base, track="epm")
    fresh.load_experience_adapter(tmp_path)
    for model_ in (model, fresh):
        model_.eval()
        model_.warm_experience(frames(seed=11))
    assert torch.equal(model(frames(seed=12)).predicted_latents, fresh(frames(seed=12)).predicted_latents)


def test_adapter_that_does_not_match_its_base_is_refused(tmp_path):
    tiny("epm", lora_rank=4).save_experience_adapter(tmp_path / "rank4")
    with pytest.raises(ValueError, match="adapter does not match its base: LoraConfig.r"):
        tiny("epm").load_experience_adapter(tmp_path / "rank4")
    tiny("epm", memory_dim=8).save_experience_adapter(tmp_path / "narrow")
    with pytest.raises(ValueError, match="adapter does not match its base: .* has shape"):
        tiny("epm").load_experience_adapter(tmp_path / "narrow")
    with pytest.raises(ValueError, match="track='epm'"):
        tiny("ei").load_experience_adapter(tmp_path / "narrow")
    with pytest.raises(FileNotFoundError, match="no peft adapter"):
        tiny("epm").load_experience_adapter(tmp_path / "missing")


def test_full_size_config_is_constructible_and_runs():
    model = EpmJepaModel(EpmJepaConfig())
    assert 3_000_000 < model.num_parameters() < 4_000_000
    output = model(frames(batch=2, length=4))
    assert output.predicted_latents.shape == (2, 1, 128)


# ------------------------------------------------------------------------------------------- the family tester


def moving_square(length: int, seed: int, side: int = 64) -> np.ndarray:
    """uint8 `(length, side, side)`: a bright noisy square drifting across a dark canvas (what the pipeline takes)."""
    rng = np.random.default_rng(seed)
    video = rng.integers(0, 20, size=(length, side, side), dtype=np.uint8)
    y, x = rng.integers(4, 24, size=2)
    for t in range(length):
        video[t, y + t : y + t + 16, x + 2 * t : x + 2 * t + 16] = rng.integers(150, 256, size=(16, 16), dtype=np.uint8)
    return video


class TestEpmJepaFamily(FamilyTester):
    """The common contracts (hf_jepa.testing.family_tester) on the three tracks of EPM-JEPA."""

    config_class = EpmJepaConfig
    model_classes = (EpmJepaModel,)
    processor_class = EpmJepaImageProcessor
    pipeline_tasks = ("latent-world-model",)
    hub_variants = ("epm",)  # also from a loopback Hub repo without hf_jepa
    variants = {"vanilla": {"track": "vanilla"}, "ei": {"track": "ei"}, "epm": {"track": "epm"}}
    invalid_configs = [
        (dict(track="epm-jepa"), "track"),
        (dict(buffer_entry="triple"), "buffer_entry"),
        (dict(latent_dim=0), "latent_dim"),
        (dict(memory_dim=15, memory_num_heads=2), "memory_dim"),
        (dict(image_size=60), "image_size"),
        (dict(write_per_event=64, buffer_capacity=32), "write_per_event"),
        (dict(predictor_num_layers=1), "predictor_num_layers"),
        (dict(surprisal_momentum=1.5), "surprisal_momentum"),
        (dict(context_length=0), "context_length"),
        (
            dict(modulation_init="ones"),
            "modulation_init",
        ),  # the memory path's init (tests/epm_jepa/test_memory_path.py)
    ]
    # the default (track-C) full preset: ~3.4M parameters
    full_sizes = {"epm": {"total": (3_000_000, 4_000_000)}}

    @torch.no_grad()
    def make_trained_looking(self, name, model):
        """Gate statistics moved by training-mode passes, the EMA target off the context encoder, and the LoRA delta
        / injection and hypernetwork non-zero (at initialisation they are exactly neutral, so the memory path would
        not show in any output); the run-time buffer emptied, as a loaded model's is."""
        model.train()
        for seed in range(3):
            model(frames(batch=4, seed=seed))
        super().make_trained_looking(name, model)
        if model.config.track == "epm":
            randomize_lora(model)
            model.hypernetwork.output.weight.normal_(0.0, 0.3)
        elif model.config.track == "ei":
            model.experience_injection.weight.normal_(0.0, 0.3)
        model.reset_experience()

    def inputs(self, name):
        return dict(pixel_values=frames(seed=5))

    def calls(self, name):
        return {
            "forward": ("__call__", self.inputs(name)),
            "predict_next_latent": ("predict_next_latent", dict(pixel_values=frames(length=4, seed=6))),
        }

    def processor_inputs(self, name):
        return dict(images=list(moving_square(3, seed=1)[:, None]), return_tensors="pt")

    def pipeline_calls(self, name, task):
        videos = [moving_square(8, seed) for seed in range(3)]
        if name == "vanilla":  # no experience buffer to warm
            return [((videos,), {}), ((videos[1],), dict(return_tensors=True))]
        # the warmed buffer changes the predictions after it, so a pipeline that did not write to it shows in the
        # third call
        return [((videos,), {}), ((videos[0],), dict(warm_experience=True)), ((videos[1],), {})]

    def bad_inputs(self):
        return [
            BadInput("pixel_values", torch.rand(2, 6, 1, 28, 28), match=r"shape \(batch, frames, 1, 64, 64\)"),
            BadInput("pixel_values", torch.rand(2, 1, 28, 28), match="must have shape"),  # (2, 1, 64, 64): to encode
            BadInput(
                "pixel_values",
                torch.rand(2, 3, 1, 64, 64),
                match="holds 3 frames per sequence; scoring a prediction needs at least 4",
            ),
            BadInput(
                "pixel_values", torch.randint(0, 255, (2, 6, 1, 64, 64), dtype=torch.uint8), TypeError, "floating"
            ),
        ]

    def test_the_run_time_buffer_is_not_saved(self, variant, family, tmp_path):
        """The gate's statistics are weights; the experience buffer is run-time state: never saved, empty after
        loading (also when the saved model's buffer held entries)."""
        model = copy.deepcopy(family.model(variant))
        if model.experience_buffer is not None:
            model.warm_experience(frames(seed=7))
            assert model.experience_buffer.occupancy > 0
        model.save_pretrained(tmp_path)
        saved = load_file(tmp_path / "model.safetensors")
        assert "surprisal_gate.running_mean" in saved and not any("experience_buffer" in k for k in saved)
        loaded = EpmJepaModel.from_pretrained(tmp_path)
        if loaded.experience_buffer is not None:
            assert loaded.experience_buffer.occupancy == 0

    @pytest.mark.parametrize("track", ["ei", "epm"])
    def test_remote_pipeline_warm_experience_writes_every_transition(self, track, remote_results):
        """Without hf_jepa (the class's remote-code subprocess), `warm_experience=True` on one 8-frame sequence
        writes its 8 - K transitions (K = context_length) into the buffer; the plain calls before and after write
        nothing (`pipeline_calls`: a list, the warm call, a plain call)."""
        context_length = EpmJepaConfig.tiny(track=track).context_length
        buffers = remote_results[track]["pipelines"]["latent-world-model"]["buffers"]
        writes = [int(after["experience_buffer.num_writes"]) for after in buffers]
        assert writes == [0, 8 - context_length, 8 - context_length]
