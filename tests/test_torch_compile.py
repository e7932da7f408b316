"""`torch_compile=True`: the trainer hands the model to torch.compile (through accelerate) and a tiny run trains."""

import math
import shutil
import sysconfig
from pathlib import Path

import pytest
import torch

from hf_jepa.cli_settings import build_train_setup, parse_overrides
from hf_jepa.modeling.bro_jepa import BroJepaConfig
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments, BroJepaRecipe
from hf_jepa.trainers import JepaTrainer, TrainingArguments


def _compiler_missing() -> str | None:
    """Why inductor cannot build CPU kernels here (it needs a C++ compiler and the Python headers), or None."""
    if not any(shutil.which(name) for name in ("g++", "c++", "clang++")):
        return "torch.compile on CPU needs a C++ compiler (g++/clang++), none on PATH"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "torch.compile on CPU needs the Python development headers (Python.h), not installed"
    return None


def test_torch_compile_refused_with_fsdp():
    with pytest.raises(ValueError, match="torch_compile cannot be combined with fsdp"):
        TrainingArguments(torch_compile=True, fsdp="fully_shard")
    with pytest.raises(ValueError, match="torch_compile must be true or false"):
        TrainingArguments(torch_compile="yes")


def test_cli_set_torch_compile():
    setup = build_train_setup("bro-jepa", parse_overrides(["torch_compile=true", "data=embedded"]))
    assert setup.training_args.torch_compile is True
    assert build_train_setup("bro-jepa", parse_overrides(["data=embedded"])).training_args.torch_compile is False


def test_tiny_run_with_torch_compile_trains(embedded_splits, tmp_path):
    reason = _compiler_missing()
    if reason:
        pytest.skip(reason)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    recipe = BroJepaRecipe(
        BroJepaConfig.tiny(),
        BroJepaDataArguments(data="embedded", plot=False, prototype_images=200, eval_images=100),
        splits=embedded_splits,
    )
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=4,
        per_device_batch_size=16,
        warmup_steps=1,
        logging_steps=1,
        save_model=False,
        disable_progress_bar=True,
        torch_compile=True,
    )
    try:
        result = JepaTrainer(recipe, args).train()
    finally:
        torch._dynamo.reset()
    # Dynamo really captured the forward (a graph compiled), and every logged loss is finite.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    losses = [record["loss"] for record in result.history]
    assert len(losses) == 4 and all(math.isfinite(loss) for loss in losses)
