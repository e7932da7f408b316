"""Checkpoints: written atomically, found by step, loaded without unpickling anything.

Layout of `output_dir/checkpoints/checkpoint-<step>` (`<step>` = optimiser steps done):

| file | what |
|---|---|
| `model.safetensors` | the model's state dict (`safetensors.torch.save_model`: shared tensors once) |
| `optimizer.safetensors` + `.json` | the optimiser's state dict: tensors flattened, the rest (param groups) as JSON |
| `trainer_state.safetensors` + `.json` | loop step, cumulative training time, skipped steps, the log so far, resumes, the scheduler's (and fp16 scaler's) state |
| `rng_state_<rank>.safetensors` + `.json` | each process's torch / numpy / python (/ cuda) random states |
| `recipe_state.safetensors` | the recipe's extra state (`Recipe.checkpoint_state`, e.g. EPM's experience buffer); only if any |
| `settings.json` | the run's settings: `train` (TrainingArguments), `model` (config), `data` (data arguments) |
| `checkpoint.json` | the completeness marker, written last: step, time, settings hash, every file with its size |

A checkpoint is written into `checkpoints/.tmp-checkpoint-<step>` and renamed when complete, so a crash leaves at most a
`.tmp-*` folder, never a checkpoint that looks complete. Rotation (`save_total_limit`) runs after the rename and keeps
the new checkpoint. Nothing here calls `pickle`/`torch.load`; a folder with pickle files is refused unless
`allow_pickle_checkpoints=True` (then only accelerate's own `load_state` reads it, see `trainer.py`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from .arguments import TrainingArguments

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
MARKER = "checkpoint.json"
FORMAT = "hf-jepa-checkpoint"
PICKLE_SUFFIXES = (".pkl", ".pickle", ".bin", ".pt", ".pth")
_NAME = re.compile(r"^checkpoint-(\d+)$")
# TrainingArguments fields that do not change what is trained (left out of the settings comparison and hash).
BOOKKEEPING_FIELDS = frozenset(
    {
        "output_dir",
        "overwrite_output_dir",
        "resume_from_checkpoint",
        "resume_allow_changes",
        "allow_pickle_checkpoints",
        "logging_steps",
        "save_steps",
        "save_total_limit",
        "log_with",
        "disable_progress_bar",
        "save_model",
        # recomputes the same activations (random state restored for dropout): memory, not results; turning it on
        # to get past an out-of-memory error must not block a resume
        "gradient_checkpointing",
    }
)


# ------------------------------------------------------------------------------------------- state <-> files


def _encode(value: Any, key: str, tensors: dict[str, torch.Tensor]) -> Any:
    """`value` as JSON, its tensors (and numpy arrays) moved into `tensors` under path-like keys."""
    if isinstance(value, torch.Tensor):
        tensors[key] = value.detach().cpu().contiguous().clone()
        return {"__tensor__": key}
    if isinstance(value, np.ndarray):
        tensors[key] = torch.from_numpy(value.astype(np.int64) if value.dtype.kind in "ui" else value.copy())
        return {"__ndarray__": key, "dtype": str(value.dtype)}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, f"{key}.{i}", tensors) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{key}.{i}", tensors) for i, v in enumerate(value)]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _encode(v, f"{key}.{k}", tensors) for k, v in value.items()}
        return {"__items__": [[k, _encode(v, f"{key}.{k}", tensors)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"cannot store a {type(value).__name__} in a checkpoint (at {key})")


def _decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if isinstance(value, dict):
        if "__tensor__" in value:
            return tensors[value["__tensor__"]]
        if "__ndarray__" in value:
            return tensors[value["__ndarray__"]].numpy().astype(value["dtype"])
        if "__tuple__" in value:
            return tuple(_decode(v, tensors) for v in value["__tuple__"])
        if "__items__" in value:
            return {k: _decode(v, tensors) for k, v in value["__items__"]}
        return {k: _decode(v, tensors) for k, v in value.items()}
    return value


def save_state_files(folder: Path, name: str, state: Any) -> None:
    """`state` (nested dicts/lists/tuples of tensors, arrays and JSON values) as `name.json` (+ `name.safetensors`)."""
    tensors: dict[str, torch.Tensor] = {}
    skeleton = _encode(state, name, tensors)
    if tensors:
        save_file(tensors, str(folder / f"{name}.safetensors"))
    (folder / f"{name}.json").write_text(json.dumps(skeleton))


def load_state_files(folder: Path, name: str) -> Any:
    tensor_file = folder / f"{name}.safetensors"
    tensors = load_file(str(tensor_file)) if tensor_file.exists() else {}
    return _decode(json.loads((folder / f"{name}.json").read_text()), tensors)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -------------------------------------------------------------------------------------------------- settings


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def run_settings(args_dict: dict, config, data_args: dict) -> dict[str, dict]:
    """The settings that define a run, as JSON: TrainingArguments, the model config, the data arguments."""
    config_dict = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    model = {k: v for k, v in config_dict.items() if not k.startswith("_") and k != "transformers_version"}
    return _json_safe({"train": args_dict, "model": model, "data": data_args})


def settings_hash(settings: dict[str, dict]) -> str:
    relevant = {**settings, "train": {k: v for k, v in settings["train"].items() if k not in BOOKKEEPING_FIELDS}}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def settings_differences(saved: dict[str, dict], current: dict[str, dict]) -> dict[str, list]:
    """`{"section.name": [in the checkpoint, now]}` for every setting that changes the run.

    A training argument the checkpoint does not have (it was added by a later hf-jepa) is no difference while it keeps
    its default: a new argument's default keeps the earlier behaviour."""
    train_defaults = {field.name: field.default for field in dataclasses.fields(TrainingArguments)}
    differences = {}
    for section in ("train", "model", "data"):
        old, new = saved.get(section, {}), current.get(section, {})
        for name in sorted(set(old) | set(new)):
            if section == "train" and name in BOOKKEEPING_FIELDS:
                continue
            if section == "train" and name not in old and new.get(name) == _json_safe(train_defaults.get(name)):
                continue
            if old.get(name, "<unset>") != new.get(name, "<unset>"):
                differences[f"{section}.{name}"] = [old.get(name, "<unset>"), new.get(name, "<unset>")]
    return differences


def disallowed(differences: dict[str, list], allowed: bool | list[str] | None) -> list[str]:
    """The differences `resume_allow_changes` does not allow (a bare name allows it in any section)."""
    if allowed is True:
        return []
    names = set(allowed or [])
    return [key for key in differences if key not in names and key.split(".", 1)[1] not in names]


def format_differences(differences: dict[str, list], keys: list[str] | None = None) -> str:
    return "\n".join(
        f"  {k}: {differences[k][0]!r} in the checkpoint, {differences[k][1]!r} now" for k in keys or differences
    )


def describe_changes(resumes: list[dict]) -> str:
    """The settings changed at each resume, as one line for the card ("" when none)."""
    return "; ".join(
        f"step {r['step']}: " + ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in r["changes"].items())
        for r in resumes
        if r.get("changes")
    )


def apply_hyperparameters(optimizer, scheduler, fresh_groups: list[dict]) -> None:
    """After loading a checkpoint's optimiser and scheduler state, put back this run's (allowed, changed) settings:
    each group's hyperparameters from `fresh_groups`, the base learning rates, and the learning rate of the current
    step under this run's schedule."""
    for group, fresh in zip(optimizer.param_groups, fresh_groups):
        group.update({k: v for k, v in fresh.items() if k != "lr"})
    scheduler.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
    for group, base, schedule in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * schedule(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


# ------------------------------------------------------------------------------------------ finding checkpoints


def checkpoint_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / CHECKPOINTS


def incomplete_reason(folder: Path) -> str | None:
    """Why `folder` is not a complete hf-jepa checkpoint, or None when it is."""
    marker = folder / MARKER
    if not marker.is_file():
        return f"no {MARKER} (the write did not finish, or it is not an hf-jepa checkpoint)"
    try:
        info = json.loads(marker.read_text())
        files = dict(info["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MARKER} is unreadable"
    if info.get("format") != FORMAT:
        return f"{MARKER} is not an hf-jepa checkpoint marker"
    for name, size in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, the marker says {size}"
    return None


def pickle_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in PICKLE_SUFFIXES)


def complete_checkpoints(output_dir: str | Path, warn: bool = False) -> list[tuple[int, Path]]:
    """(step, folder) of the complete checkpoints under `output_dir/checkpoints`, lowest step first."""
    root = checkpoint_root(output_dir)
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        match = _NAME.match(folder.name)
        if not folder.is_dir() or not (match or folder.name.startswith(".tmp-checkpoint-")):
            continue
        reason = incomplete_reason(folder) if match else "an unfinished write"
        if reason is None:
            found.append((int(match.group(1)), folder))
        elif warn:
            logger.warning("Skipping incomplete checkpoint %s: %s", folder, reason)
    return sorted(found, key=lambda item: item[0])


def resolve_checkpoint(spec: str, output_dir: str | Path, allow_pickle: bool) -> tuple[Path, bool]:
    """The checkpoint folder `resume_from_checkpoint` names, and whether it is a legacy (pickle) accelerate one.

    Raises `ValueError` with what to do for a missing, incomplete or pickle-holding checkpoint."""
    if spec == "latest":
        found = complete_checkpoints(output_dir, warn=True)
        if not found:
            raise ValueError(
                f"resume_from_checkpoint='latest': no complete checkpoint in {checkpoint_root(output_dir)}. "
                "Start a new run (without resume_from_checkpoint), or pass the path of a checkpoint folder."
            )
        folder = found[-1][1]
    else:
        folder = Path(spec)
        if not folder.is_dir():
            what = "is a file, not a checkpoint folder" if folder.exists() else "does not exist"
            raise ValueError(f"resume_from_checkpoint {folder} {what}: pass a checkpoint folder or 'latest'")
    pickles = pickle_files(folder)
    if pickles and not allow_pickle:
        raise ValueError(
            f"resume_from_checkpoint {folder} holds pickle files ({', '.join(pickles[:4])}): loading them can run "
            "arbitrary code, so it is refused. Resume from an hf-jepa checkpoint (safetensors + JSON), or set "
            "allow_pickle_checkpoints=True if you wrote this checkpoint yourself (unsafe for anything downloaded)."
        )
    reason = incomplete_reason(folder)
    if reason is None:
        return folder, False
    if pickles:  # allowed by the user: accelerate's own `save_state` format
        logger.warning("Loading %s with pickle (allow_pickle_checkpoints=True): this runs code stored in it", folder)
        return folder, True
    raise ValueError(
        f"resume_from_checkpoint {folder} is incomplete ({reason}): use resume_from_checkpoint=latest to pick the "
        "newest complete checkpoint"
    )


# ------------------------------------------------------------------------------------------------- writing


def begin_checkpoint(output_dir: str | Path, step: int) -> Path:
    """(Main process) an empty temporary folder for the checkpoint of `step`; leftovers of crashed writes go."""
    root = checkpoint_root(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    for leftover in list(root.glob(".tmp-checkpoint-*")) + list(root.glob(".old-checkpoint-*")):
        shutil.rmtree(leftover, ignore_errors=True)
    folder = root / f".tmp-checkpoint-{step}"
    folder.mkdir()
    return folder


def write_main_files(folder: Path, model, optimizer_state: dict, trainer_state: dict, recipe_state: dict, settings):
    """(Main process) everything but the per-process random states."""
    from safetensors.torch import save_model

    from .sharding import refuse_dtensors

    refuse_dtensors(model.state_dict(), f"checkpoint {folder}")
    refuse_dtensors(optimizer_state.get("state", {}), f"checkpoint {folder} (optimizer)")
    save_model(model, str(folder / "model.safetensors"))
    save_state_files(folder, "optimizer", optimizer_state)
    save_state_files(folder, "trainer_state", trainer_state)
    if recipe_state:
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in recipe_state.items()},
            str(folder / "recipe_state.safetensors"),
        )
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def finish_checkpoint(folder: Path, step: int, settings: dict, save_total_limit: int | None) -> Path:
    """(Main process) write the marker, rename the folder into place, then rotate. Returns the final folder."""
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}
    for name in files:  # the data on disk before the marker says it is complete (a power loss, not only a kill)
        with open(folder / name, "rb") as handle:
            os.fsync(handle.fileno())
    marker = {"format": FORMAT, "version": 1, "step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    marker.update(settings_hash=settings_hash(settings), files=files)
    with open(folder / MARKER, "w") as handle:
        handle.write(json.dumps(marker, indent=2))
        handle.flush()
        os.fsync(handle.fileno())
    final = folder.parent / f"checkpoint-{step}"
    if final.exists():  # a rerun of this step (a resume from an earlier checkpoint): replace it
        old = folder.parent / f".old-checkpoint-{step}"
        final.rename(old)
        folder.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        folder.rename(final)
    _fsync_directory(folder.parent)  # the rename itself
    if save_total_limit is not None:
        others = [path for _, path in complete_checkpoints(folder.parent.parent) if path != final]
        for path in others[: max(len(others) - (save_total_limit - 1), 0)]:
            shutil.rmtree(path, ignore_errors=True)
    return final
