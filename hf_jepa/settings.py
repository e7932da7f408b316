"""The settings a family exposes: a config class's own fields and a dataclass's defaults, each with its default.

Used by the CLI to route `--set` keys and YAML settings, and by the model cards' config tables. Imports no torch
(transformers only inside `config_fields`), so `hf-jepa --help` stays light.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

__all__ = ["config_fields", "dataclass_defaults"]


def config_fields(config_class) -> dict[str, Any]:
    """A family config's own settings -> their defaults, in declaration order.

    Works for both config styles of transformers 5: keyword `__init__` parameters and annotated dataclass fields.
    `PretrainedConfig`'s generic fields (`dtype`, `id2label`, ...) are left out."""
    from transformers import PretrainedConfig

    base = (
        {f.name for f in dataclasses.fields(PretrainedConfig)} if dataclasses.is_dataclass(PretrainedConfig) else set()
    )
    if issubclass(config_class, PretrainedConfig):
        base |= set(inspect.signature(PretrainedConfig.__init__).parameters)
    out: dict[str, Any] = {}
    for p in inspect.signature(config_class.__init__).parameters.values():
        if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in base:
            out[p.name] = None if p.default is inspect.Parameter.empty else p.default
    if dataclasses.is_dataclass(config_class):
        for name, default in dataclass_defaults(config_class).items():
            if name not in base and name not in out:
                out[name] = default
    return out


def dataclass_defaults(cls) -> dict[str, Any]:
    """Each field of a dataclass -> its default (`None` when it has none)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            out[f.name] = None
    return out
