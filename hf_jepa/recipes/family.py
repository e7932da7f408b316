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
    # Data settings only training uses (the checkpoint a run started from, a training stage): `hf-jepa eval DIR` does
    # not reapply them from the folder's saved settings (the folder is the model; a `--set` still gives one).
    training_only_settings: tuple[str, ...] = ()
    # Model types of other saved folders this family evaluates: wrapping model_type -> the sub-config whose model_type
    # must be this family's (e.g. the reasoner+Talker pair, by its `talker_config`).
    also_evaluates: Mapping[str, str] = field(default_factory=dict)

    @property
    def model_type(self) -> str:
        """`config.model_type` of the models this family trains (how `eval` finds the family of a saved folder)."""
        return self.config_class.model_type

    def handles(self, saved_config: Mapping[str, Any]) -> bool:
        """Whether `hf-jepa eval` uses this family for a folder whose config.json holds `saved_config`."""
        model_type = saved_config.get("model_type")
        if model_type == self.model_type:
            return True
        sub_config = self.also_evaluates.get(model_type)
        nested = saved_config.get(sub_config) if sub_config else None
        return isinstance(nested, Mapping) and nested.get("model_type") == self.model_type

    def make_config(self, preset: str | None = None, **overrides):
        """The config of `preset` (tiny | cpu_fast | full; default `default_preset`) with `overrides` on top."""
        preset = self.default_preset if preset is None else str(preset).replace("-", "_")
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r} for {self.name}; choose from {list(PRESETS)}")
        return getattr(self.config_class, preset)(**overrides)

    def make_recipe(self, config, data_args, seed: int = 0):
        return self.recipe_class(config, data_args, seed=seed)

    def recipe_for_saved(self, model, data_args, folder: str):
        """The recipe that evaluates `model`, loaded from `folder` (`hf-jepa eval`): the recipe class's
        `for_saved_model(model, data_args, folder)` when it has one (e.g. a Talker, which needs its reasoner), else
        `make_recipe(model.config, data_args)`."""
        for_saved = getattr(self.recipe_class, "for_saved_model", None)
        if for_saved is not None:
            return for_saved(model, data_args, folder)
        return self.make_recipe(model.config, data_args, seed=0)
