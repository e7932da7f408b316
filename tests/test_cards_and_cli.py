"""Model cards (hf_jepa.cards), the `hf-jepa` command line (hf_jepa.cli) and pushing to a loopback Hub."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from hf_jepa import hub as hf_hub_module
from hf_jepa.cards.bro_jepa import render_card as render_bro_jepa_card
from hf_jepa.cards.common import MODEL_ID_PLACEHOLDER, CardInputs, card_renderer, template_text
from hf_jepa.cli import build_parser, build_train_setup, families, main, parse_overrides
from hf_jepa.hub import push_to_hub
from hf_jepa.modeling.bro_jepa import BroJepaConfig
from hf_jepa.recipes import PRESETS
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments
from hf_jepa.testing.hub_server import LoopbackHub, use_loopback_hub
from hf_jepa.trainers.trainer import TrainingArguments

REPO_ROOT = Path(__file__).resolve().parents[1]
OPS = [k for k in range(-9, 10) if k != 0]


CARD_FAMILIES = ("bro_jepa", "epm_jepa", "i_jepa", "t_jepa", "jepa_reasoner")


def test_every_card_module_exports_the_one_render_card():
    import importlib
    import inspect

    signatures = set()
    for family in CARD_FAMILIES:
        render_card = importlib.import_module(f"hf_jepa.cards.{family}").render_card
        signatures.add(str(inspect.signature(render_card)))
        assert render_card.__module__ == f"hf_jepa.cards.{family}" and render_card.__name__ == "render_card"
        # The family's own text first, then the shared contract.
        assert (
            not render_card.__doc__.startswith("Every family")
            and "hf_jepa.cards.common.CardInputs" in render_card.__doc__
        )
    assert len(signatures) == 1, signatures


def test_render_card_hands_the_renderer_plain_settings():
    seen = card_renderer(lambda card, **options: (card, options))
    card, options = seen(
        BroJepaConfig(), None, TrainingArguments(output_dir="out"), {"data": "embedded"}, repo_id="org/m", extra=1
    )
    assert isinstance(card, CardInputs) and options == {"extra": 1}
    assert card.metrics == {} and card.training["output_dir"] == "out" and card.data == {"data": "embedded"}
    assert card.model_id == "org/m" and not card.remote_code and card.base_model is None
    assert CardInputs(BroJepaConfig(), {}, {}, {}).model_id == MODEL_ID_PLACEHOLDER
    with pytest.raises(TypeError, match="unexpected keyword argument 'repo'"):
        render_bro_jepa_card(BroJepaConfig(), {}, repo="org/m")


def _metrics(**overrides):
    metrics = {
        "seen_accuracy": 0.9912,
        "zero_shot_accuracy": 0.9734,
        "rollout_accuracy": 0.9521,
        "rollout_seen_accuracy": 0.9903,
        "accuracy_per_operation": {k: 0.9 + k / 1000 for k in OPS},
        "rollout_accuracy_per_operation": {k: 0.8 + k / 1000 for k in OPS},
        "prototype_off_diagonal_cosine": -0.1093,
        "data_source": "Hub ylecun/mnist",
        "eval_images": 10000,
        "pca_plot": "latent_pca.png",
        "train_time_s": 187.25,
        "train_steps": 1500,
        "num_processes": 1,
        "device": "cpu",
    }
    metrics.update(overrides)
    return metrics


def _front_matter(card: ModelCard) -> dict:
    text = str(card)
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


# ------------------------------------------------------------------------------------------------ cards


def test_template_is_found():
    assert template_text("bro_jepa.md") == (REPO_ROOT / "model_cards" / "bro_jepa.md").read_text(encoding="utf-8")
    with pytest.raises(FileNotFoundError):
        template_text("no_such_family.md")


def test_card_metadata_round_trip():
    metrics = _metrics()
    card = render_bro_jepa_card(
        BroJepaConfig.cpu_fast(), metrics, TrainingArguments(max_steps=1500), BroJepaDataArguments()
    )
    meta = _front_matter(card)
    assert meta["library_name"] == "hf-jepa"  # no auto_map: loading needs `import hf_jepa`
    assert {"jepa", "bro-jepa", "modular-arithmetic", "self-supervised", "mnist"} <= set(meta["tags"])
    assert meta["datasets"] == ["ylecun/mnist"]
    assert meta["pipeline_tag"] == "image-feature-extraction"  # the encoder latents, with the saved processor

    (entry,) = meta["model-index"]
    assert entry["name"] == "bro-jepa-mfr-cnn"
    (result,) = entry["results"]
    assert result["task"]["type"] == "modular-arithmetic"
    assert result["dataset"] == {"name": "MNIST", "type": "ylecun/mnist", "split": "test"}
    values = {m["config"]: m["value"] for m in result["metrics"]}
    assert values == {
        "zero_shot": metrics["zero_shot_accuracy"],
        "seen_operations": metrics["seen_accuracy"],
        "rollout": metrics["rollout_accuracy"],
    }

    # huggingface_hub parses it back into the same EvalResults
    parsed = ModelCard(str(card)).data
    assert {(r.metric_config, r.metric_value) for r in parsed.eval_results} == set(values.items())
    assert parsed.model_name == "bro-jepa-mfr-cnn"


def test_card_body_tables_and_figure():
    card = render_bro_jepa_card(
        BroJepaConfig.cpu_fast(), _metrics(), TrainingArguments(max_steps=1500), BroJepaDataArguments()
    )
    text = card.text
    assert "# BRo-JEPA (MFR block-rotation predictor, CNN encoder)" in text
    assert "| Zero-shot accuracy, mean over 16 unseen ops (±2…±9) | 97.34% |" in text
    assert "| Seen-operation accuracy (k = -1, +1) | 99.12% |" in text
    assert "| Rollout accuracy, unseen ops (repeated ±1 steps) | 95.21% |" in text
    assert "| Prototype off-diagonal cosine (lower = better separated) | -0.1093 |" in text
    assert "| Training time | 187.2 s (1500 steps) |" in text or "| Training time | 187.3 s (1500 steps) |" in text
    assert "| Data source | Hub ylecun/mnist |" in text and "| Device | cpu × 1 process |" in text
    assert "| +3 | 90.30% | 80.30% |" in text and "| -1 * | 89.90% | 79.90% |" in text
    assert "| `latent_dim` | 64 |" in text and "| `max_steps` | 1500 |" in text and "| `max_shift` | 1 |" in text
    assert "![](latent_pca.png)" in text
    assert "99.46%" in text and "2.42%" in text and "~10%" in text  # the paper's figures, labelled as such
    assert "published numbers of the BRo-JEPA paper" in text
    assert "@misc{" in text and "BRo-JEPA: Learning Modular Arithmetic in Latent Space" in text
    assert "import hf_jepa" in text and 'pipeline("modular-arithmetic"' in text and MODEL_ID_PLACEHOLDER in text
    # every table stays one block: no blank line between a table's rows
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("|"):
            assert all(line.startswith("|") for line in lines), block


def test_card_skips_missing_metrics_and_marks_non_mnist_data():
    metrics = {"zero_shot_accuracy": 0.5, "data_source": "embedded scikit-learn digits upscaled to 28x28"}
    card = render_bro_jepa_card(BroJepaConfig.tiny(), metrics, repo_id="org/tiny")
    meta = _front_matter(card)
    assert "datasets" not in meta
    (result,) = meta["model-index"][0]["results"]
    assert [m["value"] for m in result["metrics"]] == [0.5]
    assert result["dataset"]["name"] != "MNIST"
    assert "![](" not in card.text and "Seen-operation accuracy" not in card.text
    assert "not comparable" in card.text
    assert 'from_pretrained("org/tiny")' in card.text

    empty = render_bro_jepa_card(BroJepaConfig.tiny(), {})
    assert "model-index" not in _front_matter(empty)
    assert "No evaluation metrics were recorded" in empty.text


def test_card_accepts_json_round_tripped_metrics():
    metrics = json.loads(json.dumps(_metrics()))  # per-op keys become strings
    card = render_bro_jepa_card(BroJepaConfig.cpu_fast(), metrics)
    assert "| -9 | 89.10% | 79.10% |" in card.text


# ------------------------------------------------------------------------------------------------ CLI routing


def test_set_keys_are_routed():
    args = build_parser().parse_args(
        ["train", "bro-jepa", "--set", "latent_dim=32", "learning_rate=0.01", "max_shift=2", "--output-dir", "out"]
    )
    setup = build_train_setup(args.family, {**parse_overrides(args.overrides), "output_dir": args.output_dir})
    assert setup.config.latent_dim == 32 and setup.config.encoder_type == "cnn"  # default preset: cpu_fast
    assert setup.training_args.learning_rate == 0.01 and setup.training_args.output_dir == "out"
    assert setup.data_args.max_shift == 2
    assert setup.routed == {"latent_dim": "model", "learning_rate": "train", "max_shift": "data", "output_dir": "train"}

    setup = build_train_setup(
        "bro-jepa",
        parse_overrides(
            ["preset=full", "learning_rate=1e-3", "cnn_channels=[4, 8]", "model.modulus=7", "data.data=embedded"]
        ),
    )
    assert setup.config.encoder_type == "resnet18" and setup.config.cnn_channels == [4, 8]
    assert setup.config.modulus == 7 and setup.data_args.data == "embedded"
    assert isinstance(setup.training_args.learning_rate, float) and setup.training_args.learning_rate == 1e-3
    # YAML 1.2 booleans: `no` stays a string (mixed precision off), `true`/`false` are booleans.
    assert parse_overrides(["mixed_precision=no", "plot=false", "disable_progress_bar=True"]) == {
        "mixed_precision": "no",
        "plot": False,
        "disable_progress_bar": True,
    }


def test_unknown_key_and_bad_values_error(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "bro-jepa", "--set", "latent_dimm=32", "--output-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown setting 'latent_dimm'" in err
    assert "latent_dim" in err and "learning_rate" in err and "max_shift" in err and "preset" in err

    for bad in (["preset=huge"], ["latent_dim=33"], ["max_steps=abc"], ["novalue"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["train", "bro-jepa", "--set", *bad, "--output-dir", str(tmp_path)])
        assert exit_info.value.code == 2, bad
    assert not any(tmp_path.iterdir())  # nothing was trained


def test_yaml_config_sections_and_set_precedence(tmp_path):
    from hf_jepa.cli_settings import read_yaml

    path = tmp_path / "run.yaml"
    path.write_text("preset: tiny\nmax_steps: 7\nmodel:\n  latent_dim: 24\ndata:\n  max_shift: 1\n")
    settings = read_yaml(str(path))
    settings.update(parse_overrides(["max_steps=9"]))
    setup = build_train_setup("bro-jepa", settings)
    assert setup.preset == "tiny" and setup.config.latent_dim == 24 and setup.config.cnn_channels == [8, 16]
    assert setup.training_args.max_steps == 9 and setup.data_args.max_shift == 1


def test_reproduce_runs_the_family_reproduction_or_explains(capsys, tmp_path):
    # One real row of the BRo-JEPA table (20 steps on the embedded digits): the CLI prints the reproduction's table and
    # the reproduction writes it beside its JSON rows.
    assert (
        main(
            [
                "reproduce",
                "bro-jepa",
                "--data",
                "embedded",
                "--output-dir",
                str(tmp_path),
                "--quick",
                "--variant",
                "Supervised MLP",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| Supervised MLP |" in out and out.strip() == (tmp_path / "results.md").read_text().strip()
    assert [row["variant"] for row in json.loads((tmp_path / "results.json").read_text())["rows"]] == ["Supervised MLP"]

    with pytest.raises(SystemExit) as exit_info:  # a family without a reproduction
        main(["reproduce", "i-jepa", "--quick"])
    assert exit_info.value.code == 2
    assert "i-jepa has no reproduction" in capsys.readouterr().err


def test_registry_entries_resolve():
    registry = families()
    assert {
        "bro-jepa",
        "epm-jepa",
        "t-jepa",
        "i-jepa",
        "jepa-reasoner",
        "jepa-mono-talker",
        "jepa-dual-talker",
        "coupled-lm",
        "coconut",
    } <= set(registry)
    for family in registry.values():
        for preset in PRESETS:  # every config class offers the three presets, each taking overrides
            assert isinstance(family.make_config(preset), family.config_class)
        assert family.make_config().model_type == family.model_type


# ------------------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bro-jepa-run")
    code = main(
        [
            "train",
            "bro-jepa",
            "--set",
            "preset=tiny",
            "max_steps=3",
            "per_device_batch_size=16",
            "data=embedded",
            "warmup_steps=1",
            "logging_steps=1",
            "disable_progress_bar=true",
            "prototype_images=500",
            "seed=1",
            "--output-dir",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_train_writes_model_card_and_metrics(trained_dir, capsys):
    for name in ("config.json", "model.safetensors", "README.md", "eval_results.json", "latent_pca.png"):
        assert (trained_dir / name).is_file(), name
    metrics = json.loads((trained_dir / "eval_results.json").read_text())
    assert metrics["data_source"].startswith("embedded") and metrics["train_steps"] == 3

    card = ModelCard.load(trained_dir / "README.md")
    if "auto_map" in json.loads((trained_dir / "config.json").read_text()):  # modeling code saved with the weights
        assert card.data.library_name == "transformers" and "trust_remote_code=True" in card.text
    else:
        assert card.data.library_name == "hf-jepa" and "trust_remote_code" not in card.text
    values = {r.metric_config: r.metric_value for r in card.data.eval_results}
    assert values["zero_shot"] == pytest.approx(metrics["zero_shot_accuracy"])
    assert values["seen_operations"] == pytest.approx(metrics["seen_accuracy"])
    assert card.data.datasets is None  # embedded digits: not claimed as MNIST
    assert "![](latent_pca.png)" in card.text and "| `latent_dim` | 16 |" in card.text
    assert "| `per_device_batch_size` | 16 |" in card.text and "| `data` | embedded |" in card.text


def test_eval_command_reproduces_saved_metrics(trained_dir, capsys):
    capsys.readouterr()
    assert main(["eval", str(trained_dir), "--data", "embedded", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    saved = json.loads((trained_dir / "eval_results.json").read_text())
    for key in ("seen_accuracy", "zero_shot_accuracy", "rollout_accuracy", "prototype_off_diagonal_cosine"):
        assert got[key] == pytest.approx(saved[key], abs=1e-6), key
    assert got["accuracy_per_operation"].keys() == saved["accuracy_per_operation"].keys()

    assert main(["eval", str(trained_dir), "--data", "embedded", "--set", "eval_images=50"]) == 0
    out = capsys.readouterr().out
    assert "| Zero-shot accuracy, mean over 16 unseen ops (±2…±9) |" in out and "| Test images evaluated | 50 |" in out


def test_push_to_loopback_hub(trained_dir, tmp_path):
    with LoopbackHub() as hub, use_loopback_hub(hub, cache_dir=tmp_path / "hf-cache"):
        (trained_dir / "checkpoints").mkdir(exist_ok=True)
        (trained_dir / "checkpoints" / "junk.bin").write_bytes(b"x")
        assert main(["push", str(trained_dir), "org/x"]) == 0
        stored = hub.files("org/x")
        local_readme = (trained_dir / "README.md").read_text(encoding="utf-8")
        assert MODEL_ID_PLACEHOLDER in local_readme  # the local card is never rewritten; the repo id is only uploaded
        uploaded = stored["README.md"].decode()
        assert MODEL_ID_PLACEHOLDER not in uploaded and 'from_pretrained("org/x")' in uploaded
        assert uploaded == local_readme.replace(MODEL_ID_PLACEHOLDER, "org/x")

        remote = ModelCard.load("org/x")
        assert str(remote) == uploaded
        assert remote.data.eval_results == ModelCard.load(trained_dir / "README.md").data.eval_results
        for name in ("config.json", "model.safetensors", "eval_results.json", "latent_pca.png"):
            assert stored[name] == (trained_dir / name).read_bytes(), name
        assert not any(p.startswith("checkpoints/") for p in stored)

        # pushing again (e.g. after retraining) is a fresh commit to the same repo
        url = push_to_hub(trained_dir, "org/x", commit_message="again")
        assert url.endswith("/org/x")


def test_push_refuses_non_model_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        hf_hub_module.push_to_hub(tmp_path, "org/nothing")


def test_help_answers_without_importing_torch():
    # The console script's process: `hf-jepa --help` must not pay for torch/transformers (about 3 s here).
    code = (
        "import sys, time; sys.argv = ['hf-jepa', '--help']; start = time.perf_counter()\n"
        "from hf_jepa.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as exit:\n    assert exit.code == 0\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules, time.perf_counter() - start)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    torch_loaded, transformers_loaded, seconds = result.stdout.split()[-3:]
    assert (torch_loaded, transformers_loaded) == ("False", "False")
    assert float(seconds) < 1.0
    assert "usage: hf-jepa" in result.stdout


def test_train_family_help_lists_every_setting_with_its_default_and_doc(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "bro-jepa", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: hf-jepa train" in out
    assert (
        "  latent_dim = 64  latent width; must be even" in out
    )  # the default preset's value (cpu_fast), and the doc line
    assert "  max_steps = 600" in out  # the family's training default, not TrainingArguments' 1000
    assert "  max_shift = 1  random translation of the training images, in pixels (0 = none)" in out
    with pytest.raises(SystemExit):
        main(["train", "--help"])  # without a family: the usage only
    assert "Settings of" not in capsys.readouterr().out
