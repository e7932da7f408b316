"""The data settings a run trained with, saved beside the weights (`data_args.json`) so that `hf-jepa eval DIR`
rebuilds the same task and data (a reasoner trained on `task=cfg` is evaluated on `cfg`, with its 15-token
vocabulary). Torch-free; a private module, so `load_families` does not take it for a family."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_ARGS_FILE",
    "read_data_settings",
    "read_json_mapping",
    "write_data_settings",
    "write_settings_and_card",
]

DATA_ARGS_FILE = "data_args.json"


def write_data_settings(output_dir: str | Path, data_args: Any) -> None:
    """Write the fields of the data-arguments dataclass `data_args` to `<output_dir>/data_args.json`."""
    values = dataclasses.asdict(data_args) if dataclasses.is_dataclass(data_args) else dict(data_args or {})
    Path(output_dir, DATA_ARGS_FILE).write_text(json.dumps(values, indent=2, default=str) + "\n", encoding="utf-8")


def write_settings_and_card(
    output_dir: str | Path, data_args: Any, render_card, config, metrics: dict, args, **card_options: Any
) -> Path:
    """What every recipe's `save_artifacts` ends with: the data settings (`data_args.json`, from which `hf-jepa eval`
    rebuilds the same data) and the model card `render_card(config, metrics, training_args=args, data_args=data_args,
    **card_options)` saved as `README.md` in `output_dir`. Returns the card's path."""
    write_data_settings(output_dir, data_args)
    card = render_card(config, metrics, training_args=args, data_args=data_args, **card_options)
    path = Path(output_dir) / "README.md"
    card.save(str(path))
    return path


def read_data_settings(folder: str | Path) -> dict[str, Any]:
    """The data settings saved in `folder` ({} for a folder saved before they were, or by another tool). Raises
    `ValueError` naming the file when it is not a JSON mapping."""
    path = Path(folder, DATA_ARGS_FILE)
    if not path.is_file():
        return {}
    return read_json_mapping(path, "mapping of data settings", "delete it or save again")


def read_json_mapping(path: str | Path, what: str, fix: str) -> dict[str, Any]:
    """The JSON object in the file `path`, as a dict. Raises `ValueError` naming the file when it cannot be read or
    parsed ("not a readable JSON `what`", with the parser's reason) or holds something else than a mapping; both
    messages end with `fix`, what the user can do (e.g. "save it again")."""
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable JSON {what} ({' '.join(str(error).split())}); {fix}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: not a JSON mapping (got a {type(values).__name__}); {fix}")
    return values
