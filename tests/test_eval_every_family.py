"""`hf-jepa eval DIR` on every folder `hf-jepa train` writes (tiny presets, a few steps), and the model card of each
folder read back with huggingface_hub's own card classes: pipeline_tag, base_model, datasets and model-index.

The folders are trained once for the module through the CLI; evaluation reads the task and data settings from the
folder (data_args.json), so the reasoning folders trained on `task=cfg` are evaluated on `cfg` (before, eval rebuilt
the default tree-search task and failed with IndexError), a Talker folder takes its reasoner from the saved pair, and
the pair folder itself is evaluated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import EvalResult, ModelCard, ModelCardData, metadata_eval_result
from huggingface_hub.repocard_data import model_index_to_eval_results

from hf_jepa.cli import main
from hf_jepa.progress import no_progress_bars, progress, progress_bars_enabled

COMMON = ["preset=tiny", "mixed_precision=no", "warmup_steps=0", "disable_progress_bar=true", "plot=false"]
REASONING = ["task=cfg", "num_train_examples=64", "num_eval_examples=16", "max_steps=3", "per_device_batch_size=8"]
DIGITS = ["data=embedded", "per_device_batch_size=8", "max_steps=2"]

# folder name -> (family, --set settings; "{name}" is replaced by that trained folder)
RUNS = {
    "bro": ("bro-jepa", [*DIGITS, "prototype_images=200", "eval_images=50"]),
    "ijepa": ("i-jepa", [*DIGITS, "diagnostics_images=16", "probe_images=100", "logging_steps=1"]),
    "tjepa": ("t-jepa", ["max_steps=2", "per_device_batch_size=8", "diagnostics_sentences=16", "logging_steps=1"]),
    "epm_base": ("epm-jepa", [*DIGITS, "sequence_length=4", "eval_sequences=4", "eval_sequence_length=4"]),
    "epm_adapt": (
        "epm-jepa",
        [*DIGITS, "stage=adapt", "init_from={epm_base}", "track=epm", "eval_every=0", "sequence_length=4"]
        + ["eval_sequences=4", "eval_sequence_length=4"],
    ),
    "reasoner": ("jepa-reasoner", REASONING),
    "mono": ("jepa-mono-talker", [*REASONING, "reasoner={reasoner}"]),
    "dual": ("jepa-dual-talker", [*REASONING, "reasoner={reasoner}"]),
    "coupled": ("coupled-lm", REASONING),
    "coconut": ("coconut", REASONING),
}
# folder -> the pipeline_tag the lead decided (None: a component without a task of its own)
PIPELINE_TAGS = {
    "bro": "image-feature-extraction",
    "ijepa": "image-feature-extraction",
    "tjepa": "feature-extraction",
    "epm_base": "image-feature-extraction",
    "epm_adapt": "image-feature-extraction",
    "reasoner": "feature-extraction",
    "mono": None,
    "dual": None,
    "mono/pair": "text-generation",
    "dual/pair": "text-generation",
    "coupled": "text-generation",
    "coconut": "text-generation",
}
# eval metrics that do not depend on the training seed (the fixed eval split, the saved prototypes): eval of the
# saved folder must give what training recorded
REPRODUCED = {
    "bro": ("seen_accuracy", "zero_shot_accuracy", "rollout_accuracy"),
    "reasoner": ("eval_loss", "teacher_forced_cosine", "free_running_cosine"),
    "mono": ("accuracy", "accuracy_shuffled_chain"),
    "dual": ("accuracy", "accuracy_shuffled_chain"),
    "mono/pair": ("accuracy", "accuracy_shuffled_chain"),
    "coupled": ("accuracy",),
    "coconut": ("accuracy",),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("every-family")
    out = {}
    for name, (family, settings) in RUNS.items():
        settings = [s.format(**{k: str(v) for k, v in out.items()}) for s in settings]
        assert main(["train", family, "--set", *COMMON, *settings, "--output-dir", str(root / name)]) == 0
        out[name] = root / name
    out["mono/pair"], out["dual/pair"] = out["mono"] / "pair", out["dual"] / "pair"
    return out


def _saved_metrics(name: str, folder: Path) -> dict:
    """What training recorded for `folder` (a pair's metrics are those of the Talker run that saved it)."""
    return json.loads(((folder.parent if name.endswith("/pair") else folder) / "eval_results.json").read_text())


def _eval_json(capsys, folder: Path, *extra: str) -> dict:
    capsys.readouterr()
    assert main(["eval", str(folder), "--json", "--no-progress", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _one_line_error(capsys, argv) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hf-jepa: error: ") and "Traceback" not in err, err
    return lines[0]


def test_eval_runs_on_every_folder_and_reproduces_the_saved_metrics(folders, capsys):
    for name, folder in folders.items():
        metrics = _eval_json(capsys, folder)
        assert metrics, name
        saved = _saved_metrics(name, folder)
        for key in REPRODUCED.get(name, ()):
            assert metrics[key] == pytest.approx(saved[key], abs=1e-5), (name, key)
        if name in ("reasoner", "mono", "coupled"):
            assert metrics["data_source"] == saved["data_source"] and "cfg" in metrics["data_source"]


def test_eval_reads_the_saved_data_settings_and_set_still_overrides(folders, capsys):
    saved = json.loads((folders["reasoner"] / "data_args.json").read_text())
    assert saved["task"] == "cfg" and saved["num_eval_examples"] == 16
    assert _eval_json(capsys, folders["coupled"], "--set", "num_eval_examples=4")["eval_examples"] == 4
    # another task's vocabulary: one line naming both sizes, never the IndexError of the embedding lookup
    line = _one_line_error(capsys, ["eval", str(folders["reasoner"]), "--set", "task=tree_search"])
    assert "15-token vocabulary but the 'tree_search' task's tokenizer has 39" in line and "--set task=" in line


def test_eval_of_a_talker_without_its_reasoner_says_what_to_give(folders, capsys, tmp_path):
    talker = tmp_path / "talker"
    shutil.copytree(folders["mono"], talker, ignore=shutil.ignore_patterns("pair"))
    line = _one_line_error(capsys, ["eval", str(talker)])
    assert "a Talker is evaluated with the reasoner it reads: give --set reasoner=DIR" in line
    with_reasoner = _eval_json(capsys, talker, "--set", f"reasoner={folders['reasoner']}")
    from_pair = _eval_json(capsys, folders["mono"])
    assert with_reasoner["accuracy"] == from_pair["accuracy"]
    assert with_reasoner["example_answer"] == from_pair["example_answer"]


def _card(folder: Path) -> ModelCard:
    return ModelCard.load(folder / "README.md")


def test_cards_pipeline_tags_and_metadata_round_trip(folders):
    for name, expected_tag in PIPELINE_TAGS.items():
        card = _card(folders[name])
        data = card.data.to_dict()
        assert data.get("pipeline_tag") == expected_tag, name
        # huggingface_hub reads the metadata back into the same card data (model-index included)
        again = ModelCardData(**data)
        assert again.to_dict() == data, name
        assert ModelCard(str(card)).data.to_dict() == data, name
    assert "It is a component" in _card(folders["mono"]).text and "`pair/`" in _card(folders["mono"]).text


def test_every_family_has_a_model_index_with_the_saved_results(folders):
    for name in PIPELINE_TAGS:
        folder = folders[name]
        metrics = _saved_metrics(name, folder)
        card = _card(folder)
        model_index = card.data.to_dict()["model-index"]
        model_name, results = model_index_to_eval_results(model_index)
        assert results, name
        assert model_name == card.data.model_name
        for result in results:
            assert isinstance(result, EvalResult)
            recorded = {
                "linear_probe": "probe_accuracy",
                "zero_shot": "zero_shot_accuracy",
                "seen_operations": "seen_accuracy",
                "rollout": "rollout_accuracy",
                "shift": "d_shift",
                "train": "d_train",
                "greedy": "accuracy",
                "shuffled_chain": "accuracy_shuffled_chain",
                "free": "free_running_cosine",
                "retrieval": f"retrieval_recall_at_{result.metric_type.rpartition('_')[2]}",
            }.get(result.metric_config)
            if name == "reasoner" and result.metric_config == "teacher":
                recorded = "eval_loss" if result.metric_type == "loss" else "teacher_forced_cosine"
            assert recorded is not None, (name, result)
            assert result.metric_value == pytest.approx(metrics[recorded]), (name, recorded)


def test_reasoning_model_index_matches_huggingface_hub_metadata_eval_result(folders):
    card = _card(folders["coupled"])
    metrics = json.loads((folders["coupled"] / "eval_results.json").read_text())
    expected = metadata_eval_result(
        model_pretty_name="jepa-coupled-lm",
        task_pretty_name="Answering cfg prompts",
        task_id="text-generation",
        metrics_pretty_name="Task accuracy (greedy)",
        metrics_id="accuracy",
        metrics_value=metrics["accuracy"],
        metrics_config="greedy",
        dataset_pretty_name="synthetic cfg task (generated by hf-jepa, eval split seed 1)",
        dataset_id="hf-jepa-reasoning-cfg",
        dataset_split="test",
    )
    for result in expected["model-index"][0]["results"]:
        for metric in result["metrics"]:
            assert metric.pop("verified") is False  # self-reported results: the Hub reads a missing flag as false
    assert card.data.to_dict()["model-index"] == expected["model-index"]


def test_datasets_name_hub_sources_only_and_the_text_names_generated_data(folders):
    for name in ("bro", "ijepa", "epm_base", "reasoner", "mono/pair", "coupled", "tjepa"):
        card = _card(folders[name])
        assert "datasets" not in card.data.to_dict(), name  # embedded digits, pydoc sentences, generated tasks
        assert "## Training data and starting point" in card.text, name
    assert "scikit-learn's 8x8 handwritten digits" in _card(folders["bro"]).text
    assert "Moving MNIST with gravity" in _card(folders["epm_base"]).text
    assert "not a Hub dataset" in _card(folders["epm_base"]).text
    assert "pydoc_data.topics" in _card(folders["tjepa"]).text
    assert "synthetic `cfg` examples" in _card(folders["coupled"]).text


def test_base_model_of_runs_started_from_a_checkpoint(folders):
    # local folders: no Hub id is known, so the card names the folder in its text and sets no `base_model`
    for name, start in (("epm_adapt", "epm_base"), ("mono", "reasoner"), ("mono/pair", "reasoner")):
        card = _card(folders[name])
        assert "base_model" not in card.data.to_dict(), name
        assert f"in the local folder `{folders[start]}`" in card.text, name
    for name in ("bro", "reasoner", "coupled", "epm_base"):  # trained from scratch
        assert (
            "Started from" not in _card(folders[name]).text and "trained on the latent" not in _card(folders[name]).text
        )


def test_datasets_of_hub_sources_and_a_users_own_images(tmp_path):
    from hf_jepa.cards.bro_jepa import render_card as bro_card
    from hf_jepa.cards.t_jepa import render_card as t_jepa_card
    from hf_jepa.modeling.bro_jepa import BroJepaConfig
    from hf_jepa.modeling.t_jepa import TJepaConfig

    def datasets(card):
        return ModelCardData(**card.data.to_dict()).to_dict().get("datasets")

    assert datasets(bro_card(BroJepaConfig.tiny(), {"data_source": "Hub ylecun/mnist"})) == ["ylecun/mnist"]
    # a user's Hub images (ImageSplits' description) are theirs, not MNIST; a local folder of theirs has no Hub id
    card = bro_card(BroJepaConfig.tiny(), {"data_source": "someone/digits (in memory)"})
    assert datasets(card) == ["someone/digits"] and "Images: someone/digits (in memory)." in card.text
    local = tmp_path / "my-images"
    local.mkdir()
    assert datasets(bro_card(BroJepaConfig.tiny(), {"data_source": f"{local} (streamed)"})) is None
    text = t_jepa_card(TJepaConfig.tiny(), {"data_source": "Hub someone/sentences (datasets Hub dataset)"})
    assert datasets(text) == ["someone/sentences"]
    c4 = t_jepa_card(TJepaConfig.tiny(), {"data_source": "Hub allenai/c4 (en, streamed, first 100 sentences)"})
    assert datasets(c4) == ["allenai/c4"]


def test_base_model_metadata_from_hub_ids_and_hub_cache_folders(tmp_path):
    from hf_jepa.cards.epm_jepa import render_card as epm_card
    from hf_jepa.cards.jepa_reasoner import render_card as reasoning_card
    from hf_jepa.cards.t_jepa import render_card as t_jepa_card
    from hf_jepa.modeling.epm_jepa import EpmJepaConfig
    from hf_jepa.modeling.jepa_reasoner import MonoTalkerConfig
    from hf_jepa.modeling.t_jepa import TJepaConfig

    card = t_jepa_card(TJepaConfig.tiny(), {}, base_model="google-bert/bert-base-uncased")
    data = ModelCardData(**card.data.to_dict()).to_dict()
    assert data["base_model"] == "google-bert/bert-base-uncased" and data["base_model_relation"] == "finetune"
    cached = tmp_path / "hub" / "models--someone--epm-base" / "snapshots" / "0123abcd"
    cached.mkdir(parents=True)
    data = epm_card(EpmJepaConfig.tiny(track="epm"), {"stage": "adapt"}, base_model=str(cached)).data.to_dict()
    assert data["base_model"] == "someone/epm-base" and data["base_model_relation"] == "finetune"
    talker = reasoning_card(MonoTalkerConfig.tiny(), {}, data_args={"task": "cfg"}, base_model="someone/reasoner")
    data = talker.data.to_dict()
    assert data["base_model"] == "someone/reasoner" and "base_model_relation" not in data  # trained on its outputs
    assert "pipeline_tag" not in data


def test_progress_bars_only_on_a_terminal_and_when_not_disabled(monkeypatch):
    items = [1, 2, 3]
    assert progress(items, "x") is items  # pytest's stderr is no terminal: no bar, the iterable itself
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.delenv("HF_JEPA_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert progress_bars_enabled()
    bar = progress(items, "x")
    assert bar is not items and list(bar) == items
    monkeypatch.setenv("LOCAL_RANK", "1")  # another process of a launcher: never a bar
    assert not progress_bars_enabled()
    monkeypatch.delenv("LOCAL_RANK")
    with no_progress_bars():  # `--no-progress`
        assert not progress_bars_enabled() and progress(items, "x") is items
    assert progress_bars_enabled()  # restored afterwards (an in-process `main([...])` leaves no trace)
    monkeypatch.setenv("HF_JEPA_DISABLE_PROGRESS_BARS", "1")
    assert not progress_bars_enabled()
