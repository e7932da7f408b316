"""A user's own data as `datasets` objects: a Hub dataset id or local files, in memory or streamed, with the user's
column names checked and renamed to the names the recipes read (`image`, `label`, `text`).

Local sources (`open_source`):
- a `save_to_disk` folder (a `Dataset` or a `DatasetDict`);
- a folder that `datasets.load_dataset(folder)` understands: parquet / arrow / csv / json(l) files, text files (one
  example per line, column `text`), or an imagefolder (images, optionally in one sub-folder per class: column
  `label`); files or sub-folders named after splits (`train`, `test`, `validation`) become those splits;
- a single `.parquet`, `.arrow`, `.csv`, `.json`/`.jsonl` or `.txt` file (one split, `train`).
Anything else that looks like `namespace/name` is a Hub dataset id (refused at once when offline).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import datasets
from datasets import DatasetDict, IterableDatasetDict

from .sources import is_offline

# The `datasets` builder of a single local file, by suffix.
FILE_BUILDERS = {
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".txt": "text",
}
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def _as_dict(loaded, streaming: bool):
    """`loaded` (Dataset, DatasetDict or their iterable forms) as a (Iterable)DatasetDict."""
    if isinstance(loaded, (DatasetDict, IterableDatasetDict)):
        return loaded
    if streaming and isinstance(loaded, datasets.Dataset):
        loaded = loaded.to_iterable_dataset()
    return (IterableDatasetDict if streaming else DatasetDict)(train=loaded)


def _from_disk(path: Path, streaming: bool):
    loaded = datasets.load_from_disk(str(path))
    if not streaming:
        return _as_dict(loaded, False)
    splits = loaded if isinstance(loaded, DatasetDict) else {"train": loaded}
    # Several shards let `split_dataset_by_node` hand whole shards to processes instead of striding examples.
    return IterableDatasetDict(
        {name: split.to_iterable_dataset(num_shards=max(1, min(16, len(split)))) for name, split in splits.items()}
    )


def open_source(source: str | os.PathLike, streaming: bool = False, argument: str = "data"):
    """`source` as a `DatasetDict` (or an `IterableDatasetDict` when `streaming`), one entry per split.

    `argument` names the setting in error messages. Raises `FileNotFoundError` for a path that is neither a file nor a
    folder nor a Hub id, `ValueError` for an unsupported file type, `RuntimeError` for a Hub id while offline."""
    text = os.fspath(source)
    path = Path(text).expanduser()
    if path.is_dir():
        if (path / "dataset_dict.json").exists() or (path / "state.json").exists():
            return _from_disk(path, streaming)
        try:
            return _as_dict(datasets.load_dataset(str(path), streaming=streaming), streaming)
        except (FileNotFoundError, ValueError) as error:
            raise ValueError(
                f"{argument}={text!r}: this folder holds no data files datasets can read (parquet, arrow, csv, "
                f"json, txt or images) nor a save_to_disk dataset ({error})"
            ) from error
    if path.is_file():
        suffix = next((s for s in FILE_BUILDERS if path.name.lower().endswith(s)), None)
        if suffix is None:
            raise ValueError(
                f"{argument}={text!r}: unsupported file type; use {', '.join(FILE_BUILDERS)}, a folder of data files "
                "or images, a save_to_disk folder, or a Hub dataset id"
            )
        loaded = datasets.load_dataset(FILE_BUILDERS[suffix], data_files={"train": str(path)}, streaming=streaming)
        return _as_dict(loaded, streaming)
    if _REPO_ID.fullmatch(text) and not text.startswith((".", "/", "~")):
        if is_offline():
            raise RuntimeError(
                f"{argument}={text!r} is not a local path, and as a Hub dataset id it cannot be loaded while "
                "HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set"
            )
        return _as_dict(datasets.load_dataset(text, streaming=streaming), streaming)
    raise FileNotFoundError(f"{argument}={text!r} does not exist as a file or folder and is not a Hub dataset id")


def column_names(split) -> list[str] | None:
    """The columns of a split (None for a stream whose features are unknown until read)."""
    names = split.column_names
    if names is None and getattr(split, "features", None) is not None:
        names = list(split.features)
    return names


def rename_columns(dataset_dict, columns: dict[str, str | None], required: tuple[str, ...] = ()):
    """Rename the user's columns to the names the recipes read and drop the others.

    `columns` maps a standard name (`image`, `label`, `text`) to the user's column, given by the setting
    `<standard>_column` (None: not used). A missing column raises `ValueError` naming that setting, the columns the
    source has, and the split; a missing optional column (not in `required`) is dropped from the mapping."""
    wanted = {standard: user for standard, user in columns.items() if user}
    renamed = {}
    for split_name, split in dataset_dict.items():
        names = column_names(split)
        present = dict(wanted)
        if names is not None:
            for standard, user in wanted.items():
                if user not in names:
                    if standard in required:
                        raise ValueError(
                            f"{standard}_column={user!r}: split {split_name!r} has no {user!r} column; its columns are "
                            f"{names}"
                        )
                    present.pop(standard)
            split = split.select_columns(list(present.values()))
        for standard, user in present.items():
            if user != standard:
                split = split.rename_column(user, standard)
        renamed[split_name] = split
    return type(dataset_dict)(renamed)


__all__ = ["FILE_BUILDERS", "column_names", "open_source", "rename_columns"]
