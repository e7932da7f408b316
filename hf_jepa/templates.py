"""Card templates shipped with hf-jepa: model cards (`model_cards/`) and dataset cards (`dataset_cards/`).

In a wheel, pyproject maps each top-level folder to a data package (`hf_jepa.model_cards`, `hf_jepa.dataset_cards`);
in an editable install or a source checkout setuptools' editable finder does not expose a data folder without
`__init__.py`, so the repository's folder next to `hf_jepa/` is read instead."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

TEMPLATE_FOLDERS = ("model_cards", "dataset_cards")


def _fallback_dirs(folder: str) -> list[Path]:
    package_dir = Path(__file__).resolve().parent  # hf_jepa/
    return [package_dir.parent / folder, package_dir / folder]


def read_template(folder: str, name: str) -> str:
    """The text of template `name` (e.g. ``"bro_jepa.md"``) from `folder` (one of `TEMPLATE_FOLDERS`)."""
    if folder not in TEMPLATE_FOLDERS:
        raise ValueError(f"folder must be one of {TEMPLATE_FOLDERS}, got {folder!r}")
    package = f"hf_jepa.{folder}"
    try:
        candidate = importlib.resources.files(package).joinpath(name)
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    for directory in _fallback_dirs(folder):
        if (directory / name).is_file():
            return (directory / name).read_text(encoding="utf-8")
    searched = [package] + [str(d) for d in _fallback_dirs(folder)]
    kind = folder.removesuffix("s").replace("_", " ")
    raise FileNotFoundError(f"{kind} template {name!r} not found (searched {searched})")


__all__ = ["TEMPLATE_FOLDERS", "read_template"]
