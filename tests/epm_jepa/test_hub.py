"""Sharing a saved track-C EPM-JEPA model through the (loopback) Hub: push_to_hub, snapshot_download,
AutoModel.from_pretrained("org/name"), the experience adapter, the pipeline, the card as the Hub shows it."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from huggingface_hub import ModelCard
from PIL import Image
from transformers import AutoModel, pipeline

from hf_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER
from hf_jepa.cards.epm_jepa import render_card as render_epm_jepa_card
from hf_jepa.hub import card_for_repo, push_to_hub
from hf_jepa.testing.hub_server import use_loopback_hub

REPO_ID = "org/epm-tiny"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "experience_adapter.json")


# ------------------------------------------------------------------------------------------------ Hub round trip


def make_model() -> EpmJepaModel:
    """A tiny track-C model with moved gate statistics, an EMA target that differs from the context encoder and a
    non-zero LoRA delta / hypernetwork (so the adapter and the buffer change outputs)."""
    torch.manual_seed(0)
    model = EpmJepaModel(EpmJepaConfig.tiny(track="epm")).train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(4, 6, 1, 64, 64))
        for parameter in model.target_encoder.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
        for name, parameter in model.named_parameters():
            if ".lora_B." in name or name.startswith("hypernetwork.output.weight"):
                parameter.normal_(0.0, 0.3)
    model.reset_experience()
    return model.eval()


HUB_METRICS = {  # a partial set: d_train, gate_fire_rate_train, train_time_s etc. were not measured
    "track": "epm",
    "stage": "adapt",
    "d_shift": 0.87654,
    "d_shift_copy_last": 1.11111,
    "gate_fire_rate_shift": 0.375,
    "buffer_occupancy": 0.5,
    "buffer_turnover": 0.5,
    "data_source": "Hub ylecun/mnist",
    "device": "cpu",
    "diagnostics_plot": "diagnostics.png",
}


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def model_dir(model, tmp_path_factory):
    directory = tmp_path_factory.mktemp("epm-run")
    model.save_pretrained(directory)
    model.save_experience_adapter(str(directory / "experience_adapter"))
    Image.fromarray(np.arange(64 * 64, dtype=np.uint32).reshape(64, 64).astype(np.uint8)).save(
        directory / "diagnostics.png"
    )
    (directory / "eval_results.json").write_text(json.dumps(HUB_METRICS))
    render_epm_jepa_card(model.config, HUB_METRICS).save(str(directory / "README.md"))
    (directory / "checkpoints").mkdir()
    (directory / "checkpoints" / "junk.bin").write_bytes(b"never uploaded")
    return directory


@pytest.fixture(scope="module")
def pushed(hub, model_dir, tmp_path_factory):
    with use_loopback_hub(hub, cache_dir=tmp_path_factory.mktemp("push-cache")):
        url = push_to_hub(model_dir, REPO_ID)
    assert url.endswith("/" + REPO_ID)
    return model_dir


def test_pushed_files(hub, pushed):
    stored = hub.files(REPO_ID)
    local = {p.relative_to(pushed).as_posix(): p for p in pushed.rglob("*") if p.is_file()}
    expected = {
        "config.json",
        "model.safetensors",
        "configuration_epm_jepa.py",
        "modeling_epm_jepa.py",
        "modeling_epm_jepa_memory.py",
        "README.md",
        "diagnostics.png",
        "eval_results.json",
        *(f"experience_adapter/{name}" for name in ADAPTER_FILES),
    }
    assert expected <= set(stored)
    assert not any(path.startswith("checkpoints/") for path in stored)
    for path in expected:  # the card as uploaded: the local one (never rewritten) with the repo id filled in
        want = card_for_repo(local[path].read_bytes(), REPO_ID) if path == "README.md" else local[path].read_bytes()
        assert stored[path] == want, path
    assert MODEL_ID_PLACEHOLDER in local["README.md"].read_text(encoding="utf-8")
    readme = stored["README.md"].decode()
    assert MODEL_ID_PLACEHOLDER not in readme and f'from_pretrained("{REPO_ID}")' in readme
    config = json.loads(stored["config.json"])
    assert config["model_type"] == "epm_jepa" and config["track"] == "epm"
    assert set(config["auto_map"]) == {"AutoConfig", "AutoModel"}


def test_snapshot_and_from_pretrained_bit_identical(model, pushed, online, tmp_path):
    from huggingface_hub import snapshot_download
    from peft import LoraConfig
    from safetensors.torch import load_file

    snapshot = Path(snapshot_download(REPO_ID, cache_dir=str(tmp_path / "snap")))
    for name in ("model.safetensors", *(f"experience_adapter/{n}" for n in ADAPTER_FILES)):
        assert (snapshot / name).read_bytes() == (pushed / name).read_bytes(), name

    loaded = AutoModel.from_pretrained(REPO_ID)
    assert type(loaded) is EpmJepaModel and loaded.config.track == "epm"
    reference, state = model.state_dict(), loaded.state_dict()
    assert reference.keys() == state.keys()
    for name, tensor in reference.items():
        assert torch.equal(state[name], tensor), name
    assert not any(p.requires_grad for p in loaded.target_encoder.parameters())
    assert int(loaded.experience_buffer.num_writes) == 0  # run-time state: rebuilt, not downloaded

    # The adapter is a peft adapter and loads into another model of the same architecture, bit-exactly.
    adapter = snapshot / "experience_adapter"
    lora_config = LoraConfig.from_pretrained(str(adapter))
    assert lora_config.r == model.config.lora_rank and lora_config.lora_alpha == model.config.lora_alpha
    assert all(key.startswith("base_model.model.") for key in load_file(adapter / "adapter_model.safetensors"))
    torch.manual_seed(123)
    other = EpmJepaModel(EpmJepaConfig.tiny(track="epm")).eval()
    modulated = [k for k in reference if ".lora_" in k or k.startswith(("experience_encoder.", "hypernetwork."))]
    assert modulated and not all(torch.equal(other.state_dict()[k], reference[k]) for k in modulated)
    other.load_experience_adapter(str(adapter))
    other_state = other.state_dict()
    for key in modulated:
        assert torch.equal(other_state[key], reference[key]), key


def test_pipeline_from_hub(model, pushed, online):
    frames = np.random.default_rng(0).integers(0, 256, size=(6, 64, 64), dtype=np.uint8)
    hub_pipe = pipeline("latent-world-model", model=REPO_ID)
    result = hub_pipe(frames)
    pixel_values = torch.from_numpy(frames).float()[None, :, None] / 255.0
    model.reset_experience()
    with torch.no_grad():
        assert result["predicted_latent"] == model.predict_next_latent(pixel_values)[0].tolist()
        assert result["surprisal"] == model(pixel_values, update_experience=False).surprisal[0].tolist()
    warm = hub_pipe(frames, warm_experience=True)
    assert int(hub_pipe.model.experience_buffer.num_writes) == 6 - model.config.context_length
    assert warm["predicted_latent"] != result["predicted_latent"]


def test_card_from_hub_shows_what_was_measured(pushed, online):
    card = ModelCard.load(REPO_ID)
    assert str(card) == card_for_repo((pushed / "README.md").read_bytes(), REPO_ID).decode()
    assert card.data.library_name == "transformers"  # the saved config has auto_map: remote code loads it
    assert {(r.metric_config, r.metric_value) for r in card.data.eval_results} == {("shift", 0.87654)}
    text = card.text
    for row in (
        "| D_shift: normalised error on held-out shifted sequences (g > 0) | 0.8765 |",
        "| D_shift of copying the last latent (baseline) | 1.1111 |",
        "| Surprisal-gate firing rate, shifted sequences | 37.50% |",
        "| Experience buffer occupancy (fraction of capacity) | 50.00% |",
        "| Device | cpu |",
    ):
        assert row in text, row
    assert (
        "![](diagnostics.png)" in text
        and f'pipeline("latent-world-model", model="{REPO_ID}", trust_remote_code=True)' in text
    )
    for absent in (
        "D on the training distribution (g = 0) |",
        "Surprisal-gate firing rate, g = 0",
        "Training time",
        "sigma_embed of the predicted",
        "One-step predictions scored",
        "Three-track reproduction",
    ):
        assert absent not in text, absent
