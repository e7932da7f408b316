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

__all__ = ["default_cache_dir", "resolve_model"]


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


def resolve_model(
    family: str, model: str | None, cache_dir: str | Path | None = None, progress: Callable | None = None
) -> tuple[Path, str]:
    """(the folder to serve, a sentence saying where it came from). `model` is a local folder or a Hub id; without
    it the app's quick preset (its `QUICK_TRAINING`) is trained once into `cache_dir / family` (default `default_cache_dir()`)
    and reused afterwards. `progress(fraction, desc=...)` is told what happens (gradio's `gr.Progress`)."""
    settings = app_module(family).QUICK_TRAINING
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
    if (cached / "config.json").is_file() and (cached / "eval_results.json").is_file():
        return cached.resolve(), (
            f"No model was given: serving the quick {family} model trained earlier and cached here "
            "(delete the folder to train it again)."
        )
    shown = " ".join(f"{k}={v}" for k, v in settings.items())
    if progress:
        progress(0, desc=f"No model given: training the quick {family} preset ({shown})")
    logger.info("No --model given: training the quick %s preset (%s) into %s", family, shown, cached)
    started = time.perf_counter()
    cached.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{family}-", dir=cached.parent))
    try:
        _train(family, settings, scratch)
        if cached.exists():  # an incomplete earlier attempt
            shutil.rmtree(cached)
        scratch.rename(cached)  # atomic: a folder there is always complete
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - started
    return cached.resolve(), (
        f"No model was given: trained the quick {family} preset (`hf-jepa train {family} --set {shown}`) in "
        f"{seconds:.0f} s on embedded data and cached it here; later starts reuse it."
    )


def _train(family: str, settings: dict, output_dir: Path) -> None:
    from ..cli_settings import build_train_setup
    from ..trainers.trainer import JepaTrainer

    setup = build_train_setup(family, {**settings, "output_dir": str(output_dir), "overwrite_output_dir": True})
    recipe = setup.family.make_recipe(setup.config, setup.data_args, seed=setup.training_args.seed)
    JepaTrainer(recipe, setup.training_args).train()
