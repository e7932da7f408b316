"""Sharing a saved T-JEPA folder (model + tokenizer + card + figures) through the (loopback) Hub: the pushed files,
the card as uploaded, AutoModel and the pipeline from the repo id, bit-identical."""

import json

import numpy as np
import pytest
import torch
from huggingface_hub import ModelCard
from PIL import Image
from transformers import AutoModel, pipeline

from hf_jepa import TJepaModel
from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER
from hf_jepa.cards.t_jepa import render_card as render_t_jepa_card
from hf_jepa.hub import card_for_repo, push_to_hub
from hf_jepa.testing.hub_server import use_loopback_hub

from .test_pipeline import TASK, TEXTS, make_model, make_tokenizer, reference

REPO_ID = "org/t-jepa-tiny"


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def pipe(model, tokenizer, tmp_path_factory):
    """The pipeline on the local folder the Hub copy is compared with."""
    directory = tmp_path_factory.mktemp("t-jepa-tiny")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return pipeline(TASK, model=str(directory))


# ------------------------------------------------------------------------------------------------ Hub round trip


HUB_METRICS = {  # a partial set: retrieval, irreducible variance, step metrics etc. were not measured
    "objective": "jepa",
    "val_loss": 0.41234,
    "mi_proxy": 0.28765,
    "effective_rank": 3.2109,
    "probe_accuracy": 0.3125,
    "data_source": "embedded CPython documentation sentences",
    "device": "cpu",
    "diagnostics_plot": "diagnostics.png",
}


@pytest.fixture(scope="module")
def pushed(hub, model, tokenizer, tmp_path_factory):
    directory = tmp_path_factory.mktemp("t-jepa-run")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    Image.fromarray(np.arange(32 * 32, dtype=np.uint32).reshape(32, 32).astype(np.uint8)).save(
        directory / "diagnostics.png"
    )
    (directory / "eval_results.json").write_text(json.dumps(HUB_METRICS))
    render_t_jepa_card(model.config, HUB_METRICS).save(str(directory / "README.md"))
    (directory / "checkpoints").mkdir()
    (directory / "checkpoints" / "junk.bin").write_bytes(b"never uploaded")
    with use_loopback_hub(hub, cache_dir=tmp_path_factory.mktemp("push-cache")):
        url = push_to_hub(directory, REPO_ID)
    assert url.endswith("/" + REPO_ID)
    return directory


def test_pushed_files(hub, pushed):
    stored = hub.files(REPO_ID)
    local = {p.relative_to(pushed).as_posix(): p for p in pushed.rglob("*") if p.is_file()}
    expected = {
        "config.json",
        "model.safetensors",
        "configuration_t_jepa.py",
        "modeling_t_jepa.py",
        "README.md",
        "tokenizer.json",
        "tokenizer_config.json",
        "diagnostics.png",
        "eval_results.json",
    }
    assert expected <= set(stored)
    assert not any(path.startswith("checkpoints/") for path in stored)
    for path in expected:  # the card as uploaded: the local one (never rewritten) with the repo id filled in
        want = card_for_repo(local[path].read_bytes(), REPO_ID) if path == "README.md" else local[path].read_bytes()
        assert stored[path] == want, path
    assert MODEL_ID_PLACEHOLDER in local["README.md"].read_text(encoding="utf-8")
    readme = stored["README.md"].decode()
    assert MODEL_ID_PLACEHOLDER not in readme and f'from_pretrained("{REPO_ID}")' in readme
    assert f'pipeline("jepa-feature-extraction", model="{REPO_ID}", trust_remote_code=True)' in readme
    # hf_jepa installed: the registered classes serve the folder, without trust_remote_code (docs/guides/remote-code.md)
    assert f'extract = pipeline("jepa-feature-extraction", model="{REPO_ID}")  # hf_jepa installed' in readme


def test_from_hub_bit_identical(model, tokenizer, pipe, pushed, online):
    loaded = AutoModel.from_pretrained(REPO_ID)
    assert type(loaded) is TJepaModel and loaded.config.objective == "jepa"
    reference_state, state = model.state_dict(), loaded.state_dict()
    assert reference_state.keys() == state.keys()
    for name, tensor in reference_state.items():
        assert torch.equal(state[name], tensor), name
    assert not any(p.requires_grad for p in loaded.target_encoder.parameters())

    hub_pipe = pipeline(TASK, model=REPO_ID)
    assert hub_pipe.tokenizer is not None and hub_pipe.tokenizer.get_vocab() == tokenizer.get_vocab()
    results = hub_pipe(TEXTS, return_tensors=True)
    for text, got in zip(TEXTS, results):
        assert torch.equal(got, reference(model, tokenizer, text))
    assert hub_pipe(TEXTS) == pipe(TEXTS)

    card = ModelCard.load(REPO_ID)
    assert str(card) == card_for_repo((pushed / "README.md").read_bytes(), REPO_ID).decode()
    assert card.data.library_name == "transformers"  # the saved config has auto_map
    assert {(r.metric_config, r.metric_value) for r in card.data.eval_results} == {("linear_probe", 0.3125)}
    assert "| MI proxy, InfoNCE bound (nats) | 0.2877 |" in card.text and "![](diagnostics.png)" in card.text
