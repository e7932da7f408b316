"""The T-JEPA and I-JEPA model cards (hf_jepa.cards.t_jepa, hf_jepa.cards.i_jepa; both families' features come out
of `jepa-feature-extraction`): templates, metadata, measured numbers, absent metrics, auto_map and reproduction,
result rows."""

import json
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from hf_jepa import TJepaConfig
from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER, template_text
from hf_jepa.cards.i_jepa import CARD_TAGS as I_JEPA_CARD_TAGS
from hf_jepa.cards.i_jepa import render_card as render_i_jepa_card
from hf_jepa.cards.i_jepa import result_rows as i_jepa_result_rows
from hf_jepa.cards.t_jepa import CARD_TAGS as T_JEPA_CARD_TAGS
from hf_jepa.cards.t_jepa import render_card as render_t_jepa_card
from hf_jepa.cards.t_jepa import result_rows as t_jepa_result_rows

REPO_ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ cards


CARD_METRICS = {
    "objective": "jepa",
    "val_loss": 0.123456,
    "mi_proxy": 0.28712,
    "effective_rank": 1.87654,
    "cosine_mean": 0.91234,
    "cosine_variance": 0.000123,
    "embedding_std": 0.04567,
    "probe_accuracy": 0.2345,
    "retrieval_recall_at_1": 0.0125,
    "retrieval_recall_at_10": 0.0875,
    "irreducible_variance": 0.34567,
    "mi_saturation_step": 400,
    "divergence_step": None,
    "rank_collapse_step": 1200,
    "data_source": "embedded CPython documentation sentences",
    "diagnostics_plot": "diagnostics.png",
    "train_time_s": 321.5,
    "train_steps": 2000,
    "device": "cpu",
    "num_processes": 2,
    "probe_chance_accuracy": 0.142857,
}


def _front_matter(card: ModelCard) -> dict:
    text = str(card)
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def _tables_are_blocks(text: str) -> None:
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("|"):
            assert all(line.startswith("|") for line in lines), block


def test_templates_are_found():
    for name in ("t_jepa.md", "i_jepa.md"):
        assert template_text(name) == (REPO_ROOT / "model_cards" / name).read_text(encoding="utf-8")


def test_t_jepa_card_metadata_and_numbers():
    card = render_t_jepa_card(
        TJepaConfig.cpu_fast(),
        CARD_METRICS,
        {"max_steps": 2000, "output_dir": "runs/x", "per_device_batch_size": 32},
        {"data": "embedded", "max_length": 64},
    )
    meta = _front_matter(card)
    assert meta["library_name"] == "hf-jepa" and meta["license"] == "apache-2.0"
    assert meta["pipeline_tag"] == "feature-extraction" and "datasets" not in meta
    assert set(T_JEPA_CARD_TAGS) <= set(meta["tags"]) and "hf-jepa" in meta["tags"]
    (entry,) = meta["model-index"]
    assert entry["name"] == "t-jepa"
    values = {(m["type"], m["value"]) for result in entry["results"] for m in result["metrics"]}
    assert values == {("accuracy", 0.2345), ("recall_at_1", 0.0125), ("recall_at_10", 0.0875)}
    parsed = ModelCard(str(card)).data
    assert {r.metric_value for r in parsed.eval_results} == {0.2345, 0.0125, 0.0875}

    text = card.text
    assert "# T-JEPA: I-JEPA's latent prediction on text (BERT backbone)" in text
    for row in (
        "| Objective | T-JEPA (`jepa`) |",
        "| Validation loss (the objective's own) | 0.1235 |",
        "| MI proxy, InfoNCE bound (nats) | 0.2871 |",
        "| Effective rank of the validation embeddings | 1.88 |",
        "| Mean pairwise cosine similarity of embeddings | 0.9123 |",
        "| Variance of pairwise cosine similarity | 0.000123 |",
        "| Embedding std (mean over dimensions) | 0.0457 |",
        "| Irreducible conditional target variance | 0.3457 |",
        "| Linear-probe accuracy (topic classification) | 23.45% |",
        "| Retrieval recall@1 (next sentence) | 1.25% |",
        "| Retrieval recall@10 (next sentence) | 8.75% |",
        "| MI proxy saturation step | 400 |",
        "| Train/validation loss divergence step | not observed |",
        "| Effective-rank collapse step | 1,200 |",
        "| Training time | 321.5 s (2000 steps) |",
        "| Data source | embedded CPython documentation sentences |",
        "| Device | cpu × 2 processes |",
        "| `probe_chance_accuracy` | 0.142857 |",  # a metric the card has no wording for: a generic row
        "| `max_steps` | 2000 |",
        "| `effective batch size` | 64 |",
        "| `max_length` | 64 |",
        "| `predictor_hidden_size` | 128 |",
    ):
        assert row in text, row
    assert "| `output_dir` |" not in text and "| `backbone_config` |" not in text
    assert "![](diagnostics.png)" in text
    assert "MI proxy 0.2871 nats (paper: saturates below 0.35 nats)" in text
    # The model, the claim and the paper's figures, labelled as the paper's.
    for phrase in (
        "context encoder",
        "target encoder",
        "predictor",
        "centroid degeneracy",
        "conditional concentration",
        "published figures of the paper",
        "below 0.35 nats",
        "step 9,340",
        "~1.57",
        "chance level",
        "keeps rising",
        "VICReg, Barlow Twins, BYOL",
        "CPython documentation sentences",
        "locally trained WordPiece vocabulary of 8000",
    ):
        assert phrase.lower() in text.lower(), phrase
    assert "AutoTokenizer.from_pretrained" in text and 'pipeline("jepa-feature-extraction"' in text
    assert MODEL_ID_PLACEHOLDER in text and "trust_remote_code" not in text
    assert "\n\n- " not in text.split("## Limitations")[1].split("## Citation")[0].strip()  # one tight list
    _tables_are_blocks(text)


def test_t_jepa_card_omits_absent_metrics():
    metrics = {"mi_proxy": 0.5, "data_source": "Hub allenai/c4 (first 20,000 sentences)"}
    card = render_t_jepa_card(TJepaConfig.tiny(objective="mlm"), metrics, repo_id="org/mlm")
    meta = _front_matter(card)
    assert "model-index" not in meta and meta["datasets"] == ["allenai/c4"] and "mlm" in meta["tags"]
    text = card.text
    assert "# MLM baseline (text JEPA study, BERT backbone)" in text and "*baseline* of the study" in text
    assert "| MI proxy, InfoNCE bound (nats) | 0.5000 |" in text
    for absent in (
        "Validation loss",
        "Effective rank of",
        "Linear-probe accuracy",
        "Retrieval recall",
        "divergence step |",
        "Training time",
        "| Device |",
        "![](",
        "Objective comparison",
        "Against the paper's T-JEPA figures",
        "| `mi_proxy`",
        "| `data_source`",
        "Training (`",
    ):
        assert absent not in text, absent
    assert "This baseline: MI proxy 0.5000 nats" in text
    assert 'from_pretrained("org/mlm")' in text and MODEL_ID_PLACEHOLDER not in text
    assert "C4 sentences here are a sample" in text
    _tables_are_blocks(text)

    empty = render_t_jepa_card(TJepaConfig.tiny(), {})
    assert "model-index" not in _front_matter(empty) and "No evaluation metrics were recorded" in empty.text
    assert "## Comparison" not in empty.text and "Against the paper" not in empty.text

    bert_large = render_t_jepa_card(TJepaConfig(), {}).text
    assert "BERT-Large, the paper's backbone" in bert_large and "far smaller than the paper's" not in bert_large


def test_t_jepa_card_with_auto_map_and_reproduction():
    config = TJepaConfig.tiny(objective="byol")
    config.auto_map = {"AutoConfig": "configuration_t_jepa.TJepaConfig", "AutoModel": "modeling_t_jepa.TJepaModel"}
    reproduction = {
        "runs": {
            "jepa": {"probe_accuracy": 0.15, "mi_proxy": 0.31, "divergence_step": None},
            "mlm": {"probe_accuracy": 0.62, "mi_proxy": 1.25, "divergence_step": None},
            "byol": {"probe_accuracy": 0.55},
        },
        "train_steps": 3000,
        "seed": 0,
    }
    card = render_t_jepa_card(
        config, json.loads(json.dumps(CARD_METRICS | {"objective": "byol"})), reproduction=reproduction
    )
    assert card.data.library_name == "transformers" and "trust_remote_code=True" in card.text
    text = card.text
    assert "second_target_mask" in text and "| Objective | BYOL baseline (`byol`) |" in text
    assert "Settings: train_steps: 3000; seed: 0." in text
    assert "| Objective | Probe accuracy | MI proxy (nats) | Divergence step |" in text
    assert "| T-JEPA | 15.00% | 0.3100 | not observed |" in text
    assert "| MLM baseline | 62.00% | 1.2500 | not observed |" in text
    assert "| BYOL baseline | 55.00% | – | – |" in text
    _tables_are_blocks(text)


def test_result_rows():
    assert t_jepa_result_rows({}) == [] and i_jepa_result_rows({}) == []
    assert t_jepa_result_rows({"mi_proxy": float("nan"), "probe_accuracy": None, "extra": float("inf")}) == []
    rows = dict(
        t_jepa_result_rows(
            {"divergence_step": 9340, "rank_collapse_step": None, "num_processes": 1, "device": "cpu", "note": "x|y"}
        )
    )
    assert rows == {
        "Train/validation loss divergence step": "9,340",
        "Effective-rank collapse step": "not observed",
        "Device": "cpu × 1 process",
        "`note`": "x\\|y",
    }
    image_rows = dict(i_jepa_result_rows({"probe_accuracy": 0.9876, "objective": "i_jepa"}))
    assert image_rows == {"Objective": "i_jepa", "Linear-probe accuracy (digit classification)": "98.76%"}


def test_i_jepa_card():
    i_jepa = pytest.importorskip("hf_jepa.modeling.i_jepa", reason="the I-JEPA family is not in this checkout")
    config = i_jepa.IJepaConfig.tiny()
    metrics = {
        "mi_proxy": 2.3456,
        "effective_rank": 12.345,
        "probe_accuracy": 0.9123,
        "data_source": "Hub ylecun/mnist",
        "device": "cpu",
    }
    card = render_i_jepa_card(config, metrics, {"max_steps": 100}, repo_id="org/i-jepa")
    meta = _front_matter(card)
    assert meta["pipeline_tag"] == "image-feature-extraction" and meta["datasets"] == ["ylecun/mnist"]
    assert set(I_JEPA_CARD_TAGS) <= set(meta["tags"])
    (result,) = meta["model-index"][0]["results"]
    assert result["task"]["type"] == "image-classification" and result["metrics"][0]["value"] == 0.9123
    text = card.text
    for row in (
        "| MI proxy, InfoNCE bound (nats) | 2.3456 |",
        "| Effective rank of the validation embeddings | 12.35 |",
        "| Linear-probe accuracy (digit classification) | 91.23% |",
        "| Data source | Hub ylecun/mnist |",
    ):
        assert row in text, row
    for phrase in (
        "keeps rising",
        "below 0.35 nats",
        "9,340",
        "~1.57",
        "ViT-H/16",
        "28x28",
        "[0.1307]",
        "[0.3081]",
        'from_pretrained("org/i-jepa")',
        'pipeline("jepa-feature-extraction", model="org/i-jepa")',
    ):
        assert phrase in text, phrase
    for absent in ("Retrieval recall", "Validation loss", "![](", "| `backbone_config` |", "These are not MNIST"):
        assert absent not in text, absent
    assert "| `predictor_hidden_size` | 16 |" in text and "| `max_steps` | 100 |" in text
    _tables_are_blocks(text)
    embedded = render_i_jepa_card(config, {"data_source": "embedded scikit-learn digits"}).text
    assert "These are not MNIST digits" in embedded and "datasets" not in _front_matter(
        render_i_jepa_card(config, {"data_source": "embedded scikit-learn digits"})
    )
