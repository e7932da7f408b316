"""BRo-JEPA through the (loopback) Hub: push_to_hub, from_pretrained("org/name"), the pipeline. (Remote code from a Hub
repo without hf_jepa: the family tester in tests/bro_jepa/test_modeling.py.)"""

import json

import numpy as np
import pytest
import torch
from transformers import AutoImageProcessor, AutoModel, pipeline

from hf_jepa import BroJepaConfig, BroJepaImageProcessor, BroJepaModel
from hf_jepa.testing.hub_server import use_loopback_hub

REPO_ID = "org/bro-tiny"


def make_model() -> BroJepaModel:
    torch.manual_seed(0)
    model = BroJepaModel(BroJepaConfig.tiny()).train()
    with torch.no_grad():  # move BatchNorm statistics and make the EMA target differ from the context encoder
        model(torch.randn(16, 1, 28, 28), torch.randint(-2, 3, (16,)), target_pixel_values=torch.randn(16, 1, 28, 28))
        for parameter in model.target_encoder.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    model.eval()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(200, 1, 28, 28), dtype=np.uint8)
    pixel_values = BroJepaImageProcessor()(images=list(images), return_tensors="pt")["pixel_values"]
    model.fill_class_prototypes(pixel_values, torch.arange(200) % 10)
    return model


@pytest.fixture(scope="module")
def pushed(hub, tmp_path_factory):
    model = make_model()
    with use_loopback_hub(hub, cache_dir=tmp_path_factory.mktemp("push-cache")):
        model.push_to_hub(REPO_ID)
        BroJepaImageProcessor().push_to_hub(REPO_ID)
    return model


def test_pushed_files(hub, pushed):
    files = hub.files(REPO_ID)
    expected = {
        "config.json",
        "model.safetensors",
        "configuration_bro_jepa.py",
        "modeling_bro_jepa.py",
        "preprocessor_config.json",
        "image_processing_bro_jepa.py",
    }
    assert expected <= set(files)
    config = json.loads(files["config.json"])
    assert config["model_type"] == "bro_jepa" and set(config["auto_map"]) == {"AutoConfig", "AutoModel"}
    assert "custom_pipelines" not in config


def test_from_pretrained_from_hub_bit_equal(pushed, online, tmp_path):
    cache = tmp_path / "explicit-cache"
    loaded = AutoModel.from_pretrained(REPO_ID, cache_dir=str(cache))
    assert type(loaded) is BroJepaModel
    assert any(cache.rglob("model.safetensors"))
    reference, state = pushed.state_dict(), loaded.state_dict()
    assert reference.keys() == state.keys()
    for name, tensor in reference.items():
        assert torch.equal(state[name], tensor), name
    assert not any(p.requires_grad for p in loaded.target_encoder.parameters())
    assert not loaded.target_encoder.training
    assert type(AutoImageProcessor.from_pretrained(REPO_ID, cache_dir=str(cache))) is BroJepaImageProcessor


def test_pipeline_from_hub(pushed, online):
    hub_pipe = pipeline("modular-arithmetic", model=REPO_ID)
    assert isinstance(hub_pipe.image_processor, BroJepaImageProcessor)
    local_pipe = pipeline("modular-arithmetic", model=pushed, image_processor=BroJepaImageProcessor())
    images = np.random.default_rng(1).integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    operations = [1, -1, 4, -7, 0, 9]
    results = hub_pipe(list(images), operation=operations, batch_size=3)
    expected = local_pipe(list(images), operation=operations)
    assert [r["digit"] for r in results] == [r["digit"] for r in expected]
    assert [r["operation"] for r in results] == operations
    for a, b in zip(results, expected):
        np.testing.assert_allclose(a["latent"], b["latent"], rtol=0, atol=1e-5)
