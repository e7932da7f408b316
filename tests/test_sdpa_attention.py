"""Every attention module of every family runs through `torch.nn.functional.scaled_dot_product_attention` (torch's
fused kernels) in a training forward of the tiny preset: exactly one SDPA call per attention-module call, none
written out as softmax(QK^T)V."""

import dataclasses

import pytest
import torch
from torch import nn

from hf_jepa.recipes import load_families

# The modules that compute attention in each family: transformers' BERT self-attention (T-JEPA's encoders), the
# families' own blocks and attention layers, and torch's multi-head attention (EPM-JEPA's experience memory).
ATTENTION_CLASSES = ("BertSelfAttention", "TJepaPredictorBlock", "IJepaPredictorBlock", "JepaAttention")
FAMILIES_WITH_ATTENTION = ("t-jepa", "i-jepa", "epm-jepa", "jepa-reasoner", "coupled-lm", "coconut")
_LIGHT_DATA = dict(
    data="embedded",
    plot=False,
    downstream=False,
    diagnostics_sentences=8,
    diagnostics_images=8,
    probe_images=64,
    eval_sequences=8,
    num_train_examples=64,
    num_eval_examples=8,
)


def _is_attention(module: nn.Module) -> bool:
    return isinstance(module, nn.MultiheadAttention) or type(module).__name__ in ATTENTION_CLASSES


def _model_and_batch(name: str):
    family = load_families()[name]
    names = {field.name for field in dataclasses.fields(family.data_args_class)}
    data_args = family.data_args_class(**{k: v for k, v in _LIGHT_DATA.items() if k in names})
    config = family.make_config("tiny", track="epm") if name == "epm-jepa" else family.make_config("tiny")
    recipe = family.make_recipe(config, data_args)
    torch.manual_seed(0)
    return recipe.build_model().train(), recipe.train_batch(0, 0, 4)


def _sdpa_calls_per_attention_call(model, batch, monkeypatch) -> list[tuple[str, int]]:
    """(module class, SDPA calls during that call) for every attention-module call of one forward."""
    calls = {"sdpa": 0}
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        calls["sdpa"] += 1
        return sdpa(*args, **kwargs)

    # transformers' "sdpa" interface and nn.MultiheadAttention both look the function up in torch.nn.functional.
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting_sdpa)
    seen, handles = [], []
    for module in model.modules():
        if _is_attention(module):
            handles.append(
                module.register_forward_pre_hook(lambda m, a: seen.append([type(m).__name__, calls["sdpa"]]))
            )
            handles.append(module.register_forward_hook(lambda m, a, o: seen.append([None, calls["sdpa"]])))
    try:
        model(**batch).loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    # Attention modules do not nest, so the hooks alternate pre (name, count) / post (None, count).
    assert all(pre[0] is not None and post[0] is None for pre, post in zip(seen[::2], seen[1::2]))
    return [(pre[0], post[1] - pre[1]) for pre, post in zip(seen[::2], seen[1::2])]


@pytest.mark.parametrize("name", FAMILIES_WITH_ATTENTION)
def test_every_attention_call_uses_sdpa(name, monkeypatch):
    model, batch = _model_and_batch(name)
    per_call = _sdpa_calls_per_attention_call(model, batch, monkeypatch)
    assert per_call, f"{name}: no attention module ran"
    assert all(count == 1 for _, count in per_call), per_call


def test_t_jepa_attention_calls_counted_by_hand(monkeypatch):
    # tiny T-JEPA: 2-layer BERT context encoder + its EMA target copy (2 + 2) and the predictor's blocks.
    model, batch = _model_and_batch("t-jepa")
    per_call = _sdpa_calls_per_attention_call(model, batch, monkeypatch)
    layers = model.config.backbone_config.num_hidden_layers
    assert [name for name, _ in per_call].count("BertSelfAttention") == 2 * layers == 4
    assert [name for name, _ in per_call].count("TJepaPredictorBlock") == model.config.predictor_num_layers


def test_the_check_sees_written_out_attention(monkeypatch):
    """With `attn_implementation="eager"` the same model computes attention without SDPA, and the check says so."""
    model, batch = _model_and_batch("t-jepa")
    model.set_attn_implementation("eager")
    per_call = _sdpa_calls_per_attention_call(model, batch, monkeypatch)
    assert per_call and all(count == 0 for _, count in per_call)
