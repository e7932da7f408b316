"""Validation shared by the recipes' data-argument dataclasses (their `__post_init__`): types read from the field
annotations, ranges, choices and model folders. Every message names the field (its YAML key / ``--set`` name) and what
is accepted. Torch-free; a private module, so `load_families` does not take it for a family."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import re
import types
import typing
from pathlib import Path
from typing import Any

__all__ = ["check_choice", "check_count", "check_finite", "check_model_folder", "check_types"]

_EXPECTED = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}
# `name` or `namespace/name`: what a Hub repo id looks like (anything else that is not an existing folder is a path).
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def check_types(args: Any) -> None:
    """Check every field of the dataclass instance `args` against its annotation when that is built from int, float,
    bool, str and None (other annotations are left to the range checks). An integral number is accepted for a float
    field and stored as float, a path for a str field and stored as str; a bool is never taken for a number. Raises
    `TypeError` naming the field."""
    for field in dataclasses.fields(args):
        allowed = _type_names(field.type)
        if not all(part in _EXPECTED for part in allowed):
            continue
        value = getattr(args, field.name)
        if value is None and "None" in allowed or isinstance(value, bool) and "bool" in allowed:
            continue
        if not isinstance(value, bool):
            if "int" in allowed and isinstance(value, numbers.Integral):
                setattr(args, field.name, int(value))
                continue
            if "float" in allowed and isinstance(value, numbers.Real):
                setattr(args, field.name, float(value))
                continue
        if "str" in allowed and isinstance(value, (str, os.PathLike)):
            setattr(args, field.name, os.fspath(value))
            continue
        expected = " or ".join(_EXPECTED[part] for part in allowed)
        raise TypeError(f"{field.name} must be {expected}, got {value!r} ({type(value).__name__})")


def _type_names(annotation: Any) -> list[str]:
    """`int` -> ["int"], `str | None` (or the string "str | None") -> ["str", "None"]."""
    if isinstance(annotation, str):
        return [part.strip() for part in annotation.split("|")]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [name for arg in typing.get_args(annotation) for name in _type_names(arg)]
    return ["None" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))]


def check_count(args: Any, name: str, minimum: int = 1, zero_means: str | None = None) -> None:
    """`args.<name>` must be an integer >= `minimum`, or 0 when `zero_means` says what 0 stands for (e.g. "all")."""
    value = getattr(args, name)
    if value == 0 and zero_means is not None:
        return
    if value < minimum:
        zero = f" (or 0 = {zero_means})" if zero_means is not None else ""
        raise ValueError(f"{name} must be an integer >= {minimum}{zero}, got {value!r}")


def check_finite(args: Any, *names: str) -> None:
    """Each `args.<name>` must be a finite number (no nan / inf)."""
    for name in names:
        if not math.isfinite(getattr(args, name)):
            raise ValueError(f"{name} must be a finite number, got {getattr(args, name)!r}")


def check_choice(args: Any, name: str, choices) -> None:
    value = getattr(args, name)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def check_model_folder(args: Any, name: str, model_type: str, made_by: str) -> None:
    """`args.<name>` (None, a saved model folder or a Hub repo id) must not name a missing folder, a file or a folder of
    another model type. `made_by` says where such a folder comes from, e.g. "the output folder of `hf-jepa train
    jepa-reasoner`". A value shaped like a repo id (``name`` or ``org/name``) that is not a local folder is left to the
    loader (it is looked up on the Hub)."""
    value = getattr(args, name)
    if value is None:
        return
    text = str(value)
    path = Path(text).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ValueError(f"{name}: folder {text!r} has no config.json, so it holds no saved model; give {made_by}")
        try:
            found = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError, AttributeError) as error:
            raise ValueError(f"{name}: cannot read {str(config)!r} ({error}); give {made_by}") from error
        if found != model_type:
            raise ValueError(
                f"{name}: folder {text!r} holds a model of type {found!r}, but one of type {model_type!r} is expected; "
                f"give {made_by}"
            )
    elif path.exists():
        raise ValueError(f"{name}: {text!r} is a file, not a model folder; give {made_by}")
    elif os.path.isabs(text) or text.startswith((".", "~")) or not _REPO_ID.fullmatch(text):
        raise ValueError(f"{name}: folder {text!r} does not exist; give {made_by}")
