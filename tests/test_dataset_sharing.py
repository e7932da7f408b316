"""Generated data as Hub datasets (hf_jepa.data.sharing, `hf-jepa push-dataset`): every kind's rows are, bit for bit,
what its recipe feeds the model; the splits, card and tokenizer survive a push to the loopback Hub and a load back."""

import dataclasses
import os

import datasets  # imported before the loopback fixtures run, so that they point its own endpoint at the Hub too
import numpy as np
import pytest
import torch
from huggingface_hub import DatasetCard, hf_hub_download, snapshot_download
from transformers import AutoTokenizer

from hf_jepa.cli import main
from hf_jepa.data import MnistSplits
from hf_jepa.data.sharing import (
    DATASET_KINDS,
    build_shared_dataset,
    dataset_parameters,
    push_dataset,
    render_dataset_card,
)
from hf_jepa.data.text import ambiguity_model_inputs
from hf_jepa.modeling.epm_jepa import EpmJepaConfig
from hf_jepa.modeling.jepa_reasoner import JepaReasonerConfig
from hf_jepa.modeling.t_jepa import TJepaConfig
from hf_jepa.recipes.epm_jepa import TRAINING_DEFAULTS, EpmJepaDataArguments, EpmJepaRecipe, build_eval_pixels
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments, JepaReasonerRecipe
from hf_jepa.recipes.t_jepa import TJepaDataArguments, TJepaRecipe
from hf_jepa.trainers import seeded_generator

# Small sizes for every kind (the recipes' defaults are for real runs).
MOVING = dict(data="embedded", seed=3, train_sequences=6, adapt_sequences=5, eval_sequences=3, batch_size=4)
MOVING |= dict(sequence_length=3, eval_sequence_length=4)
AMBIGUITY = dict(ambiguity=4, seed=3, train_sentences=2 * 64 + 2, validation_sentences=8)
REASONING = dict(num_train_examples=40, num_eval_examples=8, task_seed=5)


@pytest.fixture(scope="module")
def digits():
    return MnistSplits("embedded")


@pytest.fixture(scope="module")
def shared(digits):
    """Every kind built once with the small sizes."""
    sizes = {"moving-mnist-gravity": MOVING, "ambiguity-corpus": AMBIGUITY}
    return {
        kind: build_shared_dataset(kind, dataset_parameters(kind, **sizes.get(kind, REASONING)))
        for kind in DATASET_KINDS
    }


def _columns(split: datasets.Dataset) -> dict:
    return split.with_format("numpy")[:]


def _assert_same_splits(loaded: datasets.DatasetDict, expected: datasets.DatasetDict) -> None:
    assert set(loaded) == set(expected)
    for name, split in expected.items():
        assert loaded[name].features == split.features, name
        got, want = _columns(loaded[name]), _columns(split)
        for column, values in want.items():
            assert np.asarray(got[column]).dtype == np.asarray(values).dtype, (name, column)
            np.testing.assert_array_equal(got[column], values, err_msg=f"{name}.{column}")


# ------------------------------------------------------------------------------------ rows = the recipes' batches


def test_moving_mnist_rows_are_the_epm_recipe_batches(shared, digits, tmp_path):
    configs = shared["moving-mnist-gravity"].configs
    dataset = {**configs["sequences"], **configs["evaluation"]}
    dataset = {name: split.with_format("torch") for name, split in dataset.items()}
    config = EpmJepaConfig.tiny(image_size=64)
    common = dict(sequence_length=3, eval_sequence_length=4, eval_sequences=3)
    pretrain = EpmJepaRecipe(config, EpmJepaDataArguments(**common), seed=3, splits=digits)
    EpmJepaConfig.tiny().save_pretrained(tmp_path / "base")  # adapt only checks that init_from is an EPM folder here
    adapt = EpmJepaRecipe(
        config, EpmJepaDataArguments(stage="adapt", init_from=str(tmp_path / "base"), **common), 3, digits
    )
    for split, recipe in (("train", pretrain), ("adapt", adapt)):
        for step, rows in enumerate((slice(0, 4), slice(4, 8))):
            expected = recipe.train_batch(step, rank=0, batch_size=4)["pixel_values"]
            got = dataset[split][rows]["pixel_values"]
            count = len(range(*rows.indices(dataset[split].num_rows)))
            assert got.dtype == torch.float32 and got.shape == (count, 3, 1, 64, 64)
            # The last chunk is shorter: the recipe's batch of that size at that step.
            if count < 4:
                expected = recipe.world.sample_batch(count, step=step)["pixel_values"]
            assert torch.equal(got, expected), (split, step)
    evaluation = build_eval_pixels(digits, pretrain.data_args, config.image_size)
    assert torch.equal(dataset["eval_shift"][:]["pixel_values"], evaluation["shift"])
    assert torch.equal(dataset["eval_train"][:]["pixel_values"], evaluation["train"])
    gravity = dataset["adapt"][:]["gravity"]
    assert bool((gravity > 0).all() and (gravity <= 0.5).all()) and bool((dataset["train"][:]["gravity"] == 0).all())


def test_ambiguity_rows_through_the_transform_are_the_t_jepa_recipe_batches(shared):
    item = shared["ambiguity-corpus"]
    recipe = TJepaRecipe(
        TJepaConfig.tiny(), TJepaDataArguments(corpus="ambiguity", ambiguity=4, diagnostics_sentences=8), seed=3
    )
    assert item.tokenizer.get_vocab() == recipe.tokenizer.get_vocab()
    dataset = item.configs["default"].with_transform(ambiguity_model_inputs(item.tokenizer, max_length=64))
    keys = ("input_ids", "attention_mask", "target_mask", "span_ids")
    # Step k of rank 0 with batch size 2 reads stream rows (64 k) * 2 ..: rows 0-1 and 128-129.
    for step, rows in ((0, slice(0, 2)), (1, slice(128, 130))):
        expected = recipe.train_batch(step, rank=0, batch_size=2)
        got = dataset["train"][rows]
        for key in keys:
            assert got[key].dtype == expected[key].dtype and torch.equal(got[key], expected[key]), (step, key)
    got = dataset["validation"][:]
    for key in keys:
        assert torch.equal(got[key], recipe.fixed_val[key]), key
    assert item.configs["default"]["train"][128]["sentence_index"] == 128


@pytest.mark.parametrize("kind", ["reasoning-tree-search", "reasoning-cfg", "reasoning-arithmetic"])
def test_reasoning_rows_are_the_reasoner_recipe_batches(shared, kind):
    item = shared[kind]
    task = kind.removeprefix("reasoning-").replace("-", "_")
    recipe = JepaReasonerRecipe(JepaReasonerConfig.tiny(), JepaReasonerDataArguments(task=task, **REASONING), seed=2)
    train = item.configs["default"]["train"].with_format("torch")
    for step in (0, 7):
        # The rows the recipe draws at this step (its own generator), then the same rows of the dataset.
        index = torch.randint(40, (8,), generator=seeded_generator(2, step, 0))
        expected = recipe.train_batch(step, rank=0, batch_size=8)
        got = train[index.tolist()]
        for key in recipe.batch_keys:
            assert got[key].dtype == torch.int64 and torch.equal(got[key], expected[key]), (step, key)
    test = item.configs["default"]["test"].with_format("torch")[:]
    for key, tensor in recipe.data.eval.items():
        assert torch.equal(test[key], tensor), key
    assert item.configs["default"]["test"]["prompt"] == [e.prompt for e in recipe.data.eval_examples]
    assert item.tokenizer.get_vocab() == recipe.data.tokenizer.get_vocab()


def test_parameter_defaults_are_the_recipes():
    moving = DATASET_KINDS["moving-mnist-gravity"]()
    epm = EpmJepaDataArguments()
    for name in ("sequence_length", "eval_sequence_length", "eval_sequences", "num_digits", "train_gravity"):
        assert getattr(moving, name) == getattr(epm, name), name
    assert (moving.shift_gravity_min, moving.shift_gravity_max) == epm.shift_gravity
    assert moving.batch_size == TRAINING_DEFAULTS["per_device_batch_size"]
    assert moving.canvas_size == EpmJepaConfig().image_size
    assert DATASET_KINDS["ambiguity-corpus"]().validation_sentences == TJepaDataArguments().diagnostics_sentences
    reasoner = JepaReasonerDataArguments()
    for kind in ("reasoning-tree-search", "reasoning-cfg", "reasoning-arithmetic"):
        for name, value in dataclasses.asdict(DATASET_KINDS[kind]()).items():
            assert value == getattr(reasoner, name), (kind, name)


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(sequence_length=1), "sequence_length must be an integer >= 2, got 1"),
        (dict(eval_sequence_length=1), "eval_sequence_length must be an integer >= 2, got 1"),
        (dict(num_digits=3), "num_digits must be one of 1, 2; got 3"),
        (dict(train_gravity=-0.1), "train_gravity must be >= 0 (gravity points down), got -0.1"),
        (dict(shift_gravity_max=float("inf")), "shift_gravity_max must be a finite number, got inf"),
        (
            dict(shift_gravity_min=0.5),
            "shift_gravity_min (0.5) must be < shift_gravity_max (0.5): the shift gravity is drawn from "
            "(shift_gravity_min, shift_gravity_max]",
        ),
    ],
)
def test_shared_gravity_fields_are_checked_alike(values, message):
    # One check (hf_jepa.data.moving_mnist.check_gravity_settings) for the dataset parameters and the recipe's data
    # arguments: the same values are refused with the same message.
    for parameters_class in (DATASET_KINDS["moving-mnist-gravity"], EpmJepaDataArguments):
        with pytest.raises(ValueError) as error:
            parameters_class(**values)
        assert str(error.value) == message, parameters_class


def test_card_is_honest_and_complete(shared):
    card = render_dataset_card(shared["moving-mnist-gravity"], "org/moving")
    metadata = card.data.to_dict()
    assert metadata["license"] == "cc-by-4.0"  # the embedded digits' licence (UCI optdigits via scikit-learn)
    assert metadata["tags"][0] == "synthetic" and metadata["size_categories"] == ["n<1K"]
    assert metadata["hf_jepa"]["parameters"] == dataclasses.asdict(shared["moving-mnist-gravity"].parameters)
    assert metadata["configs"] == [
        {
            "config_name": "sequences",
            "data_files": [
                {"split": "train", "path": "data/sequences/train-*.parquet"},
                {"split": "adapt", "path": "data/sequences/adapt-*.parquet"},
            ],
            "default": True,
        },
        {
            "config_name": "evaluation",
            "data_files": [
                {"split": "eval_shift", "path": "data/evaluation/eval_shift-*.parquet"},
                {"split": "eval_train", "path": "data/evaluation/eval_train-*.parquet"},
            ],
        },
    ]
    text = str(card)
    assert "hf-jepa push-dataset moving-mnist-gravity org/moving --set data=embedded seed=3 train_sequences=6" in text
    assert "embedded scikit-learn digits" in text and "| `eval_shift` | 3 |" in text
    reasoning = render_dataset_card(shared["reasoning-cfg"], "org/cfg")
    assert reasoning.data.to_dict()["license"] == "apache-2.0"
    assert "hf_jepa.data.reasoning.CfgTask" in str(reasoning) and "| `test` | 8 | 6, without" in str(reasoning)


# ------------------------------------------------------------------------------------------ loopback round trips


def test_push_then_load_back_bit_for_bit(hub, online, shared, tmp_path, monkeypatch, capsys):
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)  # nothing may be written next to the user either
    settings = [f"{key}={value}" for key, value in MOVING.items()]
    assert main(["push-dataset", "moving-mnist-gravity", "org/moving", "--set", *settings]) == 0
    assert "/datasets/org/moving/commit/" in capsys.readouterr().out
    for kind, repo_id in (("ambiguity-corpus", "org/ambiguity"), ("reasoning-cfg", "org/cfg")):
        url = push_dataset(kind, repo_id, shared[kind].parameters, revision="v1")
        assert "/datasets/" in url
    assert os.listdir(workdir) == []
    assert sorted(hub.files("org/moving", repo_type="dataset")) == [
        ".gitattributes",
        "README.md",
        *[f"data/evaluation/{name}-00000-of-00001.parquet" for name in ("eval_shift", "eval_train")],
        *[f"data/sequences/{name}-00000-of-00001.parquet" for name in ("adapt", "train")],
    ]
    cache = str(tmp_path / "load-cache")
    for kind, repo_id, revision in (
        ("moving-mnist-gravity", "org/moving", None),
        ("ambiguity-corpus", "org/ambiguity", "v1"),
        ("reasoning-cfg", "org/cfg", "v1"),
    ):
        for config_name, expected in shared[kind].configs.items():
            loaded = datasets.load_dataset(repo_id, config_name, revision=revision, cache_dir=cache)
            _assert_same_splits(loaded, expected)
        # DatasetCard.load reads main only: a branch's card is loaded from its downloaded README.md.
        where = (
            repo_id
            if revision is None
            else hf_hub_download(repo_id, "README.md", repo_type="dataset", revision=revision)
        )
        card = DatasetCard.load(where, repo_type="dataset")
        assert card.data.to_dict() == render_dataset_card(shared[kind], repo_id).data.to_dict()
        assert card.data.to_dict()["hf_jepa"]["parameters"] == dataclasses.asdict(shared[kind].parameters)
    # From the Hub alone: the pushed tokenizer and the documented transform give the local model input.
    folder = snapshot_download("org/ambiguity", repo_type="dataset", revision="v1", allow_patterns="tokenizer/*")
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(folder, "tokenizer"))
    loaded = datasets.load_dataset("org/ambiguity", revision="v1", cache_dir=cache)["validation"]
    local = shared["ambiguity-corpus"]
    got = loaded.with_transform(ambiguity_model_inputs(tokenizer))[:]
    want = local.configs["default"]["validation"].with_transform(ambiguity_model_inputs(local.tokenizer))[:]
    assert all(torch.equal(got[key], want[key]) for key in want)
    # Without a configuration name, load_dataset reads the first (the card marks it default).
    assert set(datasets.load_dataset("org/moving", cache_dir=cache)) == {"train", "adapt"}
    assert (
        main(["push-dataset", "reasoning-cfg", "org/cfg", "--set", "num_train_examples=12", "num_eval_examples=3"]) == 0
    )
    assert datasets.load_dataset("org/cfg", cache_dir=cache)["train"].num_rows == 12  # main; v1 keeps its 40 rows
    assert datasets.load_dataset("org/cfg", revision="v1", cache_dir=cache)["train"].num_rows == 40
    # A new push replaces the earlier data files: without training sequences only the evaluation splits remain, and
    # they become the default configuration.
    evaluation_only = {**MOVING, "train_sequences": 0, "adapt_sequences": 0}
    push_dataset("moving-mnist-gravity", "org/moving", dataset_parameters("moving-mnist-gravity", **evaluation_only))
    assert sorted(p for p in hub.files("org/moving", repo_type="dataset") if p.startswith("data/")) == [
        "data/evaluation/eval_shift-00000-of-00001.parquet",
        "data/evaluation/eval_train-00000-of-00001.parquet",
    ]
    reloaded = datasets.load_dataset("org/moving", cache_dir=cache)
    _assert_same_splits(reloaded, shared["moving-mnist-gravity"].configs["evaluation"])


def _one_line_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hf-jepa: error: "), lines
    return lines[0]


def test_cli_errors_are_one_line(hub, capsys):
    line = _one_line_error(capsys, ["push-dataset", "moving-mnist", "org/x"])
    assert "unknown dataset kind 'moving-mnist' (did you mean 'moving-mnist-gravity'?)" in line
    line = _one_line_error(capsys, ["push-dataset", "reasoning-cfg", "org/x", "--set", "num_nodes=5"])
    assert "unknown setting 'num_nodes' for reasoning-cfg" in line
    assert "valid keys: num_eval_examples, num_train_examples, task_seed" in line
    line = _one_line_error(capsys, ["push-dataset", "moving-mnist-gravity", "org/x", "--set", "num_digits=3"])
    assert "num_digits must be one of 1, 2; got 3" in line
    line = _one_line_error(capsys, ["push-dataset", "reasoning-cfg", "org/x", "--set", "task_seed=1.5"])
    assert "task_seed expects an integer, got 1.5" in line
    # The suite runs offline (HF_HUB_OFFLINE=1): the push fails before anything is generated.
    line = _one_line_error(capsys, ["push-dataset", "reasoning-cfg", "org/x"])
    assert "push-dataset reasoning-cfg to org/x failed: cannot reach the Hub: offline mode is on" in line


def test_cli_auth_failure_is_one_line(hub, online, capsys):
    with hub.fail(401, method="POST", path=r"/api/repos/create"):
        line = _one_line_error(capsys, ["push-dataset", "reasoning-cfg", "org/x"])
    assert "the Hub answered HTTP 401" in line and "hf auth login" in line
