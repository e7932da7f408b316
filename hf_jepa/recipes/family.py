"""`Family`: how the CLI drives one trainable model family. Each recipe module exports its families in `FAMILIES`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PRESETS = ("tiny", "cpu_fast", "full")  # classmethods of every config class, each taking **overrides


@dataclass(frozen=True)
class Family:
    """A trainable family: its config, data arguments and recipe classes, the `TrainingArguments` values it trains with
    by default, and how `hf-jepa train`/`eval` print its metrics (`result_rows(metrics) -> [(name, value)]`, and
    optionally a further markdown table)."""

    name: str
    config_class: type
    data_args_class: type
    recipe_class: type  # called as recipe_class(config, data_args, seed=...)
    training_defaults: Mapping[str, Any] = field(default_factory=dict)
    result_rows: Callable[[Mapping[str, Any]], list[tuple[str, str]]] | None = None
    extra_table: Callable[[Mapping[str, Any]], str] | None = None  # markdown printed after the rows, "" for none
    default_preset: str = "cpu_fast"

    @property
    def model_type(self) -> str:
        """`config.model_type` of the models this family trains (how `eval` finds the family of a saved folder)."""
        return self.config_class.model_type

    def make_config(self, preset: str | None = None, **overrides):
        """The config of `preset` (tiny | cpu_fast | full; default `default_preset`) with `overrides` on top."""
        preset = self.default_preset if preset is None else str(preset).replace("-", "_")
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r} for {self.name}; choose from {list(PRESETS)}")
        return getattr(self.config_class, preset)(**overrides)

    def make_recipe(self, config, data_args, seed: int = 0):
        return self.recipe_class(config, data_args, seed=seed)
