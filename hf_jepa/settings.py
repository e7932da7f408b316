"""The settings a family exposes: a config class's own fields and a dataclass's defaults, each with its default.

Used by the CLI to route `--set` keys and YAML settings, and by the model cards' config tables. Imports no torch
(transformers only inside `config_fields`), so `hf-jepa --help` stays light.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

__all__ = ["config_fields", "dataclass_defaults", "field_docs", "settings_table"]


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


# "name (`type`, *optional*, defaults to X): text" (transformers' Args style) or "name: text" / "name, other: text"
_DOC_LINE = re.compile(r"^\s*([a-z_][a-z0-9_]*(?:\s*,\s*[a-z_][a-z0-9_]*)*)\s*(?:\([^)]*\))?\s*:\s+(\S.*)$")


def field_docs(cls) -> dict[str, str]:
    """The first sentence of each field's description in the class docstrings (wrapped lines joined), <= 100 chars."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        current: list[str] | None = None
        names: list[str] = []
        lines = inspect.cleandoc(klass.__doc__ or "").splitlines() + [""]
        for line in lines:
            match = _DOC_LINE.match(line)
            if match or not line.strip():
                if current is not None:
                    text = " ".join(current).split(". ")[0].rstrip(".")
                    for name in names:
                        docs[name] = text if len(text) <= 100 else text[:97].rstrip() + "..."
                current, names = (None, []) if not match else ([match.group(2)], re.split(r"\s*,\s*", match.group(1)))
            elif current is not None:
                current.append(line.strip())
    return docs


def settings_table(targets: dict[str, tuple[type, dict[str, Any]]]) -> str:
    """Plain-text listing of every setting: `targets` maps a prefix (model / train / data) to (class, defaults)."""
    lines = []
    for prefix, (cls, defaults) in targets.items():
        docs = field_docs(cls)
        lines.append(f"{prefix} settings ({cls.__name__}; prefix '{prefix}.' when a name is ambiguous):")
        for name, default in defaults.items():
            doc = f"  {docs[name]}" if name in docs else ""
            lines.append(f"  {name} = {default!r}{doc}")
    return "\n".join(lines)
