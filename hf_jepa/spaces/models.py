"""The folder an app serves: a saved folder or Hub id given by the user, or the family's quick preset trained on
embedded data (cached, so the second start is instant)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .registry import app_module, family_of_model_type

logger = logging.getLogger(__name__)

__all__ = ["default_cache_dir", "quick_stages", "resolve_model"]


def default_cache_dir() -> Path:
    """`$HF_JEPA_SPACES_CACHE`, else `$XDG_CACHE_HOME/hf-jepa/spaces` (default `~/.cache/hf-jepa/spaces`)."""
    if os.environ.get("HF_JEPA_SPACES_CACHE"):
        return Path(os.environ["HF_JEPA_SPACES_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf-jepa" / "spaces"


def _check_folder(family: str, folder: Path, given: str) -> None:
    config = folder / "config.json"
    if not config.is_file():
        raise ValueError(f"--model {given!r}: {folder} holds no config.json (give a folder hf-jepa train wrote)")
    model_type = json.loads(config.read_text()).get("model_type")
    if model_type not in app_module(family).MODEL_TYPES:
        owner = family_of_model_type(model_type)
        hint = f"; it is served by `hf-jepa demo {owner}`" if owner else ""
        raise ValueError(f"--model {given!r} holds a {model_type!r} model, not a {family} one{hint}")


def quick_stages(family: str) -> list[tuple[str, dict]]:
    """The `hf-jepa train` runs of `family`'s quick preset, in order, as `(training family, settings)`. An app's
    `QUICK_TRAINING` is one family's settings (a dict: trained as `family`) or a list of such pairs; a setting value
    `"{name}"` in a later run is the folder of the earlier run of family `name` (a Talker reads the reasoner trained
    before it)."""
    settings = app_module(family).QUICK_TRAINING
    if isinstance(settings, dict):
        return [(family, dict(settings))]
    return [(name, dict(values)) for name, values in settings]


def resolve_model(
    family: str, model: str | None, cache_dir: str | Path | None = None, progress: Callable | None = None
) -> tuple[Path, str]:
    """(the folder to serve, a sentence saying where it came from). `model` is a local folder or a Hub id; without
    it the app's quick preset (its `QUICK_TRAINING`, see `quick_stages`) is trained once into `cache_dir / family`
    (default `default_cache_dir()`) and reused afterwards: one run is that folder; several runs are its sub-folders,
    named after their families, and the last one is served. `progress(fraction, desc=...)` is told what happens
    (gradio's `gr.Progress`)."""
    stages = quick_stages(family)
    if model:
        folder = Path(model)
        if not folder.exists():
            from huggingface_hub import snapshot_download

            if progress:
                progress(0, desc=f"Downloading {model}")
            folder = Path(snapshot_download(model))
        _check_folder(family, folder, model)
        return folder.resolve(), f"Loaded from `{model}`."
    cached = Path(cache_dir or default_cache_dir()) / family
    served = cached if len(stages) == 1 else cached / stages[-1][0]
    if (served / "config.json").is_file() and (served / "eval_results.json").is_file():
        return served.resolve(), (
            f"No model was given: serving the quick {family} model trained earlier and cached here "
            "(delete the folder to train it again)."
        )
    started = time.perf_counter()
    folders: dict[str, str] = {}
    commands = []
    for index, (name, settings) in enumerate(stages):
        settings = _with_folders(settings, folders)
        shown = " ".join(f"{k}={v}" for k, v in settings.items())
        step = f" ({index + 1}/{len(stages)})" if len(stages) > 1 else ""
        if progress:
            progress(0, desc=f"No model given: training the quick {family} preset{step}: {name} ({shown})")
        target = cached if len(stages) == 1 else cached / name
        logger.info(
            "No --model given: training the quick %s preset%s (%s: %s) into %s", family, step, name, shown, target
        )
        _train_into(name, settings, target)
        folders[name] = str(target.resolve())
        commands.append(f"`hf-jepa train {name} --set {shown}`")
    seconds = time.perf_counter() - started
    return served.resolve(), (
        f"No model was given: trained the quick {family} preset ({', then '.join(commands)}) in {seconds:.0f} s on "
        "data that needs no download and cached it here; later starts reuse it."
    )


def _with_folders(settings: dict, folders: dict[str, str]) -> dict:
    """`settings` with every value `"{name}"` replaced by the folder of the earlier run of family `name`."""
    resolved = {}
    for key, value in settings.items():
        if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
            if value[1:-1] not in folders:
                raise ValueError(f"quick preset setting {key}={value}: no earlier run of {value[1:-1]!r} to refer to")
            value = folders[value[1:-1]]
        resolved[key] = value
    return resolved


def _train_into(family: str, settings: dict, folder: Path) -> None:
    """Train into a scratch folder beside `folder`, then move it there: a folder at that path is always complete."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        _train(family, settings, scratch)
        if folder.exists():  # an incomplete earlier attempt
            shutil.rmtree(folder)
        scratch.rename(folder)  # atomic
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _train(family: str, settings: dict, output_dir: Path) -> None:
    from ..cli_settings import build_train_setup
    from ..trainers.trainer import JepaTrainer

    setup = build_train_setup(family, {**settings, "output_dir": str(output_dir), "overwrite_output_dir": True})
    recipe = setup.family.make_recipe(setup.config, setup.data_args, seed=setup.training_args.seed)
    JepaTrainer(recipe, setup.training_args).train()
