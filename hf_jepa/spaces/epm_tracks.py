"""Which models the EPM-JEPA app compares (hf_jepa.spaces.epm_jepa): the served folder, its siblings in the
reproduction's layout, and the tracks it lacks, adapted from it by a short experience phase and cached."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["ROW_KEYS", "TRACK_TRAINING", "TrackModel", "load_tracks", "track_training_settings"]

FAMILY = "epm-jepa"
# The experience phase (`stage=adapt`, the reproduction's settings but for the steps) of a track the served folder
# does not come with, started from the served folder; the track and the memory fields are added from its config.
TRACK_TRAINING = {
    "data": "embedded",
    "stage": "adapt",
    "max_steps": 20,
    "per_device_batch_size": 16,
    "learning_rate": 1e-3,
    "weight_decay": 0.0,
    "warmup_steps": 0,
    "logging_steps": 10,
    "eval_sequences": 32,
    "eval_every": 0,
    "plot": False,
}
ROW_KEYS = ("served", "vanilla", "ei", "epm")
_TRACKS_DIR = "epm-jepa-tracks"


@dataclass
class TrackModel:
    """One row of the comparison: `key` (`"served"` or a track name), the model (eval mode) and where it came from."""

    key: str
    label: str
    source: str
    model: torch.nn.Module

    @property
    def has_buffer(self) -> bool:
        return self.model.experience_buffer is not None


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _stage(folder: Path) -> str | None:
    results = folder / "eval_results.json"
    return json.loads(results.read_text()).get("stage") if results.is_file() else None


def _compatible(config: dict, other: dict) -> bool:
    fields = ("image_size", "num_channels", "context_length")
    return other.get("model_type") == "epm_jepa" and all(config.get(f) == other.get(f) for f in fields)


def _sibling(folder: Path, track: str, config: dict) -> Path | None:
    """`folder/../<track>` when it holds a compatible model of that track (the reproduction's `seedN/<track>`)."""
    candidate = folder.parent / track
    if candidate.resolve() == folder.resolve() or not (candidate / "config.json").is_file():
        return None
    other = _config(candidate)
    return candidate if other.get("track") == track and _compatible(config, other) else None


def track_training_settings(folder: Path, track: str) -> dict:
    """The `hf-jepa train epm-jepa` settings of the quick experience phase of `track` from `folder`: TRACK_TRAINING
    with the track, `init_from` and the folder's own memory/LoRA sizes."""
    from ..modeling.epm_jepa.modeling_epm_jepa import EXPERIENCE_ADAPTER_FIELDS

    config = _config(folder)
    memory = {field: config[field] for field in EXPERIENCE_ADAPTER_FIELDS if field in config and field != "track"}
    return {**TRACK_TRAINING, **memory, "track": track, "init_from": str(folder)}


def _weights_digest(folder: Path, settings: dict) -> str:
    content = hashlib.sha256(json.dumps({k: v for k, v in settings.items() if k != "init_from"}).encode())
    for path in sorted(folder.glob("*.safetensors")):
        content.update(path.read_bytes())
    return content.hexdigest()[:16]


def _trained_track(folder: Path, track: str, cache_dir: Path) -> tuple[Path, str]:
    """The folder of `track` adapted from `folder` with TRACK_TRAINING (trained now, or cached earlier)."""
    from .models import _train

    settings = track_training_settings(folder, track)
    target = cache_dir / _TRACKS_DIR / _weights_digest(folder, settings) / track
    steps = settings["max_steps"]
    if (target / "config.json").is_file() and (target / "eval_results.json").is_file():
        return target, f"{steps} experience steps from the served model, trained earlier (cached in `{target}`)"
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{track}-", dir=target.parent))
    started = time.perf_counter()
    try:
        _train(FAMILY, settings, scratch)
        if target.exists():  # an incomplete earlier attempt
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - started
    return target, f"{steps} experience steps from the served model on embedded data, trained now ({seconds:.0f} s)"


def load_tracks(
    folder: str | Path, cache_dir: str | Path | None = None, progress: Callable | None = None
) -> list[TrackModel]:
    """The comparison's rows for the served `folder`, in `ROW_KEYS` order: the folder itself (as its track, or as
    row `"served"` when it was pretrained, `stage=pretrain`), sibling track folders of the reproduction layout, and
    the remaining tracks adapted from the folder (`TRACK_TRAINING`, cached under `cache_dir`, default the apps'
    cache). `progress(fraction, desc=...)` hears about each training."""
    from ..modeling.epm_jepa import EpmJepaModel
    from ..modeling.epm_jepa.configuration_epm_jepa import TRACK_NAMES, TRACKS
    from .models import default_cache_dir

    folder = Path(folder)
    config = _config(folder)
    cache_dir = Path(cache_dir or default_cache_dir())
    folders: dict[str, tuple[Path, str]] = {}
    if _stage(folder) == "pretrain":
        folders["served"] = (folder, f"the served model (pretrained at g = 0, track {config['track']!r})")
    else:
        folders[config["track"]] = (folder, "the served model")
    for track in TRACKS:
        if track not in folders and (sibling := _sibling(folder, track, config)):
            folders[track] = (sibling, f"the sibling folder `{sibling}`")
    for index, track in enumerate(t for t in TRACKS if t not in folders):
        if progress:
            progress(index / len(TRACKS), desc=f"Adapting track {TRACK_NAMES[track]} from the served model")
        folders[track] = _trained_track(folder, track, cache_dir)
    rows = []
    for key in ROW_KEYS:
        if key in folders:
            path, source = folders[key]
            model = EpmJepaModel.from_pretrained(str(path)).eval()
            label = TRACK_NAMES.get(key) or f"served base ({TRACK_NAMES[model.config.track]}, trained at g = 0)"
            rows.append(TrackModel(key, label, source, model))
    return rows
