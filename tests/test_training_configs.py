"""`configs/<family>/*.yaml`: every example training config loads through the code path of `hf-jepa train --config`
(`read_yaml` + `build_train_setup`, which refuses unknown keys), and every CPU quick config trains for two steps."""

from pathlib import Path

import pytest

from hf_jepa.cli_settings import build_train_setup, read_yaml
from hf_jepa.recipes import load_families
from hf_jepa.trainers import JepaTrainer

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TRAINING_CONFIGS = sorted(p for p in CONFIGS.glob("*/*.yaml") if p.parent.name != "accelerate")
# Settings naming the output folder of another run: filled in with folders the fixtures train.
PREREQUISITES = {"init_from": "epm-jepa", "reasoner": "jepa-reasoner"}


def setup_for(path: Path, output_dir: Path, prerequisites: dict, **overrides):
    settings = read_yaml(str(path))
    for key, family in PREREQUISITES.items():
        if key in settings:
            settings[key] = str(prerequisites[family])
    return build_train_setup(path.parent.name, {**settings, **overrides, "output_dir": str(output_dir)})


def train(setup):
    recipe = setup.family.make_recipe(setup.config, setup.data_args, seed=setup.training_args.seed)
    return JepaTrainer(recipe, setup.training_args).train()


@pytest.fixture(scope="module")
def prerequisites(tmp_path_factory):
    """Two-step runs of the quick EPM base and the quick reasoner: the folders `init_from` and `reasoner` name."""
    folders = {}
    for family in PREREQUISITES.values():
        folder = tmp_path_factory.mktemp(family)
        train(setup_for(CONFIGS / family / "cpu-quick.yaml", folder, {}, max_steps=2, disable_progress_bar=True))
        folders[family] = folder
    return folders


def test_every_family_has_a_cpu_quick_and_a_paper_config():
    families = {family.name for family in load_families().values()}
    assert families == {p.name for p in CONFIGS.iterdir() if p.is_dir() and p.name != "accelerate"}
    for family in families:
        names = [p.name for p in (CONFIGS / family).glob("*.yaml")]
        assert "cpu-quick.yaml" in names and any(name.startswith("paper") for name in names), family


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_config_loads_with_every_key_valid(path, prerequisites, tmp_path):
    settings = read_yaml(str(path))
    setup = setup_for(path, tmp_path / "run", prerequisites)
    assert setup.family.name == path.parent.name
    routed = set(setup.routed) | {"preset"}
    assert {key.partition(".")[2] or key for key in settings} <= routed | {"output_dir"}
    if "preset" in settings:
        assert setup.preset == settings["preset"]
    for key in ("max_steps", "per_device_batch_size", "mixed_precision", "log_with"):
        if key in settings:
            assert getattr(setup.training_args, key) == settings[key], key


@pytest.mark.parametrize(
    "path",
    [p for p in TRAINING_CONFIGS if p.name == "cpu-quick.yaml" and p.parent.name not in PREREQUISITES.values()],
    ids=lambda p: p.parent.name,
)
def test_cpu_quick_config_trains(path, prerequisites, tmp_path):
    setup = setup_for(path, tmp_path / "run", prerequisites, max_steps=2, disable_progress_bar=True, save_model=False)
    result = train(setup)
    assert [row["step"] for row in result.history if "loss" in row][-1] == 2
