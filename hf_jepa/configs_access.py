"""The config files shipped with hf-jepa: training configs (``<family>/*.yaml``, for ``hf-jepa train FAMILY --config``)
and Accelerate launch configs (``accelerate/*.yaml``, for ``accelerate launch --config_file``).

In a wheel, pyproject maps the repository's top-level ``configs/`` folder to the data package ``hf_jepa.configs``
(``<site-packages>/hf_jepa/configs/``); in a source checkout or an editable install the repository's folder next to
``hf_jepa/`` is used. A config is named by its path relative to that folder, e.g. ``accelerate/cpu_2proc.yaml``.
Torch-free (``hf-jepa configs`` answers without importing torch).
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

__all__ = ["ConfigExistsError", "UnknownConfigError", "config_path", "configs_root", "copy_configs", "list_configs"]

_PACKAGE_DIR = Path(__file__).resolve().parent  # hf_jepa/
_CANDIDATES = (_PACKAGE_DIR / "configs", _PACKAGE_DIR.parent / "configs")  # installed wheel, then source checkout
_SUFFIXES = (".yaml", ".yml")


class UnknownConfigError(ValueError):
    """A config name that is not one of `list_configs()`."""


class ConfigExistsError(FileExistsError):
    """`copy_configs` would overwrite files (pass ``force=True`` to allow it)."""


def configs_root() -> Path:
    """The absolute folder holding the shipped configs."""
    for candidate in _CANDIDATES:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hf-jepa's configs folder is missing (searched {', '.join(map(str, _CANDIDATES))})")


def list_configs() -> list[str]:
    """Every shipped config, as sorted POSIX paths relative to `configs_root()` (``accelerate/cpu_2proc.yaml``)."""
    root = configs_root()
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.suffix in _SUFFIXES and "__pycache__" not in path.parts
    )


def config_path(name: str | None = None) -> Path:
    """The absolute path of config `name` (a name of `list_configs()`, optionally prefixed with ``configs/``), or of
    `configs_root()` when `name` is None.
    An unknown name raises `UnknownConfigError` naming the closest and all valid names."""
    root = configs_root()
    if name is None:
        return root
    names = list_configs()
    normalized = Path(name).as_posix().removeprefix("configs/")  # also the README's repository paths (configs/...)
    if normalized in names:
        return root / normalized
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownConfigError(f"no config {name!r}{hint}; choose from {', '.join(names)}")


def copy_configs(destination: str | Path, force: bool = False) -> list[Path]:
    """Copy every shipped config into `destination` (created if needed), keeping the relative layout; returns the
    written paths. Nothing is written when a file would be overwritten, unless `force` (`ConfigExistsError`)."""
    root, destination = configs_root(), Path(destination)
    if destination.exists() and not destination.is_dir():
        raise NotADirectoryError(f"{destination} exists and is not a folder")
    targets = [(root / name, destination / name) for name in list_configs()]
    existing = [target for _, target in targets if target.exists()]
    if existing and not force:
        shown = ", ".join(str(path) for path in existing[:3]) + (
            f" and {len(existing) - 3} more" if len(existing) > 3 else ""
        )
        raise ConfigExistsError(
            f"{len(existing)} file(s) would be overwritten: {shown}; pass --force to overwrite them"
        )
    for source, target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return [target for _, target in targets]
