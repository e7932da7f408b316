"""Progress bars of evaluation and reproduction loops (`hf-jepa eval`, `hf-jepa reproduce`, the recipes' evaluation
passes): shown on the main process only, only when stderr is a terminal, and never when asked not to
(`disable_progress_bars()`, `with no_progress_bars():`, `hf-jepa eval|reproduce --no-progress`, or ``HF_JEPA_DISABLE_PROGRESS_BARS=1``). The
training loop keeps its own bar (`TrainingArguments.disable_progress_bar`)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = [
    "DISABLE_ENV_VAR",
    "disable_progress_bars",
    "enable_progress_bars",
    "no_progress_bars",
    "progress",
    "progress_bars_enabled",
]

DISABLE_ENV_VAR = "HF_JEPA_DISABLE_PROGRESS_BARS"
_RANK_ENV_VARS = ("RANK", "LOCAL_RANK")  # set by accelerate / torchrun for every process
_disabled = False
Item = TypeVar("Item")


def disable_progress_bars() -> None:
    """Turn every evaluation/reproduction progress bar of this process off."""
    global _disabled
    _disabled = True


def enable_progress_bars() -> None:
    """Undo `disable_progress_bars` (bars still need a terminal and the main process)."""
    global _disabled
    _disabled = False


@contextlib.contextmanager
def no_progress_bars(active: bool = True) -> Iterator[None]:
    """No bars inside the block when `active` (the state before is restored after it)."""
    global _disabled
    before = _disabled
    _disabled = before or active
    try:
        yield
    finally:
        _disabled = before


def progress_bars_enabled() -> bool:
    """True when a bar would be drawn: not disabled, the main process, and stderr a terminal."""
    if _disabled or os.environ.get(DISABLE_ENV_VAR, "").strip().lower() in ("1", "true", "yes"):
        return False
    if any(os.environ.get(name, "0") not in ("", "0") for name in _RANK_ENV_VARS):
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


def progress(iterable: Iterable[Item], description: str, total: int | None = None) -> Iterable[Item]:
    """`iterable` wrapped in a tqdm bar labelled `description` when `progress_bars_enabled()`, else unchanged."""
    if not progress_bars_enabled():
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=description, total=total, leave=False, dynamic_ncols=True)
