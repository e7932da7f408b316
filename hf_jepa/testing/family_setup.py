"""What a family's tests are made of (hf_jepa.testing.family_tester): its variants (`Variant`), the calls it must refuse
(`BadInput`), and each variant's model and saved folders, made once per test class (`SavedFamily`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file
from transformers import pipeline

__all__ = ["BadInput", "SavedFamily", "Variant", "as_variant", "ema_targets", "rewrite_weights", "weights_file"]


@dataclass(frozen=True)
class Variant:
    """One model setup of a family: `model_class` (default: the tester's first) built from its config class's
    `tiny(**overrides)`; `tasks`: the pipeline tasks run on its folder (default: the tester's `pipeline_tasks`);
    `companions`: whether the image processor / tokenizer is saved beside the weights (False: neither the folder nor
    its saved pipeline holds a `preprocessor_config.json`, and the pipelines build their own processor)."""

    overrides: Mapping[str, Any] = field(default_factory=dict)
    model_class: type | None = None
    tasks: tuple[str, ...] | None = None
    companions: bool = True


@dataclass(frozen=True)
class BadInput:
    """A call the model must refuse with `error` whose message names `argument` (and matches `match`).

    The call: `call(model)` if given; else `getattr(model, method)(**kwargs)` with `kwargs = inputs` if given, else the
    variant's `inputs(name)` with `argument` set to `value` (None drops it). `variant`: default the first variant."""

    argument: str
    value: Any = None
    error: type[Exception] = ValueError
    match: str | None = None
    method: str = "__call__"
    inputs: Mapping[str, Any] | None = None
    call: Callable[[Any], Any] | None = None
    variant: str | None = None


def as_variant(spec: Mapping | Variant) -> Variant:
    """A `variants` entry as a Variant (a mapping is the tiny preset's overrides)."""
    return spec if isinstance(spec, Variant) else Variant(overrides=dict(spec))


def ema_targets(model) -> list:
    """The model's EMA target modules (none when it has no `ema_pairs`)."""
    return [target for _, target in model.ema_pairs()] if hasattr(model, "ema_pairs") else []


def weights_file(folder: Path) -> Path:
    """The folder's one safetensors file (tiny models are saved unsharded)."""
    (weights,) = sorted(Path(folder).glob("*.safetensors"))
    return weights


def rewrite_weights(folder: Path, edit: Callable[[dict], None]) -> None:
    """Load the folder's weights, `edit(tensors)` in place, write them back."""
    weights = weights_file(folder)
    tensors = load_file(str(weights))
    edit(tensors)
    save_file(tensors, str(weights), metadata={"format": "pt"})


class SavedFamily:
    """Each variant's in-memory model, its saved folder and its saved pipelines, made once on first use (the
    class-scoped `family` fixture). Tests must leave `model(name)` unchanged (copy it to change it)."""

    def __init__(self, tester: Any, root: Path):  # tester: the FamilyTester whose hooks build and save the models
        self.tester, self.root = tester, Path(root)
        self._models: dict[str, Any] = {}
        self._folders: dict[str, Path] = {}
        self._pipe_folders: dict[tuple[str, str], Path] = {}

    def model(self, name: str):
        if name not in self._models:
            self._models[name] = self.tester.make_model(name).eval()
        return self._models[name]

    def folder(self, name: str) -> Path:
        if name not in self._folders:
            folder = self.root / name
            self.model(name).save_pretrained(folder)
            if self.tester.variant(name).companions:
                self.tester.save_companions(name, folder)
            self._folders[name] = folder
        return self._folders[name]

    def load(self, name: str, **kwargs):
        """A fresh model of variant `name` from its folder (the model class's own `from_pretrained`)."""
        return type(self.model(name)).from_pretrained(self.folder(name), **kwargs)

    def copy_folder(self, name: str, destination: Path) -> Path:
        shutil.copytree(self.folder(name), destination)
        return Path(destination)

    def pipe_folder(self, name: str, task: str) -> Path:
        """`pipeline(task, model=folder).save_pretrained(...)`: the folder a remote-code pipeline user gets."""
        if (name, task) not in self._pipe_folders:
            folder = self.root / f"{name}-pipeline-{task}"
            pipe = pipeline(task, model=str(self.folder(name)))
            pipe.save_pretrained(folder)
            # the live model's config is left as it was (no custom_pipelines leaking into its later saves)
            assert "custom_pipelines" not in pipe.model.config.to_dict(), (name, task)
            if not self.tester.variant(name).companions:  # a folder without processor: the pipeline builds one
                (folder / "preprocessor_config.json").unlink(missing_ok=True)
            self._pipe_folders[name, task] = folder
        return self._pipe_folders[name, task]

    def auto_map(self, name: str) -> dict:
        return json.loads((self.folder(name) / "config.json").read_text())["auto_map"]

    def remote_plan(self, name: str, repo_id: str | None = None) -> dict:
        """This variant's entry of `run_remote_plan`: its folder, or the Hub repo `repo_id` it was pushed to (then
        without pipelines: the pushed folder declares none)."""
        tester, folder = self.tester, self.folder(name)
        has_processor = (folder / "preprocessor_config.json").exists()
        tasks = () if repo_id else tester.tasks(name)
        return {
            "folder": repo_id or str(folder),
            "auto_classes": [key for key in self.auto_map(name) if key != "AutoConfig"],
            "calls": tester.calls(name),
            "processor": tester.processor_inputs(name) if has_processor else None,
            "pipelines": {
                task: {"folder": str(self.pipe_folder(name, task)), "calls": tester.pipeline_calls(name, task)}
                for task in tasks
            },
        }
