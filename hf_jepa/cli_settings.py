"""How `hf-jepa` reads settings: the family registry, ``--set KEY=VALUE`` and YAML values, and their routing by name to
the family's model config, the shared `TrainingArguments` or the family's data arguments (a ``model.``, ``train.`` or
``data.`` prefix picks the target explicitly). Nothing heavy (torch, transformers) is imported here at module level."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli_errors import CliError, yaml_error_message

if TYPE_CHECKING:
    from .recipes.family import Family

__all__ = [
    "TrainSetup",
    "build_train_setup",
    "coerce",
    "families",
    "family_by_name",
    "parse_overrides",
    "read_yaml",
    "type_annotations",
]


def families() -> dict[str, Family]:
    """The registry: every family the recipe modules export (`hf_jepa.recipes.load_families`), loaded once."""
    global _FAMILIES
    if _FAMILIES is None:
        from .recipes import load_families

        _FAMILIES = load_families()
    return _FAMILIES


_FAMILIES: dict[str, Family] | None = None


# ---------------------------------------------------------------------------------------------------- settings


def family_by_name(name: str) -> Family:
    """The registered family called `name` (a `CliError` listing the available ones otherwise)."""
    registry = families()
    if name not in registry:
        raise CliError(f"unknown family {name!r}; available: {sorted(registry)}")
    return registry[name]


def _parse_value(text: str) -> Any:
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    # YAML 1.2 booleans only: `mixed_precision=no` is the string "no", not YAML 1.1's False.
    if isinstance(value, bool) and text.strip().lower() not in ("true", "false"):
        return text.strip()
    return value


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b=[1, 2]"]`` -> ``{"a": 1, "b": [1, 2]}`` (values read as YAML)."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set expects key=value, got {item!r} (e.g. --set max_steps=100)")
        overrides[key.strip()] = _parse_value(value)
    return overrides


def type_annotations(cls) -> dict[str, str]:
    """Field name -> annotation text, from `__init__` parameters and dataclass fields."""
    out: dict[str, str] = {}
    if dataclasses.is_dataclass(cls):
        out.update({f.name: str(f.type) for f in dataclasses.fields(cls)})
    for p in inspect.signature(cls.__init__).parameters.values():
        if p.annotation is not inspect.Parameter.empty:
            out[p.name] = str(p.annotation)
    return out


def coerce(key: str, value: Any, default: Any, annotation: str = "") -> Any:
    """Fix what YAML reads differently from what the field holds: `1e-3` (a string for YAML 1.1) for a float,
    an int for a float field, a whole float for an int field. A boolean or a fraction for a number field is refused
    (`max_steps=true`, `max_steps=1.5`). Other values pass unchanged (the target classes validate them)."""
    if value is None or isinstance(default, bool):
        return value
    wants_float = isinstance(default, float) or (default is None and "float" in annotation)
    wants_int = (isinstance(default, int) or (default is None and "int" in annotation)) and not wants_float
    if isinstance(value, bool):
        if (wants_float or wants_int) and "bool" not in annotation:
            raise CliError(f"{key} expects {'a number' if wants_float else 'an integer'}, got {str(value).lower()}")
        return value
    if wants_int and isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise CliError(f"{key} expects an integer, got {value!r}")
    if wants_float and isinstance(value, (int, str)):
        try:
            return float(value)
        except ValueError:
            if isinstance(default, float) or "str" not in annotation:
                raise CliError(f"{key} expects a number, got {value!r}") from None
    if wants_int and isinstance(value, str):
        try:
            as_float = float(value)
        except ValueError:
            if "str" in annotation:
                return value
            raise CliError(f"{key} expects an integer, got {value!r}") from None
        if as_float.is_integer():
            return int(as_float)
        raise CliError(f"{key} expects an integer, got {value!r}")
    return value


@dataclass
class TrainSetup:
    """Everything `hf-jepa train` builds before training."""

    family: Family
    preset: str
    config: Any
    training_args: Any
    data_args: Any
    routed: dict[str, str] = field(default_factory=dict)  # key -> "model" | "train" | "data"


_TARGET_PREFIXES = {"model": "model", "config": "model", "train": "train", "training": "train", "data": "data"}


def build_train_setup(family_name: str, settings: Mapping[str, Any]) -> TrainSetup:
    """Route flat `settings` (YAML file merged with --set) to the config, TrainingArguments and data arguments.

    Raises `CliError` for an unknown family, preset or key (the message lists the valid keys) and for a key that two
    targets share without a ``model.``/``train.``/``data.`` prefix."""
    from .settings import config_fields, dataclass_defaults
    from .trainers.trainer import TrainingArguments

    family = family_by_name(family_name)
    targets = {
        "model": config_fields(family.config_class),
        "train": dataclass_defaults(TrainingArguments),
        "data": dataclass_defaults(family.data_args_class),
    }
    annotations = {
        "model": type_annotations(family.config_class),
        "train": type_annotations(TrainingArguments),
        "data": type_annotations(family.data_args_class),
    }
    settings = dict(settings)
    preset = settings.pop("preset", None)
    values: dict[str, dict[str, Any]] = {name: {} for name in targets}
    routed: dict[str, str] = {}
    for raw_key, value in settings.items():
        key = str(raw_key).replace("-", "_")
        prefix, dot, rest = key.partition(".")
        if dot and prefix in _TARGET_PREFIXES:
            target = _TARGET_PREFIXES[prefix]
            if rest not in targets[target]:
                raise CliError(_unknown_key_message(raw_key, targets, family, only=target))
            key, matches = rest, [target]
        else:
            matches = [name for name, names in targets.items() if key in names]
        if not matches:
            raise CliError(_unknown_key_message(raw_key, targets, family))
        if len(matches) > 1:
            raise CliError(f"setting {raw_key!r} exists in {matches}: write e.g. {matches[0]}.{key}=...")
        target = matches[0]
        values[target][key] = coerce(key, value, targets[target][key], annotations[target].get(key, ""))
        routed[key] = target
    try:
        config = family.make_config(preset, **values["model"])
        training_args = TrainingArguments(**{**family.training_defaults, **values["train"]})
        data_args = family.data_args_class(**values["data"])
    except (TypeError, ValueError) as error:
        raise CliError(str(error)) from error
    preset_name = family.default_preset if preset is None else str(preset).replace("-", "_")
    return TrainSetup(family, preset_name, config, training_args, data_args, routed)


def _unknown_key_message(
    key: str, targets: Mapping[str, Mapping[str, Any]], family: Family, only: str | None = None
) -> str:
    from .recipes.family import PRESETS

    labels = {"model": "model config", "train": "training", "data": "data"}
    known = sorted({k for name, names in targets.items() if only is None or name == only for k in names})
    close = difflib.get_close_matches(key.rpartition(".")[2], known, n=1)
    parts = [f"unknown setting {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "") + "; valid keys:"]
    parts += [
        f"{labels[name]} ({name}.): {', '.join(sorted(names))};"
        for name, names in targets.items()
        if only is None or name == only
    ]
    if only is None:
        parts.append(f"preset: {' | '.join(PRESETS)} (default {family.default_preset})")
    return " ".join(parts).rstrip(";")


def read_yaml(path: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"--config {path}: cannot read it ({error.strerror or error}); check the path") from error
    except UnicodeDecodeError as error:
        raise CliError(f"--config {path}: not a text file ({error.reason}); give a YAML file of settings") from error
    except yaml.YAMLError as error:
        raise CliError(yaml_error_message(path, error)) from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(f"--config {path}: must hold a mapping of settings (key: value), got a {type(data).__name__}")
    flat: dict[str, Any] = {}
    for key, value in data.items():  # sections `model:`, `train:`, `data:` (mappings) become prefixed keys
        if key in _TARGET_PREFIXES and isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat
