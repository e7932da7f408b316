"""The shared test harness: short training runs and two-process (DDP on CPU) runs, as the test suite and a user's own
tests of a new family use them. (Fixtures for data and the loopback Hub are in the suite's conftest.)"""

from __future__ import annotations

import faulthandler
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..trainers import JepaTrainer, TrainingArguments, TrainResult

QUICK_TRAINING = dict(
    max_steps=4, per_device_batch_size=8, learning_rate=1e-3, warmup_steps=0, logging_steps=2, disable_progress_bar=True
)


def train_quickly(recipe, output_dir: str | Path, **overrides: Any) -> TrainResult:
    """Train `recipe` with the shared trainer for a few steps (`QUICK_TRAINING`, `overrides` on top)."""
    args = TrainingArguments(output_dir=str(output_dir), **{**QUICK_TRAINING, **overrides})
    return JepaTrainer(recipe, args).train()


def _rank_entry(worker: Callable, timeout_s: int, *args) -> None:
    faulthandler.dump_traceback_later(timeout_s, exit=True)  # a hung rank fails the test instead of the whole suite
    # A forked rank inherits tqdm's lock as the parent's threads left it at the fork (tqdm's monitor thread takes it
    # every few seconds), including the multiprocessing lock it shares with the parent. A rank of its own: it cannot
    # wait forever on a lock held by a thread it does not have, nor die holding the parent's (the parent would then
    # hang at its next progress bar; seen once in the suite, after a rank timed out).
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    torch.set_num_threads(1)  # 2 ranks x 2 OpenMP threads on 2 cores is ~8x slower (and forked OpenMP can hang)
    try:
        worker(*args)
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_in_two_processes(worker: Callable, *args: Any, timeout_s: int = 240) -> None:
    """Run `worker(*args)` on two CPU ranks (gloo, accelerate's `debug_launcher`), one OpenMP thread each.

    A single-process accelerate state is created here first, as after any earlier in-process run: the forked ranks
    inherit it, and the trainer must not reuse it (a stale state would make each rank train alone, silently)."""
    from accelerate import PartialState, debug_launcher

    PartialState(cpu=True)
    debug_launcher(_rank_entry, args=(worker, timeout_s, *args), num_processes=2)


def save_rank_state(state: dict[str, torch.Tensor], output_dir: str | Path) -> None:
    """Write this rank's tensors to `output_dir/rank<r>.safetensors` (read back by `load_rank_states`)."""
    import torch.distributed as dist
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state.items()}, f"{output_dir}/rank{dist.get_rank()}.safetensors")


def load_rank_states(output_dir: str | Path) -> list[dict[str, torch.Tensor]]:
    from safetensors.torch import load_file

    return [load_file(str(Path(output_dir) / f"rank{rank}.safetensors")) for rank in (0, 1)]


__all__ = ["QUICK_TRAINING", "load_rank_states", "run_in_two_processes", "save_rank_state", "train_quickly"]
