"""Sharing a saved reasoner + Mono-Talker pair folder (model + tokenizer + card) through the (loopback) Hub: every
file as uploaded, from_pretrained and AutoModel from the repo id bit-identical, the pipeline from the repo."""

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, pipeline

import hf_jepa.pipelines  # noqa: F401 - registers the task
from hf_jepa.hub import push_to_hub
from hf_jepa.modeling.jepa_reasoner import (
    JepaReasonerWithTalker,
    MonoTalkerModel,
)
from hf_jepa.pipelines import LatentReasoningPipeline
from hf_jepa.testing.hub_server import use_loopback_hub

from .test_pipeline import PROMPTS, TASK, TREE, make_pair

REPO_ID = "org/jepa-reasoner-pair-tiny"


@pytest.fixture(scope="module")
def tokenizer():
    return TREE.build_tokenizer()


@pytest.fixture(scope="module")
def pairs(tokenizer):
    return {"mono": make_pair("mono", len(tokenizer), seed=0)}


@pytest.fixture(scope="module")
def pipes(pushed):
    """The pipeline on the local folder the Hub copy is compared with."""
    return {"mono": pipeline(TASK, model=str(pushed))}


# ------------------------------------------------------------------------------------------------ Hub round trip


@pytest.fixture(scope="module")
def pushed(hub, pairs, tokenizer, tmp_path_factory):
    directory = tmp_path_factory.mktemp("pair-run")
    pairs["mono"].save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    (directory / "README.md").write_text(
        "---\nlibrary_name: transformers\ntags:\n- jepa-reasoner\n---\n# A tiny JEPA-Reasoner + Mono-Talker pair\n\n"
        f'```python\npipeline("latent-reasoning", model="{REPO_ID}")\n```\n',
        encoding="utf-8",
    )
    with use_loopback_hub(hub, cache_dir=tmp_path_factory.mktemp("push-cache")):
        url = push_to_hub(directory, REPO_ID)
    assert url.endswith("/" + REPO_ID)
    return directory


def test_hub_round_trip(hub, pushed, pairs, pipes, tokenizer, online):
    stored = hub.files(REPO_ID)
    for name in (
        "config.json",
        "model.safetensors",
        "configuration_jepa_reasoner.py",
        "modeling_jepa_reasoner.py",
        "modeling_jepa_reasoner_blocks.py",
        "modeling_jepa_talker.py",
        "tokenizer.json",
        "tokenizer_config.json",
        "README.md",
    ):
        assert stored[name] == (pushed / name).read_bytes(), name

    loaded = JepaReasonerWithTalker.from_pretrained(REPO_ID)
    assert type(loaded) is JepaReasonerWithTalker and type(loaded.talker) is MonoTalkerModel
    expected = pairs["mono"].state_dict()
    assert loaded.state_dict().keys() == expected.keys()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    assert not any(p.requires_grad for p in loaded.reasoner.target_encoder.parameters())
    assert type(AutoModel.from_pretrained(REPO_ID)) is JepaReasonerWithTalker

    hub_pipe = pipeline(TASK, model=REPO_ID)
    assert isinstance(hub_pipe, LatentReasoningPipeline)
    assert hub_pipe.tokenizer.get_vocab() == tokenizer.get_vocab()
    local = pipes["mono"]
    assert hub_pipe(PROMPTS) == local(PROMPTS)
    assert hub_pipe(PROMPTS, return_latents=True, num_beams=2) == local(PROMPTS, return_latents=True, num_beams=2)
    assert AutoTokenizer.from_pretrained(REPO_ID).get_vocab() == tokenizer.get_vocab()
