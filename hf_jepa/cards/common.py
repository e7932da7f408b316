"""What every family's model card shares: template lookup and rendering, number formatting, and the settings and
run rows each card's tables are built from.

Templates live in the repository's ``model_cards/`` folder, packaged as ``hf_jepa.model_cards`` (see
:func:`template_text`). Only the values actually given in ``metrics`` reach a card: a missing metric is left out
(never filled with a default). The underscore helpers are shared by the family renderers in this package only.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData

from ..settings import config_fields

__all__ = [
    "LIBRARY_NAME",
    "LICENSE",
    "MODEL_ID_PLACEHOLDER",
    "TRAINING_HOUSEKEEPING",
    "template_text",
]

LIBRARY_NAME = "hf-jepa"
LICENSE = "apache-2.0"
# The usage snippet of a card rendered before the model has a Hub id shows this; `hub.push_to_hub` replaces it.
MODEL_ID_PLACEHOLDER = "path/to/hf-jepa-model"
# TrainingArguments fields that describe housekeeping, not the training recipe: left out of the card.
TRAINING_HOUSEKEEPING = {
    "output_dir",
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "resume_from_checkpoint",
    "log_with",
    "disable_progress_bar",
    "save_model",
    "overwrite_output_dir",
    "allow_pickle_checkpoints",
    "resume_allow_changes",
}
_TEMPLATE_PACKAGE = "hf_jepa.model_cards"


# ---------------------------------------------------------------------------------------------------- templates


def _template_dirs() -> list[Path]:
    """Fallback template folders: `<repo>/model_cards` next to the `hf_jepa` source folder (editable installs and
    source checkouts), and `hf_jepa/model_cards` inside the package."""
    package_dir = Path(__file__).resolve().parent.parent  # hf_jepa/
    return [package_dir.parent / "model_cards", package_dir / "model_cards"]


def template_text(name: str) -> str:
    """The text of the card template `name` (e.g. ``"bro_jepa.md"``).

    Looked up as a resource of the ``hf_jepa.model_cards`` package (wheel installs, where pyproject maps
    ``model_cards/`` to it), else in the repository's ``model_cards/`` folder (editable installs, where setuptools'
    editable finder does not expose a data folder without ``__init__.py``)."""
    try:
        candidate = importlib.resources.files(_TEMPLATE_PACKAGE).joinpath(name)
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    for folder in _template_dirs():
        if (folder / name).is_file():
            return (folder / name).read_text(encoding="utf-8")
    searched = [_TEMPLATE_PACKAGE] + [str(d) for d in _template_dirs()]
    raise FileNotFoundError(f"model card template {name!r} not found (searched {searched})")


def _render(template_name: str, card_data: ModelCardData, **variables: Any) -> ModelCard:
    """Render `template_name` with `card_data` as YAML front matter and `variables` for the Jinja body.

    Runs of blank lines left by Jinja blocks are collapsed so that tables and sections stay tidy."""
    card = ModelCard.from_template(card_data, template_str=template_text(template_name), **variables)
    text = re.sub(r"\n{3,}", "\n\n", str(card).strip() + "\n")
    return ModelCard(text)


def _version() -> str:
    """The hf-jepa version the card names."""
    from .. import __version__

    return __version__


# ---------------------------------------------------------------------------------------------------- formatting


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _percent(value: Any) -> str:
    return f"{100.0 * value:.2f}%" if _is_number(value) else "n/a"


def _number(value: Any, digits: int = 4) -> str:
    return f"{value:.{digits}f}"


def _format_value(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return str(value).replace("|", "\\|")


def _as_dict(obj: Any) -> dict[str, Any]:
    """A dataclass instance, a mapping or None as a plain dict."""
    if obj is None:
        return {}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    return dict(vars(obj))


# ---------------------------------------------------------------------------------------------------- shared rows


def _config_rows(config) -> list[tuple[str, str]]:
    """The family's own config fields, in declaration order."""
    return [
        (name, _format_value(getattr(config, name))) for name in config_fields(type(config)) if hasattr(config, name)
    ]


def _data_is_mnist(metrics: Mapping, data_args: Mapping) -> bool:
    """True when the data was MNIST (Hub or a local MNIST folder); False for the embedded digits or when unknown."""
    source = metrics.get("data_source") or data_args.get("data")
    if not source:
        return False
    return not any(word in str(source).lower() for word in ("embedded", "scikit"))


def _run_rows(metrics: Mapping[str, Any], data_label: str = "Data source") -> list[tuple[str, str]]:
    """The rows every family's table ends with: training time, data source, device and hardware (those present)."""
    rows: list[tuple[str, str]] = []
    if _is_number(metrics.get("train_time_s")):
        steps = f" ({metrics['train_steps']} steps)" if metrics.get("train_steps") is not None else ""
        rows.append(("Training time", f"{metrics['train_time_s']:.1f} s{steps}"))
    elif metrics.get("train_steps") is not None:
        rows.append(("Training steps", _format_value(metrics["train_steps"])))
    if metrics.get("data_source"):
        rows.append((data_label, _format_value(metrics["data_source"])))
    if metrics.get("device"):
        processes = metrics.get("num_processes")
        suffix = f" × {processes} process{'es' if processes != 1 else ''}" if processes is not None else ""
        rows.append(("Device", f"{metrics['device']}{suffix}"))
    if metrics.get("hardware"):
        rows.append(("Hardware", _format_value(metrics["hardware"])))
    if metrics.get("skipped_steps"):
        rows.append(("Skipped steps (non-finite loss)", _format_value(metrics["skipped_steps"])))
    if metrics.get("settings_changed_on_resume"):
        rows.append(("Settings changed on resume", _format_value(metrics["settings_changed_on_resume"])))
    return rows


def _training_rows(training: Mapping, metrics: Mapping) -> list[tuple[str, str]]:
    """The training settings minus housekeeping, plus the effective batch size when the process count is known."""
    rows = [(k, _format_value(v)) for k, v in training.items() if k not in TRAINING_HOUSEKEEPING]
    if training and metrics.get("num_processes") is not None:
        effective = (training.get("per_device_batch_size") or 0) * (training.get("gradient_accumulation_steps") or 1)
        rows.append(("effective batch size", str(effective * int(metrics["num_processes"]))))
    return rows


def _settings_rows(training: Mapping, data: Mapping, metrics: Mapping) -> tuple[list, list]:
    """(training rows, data rows): the training settings as in `_training_rows` (the effective batch size only when
    `per_device_batch_size` is set), and every data setting except `plot`."""
    training_rows = [(k, _format_value(v)) for k, v in training.items() if k not in TRAINING_HOUSEKEEPING]
    if training.get("per_device_batch_size") and metrics.get("num_processes") is not None:
        effective = training["per_device_batch_size"] * (training.get("gradient_accumulation_steps") or 1)
        training_rows.append(("effective batch size", str(effective * int(metrics["num_processes"]))))
    data_rows = [(k, _format_value(v)) for k, v in data.items() if k != "plot"]
    return training_rows, data_rows


def _reproduction_summary(reproduction: Any) -> Mapping[str, Any] | None:
    """The summary of a reproduction given to a card: the `.summary` of a `ReproductionResult` (or anything shaped
    like one), or a plain mapping as it is."""
    return getattr(reproduction, "summary", reproduction)
