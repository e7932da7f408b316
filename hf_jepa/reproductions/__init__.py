"""The papers' experiments, one module per family: variants, runs, result tables and plots.

Every module exports `FAMILY` (the CLI family it reproduces) and `reproduce_<family>(data=, output_dir=, quick=, ...)`
returning a `ReproductionResult`; `load_reproductions()` collects them for `hf-jepa reproduce`. A reproduction taking
`variants` also exports `VARIANTS` (its row names), which `hf-jepa reproduce --variant` checks. Modules are imported
on demand.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from .result import ReproductionResult, mean_and_std


def load_reproductions() -> dict[str, Callable[..., ReproductionResult]]:
    """Family name -> its `reproduce_<family>` function, from every reproduction module."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "result":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if not hasattr(module, "FAMILY"):  # a part of another family's reproduction (e.g. epm_jepa_episodic)
            continue
        found[module.FAMILY] = getattr(module, f"reproduce_{info.name}")
    return found


__all__ = ["ReproductionResult", "load_reproductions", "mean_and_std"]
