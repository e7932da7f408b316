"""Folders saved by an earlier hf-jepa (tests/fixtures/previous_version/: every family, written by that version's
trainer, with its pipeline outputs) load with this one: strictly, bit for bit, with every saved config field kept,
the same standard-pipeline outputs, and a resave that carries their card and results over."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, pipeline

FIXTURES = Path(__file__).parent / "fixtures" / "previous_version"
SAVED = FIXTURES / "c27143d"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)
EXPECTED = json.loads((SAVED / "expected_outputs.json").read_text())
FOLDERS = sorted([*make_fixtures.STANDARD_TASK, "jepa-mono-talker"])
# Written by transformers itself, not fields of the model.
NOT_FIELDS = {"transformers_version", "dtype", "torch_dtype", "auto_map", "custom_pipelines", "architectures"}


@pytest.mark.parametrize("name", FOLDERS)
def test_loads_strictly_bit_for_bit_with_every_saved_field(name):
    folder = SAVED / name
    model = AutoModel.from_pretrained(folder)
    saved = load_file(str(folder / "model.safetensors"))
    state = model.state_dict()
    assert set(saved) <= set(state), sorted(set(saved) - set(state))
    for key, tensor in saved.items():
        assert state[key].dtype == tensor.dtype and torch.equal(state[key], tensor), key
    stored = json.loads((folder / "config.json").read_text())
    now = AutoConfig.from_pretrained(folder).to_dict()
    for key, value in stored.items():
        if key not in NOT_FIELDS:
            assert key in now and json.loads(json.dumps(now[key])) == value, key


@pytest.mark.parametrize("name", sorted(make_fixtures.STANDARD_TASK))
def test_standard_pipeline_gives_what_the_earlier_version_gave(name):
    folder, expected = SAVED / name, EXPECTED[name]
    output = pipeline(expected["task"], model=str(folder))(make_fixtures.fixed_input(expected["task"], folder))
    if expected["task"] == "text-generation":
        assert output == expected["output"]
    else:
        np.testing.assert_allclose(np.asarray(output), np.asarray(expected["output"]), rtol=1e-5, atol=1e-6)


def test_resaving_an_earlier_folder_keeps_its_card_and_results(tmp_path):
    folder = SAVED / "bro-jepa"
    AutoModel.from_pretrained(folder).save_pretrained(tmp_path / "resaved")
    for kept in ("README.md", "eval_results.json", "preprocessor_config.json", "training_args.json"):
        assert (tmp_path / "resaved" / kept).read_bytes() == (folder / kept).read_bytes(), kept
    reloaded = AutoModel.from_pretrained(tmp_path / "resaved")
    assert all(
        torch.equal(a, b)
        for a, b in zip(reloaded.state_dict().values(), AutoModel.from_pretrained(folder).state_dict().values())
    )
