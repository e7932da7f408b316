"""Which app serves which family. Each app module defines `FAMILY`, `MODEL_TYPES` (the `model_type`s of the folders
it serves), `QUICK_TRAINING` (the `hf-jepa train` settings it trains when no model is given, on data that needs no
download), `TITLE` and `build(served) -> gradio.Blocks`."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["APPS", "app_module", "family_of_model_type"]

APPS = {
    "bro-jepa": "hf_jepa.spaces.bro_jepa",
    "epm-jepa": "hf_jepa.spaces.epm_jepa",
    "i-jepa": "hf_jepa.spaces.i_jepa",
    "jepa-reasoner": "hf_jepa.spaces.jepa_reasoner",
    "t-jepa": "hf_jepa.spaces.t_jepa",
}


def app_module(family: str) -> ModuleType:
    """The app module of `family`, or a ValueError naming the families that have one."""
    if family not in APPS:
        raise ValueError(f"no app for family {family!r}; choose one of: {', '.join(sorted(APPS))}")
    return importlib.import_module(APPS[family])


def family_of_model_type(model_type: str | None) -> str | None:
    """The family whose app serves folders of `model_type`, or None."""
    return next((family for family in APPS if model_type in app_module(family).MODEL_TYPES), None)
