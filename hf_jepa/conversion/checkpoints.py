"""Reading a checkpoint to convert: a transformers model folder or Hub id (config.json + safetensors or
pytorch_model.bin weights), or one weights file (Meta's `.pth` / `.pth.tar` training checkpoint, or `.safetensors`).

Nothing is unpickled: `.pth` / `.bin` files are read with `torch.load(weights_only=True)`, which refuses anything but
tensors and plain containers (a checkpoint holding other objects fails with a message saying so)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["PICKLE_SUFFIXES", "SourceCheckpoint", "load_weights_file", "read_source"]

# Weight files read with torch.load(weights_only=True); everything else must be safetensors.
PICKLE_SUFFIXES = (".pth", ".pt", ".tar", ".bin", ".ckpt")
# What a Hub download of a transformers model fetches (no other weight formats).
HUB_PATTERNS = ["config.json", "preprocessor_config.json", "*.safetensors", "*.safetensors.index.json"]


@dataclass
class SourceCheckpoint:
    """A checkpoint read into memory. `state`: the loaded object (a flat `{key: tensor}` for a transformers folder or a
    safetensors file; whatever `torch.load` returned for a `.pth`); `config`: the folder's config.json (None for a
    weights file); `preprocessor`: its preprocessor_config.json, if any; `path`: the local folder or file read;
    `files`: the weight files read (names relative to the folder)."""

    source: str
    path: Path
    state: Any
    config: dict | None = None
    preprocessor: dict | None = None
    files: list[str] = field(default_factory=list)

    @property
    def is_hub(self) -> bool:
        """Whether `source` was a Hub repo id (not a local path)."""
        return not Path(self.source).expanduser().exists()


def load_weights_file(path: Path) -> Any:
    """The content of one weights file: a `{key: tensor}` dict for `.safetensors`; for a pickle-based file
    (`PICKLE_SUFFIXES`), what `torch.load(weights_only=True)` returns. `ValueError` naming the file when it cannot be
    read safely."""
    name = path.name.lower()
    if name.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(str(path))
    if name.endswith(PICKLE_SUFFIXES):
        try:
            return torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises UnpicklingError or RuntimeError with its own explanation
            raise ValueError(
                f"SOURCE {str(path)!r}: cannot be read with torch.load(weights_only=True) ({str(error).splitlines()[0]})"
                ". hf-jepa never unpickles arbitrary objects: re-save the checkpoint's tensors (a dict of state dicts) "
                "with torch.save or as .safetensors"
            ) from error
    raise ValueError(
        f"SOURCE {str(path)!r}: not a weights file hf-jepa reads (expected .safetensors or one of {PICKLE_SUFFIXES})"
    )


def _read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"SOURCE: cannot read {str(path)!r} ({error})") from error


def _folder_weights(folder: Path) -> tuple[dict, list[str]]:
    """The flat state dict of a transformers folder: its (possibly sharded) safetensors, else pytorch_model.bin."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        shards = ["model.safetensors"]
    elif (folder / "pytorch_model.bin").is_file():
        shards = ["pytorch_model.bin"]
    else:
        raise ValueError(
            f"SOURCE {str(folder)!r}: has a config.json but no weights (model.safetensors, a sharded "
            "model.safetensors.index.json or pytorch_model.bin)"
        )
    state: dict = {}
    for shard in shards:
        state.update(load_weights_file(folder / shard))
    return state, shards


def _single_checkpoint_file(folder: Path) -> Path | None:
    """The one weights file of a folder without config.json (e.g. a folder holding Meta's `.pth.tar`), or None."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(PICKLE_SUFFIXES))
    files += sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(".safetensors"))
    if len(files) > 1:
        names = ", ".join(p.name for p in files[:6])
        raise ValueError(f"SOURCE {str(folder)!r}: holds several weight files ({names}): give the file to convert")
    return files[0] if files else None


def read_source(source: str) -> SourceCheckpoint:
    """Read `source`: a local folder (with config.json: a transformers model; without: the single weights file it
    holds), a local weights file, or a Hub repo id (config.json, preprocessor_config.json and safetensors weights are
    downloaded; honours `HF_HUB_OFFLINE`). Returns the `SourceCheckpoint`; `ValueError` naming SOURCE otherwise."""
    text = str(source)
    path = Path(text).expanduser()
    if path.is_file():
        return SourceCheckpoint(text, path, load_weights_file(path), files=[path.name])
    if not path.exists():
        if os.path.isabs(text) or text.startswith((".", "~")) or text.count("/") > 1:
            raise ValueError(f"SOURCE {text!r}: no such file or folder (and not a Hub repo id)")
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(text, allow_patterns=HUB_PATTERNS))
    if not path.is_dir():
        raise ValueError(f"SOURCE {text!r}: not a file or folder")
    config = _read_json(path / "config.json")
    if config is None:
        single = _single_checkpoint_file(path)
        if single is None:
            raise ValueError(
                f"SOURCE {text!r}: the folder has no config.json and no weights file: give a transformers IJepaModel "
                "folder or Meta's I-JEPA checkpoint (.pth.tar)"
            )
        return SourceCheckpoint(text, single, load_weights_file(single), files=[single.name])
    state, files = _folder_weights(path)
    return SourceCheckpoint(text, path, state, config, _read_json(path / "preprocessor_config.json"), files)
