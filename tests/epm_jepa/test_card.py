"""EPM-JEPA model cards (hf_jepa.cards.epm_jepa.render_card): metadata, the measured numbers, what was not measured,
the reproduction summary, the result rows of the CLI."""

import json
from pathlib import Path

import yaml
from huggingface_hub import ModelCard

from hf_jepa import EpmJepaConfig
from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER, template_text
from hf_jepa.cards.epm_jepa import CARD_TAGS as EPM_JEPA_CARD_TAGS
from hf_jepa.cards.epm_jepa import render_card as render_epm_jepa_card
from hf_jepa.cards.epm_jepa import result_rows as epm_jepa_result_rows
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments
from hf_jepa.reproductions.epm_jepa import format_results_table
from hf_jepa.reproductions.result import ReproductionResult
from hf_jepa.trainers.trainer import TrainingArguments

REPO_ROOT = Path(__file__).resolve().parents[2]


def _metrics(**overrides) -> dict:
    """What EpmJepaRecipe.evaluate + the trainer record (distinctive values, easy to find in the text)."""
    metrics = {
        "track": "epm",
        "stage": "adapt",
        "d_shift": 0.81234,
        "d_shift_copy_last": 1.23456,
        "d_train": 0.43219,
        "d_train_copy_last": 0.98761,
        "gate_fire_rate_shift": 0.625,
        "gate_fire_rate_train": 0.125,
        "sigma_embed_shift": 0.45678,
        "eval_predictions": 3328,
        "data_source": "Hub ylecun/mnist",
        "buffer_occupancy": 0.75,
        "buffer_turnover": 3.25,
        "diagnostics_plot": "diagnostics.png",
        "train_time_s": 42.5,
        "train_steps": 50,
        "num_processes": 1,
        "device": "cpu",
    }
    metrics.update(overrides)
    return metrics


def _summary(quick: bool = False) -> dict:
    """A `reproduce_epm_jepa` summary (the shape `summarize_runs` + `reproduce_epm_jepa` return)."""
    tracks = {
        "vanilla": {"d_shift_mean": 0.8111, "d_shift_std": 0.0101, "seeds": 2, "d_shift_per_seed": [0.801, 0.8212]},
        "ei": {"d_shift_mean": 0.8222, "d_shift_std": 0.0102, "seeds": 2, "d_shift_per_seed": [0.812, 0.8324]},
        "epm": {"d_shift_mean": 0.7933, "d_shift_std": 0.0103, "seeds": 2, "d_shift_per_seed": [0.783, 0.8036]},
    }
    return {
        "tracks": tracks,
        "delta_c_vs_b_percent": 3.51,
        "outcome": "C (null: abs(delta) < 5%)",
        "delta_c_vs_a_percent": 2.19,
        "delta_b_vs_a_percent": -1.37,
        "experience_steps": 50,
        "pretrain_steps": 600,
        "seeds": [0, 1],
        "preset": "cpu_fast",
        "data_source": "Hub ylecun/mnist",
        "quick": quick,
    }


def _reproduction(quick: bool = False) -> ReproductionResult:
    """What `reproduce_epm_jepa` returns for `_summary(quick)` (the card reads its `.summary` and `.table`)."""
    summary = _summary(quick)
    return ReproductionResult("epm-jepa", summary, format_results_table(summary), Path("unused"))


def _front_matter(card: ModelCard) -> dict:
    text = str(card)
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def _tables_are_blocks(text: str) -> None:
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("|"):
            assert all(line.startswith("|") for line in lines), block


# ------------------------------------------------------------------------------------------------ cards


def test_template_is_found():
    assert template_text("epm_jepa.md") == (REPO_ROOT / "model_cards" / "epm_jepa.md").read_text(encoding="utf-8")


def test_card_metadata_round_trip():
    metrics = _metrics()
    card = render_epm_jepa_card(
        EpmJepaConfig.cpu_fast(track="epm"),
        metrics,
        TrainingArguments(max_steps=50),
        EpmJepaDataArguments(stage="adapt", init_from="runs/base"),
    )
    meta = _front_matter(card)
    assert meta["library_name"] == "hf-jepa"  # a fresh config has no auto_map: loading needs `import hf_jepa`
    assert set(EPM_JEPA_CARD_TAGS) <= set(meta["tags"]) and "hf-jepa" in meta["tags"]
    assert {"jepa", "epm-jepa", "world-model", "moving-mnist", "lora", "peft"} <= set(meta["tags"])
    assert meta["datasets"] == ["ylecun/mnist"] and meta["license"] == "apache-2.0"

    (entry,) = meta["model-index"]
    assert entry["name"] == "epm-jepa-epm"
    (result,) = entry["results"]
    assert result["task"]["type"] == "latent-world-model"
    assert result["dataset"]["type"] == "moving-mnist-gravity" and result["dataset"]["split"] == "test"
    values = {m["config"]: m["value"] for m in result["metrics"]}
    assert values == {"shift": metrics["d_shift"], "train": metrics["d_train"]}
    assert {m["type"] for m in result["metrics"]} == {"normalized_prediction_error"}

    parsed = ModelCard(str(card)).data  # huggingface_hub parses it back into the same EvalResults
    assert {(r.metric_config, r.metric_value) for r in parsed.eval_results} == set(values.items())
    assert parsed.model_name == "epm-jepa-epm"


def test_card_body_shows_measured_numbers():
    card = render_epm_jepa_card(
        EpmJepaConfig.cpu_fast(track="epm"),
        _metrics(),
        TrainingArguments(max_steps=50),
        EpmJepaDataArguments(stage="adapt", init_from="runs/base"),
    )
    text = card.text
    assert "# EPM-JEPA world model (track C: EPM-JEPA (dynamic LoRA))" in text
    for row in (
        "| Track | C: EPM-JEPA (dynamic LoRA) (adapt stage) |",
        "| D_shift: normalised error on held-out shifted sequences (g > 0) | 0.8123 |",
        "| D_shift of copying the last latent (baseline) | 1.2346 |",
        "| D on the training distribution (g = 0) | 0.4322 |",
        "| D on g = 0 of copying the last latent (baseline) | 0.9876 |",
        "| Surprisal-gate firing rate, shifted sequences | 62.50% |",
        "| Surprisal-gate firing rate, g = 0 | 12.50% |",
        "| sigma_embed of the predicted latents, shifted sequences | 0.4568 (below the paper's 0.5 safety threshold) |",
        "| One-step predictions scored (shifted set) | 3328 |",
        "| Experience buffer occupancy (fraction of capacity) | 75.00% |",
        "| Experience buffer turnover (writes / capacity) | 3.25 |",
        "| Training time | 42.5 s (50 steps) |",
        "| Digit source | Hub ylecun/mnist |",
        "| Device | cpu × 1 process |",
    ):
        assert row in text, row
    assert "on 3328 one-step predictions" in text and "digits from Hub ylecun/mnist, on cpu" in text
    assert "D_shift 0.8123 against 1.2346 for copying the last latent" in text
    assert "![](diagnostics.png)" in text
    # config, training and data settings
    assert "| `latent_dim` | 64 |" in text and "| `lora_rank` | 8 |" in text and "| `track` | epm |" in text
    assert "| `max_steps` | 50 |" in text and "| `init_from` | runs/base |" in text and "| `stage` | adapt |" in text
    assert "| `output_dir` |" not in text  # housekeeping stays out
    assert "n = 50 optimiser steps on shifted sequences" in text
    # what the model is, what is saved, the adapter folder, the metric definition
    assert "U diag(d) V^T" in text and "peft" in text and "Track B, EI-JEPA" in text
    assert "experience_adapter/" in text and "load_experience_adapter" in text and "warm_experience" in text
    assert "Predicting the targets' mean scores exactly **1.0**" in text and "copying the last latent" in text
    # the paper's figures, labelled as the paper's
    assert "published numbers of the EPM-JEPA paper" in text
    for figure in ("0.7848 +- 0.0078", "0.8238", "0.8000", "4.74%", "outcome C (null", "1.90%", "+0.021", "0.5"):
        assert figure in text, figure
    assert "gravity shift is\n  hf-jepa's own" in text and "CPU-scale" in text
    assert "import hf_jepa" in text and 'pipeline("latent-world-model"' in text and MODEL_ID_PLACEHOLDER in text
    assert "trust_remote_code" not in text  # no auto_map in a fresh config
    _tables_are_blocks(text)


def test_card_omits_metrics_that_were_not_given():
    metrics = {"d_shift": 0.91, "stage": "pretrain", "data_source": "embedded scikit-learn digits upscaled to 28x28"}
    card = render_epm_jepa_card(EpmJepaConfig.tiny(track="vanilla"), metrics, repo_id="org/tiny")
    meta = _front_matter(card)
    assert "datasets" not in meta  # embedded digits: not claimed as MNIST
    (result,) = meta["model-index"][0]["results"]
    assert [m["value"] for m in result["metrics"]] == [0.91]
    assert meta["model-index"][0]["name"] == "epm-jepa-vanilla-base"
    text = card.text
    assert "| D_shift: normalised error on held-out shifted sequences (g > 0) | 0.9100 |" in text
    for absent in (
        "copying the last latent (baseline) |",
        "D on the training distribution (g = 0) |",
        "firing rate,",
        "sigma_embed of the predicted",
        "Experience buffer occupancy",
        "Training time",
        "| Device |",
        "![](",
        "Three-track reproduction",
        "experience_adapter/",
        "warm_experience",
        "for copying the last latent",
    ):
        assert absent not in text, absent
    assert "not comparable" in text and "as a pretrained base it has seen no shifted data" in text
    assert 'from_pretrained("org/tiny")' in text and MODEL_ID_PLACEHOLDER not in text
    _tables_are_blocks(text)

    empty = render_epm_jepa_card(EpmJepaConfig.tiny(), {})
    assert "model-index" not in _front_matter(empty)
    assert "No evaluation metrics were recorded" in empty.text and "This checkpoint's D_shift" not in empty.text
    # Track C always documents its adapter folder and buffer warming; track B has a buffer but no adapter.
    assert "experience_adapter/" in empty.text and "warm_experience" in empty.text
    ei = render_epm_jepa_card(EpmJepaConfig.tiny(track="ei"), {}).text
    assert "experience_adapter/" not in ei and "warm_experience" in ei and "injection projection" in ei


def test_card_with_json_round_tripped_metrics_and_auto_map():
    config = EpmJepaConfig.tiny()
    config.auto_map = {
        "AutoConfig": "configuration_epm_jepa.EpmJepaConfig",
        "AutoModel": "modeling_epm_jepa.EpmJepaModel",
    }
    metrics = json.loads(json.dumps(_metrics()))
    card = render_epm_jepa_card(
        config,
        metrics,
        TrainingArguments(max_steps=50).__dict__,
        EpmJepaDataArguments(stage="adapt", init_from="x").__dict__,
    )
    assert card.data.library_name == "transformers" and "trust_remote_code=True" in card.text
    assert "| D_shift: normalised error on held-out shifted sequences (g > 0) | 0.8123 |" in card.text


def test_card_renders_the_reproduction_summary():
    summary = _summary()
    card = render_epm_jepa_card(EpmJepaConfig.tiny(), _metrics(), reproduction=_reproduction())
    text = card.text
    assert "### Three-track reproduction" in text
    assert "seeds 0, 1; 600 pretraining steps (g = 0); n = 50 experience steps; preset `cpu_fast`" in text
    # the table is format_results_table's, every row keeping its three cells
    assert format_results_table(summary) in text
    assert "| C: EPM-JEPA (dynamic LoRA) | 0.7933 +- 0.0103 | 0.7830, 0.8036 | 0.7848 +- 0.0078 |" in text
    assert "| Pre-registered outcome | C (null: abs(delta) < 5%) | C (null) |" in text
    _tables_are_blocks(text)
    quick = render_epm_jepa_card(EpmJepaConfig.tiny(), {}, reproduction=_reproduction(quick=True)).text
    assert "Smoke run" in quick and "not a result" in quick
    assert "Three-track reproduction" not in render_epm_jepa_card(EpmJepaConfig.tiny(), {}, reproduction=None).text


def test_result_rows_for_the_cli():
    rows = dict(epm_jepa_result_rows(_metrics(sigma_embed_shift=0.9, num_processes=2)))
    assert rows["sigma_embed of the predicted latents, shifted sequences"] == "0.9000"  # above the threshold: no flag
    assert rows["Device"] == "cpu × 2 processes"
    assert epm_jepa_result_rows({}) == []
    assert epm_jepa_result_rows({"d_shift": float("nan"), "buffer_occupancy": None}) == []
